"""Check a new project's set-up: three events through the quick-start pipeline on your
own broker, outside this repo.

    export KAFKA_BOOTSTRAP_SERVERS=host:port
    python own_project.py

Run as the last block of the get-started page, after the quick-start pipeline block that
defines `EVENT_SCHEMA` and `start_pipeline`; here they are imported so the file also
runs on its own.
"""

# Above the shown region on purpose: on the page these two names come from the
# quick-start block before it.
from snippets.quickstart.kafka_to_kafka import EVENT_SCHEMA, start_pipeline  # noqa: I001

# --8<-- [start:check]
import json
import os
import re
import tempfile
import time
import uuid

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def read_topic(spark: SparkSession, bootstrap: str, topic: str) -> list[dict]:
    records = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        # A pattern, not `subscribe`: until the query's first write creates the topic it
        # matches nothing and the read is empty, where `subscribe` would fail with
        # UnknownTopicOrPartitionException.
        .option("subscribePattern", re.escape(topic))
        .option("startingOffsets", "earliest")
        .load()
    )
    return [
        json.loads(row.value)
        for row in records.selectExpr("CAST(value AS STRING) AS value").collect()
    ]


def check_setup(
    spark: SparkSession, bootstrap: str, timeout_s: float = 120.0
) -> list[dict]:
    """Produce three events, run the real-time pipeline, and return what reached the
    sink topic."""
    source, sink = (
        f"rtm-check-{uuid.uuid4().hex[:8]}",
        f"rtm-check-out-{uuid.uuid4().hex[:8]}",
    )
    events = spark.createDataFrame(
        [(1, "ann", 2.5, 0), (2, "bob", 1.0, 0), (3, "cy", 0.25, 0)], EVENT_SCHEMA
    )
    (
        events.select(
            F.col("id").cast("string").alias("key"),
            F.to_json(F.struct("*")).alias("value"),
        )
        .write.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", source)
        .save()
    )
    # The sink topic is created by the query's first write (a broker with auto-creation
    # on, Kafka's default); create it with your Kafka tools first if yours has
    # auto-creation off.
    with tempfile.TemporaryDirectory(
        prefix="rtm-check-"
    ) as checkpoint:  # removed once the check is done
        # The shortest batch duration, for this check only: its batch reads of the sink
        # topic below waited for the running real-time batch to end when tried here,
        # which at the default 5 minutes is minutes away.
        query = start_pipeline(
            spark, bootstrap, source, sink, checkpoint, batch_duration="5 seconds"
        )
        deadline = time.monotonic() + timeout_s
        rows: list[dict] = []
        failed: Exception | None = None
        try:
            while len(rows) < 3 and time.monotonic() < deadline and query.isActive:
                time.sleep(2)
                try:
                    rows, failed = read_topic(spark, bootstrap, sink), None
                except (PySparkException, Py4JJavaError) as exc:
                    # A read while the first write is still creating the topic can fail;
                    # the next one is tried.
                    failed = exc
        finally:
            query.stop()
    if failed is not None and len(rows) < 3:
        # The read kept failing until the deadline: that error is the answer.
        raise failed
    return sorted(rows, key=lambda row: row["id"])


if __name__ == "__main__":
    spark = SparkSession.builder.appName("rtm-check").getOrCreate()
    for row in check_setup(spark, os.environ["KAFKA_BOOTSTRAP_SERVERS"]):
        print(row["id"], row["user"], row["amount_cents"])
    spark.stop()
# --8<-- [end:check]

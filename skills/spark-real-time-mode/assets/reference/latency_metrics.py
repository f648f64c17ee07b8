"""Measure real-time latencies in open-source Spark, which reports none, from Kafka
timestamps and a per-row JVM clock.

    python latency_metrics.py SOURCE_TOPIC SINK_TOPIC

runs the stamped Kafka -> Spark -> Kafka query in real-time mode on
KAFKA_BOOTSTRAP_SERVERS (topics created with message.timestamp.type=LogAppendTime) and
prints, for each row that reaches SINK_TOPIC, the three latencies Databricks reports
(source queuing, processing, end-to-end) plus the sink write that end-to-end leaves out.
"""

import json
import os
import sys
import tempfile

# --8<-- [start:progress]
from pyspark.sql.streaming import StreamingQuery

# What Databricks real-time mode adds to a query's progress; none of these exist in OSS
# Spark's progress events.
DATABRICKS_LATENCY_KEYS = (
    "processingLatencyMs",
    "sourceQueuingLatencyMs",
    "e2eLatencyMs",
)


def latency_keys_in_progress(query: StreamingQuery) -> set[str]:
    """Which of the Databricks latency keys appear anywhere in the query's progress
    events (OSS: none)."""
    text = "\n".join(progress.json for progress in query.recentProgress)
    return {key for key in DATABRICKS_LATENCY_KEYS if key in text}


# --8<-- [end:progress]

# --8<-- [start:stamps]
from pyspark.sql import Column, DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

# The batch duration: 5 minutes, Spark's default. Progress is checkpointed at the end
# of each batch (5 seconds is the default minimum).
BATCH_DURATION = "5 minutes"


def jvm_now_ms() -> Column:
    """The executor's clock, read for every row. `current_timestamp()` cannot do this:
    Spark fixes it once per batch, and a real-time batch lasts the whole batch
    duration. `reflect` is non-deterministic, so Spark calls it per row."""
    return F.expr("CAST(reflect('java.lang.System', 'currentTimeMillis') AS BIGINT)")


def stamped(raw: DataFrame, transform=lambda df: df) -> DataFrame:
    """Carry the source record's Kafka timestamp and two executor clock readings through
    the query:
    when the row was read (right after the scan) and when its output row was ready (just
    before the sink)."""
    read = raw.select(
        "key",
        "value",
        F.unix_millis("timestamp").alias("source_append_ms"),
        jvm_now_ms().alias("read_ms"),
        F.current_timestamp().alias("batch_ts"),
    )
    out = transform(read)
    return out.select(
        "key",
        F.to_json(
            F.struct(
                F.col("value").cast("string").alias("value"),
                "source_append_ms",
                "read_ms",
                jvm_now_ms().alias("output_ms"),
                F.unix_millis("batch_ts").alias("batch_ts_ms"),
            )
        ).alias("value"),
    )


def start_stamped_query(
    spark: SparkSession,
    bootstrap: str,
    source: str,
    sink: str,
    checkpoint: str,
    batch_duration: str = BATCH_DURATION,
) -> StreamingQuery:
    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
    )
    return (
        stamped(raw)
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .outputMode("update")
        .trigger(realTime=batch_duration)
        .start()
    )


# --8<-- [end:stamps]


# --8<-- [start:latencies]
def latencies(sink_value: dict, sink_append_ms: int) -> dict[str, int]:
    """The three Databricks latencies, and the sink write they leave out, from one sink
    record.
    Both topics use `message.timestamp.type=LogAppendTime`, so the Kafka stamps come
    from the broker's clock."""
    return {
        # Waiting in Kafka: appended to the source topic -> read by a real-time task. A
        # backlog inflates it.
        "source_queuing_ms": sink_value["read_ms"] - sink_value["source_append_ms"],
        # Inside Spark: read -> output row ready for the sink.
        "processing_ms": sink_value["output_ms"] - sink_value["read_ms"],
        # Databricks' e2e: appended to the source -> output ready. It stops before the
        # sink write.
        "e2e_ms": sink_value["output_ms"] - sink_value["source_append_ms"],
        # What e2e leaves out: output ready -> appended to the sink topic (producer
        # batching, network, broker).
        "sink_write_ms": sink_append_ms - sink_value["output_ms"],
        # What a consumer of the sink topic experiences.
        "kafka_to_kafka_ms": sink_append_ms - sink_value["source_append_ms"],
    }


# --8<-- [end:latencies]

if __name__ == "__main__":
    from kafka import KafkaConsumer

    if len(sys.argv) != 3:
        sys.exit(__doc__)
    # The Kafka connector comes from spark.jars.packages in spark-defaults.conf
    # (in SPARK_CONF_DIR), or from spark-submit --packages.
    spark = SparkSession.builder.appName("latency-metrics").getOrCreate()
    bootstrap, (source, sink) = os.environ["KAFKA_BOOTSTRAP_SERVERS"], sys.argv[1:]
    # A temporary checkpoint, removed when the query ends (Ctrl-C included): a run
    # leaves nothing behind.
    with tempfile.TemporaryDirectory(prefix="rtm-checkpoint-") as checkpoint:
        query = start_stamped_query(spark, bootstrap, source, sink, checkpoint)
        for record in KafkaConsumer(
            sink, bootstrap_servers=bootstrap, auto_offset_reset="earliest"
        ):
            print(latencies(json.loads(record.value), record.timestamp))

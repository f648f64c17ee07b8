"""The four comparison pipelines in PySpark real-time mode (built-in functions only),
Kafka -> Kafka.

The PyFlink twin is snippets/guides/rtm_or_flink_flink.py: same input topic and JSON,
same output records, same Kafka client settings, a checkpoint every 5 minutes. Run one
against the lab (`eval "$(python scripts/lab.py env)"`):

    python snippets/guides/rtm_or_flink_spark.py PIPELINE SOURCE_TOPIC SINK_TOPIC

PIPELINE is one of transform, count, enrich, dedup.
"""

import os
import sys
import tempfile

# --8<-- [start:setup]
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

# The same settings as the PyFlink twin: the consumer's fetch wait, the producer's
# batching and acks.
CONSUMER = {"fetch.max.wait.ms": "50"}
PRODUCER = {"linger.ms": "5", "acks": "all", "batch.size": "16384"}
# Progress is checkpointed at the end of each real-time batch: the batch duration
# sets how often RTM checkpoints.
BATCH_DURATION = "5 minutes"

EVENT_SCHEMA = StructType(
    [
        StructField("id", LongType()),
        StructField("user", StringType()),
        StructField("amount", DoubleType()),
        StructField("created_ms", LongType()),
    ]
)


def read_events(spark: SparkSession, bootstrap: str, topic: str) -> DataFrame:
    """The input topic: the record's key and Kafka timestamp beside the JSON value's
    fields."""
    reader = spark.readStream.format("kafka").option(
        "kafka.bootstrap.servers", bootstrap
    )
    for key, value in CONSUMER.items():
        reader = reader.option(f"kafka.{key}", value)
    raw = reader.option("subscribe", topic).option("startingOffsets", "earliest").load()
    event = F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e")
    return raw.select("key", event, "timestamp").select("key", "e.*", "timestamp")


def write(
    out: DataFrame, bootstrap: str, topic: str, checkpoint: str, batch_duration: str
) -> StreamingQuery:
    """Write `key` and `value` columns to Kafka in real-time mode (the Kafka sink is
    at-least-once)."""
    writer = out.writeStream.format("kafka").option(
        "kafka.bootstrap.servers", bootstrap
    )
    for key, value in PRODUCER.items():
        writer = writer.option(f"kafka.{key}", value)
    return (
        writer.option("topic", topic)
        .option("checkpointLocation", checkpoint)
        .outputMode("update")  # real-time mode accepts only update
        .trigger(realTime=batch_duration)
        .start()
    )


# --8<-- [end:setup]


# --8<-- [start:transform]
def transform(events: DataFrame) -> DataFrame:
    """Pipeline 1, stateless: parse, reshape, write (the quick start)."""
    value = F.struct(
        "id",
        F.upper("user").alias("user"),
        F.round(F.col("amount") * 100).cast("long").alias("amount_cents"),
        "created_ms",
        F.unix_millis("timestamp").alias("source_ts_ms"),
    )
    return events.select("key", F.to_json(value).alias("value"))


# --8<-- [end:transform]


# --8<-- [start:count]
def count(events: DataFrame) -> DataFrame:
    """Pipeline 2, stateful: a running count per user, every change written, keyed by
    user."""
    counts = events.groupBy("user").agg(F.count("*").alias("count"))
    return counts.select(
        F.col("user").alias("key"), F.to_json(F.struct("user", "count")).alias("value")
    )


# --8<-- [end:count]


# --8<-- [start:enrich]
TIERS = [("user0", "gold"), ("user1", "silver"), ("user2", "bronze")]


def enrich(events: DataFrame, rows: list[tuple[str, str]] = TIERS) -> DataFrame:
    """Pipeline 3: join each event with a small static table (an inner join: users not
    in it are dropped). Each task holds the whole table: no exchange, no state."""
    tiers = events.sparkSession.createDataFrame(rows, "user string, tier string")
    # Real-time mode runs only the broadcast join.
    joined = events.join(F.broadcast(tiers), "user")
    return joined.select(
        "key", F.to_json(F.struct("id", "user", "tier", "amount")).alias("value")
    )


# --8<-- [end:enrich]


# --8<-- [start:dedup]
def dedup(events: DataFrame) -> DataFrame:
    """Pipeline 4: keep the first event of each id (state grows with the ids seen: there
    is no watermark)."""
    first = events.dropDuplicates(["id"])
    return first.select(
        "key", F.to_json(F.struct("id", "user", "amount", "created_ms")).alias("value")
    )


# --8<-- [end:dedup]


# --8<-- [start:start]
PIPELINES = {"transform": transform, "count": count, "enrich": enrich, "dedup": dedup}


def start_pipeline(
    spark: SparkSession,
    name: str,
    bootstrap: str,
    source_topic: str,
    sink_topic: str,
    checkpoint: str,
    batch_duration: str = BATCH_DURATION,
) -> StreamingQuery:
    out = PIPELINES[name](read_events(spark, bootstrap, source_topic))
    return write(out, bootstrap, sink_topic, checkpoint, batch_duration)


# --8<-- [end:start]


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in PIPELINES:
        sys.exit(__doc__)
    # The Kafka connector comes from spark.jars.packages in spark-defaults.conf
    # (in SPARK_CONF_DIR), or from spark-submit --packages.
    with tempfile.TemporaryDirectory(prefix="rtm-checkpoint-") as checkpoint:
        session = SparkSession.builder.appName(f"rtm-{sys.argv[1]}").getOrCreate()
        bootstrap = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
        start_pipeline(
            session, sys.argv[1], bootstrap, sys.argv[2], sys.argv[3], checkpoint
        ).awaitTermination()

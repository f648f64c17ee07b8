"""Kafka -> real-time mode -> Postgres: parse JSON with built-in functions, dead-letter
bad input, optionally drop duplicate keys, and upsert through the `PostgresSink` foreach
writer.

Slots: a stateless query runs one task per Kafka partition, so `local[N]` or the cluster
needs N >= partitions. With `dedup=True` the sink follows a shuffle and real-time mode
schedules both stages at once:
slots >= Kafka partitions + spark.sql.shuffle.partitions.

After `eval "$(python scripts/lab.py env)"`:

    python snippets/guides/kafka_to_postgres.py TOPIC [--dedup]
"""

import os
import sys
import tempfile

# --8<-- [start:parse]
from py4j.java_gateway import JavaObject
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

EVENT_SCHEMA = StructType(
    [
        StructField("id", LongType()),
        StructField("user", StringType()),
        StructField("amount", DoubleType()),
        StructField("payload", StringType()),
        StructField("created_ms", LongType()),
        # PERMISSIVE parsing puts a record whose fields don't fit their types here
        # instead of failing the query.
        StructField("_corrupt", StringType()),
    ]
)
MAX_VALUE_BYTES = 16 * 1024
# How long each real-time batch runs: offsets are committed (and a Python writer's rows
# released) at its end. 5 minutes is Spark's default (5 seconds the default minimum);
# the JVM writer gets rows while a batch runs.
BATCH_DURATION = "5 minutes"
# With dedup=True rows cross real-time mode's streaming shuffle, which holds a partly
# filled network buffer for up to spark.shuffle.streaming.networkBufferMaxWaitTimeMs (50
# ms by default) before sending it on: most of a deduplicated row's latency at moderate
# rates. Dead letters carry their raw value, up to Kafka's default 1 MB record: the
# buffer is sized to hold one, so Spark has no row-size warning to log. Spark reads both
# when the session starts: build the session with these settings.
SESSION_CONF = {
    "spark.shuffle.streaming.networkBufferMaxWaitTimeMs": "5",
    "spark.shuffle.streaming.networkBufferSize": str(1024 * 1024),
}


def dead_letter_reason(value: Column, event: Column, max_bytes: int) -> Column:
    """Why a record can't be written, or null. Built-in functions only: OSS real-time
    mode has no Python UDFs."""
    return (
        F.when(value.isNull(), F.lit("null_value"))
        .when(F.octet_length(value) > max_bytes, F.lit("oversized"))
        .when(F.try_parse_json(value).isNull(), F.lit("malformed_json"))
        .when(event["_corrupt"].isNotNull(), F.lit("wrong_type"))
        .when(event["id"].isNull(), F.lit("missing_key"))
    )


def parse_events(raw: DataFrame, max_value_bytes: int = MAX_VALUE_BYTES) -> DataFrame:
    value = F.col("value").cast("string")
    event = F.from_json(value, EVENT_SCHEMA, {"columnNameOfCorruptRecord": "_corrupt"})
    parsed = raw.select(
        F.col("value").alias("raw"),
        value.alias("value"),
        event.alias("e"),
        "topic",
        "partition",
        "offset",
        "timestamp",
        "key",
    ).withColumn(
        "dlq_reason", dead_letter_reason(F.col("value"), F.col("e"), max_value_bytes)
    )
    good = F.col("dlq_reason").isNull()
    return parsed.select(
        F.when(good, F.col("e.id")).alias("id"),
        F.when(good, F.col("e.user")).alias("user_name"),
        F.when(good, F.col("e.amount")).alias("amount"),
        F.when(good, F.col("e.payload")).alias("payload"),
        F.when(good, F.col("e.created_ms")).alias("created_ms"),
        F.col("topic").alias("kafka_topic"),
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        F.col("timestamp").alias("kafka_timestamp"),
        F.col("key").alias("kafka_key"),
        # Only dead letters carry their raw bytes (binary, kept as bytea): good rows
        # would ship them for nothing.
        F.when(~good, F.col("raw")).alias("raw_value"),
        "dlq_reason",
        # Dead letters get a key of their own so deduplication never folds two of them
        # together.
        F.when(good, F.col("e.id").cast("string"))
        .otherwise(F.concat_ws(":", F.lit("dlq"), "partition", "offset"))
        .alias("dedup_key"),
    )


# --8<-- [end:parse]


# --8<-- [start:pipeline]
# The broker answers a fetch as soon as data is there, or after this wait: 500 ms by
# default, and 50 ms is the value docs/reference/kafka-tuning.md measured and
# recommends.
FETCH_MAX_WAIT_MS = 50


def read_kafka(spark: SparkSession, bootstrap: str, topic: str) -> DataFrame:
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("kafka.fetch.max.wait.ms", str(FETCH_MAX_WAIT_MS))
        .load()
    )


def start_pipeline(
    spark: SparkSession,
    bootstrap: str,
    topic: str,
    writer,
    checkpoint: str,
    dedup: bool = False,
    batch_duration: str = BATCH_DURATION,
) -> StreamingQuery:
    """`writer` is a Python ForeachWriter (PostgresSink) or a JVM one (the
    PostgresUpsertWriter's py4j object)."""
    events = parse_events(read_kafka(spark, bootstrap, topic))
    if dedup:
        # Stateful; real-time mode accepts it from Spark 4.3. Without a watermark the
        # state keeps every key seen.
        events = events.dropDuplicates(["dedup_key"])
    stream = (
        events.writeStream.option("checkpointLocation", checkpoint)
        .outputMode("update")
        .trigger(realTime=batch_duration)
    )
    if isinstance(writer, JavaObject):
        # PySpark's foreach() takes Python writers only; the JVM DataStreamWriter takes
        # any ForeachWriter[Row].
        stream._jwrite = stream._jwrite.foreach(writer)
    else:
        stream = stream.foreach(writer)
    return stream.start()


# --8<-- [end:pipeline]


if __name__ == "__main__":
    from snippets.guides.postgres_sink import PostgresSink, SinkConfig, create_tables

    if len(sys.argv) < 2:
        sys.exit(__doc__)
    config = SinkConfig(dsn=os.environ["POSTGRES_DSN"], table="events")
    create_tables(config)
    spark = (
        SparkSession.builder.appName("kafka-to-postgres")
        .config(map=SESSION_CONF)
        .getOrCreate()
    )
    # A temporary checkpoint, removed when the query ends (Ctrl-C included): a run
    # leaves nothing behind.
    with tempfile.TemporaryDirectory(prefix="rtm-checkpoint-") as checkpoint:
        query = start_pipeline(
            spark,
            os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092"),
            sys.argv[1],
            PostgresSink(config),
            checkpoint,
            dedup="--dedup" in sys.argv,
        )
        query.awaitTermination()

"""A Kafka source for real-time mode with the consumer settings that decide how soon a
fresh record is read.

    python kafka_tuning.py SOURCE_TOPIC SINK_TOPIC

copies SOURCE_TOPIC to SINK_TOPIC in real-time mode through this source on
KAFKA_BOOTSTRAP_SERVERS. What the settings change is measured in the Kafka tuning
reference's table.
"""

import os
import sys
import tempfile

# --8<-- [start:options]
from pyspark.sql import DataFrame, SparkSession


def low_latency_kafka_source(
    spark: SparkSession, bootstrap: str, topic: str, **kafka_settings: str
) -> DataFrame:
    """A Kafka source for real-time mode. Each real-time task reads one topic partition
    for the whole batch, so the consumer settings below decide how soon a fetch returns
    a freshly appended record to that task."""
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "latest")
        # The broker answers a fetch once it has fetch.min.bytes (default 1 byte) or
        # after fetch.max.wait.ms (default 500 ms), whichever comes first.
        .option("kafka.fetch.min.bytes", "1")
        .option("kafka.fetch.max.wait.ms", "50")
    )
    for (
        key,
        value,
    ) in kafka_settings.items():  # e.g. {"kafka.fetch.max.wait.ms": "500"} to compare
        reader = reader.option(key, value)
    return reader.load()


# --8<-- [end:options]

# The batch duration: 5 minutes, Spark's default. Progress is checkpointed at the end
# of each batch (5 seconds is the default minimum).
BATCH_DURATION = "5 minutes"

if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    # The Kafka connector comes from spark.jars.packages in spark-defaults.conf
    # (in SPARK_CONF_DIR), or from spark-submit --packages.
    spark = SparkSession.builder.appName("kafka-tuning").getOrCreate()
    bootstrap = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
    # A temporary checkpoint, removed when the query ends (Ctrl-C included): a run
    # leaves nothing behind.
    with tempfile.TemporaryDirectory(prefix="rtm-checkpoint-") as checkpoint:
        (
            low_latency_kafka_source(spark, bootstrap, sys.argv[1])
            .select("key", "value")
            .writeStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", sys.argv[2])
            .option("checkpointLocation", checkpoint)
            .outputMode("update")
            .trigger(realTime=BATCH_DURATION)
            .start()
            .awaitTermination()
        )

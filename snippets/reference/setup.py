"""Turning real-time mode on from PySpark: the trigger on 4.2+, the py4j route on 4.1,
and the settings around it.

    python snippets/reference/setup.py SOURCE_TOPIC SINK_TOPIC

prints the session's real-time settings, then copies SOURCE_TOPIC to SINK_TOPIC on
KAFKA_BOOTSTRAP_SERVERS in real-time mode (stop it with Ctrl-C).
"""

import os
import sys
import tempfile

# --8<-- [start:imports]
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

# The batch duration: 5 minutes, Spark's default. Progress is checkpointed at the end
# of each batch (5 seconds is the default minimum).
BATCH_DURATION = "5 minutes"
# --8<-- [end:imports]


# --8<-- [start:trigger]
def start_real_time(
    events: DataFrame,
    bootstrap: str,
    topic: str,
    checkpoint: str,
    batch_duration: str = BATCH_DURATION,
) -> StreamingQuery:
    """PySpark 4.2+: the trigger alone turns real-time mode on (OSS Spark has no enable
    flag)."""
    return (
        events.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("checkpointLocation", checkpoint)
        .outputMode("update")  # the only output mode real-time mode accepts
        .trigger(
            realTime=batch_duration
        )  # how often progress is checkpointed, not a latency target
        .start()
    )


# --8<-- [end:trigger]


# --8<-- [start:py4j]
def real_time_trigger(
    writer: DataStreamWriter, spark: SparkSession, batch_duration: str = BATCH_DURATION
) -> DataStreamWriter:
    """PySpark 4.1 has no `realTime=` keyword; set the JVM trigger on the writer's Java
    side instead."""
    trigger = spark._jvm.org.apache.spark.sql.streaming.Trigger.RealTime(batch_duration)
    writer._jwrite = writer._jwrite.trigger(trigger)
    return writer


# Usage:
# real_time_trigger(df.writeStream.format("kafka")...outputMode("update"), spark)
#     .start()
# --8<-- [end:py4j]


# --8<-- [start:settings]
MIN_BATCH_DURATION = "spark.sql.streaming.realTimeMode.minBatchDuration"
ALLOWLIST_CHECK = "spark.sql.streaming.realTimeMode.allowlistCheck"
# Stateless real-time queries write their offset and commit logs asynchronously unless
# this is false (or the writer sets asyncProgressTrackingEnabled itself).
ASYNC_PROGRESS_BY_DEFAULT = (
    "spark.sql.streaming.realTimeMode.asyncProgressTrackingByDefault.enabled"
)


def real_time_settings(spark: SparkSession) -> dict[str, str]:
    """The session settings that shape real-time mode, as this session sees them."""
    return {
        key: spark.conf.get(key)
        for key in (MIN_BATCH_DURATION, ALLOWLIST_CHECK, ASYNC_PROGRESS_BY_DEFAULT)
    }


def default_batch_duration_ms(spark: SparkSession) -> int:
    """What `Trigger.RealTime()` with no argument means (Scala/Java API; PySpark
    requires a duration)."""
    return (
        spark._jvm.org.apache.spark.sql.streaming.Trigger.RealTime().batchDurationMs()
    )


# --8<-- [end:settings]


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    # The Kafka connector comes from spark.jars.packages in spark-defaults.conf
    # (in SPARK_CONF_DIR), or from spark-submit --packages.
    spark = SparkSession.builder.appName("rtm-setup").getOrCreate()
    print(
        real_time_settings(spark),
        "default batch duration ms:",
        default_batch_duration_ms(spark),
    )
    bootstrap = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
    events = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", sys.argv[1])
        .load()
    )
    # A temporary checkpoint, removed when the query ends (Ctrl-C included): a run
    # leaves nothing behind.
    with tempfile.TemporaryDirectory() as checkpoint:
        start_real_time(
            events.select("key", "value"), bootstrap, sys.argv[2], checkpoint
        ).awaitTermination()

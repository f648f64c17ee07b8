"""transformWithState in PySpark: a processor that reports how it was called, run in
micro-batch and in real-time mode.

    python snippets/reference/transform_with_state.py TOPIC

runs the processor over TOPIC's keyed rows (on KAFKA_BOOTSTRAP_SERVERS) in micro-batch
mode and prints the calls: one per key per batch.
scripts/rtm_lab/apps/transform_with_state.py runs the JVM twin (snippets/jvm) in both
modes.
"""

import os
import sys
import tempfile

# --8<-- [start:processor]
from collections.abc import Iterator

from pyspark.sql import DataFrame, Row
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import LongType, StringType, StructField, StructType

# The batch duration: 5 minutes, Spark's default. Progress is checkpointed at the end
# of each batch (5 seconds is the default minimum).
BATCH_DURATION = "5 minutes"

CALLS_SCHEMA = StructType(
    [
        StructField("key", StringType()),
        StructField(
            "rows_in_call", LongType()
        ),  # how many input rows this handleInputRows call received
        StructField(
            "rows_so_far", LongType()
        ),  # the key's running total, kept in state
    ]
)


class CallRecorder(StatefulProcessor):
    """Emits one row per `handleInputRows` call, so the output shows how Spark grouped
    the input into calls."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        # State not updated for an hour is dropped (each update resets the TTL): without
        # a TTL (or timers that clear it), state for keys that stop arriving lives
        # forever, and a long-running real-time query accumulates all of it.
        self.total = handle.getValueState(
            "rows_so_far",
            StructType([StructField("n", LongType())]),
            ttlDurationMs=3_600_000,
        )

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        count = sum(1 for _ in rows)
        total = (self.total.get()[0] if self.total.exists() else 0) + count
        self.total.update((total,))
        yield Row(key=key[0], rows_in_call=count, rows_so_far=total)

    def close(self) -> None:
        pass


def record_calls(events: DataFrame, time_mode: str = "ProcessingTime") -> DataFrame:
    """Group Kafka rows by their key and run the processor. A TTL needs a time mode:
    with `timeMode="None"` Spark refuses it
    (STATEFUL_PROCESSOR_INCORRECT_TIME_MODE_TO_ASSIGN_TTL)."""
    keyed = events.selectExpr("CAST(key AS STRING) AS key")
    return keyed.groupBy("key").transformWithState(
        statefulProcessor=CallRecorder(),
        outputStructType=CALLS_SCHEMA,
        outputMode="Update",
        timeMode=time_mode,
    )


def kafka_rows(spark, bootstrap: str, topic: str) -> DataFrame:
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )


# --8<-- [end:processor]


# --8<-- [start:micro_batch]
def start_micro_batch(calls: DataFrame, checkpoint: str, table: str):
    """Run the processor's output in micro-batch mode into an in-memory table, one batch
    a second."""
    return (
        calls.writeStream.format("memory")
        .queryName(table)
        .option("checkpointLocation", checkpoint)
        .outputMode("update")
        .trigger(processingTime="1 second")
        .start()
    )


# --8<-- [end:micro_batch]


# --8<-- [start:real_time]
def start_real_time(
    spark,
    bootstrap: str,
    topic: str,
    sink: str,
    checkpoint: str,
    batch_duration: str = BATCH_DURATION,
):
    """The same processor in real-time mode: OSS 4.3 fails this query once it runs (see
    the page)."""
    return (
        record_calls(kafka_rows(spark, bootstrap, topic))
        .selectExpr("key", "to_json(struct(*)) AS value")
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .outputMode("update")
        .trigger(realTime=batch_duration)
        .start()
    )


# --8<-- [end:real_time]


# --8<-- [start:jvm]
def jvm_record_calls(spark, events: DataFrame) -> DataFrame:
    """The JVM CallRecorderProcessor (snippets/jvm) applied from PySpark; its jar must
    be in `spark.jars`."""
    return DataFrame(spark._jvm.rtmlab.CallRecorderProcessor.apply(events._jdf), spark)


# --8<-- [end:jvm]


if __name__ == "__main__":
    from pyspark.sql import SparkSession

    if len(sys.argv) != 2:
        sys.exit(__doc__)
    # The Kafka connector comes from spark.jars.packages in spark-defaults.conf
    # (in SPARK_CONF_DIR), or from spark-submit --packages. transformWithState needs
    # the RocksDB state store; real-time mode sets it by default, micro-batch does not.
    spark = (
        SparkSession.builder.appName("transform-with-state")
        .config(
            "spark.sql.streaming.stateStore.providerClass",
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        )
        .getOrCreate()
    )
    events = kafka_rows(spark, os.environ["KAFKA_BOOTSTRAP_SERVERS"], sys.argv[1])
    # A temporary checkpoint, removed when the query ends (Ctrl-C included): a run
    # leaves nothing behind.
    with tempfile.TemporaryDirectory(prefix="rtm-checkpoint-") as checkpoint:
        query = start_micro_batch(record_calls(events), checkpoint, "calls")
        query.processAllAvailable()
        spark.table("calls").show()
        query.stop()

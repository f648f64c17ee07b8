"""Real-time mode mistakes as plain PySpark, each a query Spark refuses, and how to read
the error class it names.

    python snippets/reference/errors.py SOURCE_TOPIC SINK_TOPIC [MISTAKE ...]

starts each mistake (all of them by default) against KAFKA_BOOTSTRAP_SERVERS and prints
the error class Spark gives. The tests run the same functions through
scripts/rtm_lab/probes/mistakes.py and assert each class and message.
"""

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

# --8<-- [start:shared]
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

# The batch duration, 5 minutes (Spark's default); every query below not about the
# trigger uses it (5 seconds is the default minimum).
BATCH_DURATION = "5 minutes"


def read_events(spark: SparkSession, bootstrap: str, topic: str) -> DataFrame:
    """A Kafka topic's JSON values as (id, k, ts)."""
    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    body = F.from_json(F.col("value").cast("string"), "id LONG, k STRING")
    return raw.select(body.alias("e"), F.col("timestamp").alias("ts")).select(
        "e.id", "e.k", "ts"
    )


def to_kafka(
    df: DataFrame, bootstrap: str, topic: str, checkpoint: str
) -> DataStreamWriter:
    """The usual Kafka sink (every column in a JSON value); output mode and trigger are
    left to the caller."""
    return (
        df.select(F.to_json(F.struct(*df.columns)).alias("value"))
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("checkpointLocation", checkpoint)
    )


# --8<-- [end:shared]


# --8<-- [start:boolean_trigger]
def boolean_trigger(spark, bootstrap, source, sink, checkpoint) -> StreamingQuery:
    events = read_events(spark, bootstrap, source)
    # Wrong: realTime takes the batch duration as a string, not a flag.
    return (
        to_kafka(events, bootstrap, sink, checkpoint)
        .outputMode("update")
        .trigger(realTime=True)
        .start()
    )


# --8<-- [end:boolean_trigger]


# --8<-- [start:one_second_trigger]
def one_second_trigger(spark, bootstrap, source, sink, checkpoint) -> StreamingQuery:
    events = read_events(spark, bootstrap, source)
    # Wrong: the duration is how often progress is checkpointed, not a latency target; 5
    # seconds is the default minimum.
    return (
        to_kafka(events, bootstrap, sink, checkpoint)
        .outputMode("update")
        .trigger(realTime="1 second")
        .start()
    )


# --8<-- [end:one_second_trigger]


# --8<-- [start:append_mode]
def append_mode(spark, bootstrap, source, sink, checkpoint) -> StreamingQuery:
    events = read_events(spark, bootstrap, source)
    # Wrong: append is the default output mode, and real-time mode accepts only update.
    return (
        to_kafka(events, bootstrap, sink, checkpoint)
        .trigger(realTime=BATCH_DURATION)
        .start()
    )


# --8<-- [end:append_mode]


# --8<-- [start:foreach_batch]
def foreach_batch(spark, bootstrap, source, sink, checkpoint) -> StreamingQuery:
    def write_batch(batch: DataFrame, batch_id: int) -> None:
        batch.write.format("noop").mode("overwrite").save()

    # Wrong: foreachBatch needs a batch to hand over; real-time mode streams rows. Use
    # foreach or the Kafka sink.
    return (
        read_events(spark, bootstrap, source)
        .writeStream.foreachBatch(write_batch)
        .option("checkpointLocation", checkpoint)
        .outputMode("update")
        .trigger(realTime=BATCH_DURATION)
        .start()
    )


# --8<-- [end:foreach_batch]


# --8<-- [start:rate_source]
def rate_source(spark, bootstrap, source, sink, checkpoint) -> StreamingQuery:
    # Wrong: the rate source is fine for micro-batch demos; real-time mode reads only
    # Kafka in OSS Spark.
    events = spark.readStream.format("rate").option("rowsPerSecond", 10).load()
    return (
        to_kafka(events, bootstrap, sink, checkpoint)
        .outputMode("update")
        .trigger(realTime=BATCH_DURATION)
        .start()
    )


# --8<-- [end:rate_source]


# --8<-- [start:max_offsets_per_trigger]
def max_offsets_per_trigger(
    spark, bootstrap, source, sink, checkpoint
) -> StreamingQuery:
    # Wrong: a real-time batch has no end offset to cap; the Kafka source refuses the
    # option once it plans.
    events = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("maxOffsetsPerTrigger", 1000)
        .load()
        .select("value")
    )
    return (
        to_kafka(events, bootstrap, sink, checkpoint)
        .outputMode("update")
        .trigger(realTime=BATCH_DURATION)
        .start()
    )


# --8<-- [end:max_offsets_per_trigger]


# --8<-- [start:too_many_shuffle_partitions]
def too_many_shuffle_partitions(
    spark, bootstrap, source, sink, checkpoint
) -> StreamingQuery:
    # Wrong: 2 Kafka partitions + 8 shuffle partitions = 10 tasks that must all run at
    # once, on local[4].
    spark.conf.set("spark.sql.shuffle.partitions", "8")
    counts = read_events(spark, bootstrap, source).groupBy("k").count()
    return (
        to_kafka(counts, bootstrap, sink, checkpoint)
        .outputMode("update")
        .trigger(realTime=BATCH_DURATION)
        .start()
    )


# --8<-- [end:too_many_shuffle_partitions]


# --8<-- [start:self_union]
def self_union(spark, bootstrap, source, sink, checkpoint) -> StreamingQuery:
    # Wrong: one source DataFrame used twice. Read the topic twice (two readStream
    # calls) instead.
    events = read_events(spark, bootstrap, source)
    both = events.union(events)
    return (
        to_kafka(both, bootstrap, sink, checkpoint)
        .outputMode("update")
        .trigger(realTime=BATCH_DURATION)
        .start()
    )


# --8<-- [end:self_union]


# --8<-- [start:stateful_before_union]
def stateful_before_union(spark, bootstrap, source, sink, checkpoint) -> StreamingQuery:
    # Wrong: aggregate each side, then union. Union first, then aggregate once.
    left = read_events(spark, bootstrap, source).groupBy("k").count()
    right = read_events(spark, bootstrap, source).groupBy("k").count()
    both = left.union(right)
    return (
        to_kafka(both, bootstrap, sink, checkpoint)
        .outputMode("update")
        .trigger(realTime=BATCH_DURATION)
        .start()
    )


# --8<-- [end:stateful_before_union]


# --8<-- [start:incompatible_conf]
def incompatible_conf(spark, bootstrap, source, sink, checkpoint) -> StreamingQuery:
    # Wrong: real-time mode needs sortBeforeRepartition=false and refuses to override a
    # value you set yourself.
    spark.conf.set("spark.sql.execution.sortBeforeRepartition", "true")
    deduped = read_events(spark, bootstrap, source).dropDuplicates(["id"])
    return (
        to_kafka(deduped, bootstrap, sink, checkpoint)
        .outputMode("update")
        .trigger(realTime=BATCH_DURATION)
        .start()
    )


# --8<-- [end:incompatible_conf]


# --8<-- [start:async_checkpoint_interval]
def async_checkpoint_interval(
    spark, bootstrap, source, sink, checkpoint
) -> StreamingQuery:
    # Wrong: real-time mode runs async progress tracking and must checkpoint every
    # batch's progress.
    return (
        to_kafka(read_events(spark, bootstrap, source), bootstrap, sink, checkpoint)
        .option("asyncProgressTrackingCheckpointIntervalMs", 10000)
        .outputMode("update")
        .trigger(realTime=BATCH_DURATION)
        .start()
    )


# --8<-- [end:async_checkpoint_interval]


# --8<-- [start:python_udf]
def python_udf(spark, bootstrap, source, sink, checkpoint) -> StreamingQuery:
    # Wrong in OSS Spark: Python UDFs are not on the real-time allowlist; use built-in
    # functions.
    shout = F.udf(lambda s: s.upper(), "string")
    shouted = read_events(spark, bootstrap, source).select(shout("k").alias("k"))
    return (
        to_kafka(shouted, bootstrap, sink, checkpoint)
        .outputMode("update")
        .trigger(realTime=BATCH_DURATION)
        .start()
    )


# --8<-- [end:python_udf]


# --8<-- [start:switch_from_micro_batch]
def switch_from_micro_batch(
    spark, bootstrap, source, sink, checkpoint
) -> StreamingQuery:
    # Wrong: a stateful query that ran in micro-batch mode keeps its checkpoint when
    # switched to real-time mode.
    deduped = read_events(spark, bootstrap, source).dropDuplicates(["id"])
    micro_batch = (
        to_kafka(deduped, bootstrap, sink, checkpoint)
        .outputMode("update")
        .trigger(availableNow=True)
        .start()
    )
    micro_batch.awaitTermination()
    # The same checkpoint, now in real-time mode:
    return (
        to_kafka(deduped, bootstrap, sink, checkpoint)
        .outputMode("update")
        .trigger(realTime=BATCH_DURATION)
        .start()
    )


# --8<-- [end:switch_from_micro_batch]


# --8<-- [start:switch_stateless_from_micro_batch]
def switch_stateless_from_micro_batch(
    spark, bootstrap, source, sink, checkpoint
) -> StreamingQuery:
    # Wrong too: a stateless query's micro-batch checkpoint is refused the same way.
    events = read_events(spark, bootstrap, source)
    micro_batch = to_kafka(events, bootstrap, sink, checkpoint).trigger(
        availableNow=True
    )
    micro_batch.start().awaitTermination()
    return (
        to_kafka(events, bootstrap, sink, checkpoint)
        .outputMode("update")
        .trigger(realTime=BATCH_DURATION)
        .start()
    )


# --8<-- [end:switch_stateless_from_micro_batch]


# --8<-- [start:error_class]
from py4j.java_gateway import is_instance_of  # noqa: E402
from pyspark import SparkContext  # noqa: E402
from pyspark.errors import PySparkException  # noqa: E402


def error_class(exc: BaseException) -> str:
    """The error class a failure carries (`getCondition()`), looking through the
    STREAM_FAILED wrapper a running query adds. A failure without one (e.g.
    `maxOffsetsPerTrigger`) is named by its innermost JVM exception class."""
    condition = exc.getCondition() if isinstance(exc, PySparkException) else None
    # A running query's failure is a JVM StreamingQueryException (STREAM_FAILED); the
    # real error is its cause, which PySpark does not convert, so the JVM cause chain is
    # read directly.
    java, innermost = getattr(exc, "_origin", None), None
    while condition in (None, "STREAM_FAILED") and java is not None:
        if is_instance_of(
            SparkContext._gateway, java, "org.apache.spark.SparkThrowable"
        ):
            condition = java.getCondition()
        innermost, java = java.getClass().getSimpleName(), java.getCause()
    if condition not in (None, "STREAM_FAILED"):
        return condition
    return innermost or type(exc).__name__


# --8<-- [end:error_class]


# --8<-- [start:error_catalogue]
def real_time_error_classes() -> set[str]:
    """Every real-time mode error class the installed Spark defines, read from its own
    error catalogue."""
    import json
    import zipfile
    from pathlib import Path

    import pyspark

    jar = next(
        (Path(pyspark.__file__).parent / "jars").glob("spark-common-utils_*.jar")
    )
    with zipfile.ZipFile(jar) as archive:
        catalogue = json.loads(archive.read("error/error-conditions.json"))
    found = set()
    for name, entry in catalogue.items():
        if "REAL_TIME" in name or name == "CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT":
            subclasses = entry.get("subClass", {})
            found |= {f"{name}.{sub}" for sub in subclasses} if subclasses else {name}
    return found


# Defined by Spark and not reproduced by the cases: none left. SINK_NOT_SUPPORTED needs
# the allowlist check and async progress tracking both off (the support matrix's
# allowlist-off foreachBatch case reproduces it).
NOT_REPRODUCED: set[str] = set()
# --8<-- [end:error_catalogue]

MISTAKES = (
    boolean_trigger,
    one_second_trigger,
    append_mode,
    foreach_batch,
    rate_source,
    max_offsets_per_trigger,
    too_many_shuffle_partitions,
    self_union,
    stateful_before_union,
    incompatible_conf,
    async_checkpoint_interval,
    switch_from_micro_batch,
    switch_stateless_from_micro_batch,
    python_udf,
)


# The session settings some mistakes change on purpose; put back after each so one
# cannot fail the next.
SETTINGS_CHANGED = (
    "spark.sql.shuffle.partitions",
    "spark.sql.execution.sortBeforeRepartition",
)


@contextmanager
def settings_restored(spark: SparkSession, keys=SETTINGS_CHANGED) -> Iterator[None]:
    before = {key: spark.conf.get(key, None) for key in keys}
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def outcome(
    spark: SparkSession,
    mistake,
    bootstrap: str,
    source: str,
    sink: str,
    timeout_s: float = 60.0,
) -> str:
    """Start one mistake and say where it failed and with which error class."""
    with settings_restored(spark):
        return _outcome(spark, mistake, bootstrap, source, sink, timeout_s)


def _outcome(
    spark: SparkSession,
    mistake,
    bootstrap: str,
    source: str,
    sink: str,
    timeout_s: float,
) -> str:
    # The checkpoint lives only as long as the try: the query is stopped before its
    # folder is removed.
    with tempfile.TemporaryDirectory(prefix="rtm-mistake-") as checkpoint:
        try:
            query = mistake(spark, bootstrap, source, sink, checkpoint)
        except PySparkException as exc:
            return f"fails at start(): {error_class(exc)}"
        try:
            query.awaitTermination(timeout_s)
        except PySparkException as exc:
            return f"fails at run time: {error_class(exc)}"
        finally:
            query.stop()
        return f"still running after {timeout_s:g}s"


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    chosen = [m for m in MISTAKES if m.__name__ in sys.argv[3:]] or MISTAKES
    # The Kafka connector comes from spark.jars.packages in spark-defaults.conf
    # (in SPARK_CONF_DIR), or from spark-submit --packages.
    spark = (
        SparkSession.builder.appName("rtm-mistakes").master("local[4]").getOrCreate()
    )
    for mistake in chosen:
        print(
            mistake.__name__,
            "->",
            outcome(
                spark, mistake, os.environ["KAFKA_BOOTSTRAP_SERVERS"], *sys.argv[1:3]
            ),
        )

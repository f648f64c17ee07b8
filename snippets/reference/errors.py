"""Each real-time mode error Spark raises, and each piece of wrong advice found in the wild, as a query that fails.

Every `Mistake` names the error Spark gives (the class, and a phrase of the real message), where it surfaces, and
the fix. The queries reuse the support matrix's `Probe`: fresh Kafka topics, `outputMode("update")`,
`trigger(realTime="5 seconds")` unless the mistake is about one of those.
"""

# --8<-- [start:shared]
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from snippets.reference.support_matrix import AT_RUN_TIME, AT_START, Outcome, Probe, parsed


def kafka_writer(p: Probe, df, trigger: dict | None = None, mode: str = "update"):
    """The usual Kafka sink, with the trigger and output mode left to the caller."""
    p.sink_topic = p._topic("errors-sink")
    out = df.select(F.to_json(F.struct(*[F.col(c) for c in df.columns])).alias("value"))
    w = (
        out.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", p.bootstrap)
        .option("topic", p.sink_topic)
        .option("checkpointLocation", str(p.workdir / "checkpoint"))
        .outputMode(mode)
    )
    return w.trigger(**trigger) if trigger else w


# --8<-- [end:shared]


# --8<-- [start:boolean_trigger]
def boolean_trigger(p: Probe) -> StreamingQuery:
    # Wrong: realTime takes the batch duration as a string, not a flag.
    return kafka_writer(p, parsed(p.kafka()), trigger={"realTime": True}).start()


# --8<-- [end:boolean_trigger]


# --8<-- [start:one_second_trigger]
def one_second_trigger(p: Probe) -> StreamingQuery:
    # Wrong: the duration is how often progress is checkpointed, not a latency target; 5 seconds is the minimum.
    return kafka_writer(p, parsed(p.kafka()), trigger={"realTime": "1 second"}).start()


# --8<-- [end:one_second_trigger]


# --8<-- [start:append_mode]
def append_mode(p: Probe) -> StreamingQuery:
    # Wrong: append is the default output mode, and real-time mode accepts only update.
    return kafka_writer(p, parsed(p.kafka()), trigger={"realTime": "5 seconds"}, mode="append").start()


# --8<-- [end:append_mode]


# --8<-- [start:foreach_batch]
def foreach_batch(p: Probe) -> StreamingQuery:
    # Wrong: foreachBatch needs a batch to hand over; real-time mode streams rows. Use foreach or the Kafka sink.
    return (
        parsed(p.kafka())
        .writeStream.foreachBatch(lambda batch, batch_id: batch.write.format("noop").mode("overwrite").save())
        .option("checkpointLocation", str(p.workdir / "checkpoint"))
        .outputMode("update")
        .trigger(realTime="5 seconds")
        .start()
    )


# --8<-- [end:foreach_batch]


# --8<-- [start:rate_source]
def rate_source(p: Probe) -> StreamingQuery:
    # Wrong: the rate source is fine for micro-batch demos; real-time mode reads only Kafka in OSS Spark.
    events = p.spark.readStream.format("rate").option("rowsPerSecond", 10).load()
    return kafka_writer(p, events, trigger={"realTime": "5 seconds"}).start()


# --8<-- [end:rate_source]


# --8<-- [start:max_offsets_per_trigger]
def max_offsets_per_trigger(p: Probe) -> StreamingQuery:
    # Wrong: a real-time batch has no end offset to cap; the Kafka source refuses the option once it plans.
    events = (
        p.spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", p.bootstrap)
        .option("subscribe", p._topic("errors-src"))
        .option("maxOffsetsPerTrigger", 1000)
        .load()
    )
    return kafka_writer(p, events.select("value"), trigger={"realTime": "5 seconds"}).start()


# --8<-- [end:max_offsets_per_trigger]


# --8<-- [start:too_many_shuffle_partitions]
def too_many_shuffle_partitions(p: Probe) -> StreamingQuery:
    # Wrong: 2 Kafka partitions + 8 shuffle partitions = 10 tasks that must all run at once, on 4 slots.
    # (Run with the session conf spark.sql.shuffle.partitions=8; see CONFS below.)
    counts = parsed(p.kafka()).groupBy("k").count()
    return kafka_writer(p, counts, trigger={"realTime": "5 seconds"}).start()


# --8<-- [end:too_many_shuffle_partitions]


# --8<-- [start:self_union]
def self_union(p: Probe) -> StreamingQuery:
    # Wrong: one source DataFrame used twice. Read the topic twice (two readStream calls) instead.
    events = parsed(p.kafka())
    return kafka_writer(p, events.union(events), trigger={"realTime": "5 seconds"}).start()


# --8<-- [end:self_union]


# --8<-- [start:stateful_before_union]
def stateful_before_union(p: Probe) -> StreamingQuery:
    # Wrong: aggregate each side, then union. Union first, then aggregate once.
    left = parsed(p.kafka()).groupBy("k").count()
    right = parsed(p.kafka()).groupBy("k").count()
    return kafka_writer(p, left.union(right), trigger={"realTime": "5 seconds"}).start()


# --8<-- [end:stateful_before_union]


# --8<-- [start:incompatible_conf]
def incompatible_conf(p: Probe) -> StreamingQuery:
    # Wrong: the session sets spark.sql.execution.sortBeforeRepartition=true (see CONFS below); real-time mode
    # needs it false and refuses to override a value you set yourself.
    return kafka_writer(p, parsed(p.kafka()).dropDuplicates(["id"]), trigger={"realTime": "5 seconds"}).start()


# --8<-- [end:incompatible_conf]


# --8<-- [start:async_checkpoint_interval]
def async_checkpoint_interval(p: Probe) -> StreamingQuery:
    # Wrong: real-time mode runs async progress tracking and must checkpoint every batch's progress.
    return (
        kafka_writer(p, parsed(p.kafka()), trigger={"realTime": "5 seconds"})
        .option("asyncProgressTrackingCheckpointIntervalMs", 10000)
        .start()
    )


# --8<-- [end:async_checkpoint_interval]


# --8<-- [start:python_udf]
def python_udf(p: Probe) -> StreamingQuery:
    # Wrong in OSS Spark: Python UDFs are not on the real-time allowlist; use built-in functions.
    shout = F.udf(lambda s: s.upper(), "string")
    return kafka_writer(p, parsed(p.kafka()).select(shout("k").alias("k")), trigger={"realTime": "5 seconds"}).start()


# --8<-- [end:python_udf]


# --8<-- [start:switch_from_micro_batch]
def switch_from_micro_batch(p: Probe) -> StreamingQuery:
    # Wrong: a stateful query that ran in micro-batch mode keeps its checkpoint when switched to real-time mode.
    deduped = parsed(p.kafka()).dropDuplicates(["id"])
    p.feed()
    micro_batch = kafka_writer(p, deduped, trigger={"processingTime": "1 second"}).start()
    micro_batch.processAllAvailable()
    micro_batch.stop()
    return kafka_writer(p, deduped, trigger={"realTime": "5 seconds"}).start()  # same checkpoint


# --8<-- [end:switch_from_micro_batch]


@dataclass(frozen=True)
class Mistake:
    title: str
    start: Callable[[Probe], StreamingQuery]
    expected: Outcome
    fix: str
    confs: dict[str, str] = field(default_factory=dict)  # session confs in force while the query starts and runs

    @property
    def id(self) -> str:
        return self.start.__name__


RT = "STREAMING_REAL_TIME_MODE"

# --8<-- [start:mistakes]
MISTAKES: list[Mistake] = [
    Mistake(
        "trigger(realTime=True)",
        boolean_trigger,
        Outcome(AT_START, "VALUE_NOT_NON_EMPTY_STR", "Value for `realTime` must be a non-empty string, got 'True'"),
        'Pass the batch duration: `trigger(realTime="5 seconds")`.',
    ),
    Mistake(
        'trigger(realTime="1 second")',
        one_second_trigger,
        Outcome(AT_START, "INVALID_STREAMING_REAL_TIME_MODE_TRIGGER_INTERVAL", "less than the 5000 ms minimum"),
        "Use 5 seconds or more (rows do not wait for the interval to end). The floor is "
        "`spark.sql.streaming.realTimeMode.minBatchDuration`.",
    ),
    Mistake(
        "append output mode",
        append_mode,
        Outcome(AT_START, f"{RT}.OUTPUT_MODE_NOT_SUPPORTED", "The output mode Append is not supported"),
        '`outputMode("update")`.',
    ),
    Mistake(
        "foreachBatch",
        foreach_batch,
        Outcome(AT_START, f"{RT}.OPERATOR_OR_SINK_NOT_IN_ALLOWLIST", "ForeachBatchSink is not in the sink allowlist"),
        "Use `foreach` (per-row writer) or the Kafka sink.",
    ),
    Mistake(
        "rate source",
        rate_source,
        Outcome(AT_RUN_TIME, f"{RT}.INPUT_STREAM_NOT_SUPPORTED", "RateStreamMicroBatchStream is not supported"),
        "Feed a Kafka topic (a small producer loop is enough for a demo).",
    ),
    Mistake(
        "maxOffsetsPerTrigger",
        max_offsets_per_trigger,
        Outcome(
            AT_RUN_TIME, "UnsupportedOperationException", "maxOffsetsPerTrigger is not compatible with real time mode"
        ),
        "Remove the option; size the query with partitions and slots instead.",
    ),
    Mistake(
        "too many shuffle partitions",
        too_many_shuffle_partitions,
        Outcome(AT_RUN_TIME, "CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT", "needs 10 concurrent task slots"),
        "Set `spark.sql.shuffle.partitions` so source partitions + shuffle partitions fit the free slots.",
        confs={"spark.sql.shuffle.partitions": "8"},
    ),
    Mistake(
        "union of a DataFrame with itself",
        self_union,
        Outcome(AT_RUN_TIME, f"{RT}.IDENTICAL_SOURCES_IN_UNION_NOT_SUPPORTED", "identical streaming data sources"),
        "Build each side from its own `readStream` call.",
    ),
    Mistake(
        "aggregation before a union",
        stateful_before_union,
        Outcome(AT_START, f"{RT}.STATEFUL_OPERATORS_BEFORE_UNION_NOT_SUPPORTED", "before a union"),
        "Union first, then aggregate.",
    ),
    Mistake(
        "sortBeforeRepartition=true in the session",
        incompatible_conf,
        Outcome(AT_START, f"{RT}.SQL_CONFIGURATION_NOT_SUPPORTED", "spark.sql.execution.sortBeforeRepartition"),
        "Unset the conf (real-time mode sets it to false itself).",
        confs={"spark.sql.execution.sortBeforeRepartition": "true"},
    ),
    Mistake(
        "asyncProgressTrackingCheckpointIntervalMs > 0",
        async_checkpoint_interval,
        Outcome(AT_START, f"{RT}.ASYNC_PROGRESS_TRACKING_CHECKPOINTING_INTERVAL_NON_ZERO", "must be set to 0"),
        "Drop the option (or set it to 0).",
    ),
    Mistake(
        "stateful micro-batch checkpoint reused in real-time mode",
        switch_from_micro_batch,
        Outcome(AT_RUN_TIME, f"{RT}.CHECKPOINT_FORMAT_V1_NOT_SUPPORTED", "use a fresh checkpoint location"),
        "Start the real-time query on a new checkpoint location.",
    ),
    Mistake(
        "Python UDF",
        python_udf,
        Outcome(AT_RUN_TIME, f"{RT}.OPERATOR_OR_SINK_NOT_IN_ALLOWLIST", "ArrowEvalPythonExec is not in the operator"),
        "Use built-in functions (`pyspark.sql.functions`).",
    ),
]
# --8<-- [end:mistakes]


@contextmanager
def session_confs(spark: SparkSession, confs: dict[str, str]) -> Iterator[None]:
    """Set session confs for one query and put the old values back, so cases cannot leak into each other."""
    before = {key: spark.conf.get(key, None) for key in confs}
    for key, value in confs.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


GENERATED_MARKER = "<!-- generated by `python scripts/errors_table.py`; do not edit, run it instead -->"


def render_markdown(mistakes: list[Mistake] = MISTAKES) -> str:
    from rtm_lab.versions import SPARK_VERSION

    lines = [
        GENERATED_MARKER,
        "",
        f"| Mistake | Spark {SPARK_VERSION} says | Where | Message contains | Fix | Test |",
        "|---|---|---|---|---|---|",
    ]
    for m in mistakes:
        where = "`start()`" if m.expected.kind == AT_START else "run time (`q.exception()`)"
        test = f"`tests/reference/test_errors.py::test_mistake_fails_as_documented[{m.id}]`"
        lines.append(f"| {m.title} | `{m.expected.error}` | {where} | `` {m.expected.detail} `` | {m.fix} | {test} |")
    return "\n".join(lines) + "\n"


# --8<-- [start:error_catalogue]
def real_time_error_classes() -> set[str]:
    """Every real-time mode error class the installed Spark defines, read from its own error catalogue."""
    import json
    import zipfile
    from pathlib import Path

    import pyspark

    jar = next((Path(pyspark.__file__).parent / "jars").glob("spark-common-utils_*.jar"))
    with zipfile.ZipFile(jar) as archive:
        catalogue = json.loads(archive.read("error/error-conditions.json"))
    found = set()
    for name, entry in catalogue.items():
        if "REAL_TIME" in name or name == "CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT":
            subclasses = entry.get("subClass", {})
            found |= {f"{name}.{sub}" for sub in subclasses} if subclasses else {name}
    return found


# Defined by Spark, not reproduced here: with the allowlist check on, the allowlist error fires first; with it
# off, the sinks tried (memory, noop) ran instead of failing.
NOT_REPRODUCED = {"STREAMING_REAL_TIME_MODE.SINK_NOT_SUPPORTED"}
# --8<-- [end:error_catalogue]

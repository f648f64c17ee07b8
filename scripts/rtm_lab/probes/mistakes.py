"""The errors page's gallery as cases: each mistake in snippets/reference/errors.py with the outcome Spark 4.3.0 gives.

tests/reference/test_errors.py runs every mistake through `rtm_lab.probes.harness.probe()` and asserts its error class, where
it surfaces and a phrase of the message; `scripts/tables.py errors` renders the page's table from the same list.
"""

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql.streaming import StreamingQuery

from rtm_lab.probes.harness import AT_CALL, AT_RUN_TIME, AT_START, Outcome, Probe
from snippets.reference import errors

MistakeQuery = Callable[..., StreamingQuery]  # (spark, bootstrap, source, sink, checkpoint) -> StreamingQuery


@dataclass(frozen=True)
class Mistake:
    title: str
    query: MistakeQuery
    expected: Outcome
    fix: str
    feed_first: bool = False  # rows must be in the source before the query starts (it runs a micro-batch first)

    @property
    def id(self) -> str:
        return self.query.__name__

    def start(self, p: Probe) -> StreamingQuery:
        source, sink = p.source(), p.sink()
        if self.feed_first:
            p.feed()
        return self.query(p.spark, p.bootstrap, source, sink, p.checkpoint)


RT = "STREAMING_REAL_TIME_MODE"

MISTAKES: list[Mistake] = [
    Mistake(
        "trigger(realTime=True)",
        errors.boolean_trigger,
        Outcome(AT_CALL, "VALUE_NOT_NON_EMPTY_STR", "Value for `realTime` must be a non-empty string, got 'True'"),
        'Pass the batch duration: `trigger(realTime="5 seconds")`.',
    ),
    Mistake(
        'trigger(realTime="1 second")',
        errors.one_second_trigger,
        Outcome(AT_START, "INVALID_STREAMING_REAL_TIME_MODE_TRIGGER_INTERVAL", "less than the 5000 ms minimum"),
        "Use 5 seconds or more (the batch duration is how often progress is checkpointed, not a latency target). "
        "The floor is `spark.sql.streaming.realTimeMode.minBatchDuration`.",
    ),
    Mistake(
        "append output mode",
        errors.append_mode,
        Outcome(AT_START, f"{RT}.OUTPUT_MODE_NOT_SUPPORTED", "The output mode Append is not supported"),
        '`outputMode("update")`.',
    ),
    Mistake(
        "foreachBatch",
        errors.foreach_batch,
        Outcome(AT_START, f"{RT}.OPERATOR_OR_SINK_NOT_IN_ALLOWLIST", "ForeachBatchSink is not in the sink allowlist"),
        "Use `foreach` (per-row writer) or the Kafka sink.",
    ),
    Mistake(
        "rate source",
        errors.rate_source,
        Outcome(AT_RUN_TIME, f"{RT}.INPUT_STREAM_NOT_SUPPORTED", "RateStreamMicroBatchStream is not supported"),
        "Feed a Kafka topic (a small producer loop is enough for a demo).",
    ),
    Mistake(
        "maxOffsetsPerTrigger",
        errors.max_offsets_per_trigger,
        Outcome(
            AT_RUN_TIME, "UnsupportedOperationException", "maxOffsetsPerTrigger is not compatible with real time mode"
        ),
        "Remove the option; size the query with partitions and slots instead.",
    ),
    Mistake(
        "too many shuffle partitions",
        errors.too_many_shuffle_partitions,
        Outcome(AT_RUN_TIME, "CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT", "needs 10 concurrent task slots"),
        "Set `spark.sql.shuffle.partitions` so source partitions + shuffle partitions fit the free slots.",
    ),
    Mistake(
        "union of a DataFrame with itself",
        errors.self_union,
        Outcome(AT_RUN_TIME, f"{RT}.IDENTICAL_SOURCES_IN_UNION_NOT_SUPPORTED", "identical streaming data sources"),
        "Build each side from its own `readStream` call.",
    ),
    Mistake(
        "aggregation before a union",
        errors.stateful_before_union,
        Outcome(AT_START, f"{RT}.STATEFUL_OPERATORS_BEFORE_UNION_NOT_SUPPORTED", "before a union"),
        "Union first, then aggregate.",
    ),
    Mistake(
        "sortBeforeRepartition=true in the session",
        errors.incompatible_conf,
        Outcome(AT_START, f"{RT}.SQL_CONFIGURATION_NOT_SUPPORTED", "spark.sql.execution.sortBeforeRepartition"),
        "Unset the conf (real-time mode sets it to false itself).",
    ),
    Mistake(
        "asyncProgressTrackingCheckpointIntervalMs > 0",
        errors.async_checkpoint_interval,
        Outcome(AT_START, f"{RT}.ASYNC_PROGRESS_TRACKING_CHECKPOINTING_INTERVAL_NON_ZERO", "must be set to 0"),
        "Drop the option (or set it to 0).",
    ),
    Mistake(
        "stateful micro-batch checkpoint reused in real-time mode",
        errors.switch_from_micro_batch,
        Outcome(AT_RUN_TIME, f"{RT}.CHECKPOINT_FORMAT_V1_NOT_SUPPORTED", "use a fresh checkpoint location"),
        "Start the real-time query on a new checkpoint location.",
        feed_first=True,
    ),
    Mistake(
        "stateless micro-batch checkpoint reused in real-time mode",
        errors.switch_stateless_from_micro_batch,
        Outcome(AT_RUN_TIME, f"{RT}.CHECKPOINT_FORMAT_V1_NOT_SUPPORTED", "use a fresh checkpoint location"),
        "Start the real-time query on a new checkpoint location.",
        feed_first=True,
    ),
    Mistake(
        "Python UDF",
        errors.python_udf,
        Outcome(AT_RUN_TIME, f"{RT}.OPERATOR_OR_SINK_NOT_IN_ALLOWLIST", "ArrowEvalPythonExec is not in the operator"),
        "Use built-in functions (`pyspark.sql.functions`).",
    ),
]

# The three moments a failure can surface, as the table names them.
WHERE = {
    AT_CALL: "the call (`trigger()`), before `start()`",
    AT_START: "`start()`",
    AT_RUN_TIME: "run time (`q.exception()`)",
}

TEST_PATH = "tests/reference/test_errors.py::test_mistake_fails_as_documented"


def table_rows(mistakes: list[Mistake] = MISTAKES) -> tuple[list[str], list[list[str]]]:
    """The errors table: a header and one row per mistake."""
    from rtm_lab.versions import SPARK_VERSION

    header = ["Mistake", f"Spark {SPARK_VERSION} says", "Where", "Message contains", "Fix", "Test"]
    rows = []
    for m in mistakes:
        where = WHERE[m.expected.kind]
        rows.append(
            [m.title, f"`{m.expected.error}`", where, f"`` {m.expected.detail} ``", m.fix, f"`{TEST_PATH}[{m.id}]`"]
        )
    return header, rows

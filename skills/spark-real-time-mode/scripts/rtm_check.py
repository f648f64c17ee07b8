"""Before `start()`: what real-time mode will refuse in a query, how many task slots it
needs, and how to fix each.

    python snippets/reference/readiness_check.py --slots N [--conf K=V ...] \\
        [--source-partitions N] QUERY.py [ARGS ...]

runs QUERY.py (with ARGS as its command line) the way you would, except that every
`writeStream ... .start()` is stood in for: a real-time query is checked instead of
started, and the file is stopped there. No session is started before the file's own: it
gets what spark-submit would give it (Spark's defaults, spark-defaults.conf, --conf,
then what the file sets). Exit 0: nothing that Spark refuses (warnings are tuning
advice); 1: something Spark refuses, every finding listed; 2: bad input or an
unreachable Kafka. `rtm_check(df, ...)` does the same for a DataFrame in your own code,
in its own session. scripts/rtm_check.py is this file; the skill ships it as
scripts/rtm_check.py.

How it decides: the verdicts are Spark's own. First what can be read without running:
sinks are looked up in the installed Spark's real-time allowlist
(`RealTimeModeAllowlist`, read by reflection), the batch duration is compared with the
session's `spark.sql.streaming.realTimeMode.minBatchDuration`, the output mode goes
through Spark's `UnsupportedOperationChecker`, each Kafka source's topics are looked up
on its broker and its refused options read, and Python code and clock functions are read
from the analysed plan. Then the query is started for a moment, in real-time mode, on a
private temporary copy of its checkpoint with the console sink (a refused sink swapped
out, refused Kafka options left out) and a 5-minute batch (no batch ends, nothing is
printed or written), until Spark has planned the real-time scan;
`RealTimeModeAllowlist.checkAllowedPhysicalOperator` then checks that plan, which also
gives the shuffles for the slot count. A refusal it cannot swap out ends the report with
"Spark may refuse more once this is fixed".
"""

# --8<-- [start:check]
import re
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame
from pyspark.sql.streaming import DataStreamReader, DataStreamWriter, StreamingQuery

RUNS, AT_CALL, AT_START, AT_RUN_TIME = (
    "runs",
    "fails at the call",
    "fails at start()",
    "fails at run time",
)
ERROR, WARNING = "error", "warning"
RT = "STREAMING_REAL_TIME_MODE"
ALLOWLIST = "org.apache.spark.sql.execution.streaming.runtime.RealTimeModeAllowlist$"
NOT_IN_ALLOWLIST = f"{RT}.OPERATOR_OR_SINK_NOT_IN_ALLOWLIST"
SLOTS_ERROR = "CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT"
# the project's pages (in the skill: references/), where each rule and fix is proven
PAGES = "docs/reference/"
MOMENT_INTERVAL = (
    "5 minutes"  # the probe run's batch never ends: the console sink prints nothing
)
ALLOWLIST_CHECK = "spark.sql.streaming.realTimeMode.allowlistCheck"
# Kafka reader options real-time mode refuses once running; the check reads them, then
# tries the query without them.
REFUSED_READER_OPTIONS = ("maxOffsetsPerTrigger", "minPartitions")
# what Spark's Kafka source fails with on a topic that is not there
MISSING_TOPIC = "UnknownTopicOrPartitionException"
MORE = "Spark may refuse more once this is fixed"
# how long the broker has to list its topics before the check says it is out of reach
KAFKA_TIMEOUT_S = 15
# Expressions that are evaluated once per batch (the optimiser turns them into a literal
# when it plans the batch).
CLOCK_EXPRESSIONS = {
    "CurrentTimestamp": "current_timestamp()",
    "Now": "now()",
    "LocalTimestamp": "localtimestamp()",
}


class ReadinessInputError(ValueError):
    """The input cannot be checked (not a streaming query, no slot count, ...): one line
    says what to do."""


@dataclass(frozen=True)
class Finding:
    level: str  # ERROR (Spark refuses it) or WARNING (it runs, but hurts)
    what: str  # e.g. "operator ArrowEvalPythonExec", "sink ForeachBatchSink"
    error: str | None  # the error class Spark raises (None for a warning)
    when: str  # AT_CALL, AT_START or AT_RUN_TIME ("" for a warning)
    fix: str
    page: str  # the page that proves the rule and the fix
    rank: int = (
        0  # among failures at the same moment, the order in which Spark meets them
    )
    # what Spark's message names: a sink or operator class, a Kafka option, a topic, a
    # slot count
    subject: str = ""

    def line(self) -> str:
        head = f"{self.level.upper():7} {self.what}"
        said = f" -> {self.error} ({self.when})" if self.error else ""
        return f"{head}{said}\n        fix: {self.fix}\n        see: {PAGES}{self.page}"


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    source_tasks: int | None = None
    shuffle_tasks: tuple[int, ...] | None = (
        None  # None: Spark refused the query before planning it
    )
    slots: int | None = None
    spark_version: str = ""
    how: str = ""
    # False: a refusal stopped the trial before Spark's later checks, which may refuse
    # more
    complete: bool = True

    @property
    def slots_needed(self) -> int | None:
        if self.source_tasks is None or self.shuffle_tasks is None:
            return None
        return self.source_tasks + sum(self.shuffle_tasks)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.level == ERROR]

    @property
    def verdict(self) -> tuple[str, str | None]:
        """What Spark will do: (RUNS, None) or (moment, error class) of the first
        refusal it meets."""
        for moment in (AT_CALL, AT_START, AT_RUN_TIME):
            found = sorted(
                (f for f in self.errors if f.when == moment), key=lambda f: f.rank
            )
            if found:
                return moment, found[0].error
        return RUNS, None

    @property
    def exit_code(self) -> int:
        return 1 if self.errors else 0

    def text(self) -> str:
        kind, error = self.verdict
        lines = [
            f"Spark {self.spark_version}: {kind}" + (f" with {error}" if error else "")
        ]
        need = self.slots_needed
        if need is None:
            lines.append(
                "Slots: not counted (Spark refuses the query before it plans its "
                "stages)"
            )
        else:
            shuffles = " + ".join(str(n) for n in self.shuffle_tasks) or "0"
            verdict = "enough" if self.slots >= need else f"{need - self.slots} short"
            lines.append(
                f"Slots: needs {need} ({self.source_tasks} source + {shuffles} "
                f"shuffle), {self.slots} given: "
                f"{verdict}"
            )
        lines += [f.line() for f in self.findings] or ["No findings."]
        if not self.complete and self.errors:
            lines.append(
                f"{MORE}: the check could not get past the refusals above to see "
                "what Spark checks after them."
            )
        lines.append(f"How: {self.how}")
        return "\n".join(lines)


@dataclass
class WriterSettings:
    """What a `writeStream` chain set, as recorded by `recording()` or given to
    `rtm_check()`."""

    format: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    output_mode: str = "append"  # Spark's default
    real_time: object = (
        None  # the value given to trigger(realTime=...); None: no real-time trigger
    )
    other_trigger: dict | None = None  # processingTime=..., availableNow=True, ...
    foreach: bool = False
    foreach_batch: bool = False
    call_errors: list[tuple[str, str]] = field(
        default_factory=list
    )  # (call, error class) PySpark raised


def _jvm_class(spark, name: str):
    return spark._jvm.java.lang.Class.forName(name)


def _allowlist(spark, field_name: str) -> set[str]:
    """A private set of Spark's RealTimeModeAllowlist (allowedSinks or
    allowedOperators), read by reflection."""
    cls = _jvm_class(spark, ALLOWLIST)
    member = cls.getDeclaredField(field_name)
    member.setAccessible(True)
    return set(
        member.get(cls.getField("MODULE$").get(None)).mkString("\n", "\n", "\n").split()
    )


def _condition(exc: BaseException) -> str:
    """The error class of a failure (through the STREAM_FAILED wrapper of a running
    query), else the innermost JVM exception's class name (see the errors page's
    `error_class`)."""
    from py4j.java_gateway import is_instance_of
    from pyspark import SparkContext

    condition = exc.getCondition() if isinstance(exc, PySparkException) else None
    java, innermost = (
        getattr(exc, "_origin", None) or getattr(exc, "java_exception", None),
        None,
    )
    while condition in (None, "STREAM_FAILED") and java is not None:
        if is_instance_of(
            SparkContext._gateway, java, "org.apache.spark.SparkThrowable"
        ):
            condition = java.getCondition()
        innermost, java = java.getClass().getSimpleName(), java.getCause()
    if condition not in (None, "STREAM_FAILED"):
        return condition
    return innermost or type(exc).__name__


# What to do about each refusal, and the page that proves it. Spark decides *whether*
# something is refused; this
# table only words the fix (a class it does not know gets the generic advice).
FIXES = {
    "ArrowEvalPythonExec": (
        "Use built-in functions (pyspark.sql.functions) instead of the Python or "
        "pandas UDF.",
        "support-matrix.md",
    ),
    "BatchEvalPythonExec": (
        "Use built-in functions (pyspark.sql.functions) instead of the Python UDF.",
        "support-matrix.md",
    ),
    "MapInPandasExec": (
        "Express the transformation with built-in functions.",
        "support-matrix.md",
    ),
    "MapInArrowExec": (
        "Express the transformation with built-in functions.",
        "support-matrix.md",
    ),
    "SortExec": (
        "Broadcast the static side of a join (F.broadcast(df)); for per-key "
        "state use groupBy or "
        "dropDuplicates.",
        "support-matrix.md",
    ),
    "SortMergeJoinExec": (
        "Broadcast the static side of the join: df.join(F.broadcast(static), ...).",
        "support-matrix.md",
    ),
    "ShuffleExchangeExec": (
        "Use repartition(n) or a hash-partitioned operator: range partitioning "
        "is refused.",
        "support-matrix.md",
    ),
    "StreamingDeduplicateWithinWatermarkExec": (
        "Use dropDuplicates(keys).",
        "support-matrix.md",
    ),
    "StreamingSymmetricHashJoinExec": (
        "Join the stream with a broadcast static table, or run the join in "
        "micro-batch mode.",
        "support-matrix.md",
    ),
    "ForeachBatchSink": (
        "Use foreach (a per-row writer) or the Kafka sink.",
        "errors.md",
    ),
    "MemorySink": (
        "Use the console sink to look at rows, or the Kafka sink.",
        "support-matrix.md",
    ),
    "NoopTable": ("Use the Kafka sink, foreach, or console.", "support-matrix.md"),
    "VALUE_NOT_NON_EMPTY_STR": (
        'Pass the batch duration: trigger(realTime="5 minutes").',
        "errors.md",
    ),
    "INVALID_STREAMING_REAL_TIME_MODE_TRIGGER_INTERVAL": (
        "Use 5 seconds or more: the batch duration sets how often Spark checkpoints, "
        "not a latency target.",
        "errors.md",
    ),
    f"{RT}.OUTPUT_MODE_NOT_SUPPORTED": ('outputMode("update").', "errors.md"),
    f"{RT}.INPUT_STREAM_NOT_SUPPORTED": (
        "Read from Kafka: it is the only real-time source in OSS Spark.",
        "support-matrix.md",
    ),
    f"{RT}.IDENTICAL_SOURCES_IN_UNION_NOT_SUPPORTED": (
        "Build each side of the union from its own readStream call.",
        "errors.md",
    ),
    f"{RT}.STATEFUL_OPERATORS_BEFORE_UNION_NOT_SUPPORTED": (
        "Union first, then aggregate.",
        "errors.md",
    ),
    f"{RT}.SQL_CONFIGURATION_NOT_SUPPORTED": (
        "Unset the configuration named in the message.",
        "errors.md",
    ),
    f"{RT}.ASYNC_PROGRESS_TRACKING_CHECKPOINTING_INTERVAL_NON_ZERO": (
        "Drop asyncProgressTrackingCheckpointIntervalMs (or set it to 0).",
        "errors.md",
    ),
    f"{RT}.CHECKPOINT_FORMAT_V1_NOT_SUPPORTED": (
        "Start the real-time query on a new checkpoint location.",
        "errors.md",
    ),
    "STDS_FAILED_TO_READ_OPERATOR_METADATA": (
        "Python transformWithState does not run in OSS real-time mode: use the "
        "Scala/Java transformWithState "
        "or built-in stateful "
        "operators.",
        "transform-with-state.md",
    ),
    "STREAMING_OUTPUT_MODE.UNSUPPORTED_DATASOURCE": (
        "File sinks take only append; real-time mode only update: write to Kafka "
        "instead.",
        "support-matrix.md",
    ),
    "_LEGACY_ERROR_TEMP_3102": (
        "Drop the limit or sort: streaming update mode refuses them.",
        "support-matrix.md",
    ),
    "maxOffsetsPerTrigger": (
        "Remove maxOffsetsPerTrigger: a real-time batch has no end offset to cap.",
        "errors.md",
    ),
    "minPartitions": (
        "Remove minPartitions: real-time mode runs one task per Kafka partition.",
        "support-matrix.md",
    ),
    SLOTS_ERROR: (
        "Give the cluster more slots, or lower spark.sql.shuffle.partitions.",
        "slot-sizing.md",
    ),
}
GENERIC_FIX = (
    "Remove this from the real-time query, or run it in micro-batch mode.",
    "support-matrix.md",
)
# Spark checks these at start() in this order: the sink is made, then checked against
# the allowlist, then the
# batch duration, the session's configuration, the plan (output mode, unions, limits)
# and async progress options.
START_RANK = {
    "sink": 0,
    "allowlist": 1,
    "batch_duration": 2,
    f"{RT}.SQL_CONFIGURATION_NOT_SUPPORTED": 3,
    "plan": 4,
    f"{RT}.ASYNC_PROGRESS_TRACKING_CHECKPOINTING_INTERVAL_NON_ZERO": 5,
}


def _refusal(
    what: str,
    error: str,
    when: str,
    key: str | None = None,
    rank: int = 0,
    exc=None,
    subject: str = "",
) -> Finding:
    fix, page = FIXES.get(key or error, FIXES.get(error, GENERIC_FIX))
    if exc is not None:  # Spark's own words, first line, after the error class
        said = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        # A running query's failure is wrapped ("[STREAM_FAILED] Query [id = ...]
        # terminated with exception: ..."):
        # the cause's words say what was refused.
        said = re.sub(
            r"^\[STREAM_FAILED\]\s*Query \[.*?\] terminated with exception:\s*",
            "",
            said,
        )
        said = re.sub(r"^(?:[\w.$]+Exception:\s*)?\[[A-Z0-9_.]+\]\s*", "", said)
        what = f"{what}: {said[:160]}" if said else what
    return Finding(ERROR, what, error, when, fix, page, rank, subject or key or "")


def _bypassed(refused: Finding) -> Finding:
    """With the allowlist check switched off Spark runs what it would have refused: said
    as a warning."""
    return Finding(
        WARNING,
        f"{refused.what}: Spark would refuse it with {refused.error}, but "
        f"{ALLOWLIST_CHECK} is false",
        None,
        "",
        "Spark's own error says that switching the check off means you agree to "
        "run the query at your own "
        "risk: "
        "nothing checks that it is right in real-time mode. To stay on what "
        f"Spark supports: {refused.fix}",
        "support-matrix.md#with-the-allowlist-switched-off",
        subject=refused.subject,
    )


def _sink_class(spark, settings: WriterSettings) -> tuple[str, str | None]:
    """(class of the sink Spark would make, an error Spark raises while making it)."""
    if settings.foreach_batch:
        return "org.apache.spark.sql.execution.streaming.sources.ForeachBatchSink", None
    if settings.foreach:
        return (
            "org.apache.spark.sql.execution.streaming.sources.ForeachWriterTable",
            None,
        )
    fmt = settings.format or spark.conf.get("spark.sql.sources.default")
    if fmt == "memory":
        return "org.apache.spark.sql.execution.streaming.sources.MemorySink", None
    jvm, jspark = spark._jvm, spark._jsparkSession
    provider = (
        jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
            fmt, jspark.sessionState().conf()
        )
    )
    is_a = lambda name: _jvm_class(spark, name).isAssignableFrom(provider)  # noqa: E731
    if is_a("org.apache.spark.sql.execution.datasources.FileFormat") or is_a(
        "org.apache.spark.sql.execution.datasources.v2.FileDataSourceV2"
    ):
        # Spark makes a file sink only for append; real-time mode runs only update.
        error = (
            None
            if settings.output_mode.lower() == "append"
            else "STREAMING_OUTPUT_MODE.UNSUPPORTED_DATASOURCE"
        )
        return "org.apache.spark.sql.execution.streaming.sinks.FileStreamSink", error
    if is_a("org.apache.spark.sql.connector.catalog.TableProvider"):
        options = jvm.java.util.HashMap()
        for key, value in settings.options.items():
            options.put(key, value)
        options = jvm.org.apache.spark.sql.util.CaseInsensitiveStringMap(options)
        table_provider = (
            provider.newInstance()
        )  # a provider has a no-argument constructor, as Spark requires
        schema = table_provider.inferSchema(options)
        no_partitioning = spark.sparkContext._gateway.new_array(
            jvm.org.apache.spark.sql.connector.expressions.Transform, 0
        )
        table = table_provider.getTable(schema, no_partitioning, options)
        return table.getClass().getName(), None
    return provider.getName(), None


def _check_writer(spark, df: DataFrame, settings: WriterSettings) -> list[Finding]:
    """Everything Spark checks on the writer's own settings (sink, trigger, output
    mode), with its own verdicts."""
    found = [
        _refusal(f"{call}", error, AT_CALL) for call, error in settings.call_errors
    ]
    sink, error = _sink_class(spark, settings)
    short = sink.rsplit(".", 1)[-1].rstrip("$")
    if error:
        found.append(
            _refusal(
                f"sink {short} in {settings.output_mode} mode",
                error,
                AT_START,
                rank=START_RANK["sink"],
            )
        )
    elif sink not in _allowlist(spark, "allowedSinks"):
        found.append(
            _refusal(
                f"sink {short}",
                NOT_IN_ALLOWLIST,
                AT_START,
                key=short,
                rank=START_RANK["allowlist"],
                subject=short,
            )
        )
    if isinstance(settings.real_time, str):
        jvm = spark._jvm
        trigger = jvm.org.apache.spark.sql.execution.streaming.RealTimeTrigger.apply(
            settings.real_time
        )
        floor = jvm.org.apache.spark.network.util.JavaUtils.timeStringAsMs(
            spark.conf.get("spark.sql.streaming.realTimeMode.minBatchDuration")
        )
        if trigger.batchDurationMs() < floor:
            error = "INVALID_STREAMING_REAL_TIME_MODE_TRIGGER_INTERVAL"
            what = (
                f"trigger(realTime={settings.real_time!r}): under the {floor} "
                "ms minimum"
            )
            found.append(
                _refusal(what, error, AT_START, rank=START_RANK["batch_duration"])
            )
    if settings.output_mode.lower() != "update":
        jvm = spark._jvm
        mode = jvm.org.apache.spark.sql.catalyst.streaming.InternalOutputModes.apply(
            settings.output_mode
        )
        try:
            checker = (
                jvm.org.apache.spark.sql.catalyst.analysis.UnsupportedOperationChecker
            )
            checker.checkAdditionalRealTimeModeConstraints(
                df._jdf.queryExecution().analyzed(), mode
            )
        except Exception as exc:
            what = f"outputMode({settings.output_mode!r})"
            found.append(
                _refusal(what, _condition(exc), AT_START, rank=START_RANK["plan"])
            )
    return found


def _kafka_sources(df: DataFrame) -> list[dict[str, str]]:
    """The options of every Kafka source in the plan."""
    found, todo = [], [df._jdf.queryExecution().analyzed()]
    while todo:
        node = todo.pop()
        name = node.getClass().getSimpleName()
        if name == "StreamingRelationV2" and node.sourceName() == "kafka":
            found.append(dict(node.extraOptions().asCaseSensitiveMap()))
        children = node.children().iterator()
        while children.hasNext():
            todo.append(children.next())
    return found


def _plan_nodes(plan):
    todo = [plan]
    while todo:
        node = todo.pop()
        yield node
        children = node.children().iterator()
        while children.hasNext():
            todo.append(children.next())


def _moment(
    df: DataFrame, settings: WriterSettings, checkpoint: str, timeout_s: float
) -> tuple[list[Finding], object, bool]:
    """Start the query for a moment on a private checkpoint and the console sink; return
    what Spark refused, the physical plan it made (None when it refused before
    planning), and whether the run got through all of Spark's checks (False: a refusal
    stopped it before the later ones)."""
    writer = (
        df.writeStream.format("console")
        .outputMode("update")
        .trigger(realTime=MOMENT_INTERVAL)
    )
    for key, value in settings.options.items():
        if key.lower() not in ("checkpointlocation", "path"):
            writer = writer.option(
                key, value
            )  # e.g. asyncProgressTracking*: Spark checks them at start()
    try:
        query = _ORIGINAL["start"](writer.option("checkpointLocation", checkpoint))
    except Exception as exc:
        error = _condition(exc)
        rank = START_RANK.get(error, START_RANK["plan"])
        return (
            [_refusal(_what(error), error, AT_START, rank=rank, exc=exc)],
            None,
            False,
        )
    try:
        deadline, failed = time.monotonic() + timeout_s, None
        while time.monotonic() < deadline and failed is None:
            try:
                query.awaitTermination(0.2)
            except Exception as exc:
                failed = exc
            plan = _executed(query)
            if plan is not None and _scans(plan):
                break
        else:
            if failed is None:
                raise ReadinessInputError(
                    f"Spark did not plan the query within {timeout_s:.0f}s: is "
                    "its Kafka reachable from here?"
                )
        plan = _executed(query)
        if failed is None and plan is not None:
            try:
                # Spark's own check, on the plan Spark made for this query in real-time
                # mode.
                streaming = (
                    df.sparkSession._jvm.org.apache.spark.sql.execution.streaming
                )
                RealTimeModeAllowlist = streaming.runtime.RealTimeModeAllowlist
                RealTimeModeAllowlist.checkAllowedPhysicalOperator(plan, True)
                # The source's own checks (Kafka refuses minPartitions here) run when it
                # splits its input: ask now.
                for scan in _scans(plan):
                    scan.inputPartitions()
            except Exception as exc:
                failed = exc
        if failed is None:
            return [], plan, True
        error = _condition(failed)
        if (
            error == SLOTS_ERROR
        ):  # this session's slots, not the cluster's: counted from the plan instead
            return [], plan, True
        if error == NOT_IN_ALLOWLIST and plan is not None:
            # Name every operator Spark's allowlist refuses, each with its own fix.
            allowlist = _jvm_class(df.sparkSession, ALLOWLIST)
            module = allowlist.getField("MODULE$").get(None)
            allowed = getattr(
                module,
                "org$apache$spark$sql$execution$streaming$runtime$"
                "RealTimeModeAllowlist$$isAllowed",
            )
            refused = sorted(
                {_name(n) for n in _streaming_nodes(plan) if not allowed(n)}
            )
            if refused:
                # The source's checks come after the operators' in Spark: the refused
                # Kafka options were read
                # before the run, so nothing Spark checks is left unseen.
                return (
                    [
                        _refusal(f"operator {name}", error, AT_RUN_TIME, key=name)
                        for name in refused
                    ],
                    plan,
                    True,
                )
        key = (
            _option_named(failed) if error == "UnsupportedOperationException" else None
        )
        found = [_refusal(_what(key or error), error, AT_RUN_TIME, key=key, exc=failed)]
        return found, plan, key is not None
    finally:
        query.stop()


def _option_named(exc: BaseException) -> str | None:
    """The Kafka option a source refusal names ("maxOffsetsPerTrigger is not compatible
    with real time mode")."""
    text = str(exc).lower()
    return next(
        (
            option
            for option in ("maxOffsetsPerTrigger", "minPartitions")
            if option.lower() in text
        ),
        None,
    )


def _scans(plan) -> list:
    return [n for n in _plan_nodes(plan) if _name(n) == "RealTimeStreamScanExec"]


def _name(node) -> str:
    return node.getClass().getSimpleName()


def _what(error: str) -> str:
    return {
        f"{RT}.SQL_CONFIGURATION_NOT_SUPPORTED": "session configuration",
        f"{RT}.ASYNC_PROGRESS_TRACKING_CHECKPOINTING_INTERVAL_NON_ZERO": "writer "
        "option asyncProgressTrackingCheckpointIntervalMs",
        f"{RT}.STATEFUL_OPERATORS_BEFORE_UNION_NOT_SUPPORTED": "stateful operator "
        "before a union",
        "_LEGACY_ERROR_TEMP_3102": "an operator streaming refuses in update mode "
        "(limit, sort)",
        f"{RT}.INPUT_STREAM_NOT_SUPPORTED": "source (not Kafka)",
        f"{RT}.IDENTICAL_SOURCES_IN_UNION_NOT_SUPPORTED": "union of one source with "
        "itself",
        "STDS_FAILED_TO_READ_OPERATOR_METADATA": "Python transformWithState",
        "maxOffsetsPerTrigger": "Kafka option maxOffsetsPerTrigger",
        "minPartitions": "Kafka option minPartitions",
        f"{RT}.CHECKPOINT_FORMAT_V1_NOT_SUPPORTED": "checkpoint written in micro-batch "
        "mode",
    }.get(error, "the query")


def _executed(query: StreamingQuery):
    """The physical plan of the query's last execution, or None when Spark has not made
    one (or failed to)."""
    try:
        execution = query._jsq.streamingQuery().lastExecution()
        return None if execution is None else execution.executedPlan()
    except Exception:
        return None


def _streaming_nodes(plan):
    """Nodes above a real-time scan: the ones Spark's allowlist applies to."""

    def has_scan(node) -> bool:
        return any(
            n.getClass().getSimpleName() == "RealTimeStreamScanExec"
            for n in _plan_nodes(node)
        )

    return [
        n
        for n in _plan_nodes(plan)
        if has_scan(n) and n.getClass().getSimpleName() != "RealTimeStreamScanExec"
    ]


def _warnings(kafka: list[dict[str, str]]) -> list[Finding]:
    found = []
    for options in kafka:
        lower = {k.lower() for k in options}
        if "kafka.fetch.max.wait.ms" not in lower:
            found.append(
                Finding(
                    WARNING,
                    "Kafka source: kafka.fetch.max.wait.ms left at 500 ms",
                    None,
                    "",
                    'Set .option("kafka.fetch.max.wait.ms", "50") (and keep '
                    "kafka.fetch.min.bytes at 1).",
                    "kafka-tuning.md",
                )
            )
    return found


def rtm_check(
    df: DataFrame,
    slots: int,
    *,
    sink: str = "kafka",
    options: dict[str, str] | None = None,
    output_mode: str = "update",
    batch_duration: str = "5 minutes",
    checkpoint: str | None = None,
    source_partitions: int | None = None,
    timeout_s: float = 90.0,
) -> Report:
    """Check a streaming DataFrame, written to `sink` ("kafka", "console", ...,
    "foreach" or "foreachBatch") with these writer `options`, output mode and
    `trigger(realTime=batch_duration)`, on a cluster with `slots` task slots.

    `checkpoint`: the query's checkpoint location, copied (never written) so Spark sees
    what it holds. `source_partitions`: the partition count of the topics in production,
    when it differs from the ones read here."""
    settings = WriterSettings(
        format=None if sink in ("foreach", "foreachBatch") else sink,
        options={k: str(v) for k, v in (options or {}).items()},
        output_mode=output_mode,
        real_time=batch_duration,
        foreach=sink == "foreach",
        foreach_batch=sink == "foreachBatch",
    )
    return check_writer(df, settings, slots, source_partitions, checkpoint, timeout_s)


def check_writer(
    df: DataFrame,
    settings: WriterSettings,
    slots: int,
    source_partitions: int | None = None,
    checkpoint: str | None = None,
    timeout_s: float = 90.0,
    withheld: list[dict[str, str]] | None = None,
) -> Report:
    """`rtm_check()` for the settings a `writeStream` chain recorded (see
    `recording()`); `withheld`: refused Kafka reader options `recording()` kept out of
    the query, so that the trial run gets past them."""
    if not isinstance(df, DataFrame) or not hasattr(df, "_jdf"):
        raise ReadinessInputError(
            f"expected a classic PySpark DataFrame, got {type(df).__name__} "
            "(Spark Connect and other "
            "objects are not checked)"
        )
    if not df.isStreaming:
        raise ReadinessInputError(
            "the DataFrame is a batch DataFrame: build it with spark.readStream"
        )
    if not isinstance(slots, int) or isinstance(slots, bool) or slots < 1:
        raise ReadinessInputError(
            "no task slot count: pass slots=N (local[N], or executors x cores on "
            "a cluster)"
        )
    spark = df.sparkSession
    check_spark_version(spark.version, _has_class(spark, ALLOWLIST))
    report = Report(slots=slots, spark_version=spark.version)
    # Read first, without running anything: the writer, the Kafka sources (their topics,
    # their options), and the
    # Python code and clock functions in the query's plan.
    report.findings += _check_writer(spark, df, settings)
    kafka = _kafka_sources(df)
    missing = [f for options in kafka for f in _missing_topics(spark, options)]
    report.findings += missing
    report.findings += _reader_options(kafka, withheld or [])
    python = _python_operators(df)
    # Spark fails on the topic before it plans the query: there is nothing more to run
    if missing:
        moment, plan, report.complete = [], None, False
    else:
        # A stopped query's state-store maintenance may still be writing into the copy
        # as it is removed: what is left behind is a temporary folder, not an error.
        with tempfile.TemporaryDirectory(
            prefix="rtm-check-", ignore_cleanup_errors=True
        ) as private:
            copy = Path(private) / "checkpoint"
            if checkpoint and Path(checkpoint).is_dir():
                shutil.copytree(checkpoint, copy)
            moment, plan, report.complete = _moment(df, settings, str(copy), timeout_s)
    seen = {(f.error, f.subject) for f in report.findings}
    report.findings += [f for f in moment if (f.error, f.subject) not in seen]
    if not any(f.subject in python for f in moment if f.error == NOT_IN_ALLOWLIST):
        # The run stopped before Spark's operator check (or never ran): the Python code
        # is named from the plan.
        report.findings += [
            _refusal(
                f"operator {name} (read from the plan, not run)",
                NOT_IN_ALLOWLIST,
                AT_RUN_TIME,
                key=name,
            )
            for name in python
        ]
    if plan is not None and not any(
        f.when == AT_RUN_TIME and f.error != NOT_IN_ALLOWLIST for f in moment
    ):
        _count_slots(report, plan, slots, source_partitions)
    for warning in _warnings(kafka) + _clock_warnings(df):
        if (
            warning not in report.findings
        ):  # two reads of one topic give the same advice once
            report.findings.append(warning)
    if spark.conf.get(ALLOWLIST_CHECK, "true").strip().lower() == "false":
        # Spark skips its allowlist: what it would have refused runs, at the user's own
        # risk (a warning, not an error).
        report.findings = [
            _bypassed(f) if f.error == NOT_IN_ALLOWLIST else f for f in report.findings
        ]
    read = "read the writer, the Kafka topics and options and the query's plan"
    report.how = (
        f"{read}; not started (Spark fails on a missing topic before anything else)"
        if missing
        else f"{read}, then started the query for a moment on a private copy of "
        "its checkpoint with the "
        "console "
        "sink (refused sinks and Kafka options left out), stopped before any "
        "batch ended; your sink and "
        "checkpoint were not touched"
    )
    return report


def _count_slots(
    report: Report, plan, slots: int, source_partitions: int | None
) -> None:
    """Counted only for a query Spark gets as far as scheduling (a source refusal stops
    it before)."""
    report.shuffle_tasks = tuple(
        n.outputPartitioning().numPartitions()
        for n in _streaming_nodes(plan)
        if n.getClass().getSimpleName() == "ShuffleExchangeExec"
    )
    if source_partitions is None:
        try:
            # One task per input partition of each real-time scan: for Kafka, the topic
            # partitions Kafka reported.
            source_partitions = sum(
                scan.inputPartitions().size() for scan in _scans(plan)
            )
        except (
            Exception
        ):  # the source refuses to split its input (a refused option): not counted
            report.shuffle_tasks = None
            return
    report.source_tasks = source_partitions
    need = report.slots_needed
    short = f"slots: needs {need}, {slots} given ({need - slots} short)"
    if need > slots and report.shuffle_tasks:
        report.findings.append(
            _refusal(short, SLOTS_ERROR, AT_RUN_TIME, subject=str(need))
        )
    elif need > slots:
        report.findings.append(
            Finding(
                WARNING,
                short,
                None,
                "",
                "A one-stage query does not fail: the tasks without a slot wait, "
                "and their partitions' rows "
                "are late. Give it a slot per "
                "partition.",
                "slot-sizing.md",
            )
        )


def _topics(options: dict[str, str]) -> list[str]:
    """The topics a Kafka source names (subscribePattern matches at run time: none)."""
    lower = {k.lower(): v for k, v in options.items()}
    if "subscribe" in lower:
        return [t.strip() for t in lower["subscribe"].split(",") if t.strip()]
    if "assign" in lower:
        import json

        return sorted(json.loads(lower["assign"]))
    return []


def _missing_topics(spark, options: dict[str, str]) -> list[Finding]:
    """A finding per topic the source names that its broker does not have, asked with
    Kafka's own admin client (the connector's), configured with the source's kafka.*
    options."""
    named = _topics(options)
    if not named:
        return []
    jvm = spark._jvm
    props = jvm.java.util.Properties()
    for key, value in options.items():
        if key.lower().startswith("kafka."):
            props.setProperty(key[len("kafka.") :], value)
    bootstrap = props.getProperty("bootstrap.servers")
    admin = jvm.org.apache.kafka.clients.admin.Admin.create(props)
    try:
        names = (
            admin.listTopics()
            .names()
            .get(KAFKA_TIMEOUT_S, jvm.java.util.concurrent.TimeUnit.SECONDS)
        )
        there = set(names.toArray())
    except Exception:
        raise ReadinessInputError(
            f"Kafka at {bootstrap} did not list its topics within "
            f"{KAFKA_TIMEOUT_S}s: is it "
            "running and reachable "
            "from here (kafka.bootstrap.servers)?"
        ) from None
    finally:
        admin.close(jvm.java.time.Duration.ofSeconds(1))
    return [
        Finding(
            ERROR,
            f"Kafka topic {topic!r} does not exist on {bootstrap}",
            MISSING_TOPIC,
            AT_RUN_TIME,
            "Create it or check the name (subscribe / assign).",
            "readiness-check.md",
            rank=-1,  # the source fails on it before the plan is checked
            subject=topic,
        )
        for topic in named
        if topic not in there
    ]


def _reader_options(
    kafka: list[dict[str, str]], withheld: list[dict[str, str]]
) -> list[Finding]:
    """The Kafka reader options real-time mode refuses (Spark fails on them once
    running)."""
    found = {}
    for options in kafka + withheld:
        for key in options:
            option = next(
                (o for o in REFUSED_READER_OPTIONS if o.lower() == key.lower()), None
            )
            if option:
                what = f"Kafka option {option}: not compatible with real-time mode"
                found[option] = _refusal(
                    what,
                    "UnsupportedOperationException",
                    AT_RUN_TIME,
                    key=option,
                    rank=1,
                )
    return list(found.values())


def _expressions(plan):
    """(plan node, expression) for every expression of every node of a logical plan."""
    for node in _plan_nodes(plan):
        todo = list(_scala(node.expressions()))
        while todo:
            expression = todo.pop()
            yield node, expression
            todo.extend(_scala(expression.children()))


def _scala(seq) -> list:
    items, iterator = [], seq.iterator()
    while iterator.hasNext():
        items.append(iterator.next())
    return items


# PySpark's eval types (pyspark.util.PythonEvalType) of scalar UDFs, and the operator
# Spark runs each in: a plain
# Python UDF (useArrow=False), an Arrow-optimised one (the default), a pandas UDF. The
# others (Arrow UDFs, map,
# grouped, stateful) are arguments of their own plan node, named by it.
SCALAR_UDFS = {
    100: "BatchEvalPythonExec",
    101: "ArrowEvalPythonExec",
    200: "ArrowEvalPythonExec",
}
SCALAR_UDFS[204] = "ArrowEvalPythonExec"  # a pandas UDF over an iterator of batches


def _python_operators(df: DataFrame) -> list[str]:
    """The physical operators Spark plans for the query's Python code, read from the
    analysed plan without running it: a Python UDF becomes BatchEvalPythonExec
    (useArrow=False) or ArrowEvalPythonExec (the default, and pandas UDFs); mapInPandas
    and mapInArrow keep their own operators."""
    found = set()
    for node, expression in _expressions(df._jdf.queryExecution().analyzed()):
        if _name(expression) == "PythonUDF" and expression.evalType() in SCALAR_UDFS:
            found.add(SCALAR_UDFS[expression.evalType()])
        if _name(node) in ("MapInPandas", "MapInArrow"):
            found.add(f"{_name(node)}Exec")
    return sorted(found)


def _clock_warnings(df: DataFrame) -> list[Finding]:
    """current_timestamp() and its kind in the analysed plan: evaluated once per batch,
    which in real-time mode lasts the whole batch duration."""
    analysed = df._jdf.queryExecution().analyzed()
    used = sorted(
        {
            CLOCK_EXPRESSIONS[_name(e)]
            for _, e in _expressions(analysed)
            if _name(e) in CLOCK_EXPRESSIONS
        }
    )
    return [
        Finding(
            WARNING,
            f"{call} in a real-time query: one value for the whole batch",
            None,
            "",
            f"{call} is fixed when Spark plans the batch, and a real-time batch "
            "lasts the batch duration: a "
            "latency "
            "or processing-time column built on it is wrong by up to the "
            "batch duration. Use the Kafka "
            "record's timestamp "
            "and take the time where the row is written.",
            "latency-metrics.md (section: current_timestamp() is fixed per batch)",
            subject=call,
        )
        for call in used
    ]


def _has_class(spark, name: str) -> bool:
    try:
        _jvm_class(spark, name)
        return True
    except Exception:
        return False


def check_spark_version(version: str, has_allowlist: bool) -> None:
    """The checker reads the real-time allowlist of the Spark it runs on; a Spark
    without one cannot be checked."""
    if not has_allowlist:
        raise ReadinessInputError(
            f"Spark {version} has no real-time mode allowlist: run the check with "
            "the Spark (4.1 or later) your "
            "query runs on"
        )


# --8<-- [end:check]


# --8<-- [start:intercept]
class Checked(Exception):
    """Raised in place of `start()` once a real-time query has been checked: the file
    stops there."""

    def __init__(self, report: Report):
        super().__init__("checked")
        self.report = report


_ORIGINAL: dict[str, object] = {}
_ORIGINAL_READER: dict[str, object] = {}


def _settings(writer: DataStreamWriter) -> WriterSettings:
    if not hasattr(writer, "_rtm_settings"):
        writer._rtm_settings = WriterSettings()
    return writer._rtm_settings


@contextmanager
def recording(
    slots: int,
    source_partitions: int | None = None,
    timeout_s: float = 90.0,
    quiet: bool = False,
):
    """Within this block a `writeStream ... start()` does not start: a real-time query
    is checked (`Checked` is raised with the report), any other query runs on a private
    checkpoint with the noop sink. A Kafka reader's options that real-time mode refuses
    are kept out of the query (and reported), so the check sees past them. `quiet`:
    Spark's own log is switched off for the check (its failures are the report)."""
    private_checkpoints: dict[str, str] = {}
    scratch = tempfile.mkdtemp(prefix="rtm-check-files-")
    withheld: list[dict[str, str]] = []

    def held(reader) -> dict[str, str]:
        if not hasattr(reader, "_rtm_withheld"):
            reader._rtm_withheld = {}
        return reader._rtm_withheld

    def reader_format(self, source):
        self._rtm_format = source
        return _ORIGINAL_READER["format"](self, source)

    def reader_option(self, key, value):
        if str(key).lower() in {o.lower() for o in REFUSED_READER_OPTIONS}:
            held(self)[key] = str(value)
            return self
        return _ORIGINAL_READER["option"](self, key, value)

    def reader_options(self, **options):
        for key, value in options.items():
            reader_option(self, key, value)
        return self

    def reader_load(self, path=None, format=None, schema=None, **options):
        reader_options(self, **options)
        kept = held(self)
        if kept and (format or getattr(self, "_rtm_format", None)) != "kafka":
            for (
                key,
                value,
            ) in kept.items():  # another source's own option of that name: passed on
                _ORIGINAL_READER["option"](self, key, value)
        elif kept:
            withheld.append(dict(kept))
        return _ORIGINAL_READER["load"](self, path=path, format=format, schema=schema)

    def record(name, update):
        def wrapper(self, *args, **kwargs):
            update(_settings(self), *args, **kwargs)
            return _ORIGINAL[name](self, *args, **kwargs)

        return wrapper

    def options(s, **kw):
        s.options.update({k: str(v) for k, v in kw.items()})

    def trigger(self, **kwargs):
        s = _settings(self)
        try:
            result = _ORIGINAL["trigger"](self, **kwargs)
        # PySpark refuses the argument here, before start(); carry on to see the rest
        except Exception as exc:
            s.call_errors.append(
                (
                    f"trigger({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})",
                    _condition(exc),
                )
            )
            s.real_time = kwargs.get("realTime", s.real_time)
            return self
        if "realTime" in kwargs:
            s.real_time, s.other_trigger = kwargs["realTime"], None
        else:
            s.real_time, s.other_trigger = None, kwargs
        return result

    def start(
        self,
        path=None,
        format=None,
        outputMode=None,
        partitionBy=None,
        queryName=None,
        **opts,
    ):
        s = _settings(self)
        self.options(**opts)
        if outputMode is not None:
            self.outputMode(outputMode)
        if format is not None:
            self.format(format)
        if path is not None:
            s.options["path"] = path
        user_checkpoint = s.options.get("checkpointLocation")
        if s.real_time is None and not s.call_errors:
            if not s.other_trigger or not (
                s.other_trigger.get("availableNow") or s.other_trigger.get("once")
            ):
                raise ReadinessInputError(
                    "the file starts a micro-batch query (no "
                    "trigger(realTime=...)): add "
                    "the real-time trigger, then "
                    "check it"
                )
            # A micro-batch run that ends (e.g. before a switch to real-time): run it on
            # a private checkpoint into
            # noop, so that what it leaves in the checkpoint is seen by the real-time
            # query checked next.
            private = private_checkpoints.setdefault(
                user_checkpoint or str(len(private_checkpoints)),
                tempfile.mkdtemp(dir=scratch),
            )
            stand_in = (
                self._df.writeStream.format("noop")
                .option("checkpointLocation", private)
                .outputMode(s.output_mode)
            )
            if s.other_trigger:
                stand_in = _ORIGINAL["trigger"](stand_in, **s.other_trigger)
            return _ORIGINAL["start"](stand_in)
        checkpoint = private_checkpoints.get(user_checkpoint, user_checkpoint)
        if quiet:
            self._df.sparkSession.sparkContext.setLogLevel("OFF")
        try:
            report = check_writer(
                self._df, s, slots, source_partitions, checkpoint, timeout_s, withheld
            )
        except ReadinessInputError:
            raise
        except (
            Exception
        ) as exc:  # the check's own failure, not the file's: said as such
            said = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
            raise ReadinessInputError(
                f"the check failed on this query: {type(exc).__name__}: {said}"
            ) from None
        raise Checked(report)

    patches = {
        "format": record("format", lambda s, fmt: setattr(s, "format", fmt)),
        "option": record("option", lambda s, k, v: s.options.__setitem__(k, str(v))),
        "options": record("options", options),
        "outputMode": record(
            "outputMode", lambda s, mode: setattr(s, "output_mode", mode)
        ),
        "foreach": record("foreach", lambda s, f: setattr(s, "foreach", True)),
        "foreachBatch": record(
            "foreachBatch", lambda s, f: setattr(s, "foreach_batch", True)
        ),
        "trigger": trigger,
        "start": start,
    }
    reader_patches = {
        "format": reader_format,
        "option": reader_option,
        "options": reader_options,
        "load": reader_load,
    }
    _ORIGINAL.update({name: getattr(DataStreamWriter, name) for name in patches})
    _ORIGINAL_READER.update(
        {name: getattr(DataStreamReader, name) for name in reader_patches}
    )
    for name, patched in patches.items():
        setattr(DataStreamWriter, name, patched)
    for name, patched in reader_patches.items():
        setattr(DataStreamReader, name, patched)
    try:
        yield
    finally:
        for name in patches:
            setattr(DataStreamWriter, name, _ORIGINAL[name])
        for name in reader_patches:
            setattr(DataStreamReader, name, _ORIGINAL_READER[name])
        shutil.rmtree(scratch, ignore_errors=True)


# The real methods, for the short check run; `recording()` puts them back when it ends.
_ORIGINAL.setdefault("start", DataStreamWriter.start)
_ORIGINAL.setdefault("trigger", DataStreamWriter.trigger)
# --8<-- [end:intercept]


# --8<-- [start:usage]
def check_my_query(
    spark, bootstrap: str, source: str, sink: str, checkpoint: str
) -> int:
    """The query you are about to start, checked instead: prints the report, returns the
    exit code."""
    events = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
    )
    counts = (
        events.load()
        .groupBy("key")
        .count()
        .selectExpr("key", "CAST(count AS STRING) AS value")
    )
    report = rtm_check(
        counts,
        slots=8,  # the cluster's task slots
        sink="kafka",  # or "foreach", "foreachBatch", "console", ...
        options={"kafka.bootstrap.servers": bootstrap, "topic": sink},
        output_mode="update",
        batch_duration="5 minutes",
        checkpoint=checkpoint,  # copied, never written
    )
    print(report.text())
    return report.exit_code  # 0: nothing refused; 1: something Spark refuses


# --8<-- [end:usage]


def check_file(
    path: str,
    args: list[str],
    slots: int,
    source_partitions: int | None = None,
    quiet: bool = False,
) -> Report:
    """Run a query file as `python PATH ARGS...` would, checking its first real-time
    `start()`, in the session the file builds (or the one already running in this
    process)."""
    import runpy

    _readable(path)
    argv = sys.argv
    sys.argv = [path, *args]
    try:
        with recording(slots, source_partitions, quiet=quiet):
            runpy.run_path(path, run_name="__main__")
    except Checked as done:
        return done.report
    except ReadinessInputError:
        raise
    except SystemExit as exc:
        raise ReadinessInputError(
            f"{path} exited ({exc.code}) before starting a real-time query: check "
            "its arguments"
        ) from None
    except Exception as exc:
        said = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ReadinessInputError(
            f"{path} failed before starting a real-time query: "
            f"{type(exc).__name__}: {said}"
        ) from None
    finally:
        sys.argv = argv
    raise ReadinessInputError(
        f"{path} started no streaming query in real-time mode: it must call "
        "writeStream ... "
        "trigger(realTime=...) ... "
        "start()"
    )


def _readable(path: str) -> None:
    if not Path(path).is_file() or not path.endswith(".py"):
        raise ReadinessInputError(
            f"{path} is not a Python file: pass the .py file that builds and "
            "starts the query"
        )


def parse_args(argv: list[str]):
    """The parsed command line, or 2 after a one-line message when it cannot be
    checked."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="rtm_check.py", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--slots",
        type=int,
        help="task slots of the cluster the query will run on (required)",
    )
    parser.add_argument(
        "--source-partitions",
        type=int,
        help="Kafka partitions in production, if not the ones read here",
    )
    parser.add_argument(
        "--master",
        default="local[2]",
        help="where the short check run happens (%(default)s)",
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="K=V",
        help="a Spark setting you pass to spark-submit (repeatable); "
        "spark-defaults.conf is read "
        "as spark-submit reads it",
    )
    parser.add_argument(
        "--jars",
        help="jars for the check session (the Kafka connector), comma-separated",
    )
    parser.add_argument(
        "--packages",
        help="Maven coordinates for the check session, e.g. the Kafka connector",
    )
    parser.add_argument("file", help="the Python file that builds and starts the query")
    parser.add_argument(
        "args", nargs=argparse.REMAINDER, help="the file's own arguments"
    )
    ns = parser.parse_args(argv)
    try:
        if ns.slots is None or ns.slots < 1:
            raise ReadinessInputError(
                "no task slot count: pass --slots N (N of local[N], or executors "
                "x cores)"
            )
        for setting in ns.conf:
            if "=" not in setting or not setting.split("=", 1)[0].strip():
                raise ReadinessInputError(
                    f"--conf {setting!r} is not KEY=VALUE: pass it as "
                    "spark-submit takes it"
                )
        _readable(ns.file)
    except ReadinessInputError as exc:
        print(f"rtm_check: {exc}", file=sys.stderr)
        return 2
    return ns


def submit_args(
    ns, jars: str | None = None, launcher_conf: dict[str, str] | None = None
) -> list[str]:
    """What spark-submit gets when the file builds its session: no session is started
    before the file's own, so the file gets what it would get from spark-submit (Spark's
    defaults, spark-defaults.conf, --conf, then what the file sets itself), never
    settings of the checker's."""
    args = ["--master", ns.master]
    for flag, value in (("--jars", ns.jars or jars), ("--packages", ns.packages)):
        if value:
            args += [flag, value]
    for key, value in (
        launcher_conf or {}
    ).items():  # how the checker's JVM logs and listens, not query settings
        args += ["--conf", f"{key}={value}"]
    for setting in ns.conf:
        args += ["--conf", setting]
    return args


def main(
    argv: list[str] | None = None,
    jars: str | None = None,
    launcher_conf: dict[str, str] | None = None,
) -> int:
    import os
    import shlex

    ns = parse_args(sys.argv[1:] if argv is None else argv)
    if isinstance(ns, int):
        return ns
    # PySpark starts the JVM through spark-submit with these arguments when the file
    # calls getOrCreate().
    before = (
        os.environ.get("PYSPARK_SUBMIT_ARGS", "").replace("pyspark-shell", "").strip()
    )
    ours = shlex.join(submit_args(ns, jars, launcher_conf))
    os.environ["PYSPARK_SUBMIT_ARGS"] = f"{before} {ours} pyspark-shell".strip()
    try:
        # Quiet: the check's own failures are the report, Spark's log of them would only
        # repeat it.
        report = check_file(
            ns.file, ns.args, ns.slots, ns.source_partitions, quiet=True
        )
    except ReadinessInputError as exc:
        print(f"rtm_check: {exc}", file=sys.stderr)
        return 2
    print(report.text())
    return report.exit_code


if __name__ == "__main__":
    sys.exit(main())

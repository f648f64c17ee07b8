"""The readiness check against Spark on real-time queries written the way public examples write them (not this
project's snippets), each with the fixes that take it, one refusal at a time, to a query Spark runs.

A case is a whole program (`python FILE BOOTSTRAP TOPIC OUT_TOPIC CHECKPOINT`) and the fix for each refusal Spark
may raise on it, keyed by what Spark's message names (a sink or operator class, a Kafka option, the slot count's
error class, ...). `spark_refusals()` runs the file for real, applies the fix for what Spark refused, and runs it
again until Spark runs it: the list of refusals is Spark's own. `checker_findings()` runs the readiness check once, on
the original file. They agree when the two are equal as sets. Both run in one session whose SQL settings are Spark's
defaults (the file's own settings are put back after each run), at the slot count the checker is given.
"""

import re
import runpy
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.streaming import DataStreamWriter

from rtm_lab import plans, topics
from snippets.reference.errors import error_class, settings_restored
from snippets.reference.readiness_check import (
    AT_CALL,
    AT_RUN_TIME,
    AT_START,
    MISSING_TOPIC,
    NOT_IN_ALLOWLIST,
    RUNS,
    SLOTS_ERROR,
    WARNING,
    Report,
    check_file,
)

SLOTS = 4  # the session's local[4], given to the checker too
RT = "STREAMING_REAL_TIME_MODE"
ALLOWLIST_CHECK = "spark.sql.streaming.realTimeMode.allowlistCheck"
# The settings a case file may set on the shared session; put back to Spark's defaults around every run.
CASE_SETTINGS = ("spark.sql.shuffle.partitions", ALLOWLIST_CHECK)
RUN_GRACE_S = 15.0  # planned, fed and not failed for this long (or rows in its Kafka sink): Spark runs it

HEAD = """import sys

from pyspark.sql import SparkSession
from pyspark.sql.functions import broadcast, col, current_timestamp, lower, trim, udf, unix_millis
from pyspark.sql.types import StringType

bootstrap, topic, out, checkpoint = sys.argv[1:5]
"""
READ = """events = (
    spark.readStream.format("kafka")
    .option("kafka.bootstrap.servers", bootstrap)
    .option("subscribe", topic)
    .load()
    .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "timestamp")
)
"""
TO_KAFKA = """.format("kafka")
    .option("kafka.bootstrap.servers", bootstrap)
    .option("topic", out)"""

THREE_REFUSALS = (
    HEAD
    + """spark = SparkSession.builder.appName("clean-events").getOrCreate()

events = (
    spark.readStream.format("kafka")
    .option("kafka.bootstrap.servers", bootstrap)
    .option("subscribe", topic)
    .option("startingOffsets", "latest")
    .option("maxOffsetsPerTrigger", 10000)
    .load()
)


@udf(returnType=StringType())
def normalize(value):
    return value.decode("utf-8").strip().lower() if value is not None else None


cleaned = events.select(col("key"), normalize(col("value")).alias("value"))


def write_to_kafka(batch_df, batch_id):
    batch_df.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", out).save()


query = (
    cleaned.writeStream.foreachBatch(write_to_kafka)
    .outputMode("update")
    .option("checkpointLocation", checkpoint)
    .trigger(realTime="5 minutes")
    .start()
)
query.awaitTermination()
"""
)
THREE_FIXES = {
    "ForeachBatchSink": (".foreachBatch(write_to_kafka)", TO_KAFKA),
    "ArrowEvalPythonExec": ('normalize(col("value"))', 'lower(trim(col("value").cast("string")))'),
    "maxOffsetsPerTrigger": ('    .option("maxOffsetsPerTrigger", 10000)\n', ""),
}


@dataclass(frozen=True)
class Case:
    id: str
    title: str
    text: str  # the program, as a public example writes it
    fixes: dict[str, tuple[str, str]]  # what Spark's refusal names -> (old, new) in the text
    warnings: tuple[str, ...] = ()  # what the checker must warn about (it runs, but ...)
    warning_fixes: tuple[tuple[str, str], ...] = ()  # applied last, for the fixed variant without the warnings
    allowlist_on: tuple[str, str] | None = None  # the same query with Spark's allowlist check back on

    def final(self) -> str:
        text = self.text
        for old, new in [*self.fixes.values(), *self.warning_fixes]:
            text = text.replace(old, new)
        return text


CASES = [
    Case(
        "groupby-default-shuffle-partitions",
        "a groupBy that leaves spark.sql.shuffle.partitions at Spark's default",
        HEAD
        + """spark = SparkSession.builder.appName("key-counts").getOrCreate()
"""
        + READ
        + """counts = events.groupBy("key").count().selectExpr("key", "CAST(count AS STRING) AS value")

query = (
    counts.writeStream"""
        + TO_KAFKA
        + """
    .option("checkpointLocation", checkpoint)
    .outputMode("update")
    .trigger(realTime="5 minutes")
    .start()
)
query.awaitTermination()
""",
        {
            SLOTS_ERROR: (
                'SparkSession.builder.appName("key-counts")',
                'SparkSession.builder.appName("key-counts").config("spark.sql.shuffle.partitions", "2")',
            )
        },
    ),
    Case(
        "broadcast-enrichment-current-timestamp",
        "a broadcast enrichment that computes latency from current_timestamp()",
        HEAD
        + """spark = SparkSession.builder.appName("enrich").getOrCreate()
customers = spark.createDataFrame([("k0", "gold"), ("k1", "silver")], ["key", "tier"])
"""
        + READ
        + """enriched = events.join(broadcast(customers), "key", "left").withColumn(
    "latency_ms", unix_millis(current_timestamp()) - unix_millis(col("timestamp"))
)

query = (
    enriched.selectExpr("key", "to_json(struct(*)) AS value")
    .writeStream"""
        + TO_KAFKA
        + """
    .option("checkpointLocation", checkpoint)
    .outputMode("update")
    .trigger(realTime="5 minutes")
    .start()
)
query.awaitTermination()
""",
        {},
        warnings=("current_timestamp()",),
        warning_fixes=(
            ('unix_millis(current_timestamp()) - unix_millis(col("timestamp"))', 'unix_millis(col("timestamp"))'),
        ),
    ),
    Case(
        "rate-source-into-noop",
        "the rate source into the noop sink",
        HEAD
        + """spark = SparkSession.builder.appName("rate-test").getOrCreate()

df = spark.readStream.format("rate").option("rowsPerSecond", 10).load()

query = (
    df.writeStream.format("noop")
    .outputMode("update")
    .option("checkpointLocation", checkpoint)
    .trigger(realTime="5 minutes")
    .start()
)
query.awaitTermination()
""",
        {
            "NoopTable": ('.format("noop")', '.format("console")'),
            f"{RT}.INPUT_STREAM_NOT_SUPPORTED": (
                'spark.readStream.format("rate").option("rowsPerSecond", 10).load()',
                'spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic).load()',
            ),
        },
    ),
    Case(
        "foreachbatch-append",
        "foreachBatch with append mode",
        HEAD
        + """spark = SparkSession.builder.appName("events-to-files").getOrCreate()
"""
        + READ
        + """

def write_batch(batch_df, batch_id):
    batch_df.select("value").write.mode("append").json(checkpoint + "-out")


query = (
    events.select("value")
    .writeStream.foreachBatch(write_batch)
    .outputMode("append")
    .option("checkpointLocation", checkpoint)
    .trigger(realTime="5 minutes")
    .start()
)
query.awaitTermination()
""",
        {
            "ForeachBatchSink": (".foreachBatch(write_batch)", TO_KAFKA),
            f"{RT}.OUTPUT_MODE_NOT_SUPPORTED": ('.outputMode("append")', '.outputMode("update")'),
        },
    ),
    Case(
        "three-refusals",
        "foreachBatch, a Python UDF and maxOffsetsPerTrigger in one query",
        THREE_REFUSALS,
        THREE_FIXES,
    ),
    Case(
        "missing-topic",
        "the same three refusals, reading a topic that does not exist",
        THREE_REFUSALS.replace('.option("subscribe", topic)', '.option("subscribe", topic + "-events")'),
        {**THREE_FIXES, MISSING_TOPIC: ('.option("subscribe", topic + "-events")', '.option("subscribe", topic)')},
    ),
    Case(
        "allowlist-switched-off",
        "the allowlist check switched off to run the noop sink",
        HEAD
        + """spark = (
    SparkSession.builder.appName("sink-throughput")
    .config("spark.sql.streaming.realTimeMode.allowlistCheck", "false")
    .getOrCreate()
)
"""
        + READ
        + """
query = (
    events.writeStream.format("noop")
    .outputMode("update")
    .option("checkpointLocation", checkpoint)
    .trigger(realTime="5 minutes")
    .start()
)
query.awaitTermination()
""",
        {},
        warnings=("NoopTable",),
        warning_fixes=(
            ('    .config("spark.sql.streaming.realTimeMode.allowlistCheck", "false")\n', ""),
            ('.format("noop")', '.format("console")'),
        ),
        allowlist_on=('    .config("spark.sql.streaming.realTimeMode.allowlistCheck", "false")\n', ""),
    ),
]

# ---- what Spark does ----------------------------------------------------------------------------------------------

NAMED_CLASSES = re.compile(r"The (?:sink|operator)\(s\): (.+?) (?:is|are) not in the")
SLOTS_NEEDED = re.compile(r"needs (\d+) concurrent task slots")
# Errors whose message says which thing was refused: compared with what the checker names, not by class alone.
SUBJECTED = (NOT_IN_ALLOWLIST, SLOTS_ERROR, "UnsupportedOperationException")


def spark_names(error: str, message: str) -> list[str]:
    """What a refusal names: the classes Spark's allowlist message lists, the slots it needs, the Kafka option."""
    if error == NOT_IN_ALLOWLIST and (m := NAMED_CLASSES.search(message)):
        return sorted({name.strip().rsplit(".", 1)[-1].rstrip("$") for name in m.group(1).split(",")})
    if error == SLOTS_ERROR and (m := SLOTS_NEEDED.search(message)):
        return [m.group(1)]
    if error == "UnsupportedOperationException":
        return [o for o in ("maxOffsetsPerTrigger", "minPartitions") if o.lower() in message.lower()][:1]
    return [""]


def refusal_key(error: str, subject: str) -> str:
    return f"{error}: {subject}" if error in SUBJECTED and subject else error


class _Started(Exception):
    def __init__(self, query):
        super().__init__("started")
        self.query = query


class _RefusedAtStart(Exception):
    def __init__(self, cause: BaseException):
        super().__init__("refused at start()")
        self.cause = cause


@contextmanager
def _starts_then_returns() -> Iterator[None]:
    """`start()` starts the query for real, then leaves the file (which would block in awaitTermination)."""
    original = DataStreamWriter.start

    def start(self, *args, **kwargs):
        try:
            query = original(self, *args, **kwargs)
        except Exception as exc:
            raise _RefusedAtStart(exc) from exc
        raise _Started(query)

    # Patching the class's method on purpose, and putting it back: mypy refuses any assignment to a method.
    DataStreamWriter.start = start  # type: ignore[method-assign]
    try:
        yield
    finally:
        DataStreamWriter.start = original  # type: ignore[method-assign]


@dataclass
class Workspace:
    spark: SparkSession
    bootstrap: str
    root: Path
    made: list[str] = field(default_factory=list)

    def args(self, name: str) -> list[str]:
        """A fresh source (2 partitions) and sink (1 partition) topic and checkpoint for one run."""
        source = topics.create_topic(self.bootstrap, topics.unique_name("pub-src"), 2)
        out = topics.create_topic(self.bootstrap, topics.unique_name("pub-out"), 1)
        self.made += [source, out]
        checkpoint = tempfile.mkdtemp(dir=self.root, prefix=f"{name}-")
        return [self.bootstrap, source, out, str(Path(checkpoint) / "checkpoint")]

    def file(self, name: str, text: str) -> str:
        path = self.root / f"{name}.py"
        path.write_text(text)
        return str(path)

    def cleanup(self) -> None:
        for name in self.made:
            topics.delete_topic(self.bootstrap, name)


@contextmanager
def spark_defaults(spark: SparkSession) -> Iterator[None]:
    """The session's SQL settings at Spark's defaults for one run (the lab's session lowers shuffle partitions),
    and whatever the file sets put back after it."""
    with settings_restored(spark, CASE_SETTINGS):
        for key in CASE_SETTINGS:
            spark.conf.unset(key)
        yield


def run_for_real(ws: Workspace, path: str, timeout_s: float = 90.0) -> tuple[str, str | None, str]:
    """(moment, error class, message) of what Spark did with the file's query: RUNS, or where it refused it."""
    args = ws.args(Path(path).stem)
    argv = sys.argv
    sys.argv = [path, *args]
    query = None
    try:
        with spark_defaults(ws.spark), _starts_then_returns():
            try:
                runpy.run_path(path, run_name="__main__")
            except _Started as started:
                query = started.query
            except _RefusedAtStart as refused:
                return AT_START, error_class(refused.cause), str(refused.cause)
            except Exception as exc:
                return AT_CALL, error_class(exc), str(exc)
            return _observe(ws, query, args[1], args[2], timeout_s)
    finally:
        sys.argv = argv
        if query is not None:
            query.stop()


def _observe(ws: Workspace, query, source: str, out: str, timeout_s: float) -> tuple[str, str | None, str]:
    deadline, fed_at = time.monotonic() + timeout_s, None
    while time.monotonic() < deadline:
        try:
            query.awaitTermination(0.5)
        except Exception as exc:
            return AT_RUN_TIME, error_class(exc), str(exc)
        if not query.isActive:
            failed = plans.failure(query)
            return (AT_RUN_TIME, error_class(failed), str(failed)) if failed else ("stopped by itself", None, "")
        if fed_at is None:
            try:
                planned = plans.REAL_TIME_SCAN in plans.executed_plan(query)
            except Exception:
                planned = False
            if planned:
                topics.produce_json(ws.bootstrap, source, ({"id": i, "k": f"k{i % 2}"} for i in range(3)))
                fed_at = time.monotonic()
            continue
        if topics.read_all(ws.bootstrap, out, expected=1, timeout_s=0.5):
            return RUNS, None, "rows reached the Kafka sink"
        if time.monotonic() - fed_at > RUN_GRACE_S:
            return RUNS, None, f"planned, fed, and running {RUN_GRACE_S:.0f}s later"
    return f"no outcome in {timeout_s:.0f}s", None, ""


def spark_refusals(ws: Workspace, case: Case, text: str | None = None) -> list[dict]:
    """Spark's refusals of the case, one run per variant: each refusal's fix is applied and the file run again,
    until Spark runs it (the last entry, "runs") or refuses something the case has no fix for."""
    fixed: list[str] = []
    steps: list[dict] = []
    for attempt in range(len(case.fixes) + 2):
        variant = case.text if text is None else text
        for name in fixed:
            old, new = case.fixes[name]
            variant = variant.replace(old, new)
        moment, error, message = run_for_real(ws, ws.file(f"{case.id}-spark-{attempt}", variant))
        if moment == RUNS or error is None:
            steps.append({"fixed": list(fixed), "spark": moment})
            return steps
        names = spark_names(error, message)
        steps.append(
            {
                "fixed": list(fixed),
                "spark": moment,
                "refused": [refusal_key(error, n) for n in names],
                "message": message.strip().splitlines()[0][:300] if message.strip() else "",
            }
        )
        todo = [n if n in case.fixes else error for n in names]
        if not all(n in case.fixes for n in todo) or any(n in fixed for n in todo):
            return steps  # no fix for it: the chain ends unresolved (a disagreement to look at)
        fixed += todo
    return steps


def checker_findings(ws: Workspace, text: str, name: str) -> Report:
    path = ws.file(name, text)
    with spark_defaults(ws.spark):
        return check_file(path, ws.args(name), slots=SLOTS)


def refused_keys(steps: list[dict]) -> list[str]:
    return sorted({key for step in steps for key in step.get("refused", [])})


def checker_keys(report: Report) -> list[str]:
    keys = set()
    for f in report.errors:
        assert f.error is not None  # an ERROR finding always names the error class Spark raises
        keys.add(refusal_key(f.error, f.subject))
    return sorted(keys)


def warned(report: Report) -> list[str]:
    return sorted({f.subject for f in report.findings if f.level == WARNING and f.subject})


def run_case(ws: Workspace, case: Case) -> dict:
    """One case: the checker on the file as written; Spark on it and on each fixed variant; the fixed variant without
    the warned-about habits, checked and run."""
    report = checker_findings(ws, case.text, f"{case.id}-check")
    steps = spark_refusals(ws, case)
    final = case.final()
    final_report = checker_findings(ws, final, f"{case.id}-final-check")
    final_spark = run_for_real(ws, ws.file(f"{case.id}-final", final))[0]
    row = {
        "case": case.id,
        "title": case.title,
        "checker": checker_keys(report),
        "spark": refused_keys(steps),
        "spark_runs_when_fixed": steps[-1]["spark"] == RUNS,
        "steps": steps,
        "warnings_expected": list(case.warnings),
        "checker_warnings": warned(report),
        "may_refuse_more": not report.complete,
        "report": report.text(),
        "final": {"checker": checker_keys(final_report), "warnings": warned(final_report), "spark": final_spark},
    }
    if case.allowlist_on:
        old, new = case.allowlist_on
        on = spark_refusals(ws, case, case.text.replace(old, new))
        row["spark_with_allowlist_on"] = refused_keys(on)
        row["checker_bypassed"] = sorted(
            refusal_key(NOT_IN_ALLOWLIST, f.subject) for f in report.findings if "allowlistCheck" in f.what
        )
    row["agree"] = agrees(row)
    return row


def agrees(row: dict) -> bool:
    """Equal sets of refusals; Spark runs the fixed file; the expected warnings given, and gone once fixed; with the
    allowlist switched off, the checker names what Spark refuses with it on."""
    return (
        row["checker"] == row["spark"]
        and row["spark_runs_when_fixed"]
        and set(row["warnings_expected"]) <= set(row["checker_warnings"])
        and row["final"]["checker"] == []
        and not set(row["warnings_expected"]) & set(row["final"]["warnings"])
        and row["final"]["spark"] == RUNS
        and row.get("checker_bypassed", []) == row.get("spark_with_allowlist_on", [])
    )

"""What the refusals people bypass do once `spark.sql.streaming.realTimeMode.allowlistCheck=false`: one case each.

Public examples switch the allowlist check off to run what real-time mode refuses; Spark's guide says only "at your
own risk". Each case here is a query the support matrix shows refused (probes/support_matrix.py), started with the
check off on a real Kafka broker. The runner feeds rows once the real-time scan is planned and reads what came out,
so each answer is one of: runs correctly (the sink holds exactly the rows a correct query writes), runs but wrong
(it holds something else), stalls (nothing within the wait), or fails at a moment with a class.
tests/reference/test_allowlist_off.py runs every case and asserts its `expected`; `scripts/tables.py allowlist-off`
renders the support-matrix page's table from the same list.

The version matrix (probes/version_cases.py) also runs `restart_case()` on each PySpark: a stateful query with the
check off, stopped after a committed batch and started again on its checkpoint.
"""

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from rtm_lab import plans, topics
from rtm_lab.probes.harness import AT_RUN_TIME, AT_START, Probe, session_confs
from rtm_lab.probes.support_matrix import parsed
from rtm_lab.waiting import WaitTimeout, wait_until
from snippets.reference.errors import error_class
from snippets.reference.setup import ALLOWLIST_CHECK

ASYNC_BY_DEFAULT = "spark.sql.streaming.realTimeMode.asyncProgressTrackingByDefault.enabled"

RUNS_CORRECTLY = "runs correctly"
RUNS_BUT = "runs, but"  # followed by what breaks
STALLS = "stalls"
FAILS = "fails"

# The bound: no output row within 60 s is a stall. A case that ends earlier (output, or a failure) returns as
# soon as it is known, so the bound costs time only when something stalls.
STALL_S = 60.0
# Output that is not yet right gets three probe intervals (5 s each) to become right before it is called wrong;
# output that is right is read again after a second, for anything extra a broken operator lets through.
WRONG_AFTER_S = 15.0
SETTLE_S = 1.0


SIX: tuple[dict[str, Any], ...] = tuple(
    {"id": i % 3, "k": f"k{i % 3 % 2}"} for i in range(6)
)  # ids 0, 1, 2, each twice
SIX_SORTED = sorted(SIX, key=json.dumps)
JOIN_ROWS: tuple[dict[str, Any], ...] = ({"id": 0, "k": "k0"}, {"id": 1, "k": "k1"})  # to each side of the join


@dataclass(frozen=True)
class Answer:
    kind: str  # RUNS_CORRECTLY, RUNS_BUT, STALLS or FAILS
    moment: str = ""  # FAILS: AT_START or AT_RUN_TIME
    error: str = ""  # FAILS: the error class (or JVM exception class when Spark names none)
    detail: str = field(default="", compare=False)  # expected: a phrase the message contains; observed: the message

    def __str__(self) -> str:
        if self.kind == FAILS:
            return f"fails {self.moment}: {self.error}"
        return self.kind if self.kind != RUNS_BUT else f"{self.kind} {self.detail}"


@dataclass
class Run:
    """What one case's query left: the probe (topics, folders) and anything the case wants to read back."""

    probe: Probe
    query: StreamingQuery | None = None
    memory_table: str = ""
    calls: Path | None = None  # foreachBatch: one JSON line per call of the function

    def calls_made(self) -> list[dict]:
        if self.calls is None or not self.calls.is_file():
            return []
        return [json.loads(line) for line in self.calls.read_text().splitlines() if line]


@dataclass(frozen=True)
class OffCase:
    refusal: str  # what the allowlist refuses, as the support matrix names it
    name: str  # this query
    start: Callable[[Run], StreamingQuery]
    output: Callable[[Run], list]  # what the sink holds now, in a comparable form
    correct: list  # what a correct query's sink holds once the fed rows went through
    expected: Answer
    rows: tuple = SIX  # fed to every source topic
    confs: dict = field(default_factory=dict)  # set for this case, besides the allowlist check
    partitions: int = 2  # of each source topic
    note: str = ""  # how the case reads its sink, for the page

    @property
    def id(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-")


class _Probe(Probe):
    """The harness's probe with source and sink topics of a chosen partition count."""

    def __init__(self, *args, partitions: int = 2, **kwargs):
        super().__init__(*args, **kwargs)
        self.partitions = partitions

    def _topic(self, prefix: str) -> str:
        name = topics.create_topic(self.bootstrap, topics.unique_name(prefix), self.partitions)
        self.made_topics.append(name)
        return name


# ---- The queries -----------------------------------------------------------------------------------------------


def _kafka_values(run: Run) -> list:
    """The sink topic's JSON values, sorted (the order across partitions means nothing)."""
    assert run.probe.sink_topic is not None  # the case's start() wrote to `run.probe.sink()`
    records = topics.read_all(run.probe.bootstrap, run.probe.sink_topic, expected=10**6, timeout_s=1.0)
    return sorted((json.loads(r.value) for r in records), key=json.dumps)


def _foreach_batch_to_kafka(run: Run) -> StreamingQuery:
    """foreachBatch writing each batch to Kafka, and noting each call (batch id, rows seen) in a file."""
    p = run.probe
    sink, bootstrap = p.sink(), p.bootstrap
    run.calls = p.workdir / "calls.jsonl"
    calls = str(run.calls)

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        (
            batch.select(F.to_json(F.struct("id", "k")).alias("value"))
            .write.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", sink)
            .save()
        )
        with open(calls, "a") as out:
            out.write(json.dumps({"batch_id": batch_id, "at": time.time()}) + "\n")

    return p.writer(parsed(p.kafka())).foreachBatch(write_batch).start()


def _python_udf(run: Run) -> StreamingQuery:
    shout = F.udf(lambda s: s.upper() + "!", "string")
    return run.probe.to_kafka(parsed(run.probe.kafka()).select("id", shout("k").alias("k")))


def _pandas_udf(run: Run) -> StreamingQuery:
    # PySpark's stubs have no overload for a return type alone (the UDF type inferred), which PySpark takes.
    @F.pandas_udf("string")  # type: ignore[call-overload]
    def shout(s):
        return s.str.upper() + "!"

    return run.probe.to_kafka(parsed(run.probe.kafka()).select("id", shout("k").alias("k")))


def _drop_duplicates_within_watermark(run: Run) -> StreamingQuery:
    events = parsed(run.probe.kafka()).withWatermark("ts", "10 seconds")
    return run.probe.to_kafka(events.dropDuplicatesWithinWatermark(["id"]).select("id"))


def _stream_stream_join(run: Run) -> StreamingQuery:
    p = run.probe
    left = parsed(p.kafka()).withWatermark("ts", "10 seconds").alias("l")
    right = parsed(p.kafka()).withWatermark("ts", "10 seconds").alias("r")
    window = "r.ts BETWEEN l.ts - INTERVAL 60 SECONDS AND l.ts + INTERVAL 60 SECONDS"
    joined = left.join(right, F.expr(f"l.id = r.id AND l.k = r.k AND {window}"))
    return p.to_kafka(joined.select("l.id", "r.k"))


def _sort_merge_join(run: Run) -> StreamingQuery:
    p = run.probe
    parity = p.spark.createDataFrame([("k0", "even"), ("k1", "odd")], "k STRING, parity STRING")
    return p.to_kafka(parsed(p.kafka()).join(parity.hint("merge"), "k").select("id", "parity"))


def _memory(run: Run) -> StreamingQuery:
    run.memory_table = f"allowlist_off_{time.monotonic_ns()}"
    return run.probe.writer(parsed(run.probe.kafka())).format("memory").queryName(run.memory_table).start()


def _memory_rows(run: Run) -> list:
    rows = run.probe.spark.sql(f"SELECT id, k FROM {run.memory_table}").collect()
    return sorted(({"id": r.id, "k": r.k} for r in rows), key=json.dumps)


def _noop(run: Run) -> StreamingQuery:
    return run.probe.writer(parsed(run.probe.kafka())).format("noop").start()


def _rows_counted(run: Run) -> list:
    """A noop sink keeps nothing: the rows the query's progress counts are what it took in."""
    counted = sum(p["numInputRows"] for p in run.query.recentProgress) if run.query else 0
    return [counted] if counted else []


CASES: list[OffCase] = [
    OffCase(
        "foreachBatch sink",
        "foreachBatch writing to Kafka",
        _foreach_batch_to_kafka,
        _kafka_values,
        SIX_SORTED,
        Answer(FAILS, AT_START, "IllegalArgumentException", "Sink ForeachBatchSink does not support async progress"),
        note="the function writes each batch to a Kafka topic",
    ),
    OffCase(
        "foreachBatch sink",
        "foreachBatch writing to Kafka, async progress tracking off too",
        _foreach_batch_to_kafka,
        _kafka_values,
        SIX_SORTED,
        Answer(FAILS, AT_RUN_TIME, "STREAMING_REAL_TIME_MODE.SINK_NOT_SUPPORTED", "ForeachBatchSink"),
        confs={ASYNC_BY_DEFAULT: "false"},
        note=f"`{ASYNC_BY_DEFAULT}=false` as well",
    ),
    OffCase(
        "Python UDF (ArrowEvalPythonExec)",
        "Python UDF",
        _python_udf,
        _kafka_values,
        sorted(({"id": r["id"], "k": r["k"].upper() + "!"} for r in SIX), key=json.dumps),
        Answer(RUNS_CORRECTLY),
    ),
    OffCase(
        "pandas UDF (ArrowEvalPythonExec)",
        "pandas UDF",
        _pandas_udf,
        _kafka_values,
        sorted(({"id": r["id"], "k": r["k"].upper() + "!"} for r in SIX), key=json.dumps),
        Answer(RUNS_CORRECTLY),
    ),
    OffCase(
        "dropDuplicatesWithinWatermark",
        "dropDuplicatesWithinWatermark",
        _drop_duplicates_within_watermark,
        _kafka_values,
        [{"id": 0}, {"id": 1}, {"id": 2}],
        Answer(RUNS_CORRECTLY),
        note="six rows, three ids: three rows out",
    ),
    OffCase(
        "stream-stream join",
        "stream-stream inner join",
        _stream_stream_join,
        _kafka_values,
        [{"id": 0, "k": "k0"}, {"id": 1, "k": "k1"}],
        Answer(RUNS_CORRECTLY),
        rows=JOIN_ROWS,
        partitions=1,
        # One partition per topic, so the join fits the tests' 4 slots: 1 + 1 source partitions + 2 shuffle partitions.
        note=f"topics of 1 partition, 2 shuffle partitions: 4 slots; {len(JOIN_ROWS)} rows fed to each side",
    ),
    OffCase(
        "stream-static join without broadcast (SortExec)",
        "stream-static sort-merge join",
        _sort_merge_join,
        _kafka_values,
        sorted(({"id": r["id"], "parity": ("even", "odd")[int(r["k"][1])]} for r in SIX), key=json.dumps),
        Answer(FAILS, AT_RUN_TIME, "SparkException", "mixes a pipelined shuffle dependency with a regular shuffle"),
    ),
    OffCase(
        "memory sink",
        "memory sink",
        _memory,
        _memory_rows,
        SIX_SORTED,
        Answer(RUNS_CORRECTLY),
        note="read back with `spark.sql()` on the query name",
    ),
    OffCase(
        "noop sink",
        "noop sink",
        _noop,
        _rows_counted,
        [len(SIX)],
        Answer(RUNS_CORRECTLY),
        note="keeps nothing: the query's progress counts the six rows in",
    ),
]


# ---- Running a case --------------------------------------------------------------------------------------------


def observe(case: OffCase, spark: SparkSession, bootstrap: str, workdir: Path, stall_s: float = STALL_S) -> tuple:
    """Run the case with the allowlist check off; return (Answer, Run). The query is stopped before returning."""
    run = Run(_Probe(spark, bootstrap, workdir, partitions=case.partitions))
    with session_confs(spark, {ALLOWLIST_CHECK: "false", **case.confs}):
        try:
            run.query = case.start(run)
        except Exception as exc:
            return Answer(FAILS, AT_START, error_class(exc), str(exc)), run
        try:
            return _watch(case, run, stall_s), run
        finally:
            run.query.stop()


def _watch(case: OffCase, run: Run, stall_s: float) -> Answer:
    query, fed = run.query, False
    assert query is not None  # observe() started it
    seen: list = []
    first_output: float | None = None

    def settled() -> Answer | None:
        nonlocal fed, seen, first_output
        exc = plans.failure(query)
        if exc is not None:
            return Answer(FAILS, AT_RUN_TIME, error_class(exc), str(exc))
        # Rows go in once the real-time scan is planned, as in the support matrix's harness.
        if not fed and plans.REAL_TIME_SCAN in _plan(query):
            for topic in run.probe.source_topics:
                topics.produce_json(run.probe.bootstrap, topic, case.rows)
            fed = True
        if fed:
            seen = case.output(run)
            if seen and first_output is None:
                first_output = time.monotonic()
            if seen and seen == case.correct:
                time.sleep(SETTLE_S)
                seen = case.output(run)
                return Answer(RUNS_CORRECTLY) if seen == case.correct else _wrong(case, seen)
            if first_output is not None and time.monotonic() - first_output > WRONG_AFTER_S:
                return _wrong(case, seen)
        time.sleep(0.3)
        return None

    try:
        return wait_until(settled, stall_s, f"output of {case.name}", interval_s=0)
    except WaitTimeout:
        if seen:
            return _wrong(case, seen)
        return Answer(STALLS, detail=f"no output row within {stall_s:.0f} s")


def _wrong(case: OffCase, seen: list) -> Answer:
    return Answer(RUNS_BUT, detail=f"wrong output: {seen}, expected {case.correct}")


def _plan(query: StreamingQuery) -> str:
    try:
        return plans.executed_plan(query)
    except Exception:
        return ""  # still planning, or failed: the next failure() says which


# ---- The page's table ------------------------------------------------------------------------------------------

TEST_PATH = "tests/reference/test_allowlist_off.py::test_case"


def _cell(answer: Answer) -> str:
    if answer.kind == RUNS_CORRECTLY:
        return "✓ runs correctly"
    if answer.kind == FAILS:
        where = "at `start()`" if answer.moment == AT_START else "at run time (`q.exception()`)"
        named = f" ({answer.detail})" if answer.detail else ""
        return f"✗ fails {where}: `{answer.error}`{named}"
    return f"{answer.kind} {answer.detail}".strip()


def table_rows(cases: list[OffCase] = CASES) -> tuple[list[str], list[list[str]]]:
    from rtm_lab.versions import SPARK_VERSION

    header = ["Refused with the check on", "Query", f"With the check off, OSS Spark {SPARK_VERSION} (tested)", "Test"]
    rows = []
    for c in cases:
        query = f"{c.name} ({c.note})" if c.note else c.name
        rows.append([c.refusal, query, _cell(c.expected), f"`{TEST_PATH}[{c.id}]`"])
    return header, rows


# ---- The version matrix's restart cases ------------------------------------------------------------------------

# Round one feeds ids 0-5 and 0-2 again; round two, on the same checkpoint after a committed batch, 0-3 and 6-7.
ROUND_ONE = tuple({"id": i, "k": f"k{i % 2}"} for i in (*range(6), 0, 1, 2))
ROUND_TWO = tuple({"id": i, "k": f"k{i % 2}"} for i in (0, 1, 2, 3, 6, 7))


def _counts(ids: tuple) -> dict[str, int]:
    out: dict[str, int] = {}
    for row in ids:
        out[row["k"]] = out.get(row["k"], 0) + 1
    return out


def _aggregation(p: Probe, again: bool) -> StreamingQuery:
    return p.to_kafka(parsed(p.kafka(reuse_topic=again)).groupBy("k").agg(F.count("*").alias("n")))


def _drop_duplicates(p: Probe, again: bool) -> StreamingQuery:
    return p.to_kafka(parsed(p.kafka(reuse_topic=again)).dropDuplicates(["id"]).select("id"))


def _latest_counts(values: list[dict]) -> dict[str, int]:
    """An update-mode count per key: the highest count written for each key is its current value."""
    out: dict[str, int] = {}
    for v in values:
        out[v["k"]] = max(out.get(v["k"], 0), v["n"])
    return out


RESTART_CASES = {
    # id: (title, query, what round one must write, what round two must write)
    "allowlist-off-aggregation": (
        "groupBy count with the allowlist check off: counts, then a restart",
        _aggregation,
        lambda values: _latest_counts(values) == _counts(ROUND_ONE),
        lambda values: _latest_counts(values) == _counts(ROUND_ONE + ROUND_TWO),
    ),
    "allowlist-off-dropduplicates": (
        "dropDuplicates with the allowlist check off: rows, then a restart",
        _drop_duplicates,
        lambda values: sorted(v["id"] for v in values) == list(range(6)),
        lambda values: sorted(v["id"] for v in values) == [6, 7],
    ),
}


def restart_case(case_id: str, spark: SparkSession, bootstrap: str, workdir: Path, probe_class=Probe) -> dict:
    """Round one: start with the check off, feed, wait for a committed batch holding the rows, check the sink, stop.
    Round two: start again on the checkpoint, feed new rows and repeats, check the new sink topic (a committed batch
    is not replayed, so it holds only round two's output). Returns the version matrix's record fields."""
    _, query_of, first_ok, second_ok = RESTART_CASES[case_id]
    p = probe_class(spark, bootstrap, workdir)
    notes = []
    try:
        with session_confs(spark, {ALLOWLIST_CHECK: "false"}):
            for again, rows, ok in ((False, ROUND_ONE, first_ok), (True, ROUND_TWO, second_ok)):
                try:
                    query = query_of(p, again)
                except Exception as exc:
                    return {"kind": AT_START, "error": error_class(exc), "message": str(exc)}
                try:
                    failed = _feed_and_commit(query, p, rows)
                    if failed is not None:
                        return {"kind": AT_RUN_TIME, "error": error_class(failed), "message": str(failed)}
                    values = [json.loads(r.value) for r in topics.read_all(bootstrap, p.sink_topic, 10**6, 2.0)]
                finally:
                    query.stop()
                round_name = "after the restart" if again else "first run"
                notes.append(f"{round_name}: {'right' if ok(values) else f'wrong ({values})'}")
        return {"kind": "runs", "error": None, "message": "", "checks": notes}
    finally:
        p.cleanup()


def _feed_and_commit(query: StreamingQuery, p: Probe, rows: tuple) -> BaseException | None:
    """Feed once the real-time scan is planned; return the query's failure, or None once a batch that read all the
    rows has committed (its progress is reported after the commit)."""
    try:
        plans.wait_for_real_time_scan(query, 90)
    except WaitTimeout:
        return plans.failure(query) or TimeoutError("no real-time scan within 90 s")
    except Exception as exc:
        return exc
    topics.produce_json(p.bootstrap, p.source_topics[-1], rows)
    try:
        wait_until(
            lambda: sum(x["numInputRows"] for x in query.recentProgress) >= len(rows) or None,
            90,
            "a committed batch with the fed rows",
            interval_s=0.3,
            abort=lambda: plans.failure(query),
        )
    except WaitTimeout as exc:
        return exc
    except Exception as exc:
        return exc
    return None

"""What real-time mode accepts in OSS Spark: one case per source, sink and operator, with the outcome Spark gives.

Every case builds a small query, starts it with `trigger(realTime="5 seconds")` and `outputMode("update")`, and is
observed by `probe()`: it either fails at `start()`, fails once running (the error shows up in `q.exception()`), or
runs, meaning rows fed after the start came out of the sink. `EXPECTED` in each case is what Spark 4.3.0 does; the
test runs every case and asserts it, and `scripts/support_matrix.py` renders the page's table from the same list.
"""

# --8<-- [start:imports]
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

# --8<-- [end:imports]
from rtm_lab import plans, topics

RUNS = "runs"
AT_START = "fails at start()"
AT_RUN_TIME = "fails at run time"

DBX_REFERENCE = "structured-streaming/real-time/reference"
DBX_LIMITATIONS = "structured-streaming/real-time/limitations"


@dataclass(frozen=True)
class Outcome:
    kind: str  # RUNS, AT_START or AT_RUN_TIME
    error: str | None = None  # the error class Spark names, or the JVM exception class when it names none
    detail: str = field(default="", compare=False)  # expected: a phrase the message must contain (what it names)
    message: str = field(default="", compare=False)  # observed: the full message

    def __str__(self) -> str:
        return self.kind if self.error is None else f"{self.kind}: {self.error}"


# --8<-- [start:error_name]
_CONDITION = re.compile(r"\[([A-Z][A-Z0-9_]+(?:\.[A-Z0-9_]+)*)\]")


def error_name(exc: BaseException) -> str:
    """The error class a failure carries, looking through the STREAM_FAILED wrapper a running query adds.

    Some failures carry no error class (e.g. `maxOffsetsPerTrigger`); then the JVM exception class of the
    innermost cause is the name.
    """
    names = [n for n in _CONDITION.findall(str(exc)) if n != "STREAM_FAILED"]
    if names:
        return names[0]
    java_classes = []
    cause = exc
    while cause is not None:  # PySpark keeps the JVM exception and its cause chain on private attributes
        origin = getattr(cause, "_origin", None)
        if origin is not None and hasattr(origin, "getClass"):
            java_classes.append(origin.getClass().getName())
        cause = getattr(cause, "_cause", None)
    plain = [c for c in java_classes if not c.endswith("StreamingQueryException")]
    return plain[-1].rsplit(".", 1)[-1] if plain else type(exc).__name__


# --8<-- [end:error_name]


class Probe:
    """Everything one case needs: fresh Kafka topics, a sink, and a way to tell whether rows came through."""

    def __init__(self, spark: SparkSession, bootstrap: str, workdir: Path, rows: int = 3):
        self.spark, self.bootstrap, self.workdir, self.rows = spark, bootstrap, workdir, rows
        self.source_topics: list[str] = []
        self.sink_topic: str | None = None
        self.foreach_dir: Path | None = None
        self.made_topics: list[str] = []
        self.workdir.mkdir(parents=True, exist_ok=True)

    def _topic(self, prefix: str) -> str:
        name = topics.create_topic(self.bootstrap, topics.unique_name(prefix), 2)
        self.made_topics.append(name)
        return name

    def kafka(self, reuse_topic: bool = False) -> DataFrame:
        """A Kafka topic read as a stream: a new topic, or with `reuse_topic` the previous call's topic again."""
        if reuse_topic:
            topic = self.source_topics[-1]
        else:
            topic = self._topic("matrix-src")
            self.source_topics.append(topic)
        return (
            self.spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .load()
        )

    def writer(self, df: DataFrame) -> DataStreamWriter:
        return (
            df.writeStream.option("checkpointLocation", str(self.workdir / "checkpoint"))
            .outputMode("update")
            .trigger(realTime="5 seconds")
        )

    def to_kafka(self, df: DataFrame) -> StreamingQuery:
        """Write any frame to a new sink topic: every column goes into a JSON value."""
        self.sink_topic = self._topic("matrix-sink")
        out = df.select(F.to_json(F.struct(*[F.col(c) for c in df.columns])).alias("value"))
        return (
            self.writer(out)
            .format("kafka")
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("topic", self.sink_topic)
            .start()
        )

    def feed(self) -> None:
        for topic in self.source_topics:
            topics.produce_json(self.bootstrap, topic, ({"id": i, "k": f"k{i % 2}"} for i in range(self.rows)))

    def arrived(self, query: StreamingQuery) -> bool:
        if self.sink_topic:
            return len(topics.read_all(self.bootstrap, self.sink_topic, expected=1, timeout_s=1.0)) > 0
        if self.foreach_dir:
            return any(p.stat().st_size > 0 for p in self.foreach_dir.glob("*.jsonl"))
        progress = query.lastProgress
        return bool(progress and progress["numInputRows"] > 0)

    def cleanup(self) -> None:
        for name in self.made_topics:
            topics.delete_topic(self.bootstrap, name)


def _real_time_scan_planned(query: StreamingQuery) -> bool:
    try:
        return plans.REAL_TIME_SCAN in plans.executed_plan(query)
    except Exception:
        return False  # the query failed while planning; the next awaitTermination() reports why


def probe(case: "Case", probe_: Probe, timeout_s: float = 60.0) -> Outcome:
    """Start the case's query and return its outcome as soon as it is known; the query is always stopped."""
    try:
        query = case.start(probe_)
    except Exception as exc:
        return Outcome(AT_START, error_name(exc), message=str(exc))
    fed = False
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            try:
                query.awaitTermination(0.5)
            except Exception as exc:
                return Outcome(AT_RUN_TIME, error_name(exc), message=str(exc))
            if not query.isActive:
                exc = query.exception()
                return Outcome(AT_RUN_TIME, error_name(exc), message=str(exc)) if exc else Outcome("stopped by itself")
            # Rows go in only once the real-time scan is planned: rows present before the start are read by the
            # first batch, which a real-time query may hold back until that batch ends.
            if not fed and _real_time_scan_planned(query):
                probe_.feed()
                fed = True
            if fed and probe_.arrived(query):
                return Outcome(RUNS)
        return Outcome(f"no outcome in {timeout_s:.0f}s")
    finally:
        query.stop()


# ---- The cases -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    group: str  # "Source", "Sink" or "Operator"
    name: str
    start: Callable[[Probe], StreamingQuery]
    expected: Outcome
    databricks: str  # what the Databricks docs say, with the page in DBX_PAGES

    @property
    def id(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", f"{self.group} {self.name}".lower()).strip("-")


def parsed(df: DataFrame) -> DataFrame:
    """Kafka value -> (id, k, ts) with built-in functions only."""
    body = F.from_json(F.col("value").cast("string"), "id LONG, k STRING")
    return df.select(body.alias("e"), F.col("timestamp").alias("ts")).select("e.id", "e.k", "ts")


class CounterStreamReader(DataSourceStreamReader):
    """A Python data source that always has ten rows: enough to show whether real-time mode will read it."""

    def initialOffset(self) -> dict:
        return {"offset": 0}

    def latestOffset(self, start: dict, limit) -> dict:
        return {"offset": 10}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [InputPartition(0)]

    def read(self, partition: InputPartition):
        yield from ((i,) for i in range(10))


class CounterSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "rtm_counter"

    def schema(self) -> str:
        return "id LONG"

    def streamReader(self, schema) -> DataSourceStreamReader:
        return CounterStreamReader()


class CountPerKey(StatefulProcessor):
    """The smallest transformWithState processor: a running count per key."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.count = handle.getValueState("count", "n LONG")

    def handleInputRows(self, key, rows, timerValues):
        n = (self.count.get() or (0,))[0] + sum(1 for _ in rows)
        self.count.update((n,))
        yield Row(k=key[0], n=n)

    def close(self) -> None:
        pass


class CountPerKeyPandas(StatefulProcessor):
    def init(self, handle: StatefulProcessorHandle) -> None:
        self.count = handle.getValueState("count", "n LONG")

    def handleInputRows(self, key, rows, timerValues):
        import pandas as pd

        n = (self.count.get() or (0,))[0] + sum(len(frame) for frame in rows)
        self.count.update((n,))
        yield pd.DataFrame({"k": [key[0]], "n": [n]})

    def close(self) -> None:
        pass


def _rate(p: Probe) -> StreamingQuery:
    return p.to_kafka(p.spark.readStream.format("rate").option("rowsPerSecond", 5).load())


def _python_source(p: Probe) -> StreamingQuery:
    p.spark.dataSource.register(CounterSource)
    return p.to_kafka(p.spark.readStream.format("rtm_counter").load())


def _file_source(p: Probe) -> StreamingQuery:
    folder = p.workdir / "input"
    folder.mkdir(exist_ok=True)
    (folder / "part-0.json").write_text("".join(json.dumps({"id": i}) + "\n" for i in range(3)))
    return p.to_kafka(p.spark.readStream.schema("id LONG").json(str(folder)))


def _foreach(p: Probe) -> StreamingQuery:
    p.foreach_dir = p.workdir / "foreach"
    p.foreach_dir.mkdir()
    folder = str(p.foreach_dir)

    def write_row(row: Row) -> None:
        import os

        with open(os.path.join(folder, f"{os.getpid()}.jsonl"), "a") as out:
            out.write(json.dumps({"id": row.id}) + "\n")

    return p.writer(parsed(p.kafka())).foreach(write_row).start()


def _sink(fmt: str, **options: str) -> Callable[[Probe], StreamingQuery]:
    def start(p: Probe) -> StreamingQuery:
        w = p.writer(parsed(p.kafka())).format(fmt)
        for key, value in options.items():
            w = w.option(key, value)
        return w.start(str(p.workdir / "out")) if fmt in ("parquet", "json") else w.start()

    return start


def _foreach_batch(p: Probe) -> StreamingQuery:
    return p.writer(parsed(p.kafka())).foreachBatch(lambda batch, batch_id: None).start()


def _memory(p: Probe) -> StreamingQuery:
    return p.writer(parsed(p.kafka())).format("memory").queryName(f"matrix_{time.monotonic_ns()}").start()


def _project_filter(p: Probe) -> StreamingQuery:
    return p.to_kafka(parsed(p.kafka()).where("id >= 0").select("id", F.upper("k").alias("k")))


def _union(p: Probe) -> StreamingQuery:
    return p.to_kafka(parsed(p.kafka()).union(parsed(p.kafka())))


def _union_same_topic(p: Probe) -> StreamingQuery:
    return p.to_kafka(parsed(p.kafka()).union(parsed(p.kafka(reuse_topic=True))))


def _self_union(p: Probe) -> StreamingQuery:
    events = parsed(p.kafka())
    return p.to_kafka(events.union(events))


def _broadcast_join(p: Probe) -> StreamingQuery:
    names = p.spark.createDataFrame([("k0", "even"), ("k1", "odd")], "k STRING, parity STRING")
    return p.to_kafka(parsed(p.kafka()).join(F.broadcast(names), "k"))


def _aggregation(p: Probe) -> StreamingQuery:
    return p.to_kafka(parsed(p.kafka()).groupBy("k").agg(F.count("*").alias("n"), F.sum("id").alias("total")))


def _window(p: Probe) -> StreamingQuery:
    events = parsed(p.kafka()).withWatermark("ts", "10 seconds")
    return p.to_kafka(events.groupBy(F.window("ts", "10 seconds"), "k").count())


def _drop_duplicates(p: Probe) -> StreamingQuery:
    return p.to_kafka(parsed(p.kafka()).dropDuplicates(["id"]))


def _drop_duplicates_within_watermark(p: Probe) -> StreamingQuery:
    events = parsed(p.kafka()).withWatermark("ts", "10 seconds")
    return p.to_kafka(events.dropDuplicatesWithinWatermark(["id"]))


def _transform_with_state(p: Probe) -> StreamingQuery:
    counted = (
        parsed(p.kafka())
        .select("k", "id")
        .groupBy("k")
        .transformWithState(CountPerKey(), "k STRING, n LONG", outputMode="Update", timeMode="None")
    )
    return p.to_kafka(counted)


def _transform_with_state_pandas(p: Probe) -> StreamingQuery:
    counted = (
        parsed(p.kafka())
        .select("k", "id")
        .groupBy("k")
        .transformWithStateInPandas(CountPerKeyPandas(), "k STRING, n LONG", outputMode="Update", timeMode="None")
    )
    return p.to_kafka(counted)


def _stream_stream_join(p: Probe) -> StreamingQuery:
    left = parsed(p.kafka()).withWatermark("ts", "10 seconds").alias("l")
    right = parsed(p.kafka()).withWatermark("ts", "10 seconds").alias("r")
    joined = left.join(right, F.expr("l.id = r.id AND r.ts BETWEEN l.ts - INTERVAL 5 SECONDS AND l.ts"))
    return p.to_kafka(joined.select("l.id", "l.k"))


def _python_udf(p: Probe) -> StreamingQuery:
    shout = F.udf(lambda s: s.upper() + "!", "string")
    return p.to_kafka(parsed(p.kafka()).select("id", shout("k").alias("k")))


def _python_udf_pickled(p: Probe) -> StreamingQuery:
    shout = F.udf(lambda s: s.upper() + "!", "string", useArrow=False)
    return p.to_kafka(parsed(p.kafka()).select("id", shout("k").alias("k")))


def _pandas_udf(p: Probe) -> StreamingQuery:
    @F.pandas_udf("string")
    def shout(s):
        return s.str.upper() + "!"

    return p.to_kafka(parsed(p.kafka()).select("id", shout("k").alias("k")))


def _kafka_to_kafka(p: Probe) -> StreamingQuery:
    return p.to_kafka(parsed(p.kafka()))


def _console(p: Probe) -> StreamingQuery:
    return p.writer(parsed(p.kafka())).format("console").start()


NOT_IN_ALLOWLIST = "STREAMING_REAL_TIME_MODE.OPERATOR_OR_SINK_NOT_IN_ALLOWLIST"
INPUT_NOT_SUPPORTED = "STREAMING_REAL_TIME_MODE.INPUT_STREAM_NOT_SUPPORTED"
DBX_NOT_LISTED = "not listed"


def at_start(error: str, detail: str = "") -> Outcome:
    return Outcome(AT_START, error, detail)


def at_run_time(error: str, detail: str = "") -> Outcome:
    return Outcome(AT_RUN_TIME, error, detail)


# --8<-- [start:cases]
CASES: list[Case] = [
    Case("Source", "Kafka", _kafka_to_kafka, Outcome(RUNS), "supported"),
    Case("Source", "rate", _rate, at_run_time(INPUT_NOT_SUPPORTED, "RateStreamMicroBatchStream"), DBX_NOT_LISTED),
    Case(
        "Source",
        "Python data source",
        _python_source,
        at_run_time(INPUT_NOT_SUPPORTED, "PythonMicroBatchStream"),
        DBX_NOT_LISTED,
    ),
    Case(
        "Source",
        "file (JSON folder)",
        _file_source,
        at_run_time(INPUT_NOT_SUPPORTED, "FileStreamSource"),
        DBX_NOT_LISTED,
    ),
    Case("Sink", "Kafka", _kafka_to_kafka, Outcome(RUNS), "supported"),
    Case("Sink", "foreach (Python function)", _foreach, Outcome(RUNS), "supported (foreach writer)"),
    Case("Sink", "foreachBatch", _foreach_batch, at_start(NOT_IN_ALLOWLIST, "ForeachBatchSink"), DBX_NOT_LISTED),
    Case("Sink", "console", _console, Outcome(RUNS), DBX_NOT_LISTED),
    Case("Sink", "memory", _memory, at_start(NOT_IN_ALLOWLIST, "MemorySink"), DBX_NOT_LISTED),
    Case("Sink", "noop", _sink("noop"), at_start(NOT_IN_ALLOWLIST, "NoopTable"), DBX_NOT_LISTED),
    # File sinks accept only append, and real-time mode only update: the output-mode check fires first.
    Case(
        "Sink",
        "file (Parquet)",
        _sink("parquet"),
        at_start("STREAMING_OUTPUT_MODE.UNSUPPORTED_DATASOURCE", "Data Source parquet"),
        "not supported (Delta)",
    ),
    Case("Operator", "project / filter", _project_filter, Outcome(RUNS), "supported"),
    Case("Operator", "union of two Kafka sources", _union, Outcome(RUNS), "supported"),
    Case(
        "Operator",
        "union of two reads of one topic",
        _union_same_topic,
        Outcome(RUNS),
        "supported (the limitations page's self-union workaround)",
    ),
    Case(
        "Operator",
        "self-union (same DataFrame twice)",
        _self_union,
        at_run_time("STREAMING_REAL_TIME_MODE.IDENTICAL_SOURCES_IN_UNION_NOT_SUPPORTED", "KafkaV2"),
        "not supported",
    ),
    Case("Operator", "broadcast stream-static join", _broadcast_join, Outcome(RUNS), "supported"),
    Case("Operator", "groupBy aggregation", _aggregation, Outcome(RUNS), "supported"),
    Case("Operator", "windowed aggregation", _window, Outcome(RUNS), "supported (tumbling, sliding)"),
    Case("Operator", "dropDuplicates", _drop_duplicates, Outcome(RUNS), "supported (state is unbounded)"),
    Case(
        "Operator",
        "dropDuplicatesWithinWatermark",
        _drop_duplicates_within_watermark,
        at_run_time(NOT_IN_ALLOWLIST, "StreamingDeduplicateWithinWatermarkExec"),
        "not supported",
    ),
    Case(
        "Operator",
        "transformWithState (Python, Row)",
        _transform_with_state,
        at_run_time("STDS_FAILED_TO_READ_OPERATOR_METADATA"),
        "supported (DBR 17.3+)",
    ),
    Case(
        "Operator",
        "transformWithStateInPandas",
        _transform_with_state_pandas,
        at_run_time("STDS_FAILED_TO_READ_OPERATOR_METADATA"),
        DBX_NOT_LISTED,
    ),
    Case(
        "Operator",
        "stream-stream join",
        _stream_stream_join,
        at_run_time(NOT_IN_ALLOWLIST, "StreamingSymmetricHashJoinExec"),
        DBX_NOT_LISTED,
    ),
    Case(
        "Operator",
        "Python UDF (default, Arrow-optimized)",
        _python_udf,
        at_run_time(NOT_IN_ALLOWLIST, "ArrowEvalPythonExec"),
        "supported (with some limitations)",
    ),
    Case(
        "Operator",
        "Python UDF (useArrow=False)",
        _python_udf_pickled,
        at_run_time(NOT_IN_ALLOWLIST, "BatchEvalPythonExec"),
        "supported (with some limitations)",
    ),
    Case(
        "Operator",
        "pandas UDF",
        _pandas_udf,
        at_run_time(NOT_IN_ALLOWLIST, "ArrowEvalPythonExec"),
        "supported (with some limitations)",
    ),
]
# --8<-- [end:cases]


# ---- The page's table ------------------------------------------------------------------------------------------

GENERATED_MARKER = "<!-- generated by `python scripts/support_matrix.py`; do not edit, run it instead -->"
TEST_PATH = "tests/reference/test_support_matrix.py::test_case"


def _cell(outcome: Outcome) -> str:
    if outcome.kind == RUNS:
        return "✓ runs"
    where = "at `start()`" if outcome.kind == AT_START else "at run time (`q.exception()`)"
    named = f" (names `{outcome.detail}`)" if outcome.detail else ""
    return f"✗ fails {where}: `{outcome.error}`{named}"


def render_markdown(cases: list[Case] = CASES) -> str:
    from rtm_lab.versions import SPARK_VERSION

    lines = [
        GENERATED_MARKER,
        "",
        f"| Kind | Case | OSS Spark {SPARK_VERSION} (tested) | Databricks (from its docs) | Test |",
        "|---|---|---|---|---|",
    ]
    for case in cases:
        lines.append(
            f"| {case.group} | {case.name} | {_cell(case.expected)} | {case.databricks} | `{TEST_PATH}[{case.id}]` |"
        )
    return "\n".join(lines) + "\n"

"""What real-time mode accepts in OSS Spark: one case per source, sink and operator, with the outcome Spark gives.

Every case builds a small query, starts it with `trigger(realTime=...)` and `outputMode("update")`, and is observed
by `rtm_lab.probes.harness.probe()`: it either fails at `start()`, fails once running (the error shows up in
`q.exception()`), or runs, meaning rows fed after the start came out of the sink. `expected` in each case is what
Spark 4.3.0 does; tests/reference/test_support_matrix.py runs every case and asserts it, and
`scripts/tables.py support-matrix` renders the page's table from the same list.
"""

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from rtm_lab.probes.harness import AT_CALL, AT_START, RUNS, Outcome, Probe, at_run_time, at_start
from snippets.reference.support_matrix import shout_in_the_jvm

# ---- The cases -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    group: str  # "Source", "Sink" or "Operator"
    name: str
    start: Callable[[Probe], StreamingQuery]
    expected: Outcome
    databricks: str  # what the Databricks docs say (structured-streaming/real-time/reference and /limitations)
    # The case loads a class from the JVM snippets jar (rtm_lab.snippet_jar), which must be on `spark.jars` when the
    # session starts: the tests' session has it; a session built without it cannot run the case.
    needs_snippet_jar: bool = False

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


def _kafka_min_partitions(p: Probe) -> StreamingQuery:
    raw = (
        p.spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", p.bootstrap)
        .option("subscribe", p.source())
        .option("startingOffsets", "earliest")
        .option("minPartitions", 4)
        .load()
    )
    return p.to_kafka(parsed(raw))


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
    # PySpark's stubs have no overload for a return type alone (the UDF type inferred), which PySpark takes.
    @F.pandas_udf("string")  # type: ignore[call-overload]
    def shout(s):
        return s.str.upper() + "!"

    return p.to_kafka(parsed(p.kafka()).select("id", shout("k").alias("k")))


def _jvm_udf(p: Probe) -> StreamingQuery:
    return p.to_kafka(shout_in_the_jvm(p.spark, parsed(p.kafka())))


def _sort_merge_join(p: Probe) -> StreamingQuery:
    names = p.spark.createDataFrame([("k0", "even"), ("k1", "odd")], "k STRING, parity STRING")
    return p.to_kafka(parsed(p.kafka()).join(names.hint("merge"), "k"))


def _repartition_by_range(p: Probe) -> StreamingQuery:
    return p.to_kafka(parsed(p.kafka()).repartitionByRange(2, "id"))


def _map_in_pandas(p: Probe) -> StreamingQuery:
    def same(batches):
        yield from batches

    return p.to_kafka(parsed(p.kafka()).select("id", "k").mapInPandas(same, "id LONG, k STRING"))


def _map_in_arrow(p: Probe) -> StreamingQuery:
    def same(batches):
        yield from batches

    return p.to_kafka(parsed(p.kafka()).select("id", "k").mapInArrow(same, "id LONG, k STRING"))


def map_partitions_in_the_jvm(spark, frame: DataFrame) -> DataFrame:
    """The JVM `Dataset.mapPartitions` (snippets/jvm/rtmlab/UpperCaseValues.java, in the session's jar) on `frame`'s
    first column, a string, reached through py4j: a PySpark DataFrame has no mapPartitions of its own."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None  # a classic (py4j) session, as every probe's
    return DataFrame(jvm.rtmlab.UpperCaseValues.apply(frame._jdf), spark)


def _jvm_map_partitions(p: Probe) -> StreamingQuery:
    values = p.kafka().select(F.col("value").cast("string").alias("value"))
    return p.to_kafka(map_partitions_in_the_jvm(p.spark, values))


def _limit(p: Probe) -> StreamingQuery:
    return p.to_kafka(parsed(p.kafka()).limit(100))


def _sort(p: Probe) -> StreamingQuery:
    return p.to_kafka(parsed(p.kafka()).sort("id"))


def _apply_in_pandas_with_state(p: Probe) -> StreamingQuery:
    import pandas as pd

    def count(key, batches, state):
        n = (state.get[0] if state.exists else 0) + sum(len(b) for b in batches)
        state.update((n,))
        yield pd.DataFrame({"k": [key[0]], "n": [n]})

    counted = (
        parsed(p.kafka())
        .select("k", "id")
        .groupBy("k")
        .applyInPandasWithState(count, "k STRING, n LONG", "n LONG", "Update", "NoTimeout")
    )
    return p.to_kafka(counted)


def _kafka_to_kafka(p: Probe) -> StreamingQuery:
    return p.to_kafka(parsed(p.kafka()))


def _console(p: Probe) -> StreamingQuery:
    return p.writer(parsed(p.kafka())).format("console").start()


NOT_IN_ALLOWLIST = "STREAMING_REAL_TIME_MODE.OPERATOR_OR_SINK_NOT_IN_ALLOWLIST"
INPUT_NOT_SUPPORTED = "STREAMING_REAL_TIME_MODE.INPUT_STREAM_NOT_SUPPORTED"
# Databricks cells name the page they come from in brackets ([ref], [lim], [setup]); docs/reference/support-matrix.md
# expands each tag to its URL, edition and the month it was read (November 2026). Refresh all of them together.
# They follow the newest edition read; where an older edition says otherwise, the cell says so too.
DBX_NOT_LISTED = "not listed [ref]"
DBX_NOT_CHECKED = "not checked"  # the pages read do not say; see the page's note
DBX_MAP_PARTITIONS = "not supported [lim]; older copies: may block output and add latency"


CASES: list[Case] = [
    Case("Source", "Kafka", _kafka_to_kafka, Outcome(RUNS), "supported [ref]"),
    Case(
        "Source",
        "Kafka with minPartitions",
        _kafka_min_partitions,
        at_run_time("UnsupportedOperationException", "minpartitions is not compatible with real time mode"),
        DBX_NOT_CHECKED,
    ),
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
    Case("Sink", "Kafka", _kafka_to_kafka, Outcome(RUNS), "supported [ref]"),
    Case("Sink", "foreach (Python function)", _foreach, Outcome(RUNS), "supported (forEachWriter) [ref]"),
    Case("Sink", "foreachBatch", _foreach_batch, at_start(NOT_IN_ALLOWLIST, "ForeachBatchSink"), "not supported [ref]"),
    Case("Sink", "console", _console, Outcome(RUNS), DBX_NOT_LISTED),
    Case("Sink", "memory", _memory, at_start(NOT_IN_ALLOWLIST, "MemorySink"), DBX_NOT_LISTED),
    Case("Sink", "noop", _sink("noop"), at_start(NOT_IN_ALLOWLIST, "NoopTable"), DBX_NOT_LISTED),
    # File sinks accept only append, and real-time mode only update: the output-mode check fires first.
    Case(
        "Sink",
        "file (Parquet)",
        _sink("parquet"),
        at_start("STREAMING_OUTPUT_MODE.UNSUPPORTED_DATASOURCE", "Data Source parquet"),
        "not supported (Delta) [ref]",
    ),
    Case("Operator", "project / filter", _project_filter, Outcome(RUNS), "supported [ref]"),
    Case("Operator", "union of two Kafka sources", _union, Outcome(RUNS), "supported, with some limitations [ref]"),
    Case(
        "Operator",
        "union of two reads of one topic",
        _union_same_topic,
        Outcome(RUNS),
        "supported: the self-union workaround [lim]",
    ),
    Case(
        "Operator",
        "self-union (same DataFrame twice)",
        _self_union,
        at_run_time("STREAMING_REAL_TIME_MODE.IDENTICAL_SOURCES_IN_UNION_NOT_SUPPORTED", "KafkaV2"),
        "not supported [lim]",
    ),
    Case(
        "Operator",
        "broadcast stream-static join",
        _broadcast_join,
        Outcome(RUNS),
        "supported, static table 10 MB or less [ref]",
    ),
    Case(
        "Operator",
        "stream-static join without broadcast (sort-merge)",
        _sort_merge_join,
        at_run_time(NOT_IN_ALLOWLIST, "SortExec"),
        "not supported [ref]",
    ),
    Case(
        "Operator",
        "repartitionByRange",
        _repartition_by_range,
        at_run_time(NOT_IN_ALLOWLIST, "ShuffleExchangeExec"),
        DBX_NOT_CHECKED,
    ),
    Case("Operator", "limit", _limit, at_start("_LEGACY_ERROR_TEMP_3102", "Limits are not supported"), DBX_NOT_CHECKED),
    Case("Operator", "sort", _sort, at_start("_LEGACY_ERROR_TEMP_3102", "Sorting is not supported"), DBX_NOT_CHECKED),
    Case("Operator", "groupBy aggregation", _aggregation, Outcome(RUNS), "supported [ref]"),
    Case(
        "Operator", "windowed aggregation", _window, Outcome(RUNS), "supported (tumbling, sliding; not session) [ref]"
    ),
    Case("Operator", "dropDuplicates", _drop_duplicates, Outcome(RUNS), "supported [ref]"),
    Case(
        "Operator",
        "dropDuplicatesWithinWatermark",
        _drop_duplicates_within_watermark,
        at_run_time(NOT_IN_ALLOWLIST, "StreamingDeduplicateWithinWatermarkExec"),
        "supported [ref]; older copies: not supported",
    ),
    Case(
        "Operator",
        "transformWithState (Python, Row)",
        _transform_with_state,
        at_run_time("STDS_FAILED_TO_READ_OPERATOR_METADATA"),
        "supported, with some differences [ref]; Runtime 17.3 LTS+ in real-time mode, per its stateful-applications page "
        "(read November 2026; stated for the operator, Python not named apart); use the Row API in Python [lim]",
    ),
    Case(
        "Operator",
        "transformWithStateInPandas",
        _transform_with_state_pandas,
        at_run_time("STDS_FAILED_TO_READ_OPERATOR_METADATA"),
        "not supported [lim]",
    ),
    Case(
        "Operator",
        "stream-stream join",
        _stream_stream_join,
        at_run_time(NOT_IN_ALLOWLIST, "StreamingSymmetricHashJoinExec"),
        "inner: Runtime 18 LTS+, with extra settings [ref] [setup]; outer: not supported [ref]",
    ),
    Case(
        "Operator",
        "Python UDF (default, Arrow-optimized)",
        _python_udf,
        at_run_time(NOT_IN_ALLOWLIST, "ArrowEvalPythonExec"),
        "supported, with some limitations [ref]",
    ),
    Case(
        "Operator",
        "Python UDF (useArrow=False)",
        _python_udf_pickled,
        at_run_time(NOT_IN_ALLOWLIST, "BatchEvalPythonExec"),
        "supported, with some limitations [ref]",
    ),
    Case(
        "Operator",
        "pandas UDF",
        _pandas_udf,
        at_run_time(NOT_IN_ALLOWLIST, "ArrowEvalPythonExec"),
        "supported, with some limitations [ref]",
    ),
    Case(
        "Operator",
        "JVM scalar UDF (registerJavaFunction)",
        _jvm_udf,
        Outcome(RUNS),
        "Scala UDFs: supported, with some limitations [ref]",
        needs_snippet_jar=True,
    ),
    Case(
        "Operator", "mapInPandas", _map_in_pandas, at_run_time(NOT_IN_ALLOWLIST, "MapInPandasExec"), DBX_MAP_PARTITIONS
    ),
    Case("Operator", "mapInArrow", _map_in_arrow, at_run_time(NOT_IN_ALLOWLIST, "MapInArrowExec"), DBX_MAP_PARTITIONS),
    # SPARK-55720 proposed taking MapPartitionsExec off the allowlist; the 4.3.0 allowlist still has it.
    Case(
        "Operator",
        "mapPartitions (JVM Dataset, Scala or Java)",
        _jvm_map_partitions,
        Outcome(RUNS),
        DBX_MAP_PARTITIONS,
        needs_snippet_jar=True,
    ),
    Case(
        "Operator",
        "applyInPandasWithState (Python flatMapGroupsWithState)",
        _apply_in_pandas_with_state,
        at_run_time(NOT_IN_ALLOWLIST, "SortExec"),
        "not supported ((flat)MapGroupsWithState) [ref]",
    ),
]


# ---- The page's table ------------------------------------------------------------------------------------------

TEST_PATH = "tests/reference/test_support_matrix.py::test_case"


def _cell(outcome: Outcome) -> str:
    if outcome.kind == RUNS:
        return "✓ runs"
    where = {AT_CALL: "at the call, before `start()`", AT_START: "at `start()`"}.get(
        outcome.kind, "at run time (`q.exception()`)"
    )
    named = f" (names `{outcome.detail}`)" if outcome.detail else ""
    return f"✗ fails {where}: `{outcome.error}`{named}"


def table_rows(cases: list[Case] = CASES) -> tuple[list[str], list[list[str]]]:
    """The support-matrix table: a header and one row per case."""
    from rtm_lab.versions import SPARK_VERSION

    header = ["Kind", "Case", f"OSS Spark {SPARK_VERSION} (tested)", "Databricks (from its docs)", "Test"]
    rows = [[c.group, c.name, _cell(c.expected), c.databricks, f"`{TEST_PATH}[{c.id}]`"] for c in cases]
    return header, rows


ALLOWLIST_CLASS = "org.apache.spark.sql.execution.streaming.runtime.RealTimeModeAllowlist$"


def real_time_allowlist(spark, which: str) -> set[str]:
    """The class names on Spark's real-time allowlist, read from the running JVM: `which` is "allowedSinks" or
    "allowedOperators" (private fields of RealTimeModeAllowlist, read by reflection; the names a page quotes from
    Spark's guide, such as its "memory sink", are checked against what this Spark version actually allows)."""
    jvm = spark.sparkContext._jvm
    holder = jvm.java.lang.Class.forName(ALLOWLIST_CLASS)
    field = holder.getDeclaredField(which)
    field.setAccessible(True)
    names = field.get(holder.getField("MODULE$").get(None))
    return set(str(names.mkString("\n")).splitlines())

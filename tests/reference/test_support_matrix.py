"""Every cell of the support matrix is a real outcome on the pinned Spark, and the page's table is current."""

import subprocess
import sys

import pytest

from rtm_lab.paths import PROJECT_ROOT
from rtm_lab.probes import readiness
from rtm_lab.probes.harness import RUNS, Probe, probe
from rtm_lab.probes.support_matrix import CASES, parsed, real_time_allowlist

# The Kafka -> Kafka case is both the "Kafka source" and the "Kafka sink" cell: run it once.
_seen: dict = {}


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case, spark, lab, tmp_path):
    """Each cell is what Spark did, and the readiness check predicted it (scripts/rtm_check.py) before the start."""
    if case.start not in _seen:
        checker = Probe(spark, lab.kafka_bootstrap, tmp_path / "check")
        runner = Probe(spark, lab.kafka_bootstrap, tmp_path / "run")
        try:
            report = readiness.check(case.start, checker)
            _seen[case.start] = report, probe(case.start, runner, timeout_s=90)
        finally:
            checker.cleanup()
            runner.cleanup()
    report, observed = _seen[case.start]

    assert observed == case.expected, observed.message
    if case.expected.kind != RUNS:
        assert case.expected.detail in observed.message
    assert report.verdict == (observed.kind, observed.error), report.text()
    if case.id == "source-kafka":
        # The one warning every plain Kafka source gets (kafka-tuning page), on a query that runs.
        assert [f.what for f in report.findings] == ["Kafka source: kafka.fetch.max.wait.ms left at 500 ms"]


class MicroBatchProbe(Probe):
    """The same probe, but the query is written with a micro-batch trigger, in the same update mode."""

    def writer(self, df):
        return (
            df.writeStream.option("checkpointLocation", self.checkpoint)
            .outputMode("update")
            .trigger(processingTime="1 second")
        )


STRUCTURED_STREAMING_REFUSALS = [c for c in CASES if c.name in ("limit", "sort")]


@pytest.mark.slow
@pytest.mark.parametrize("case", STRUCTURED_STREAMING_REFUSALS, ids=[c.id for c in STRUCTURED_STREAMING_REFUSALS])
def test_micro_batch_refuses_limit_and_sort_in_update_mode_too(case, spark, lab, tmp_path):
    """`limit` and `sort` are not real-time refusals: with a micro-batch trigger, in update mode (the only output
    mode real-time mode takes), the same query fails at start() with the same error class and message."""
    runner = MicroBatchProbe(spark, lab.kafka_bootstrap, tmp_path)
    try:
        observed = probe(case.start, runner, timeout_s=60)
    finally:
        runner.cleanup()
    assert observed == case.expected, observed.message
    assert case.expected.detail in observed.message
    # Structured Streaming's own check refused it, not a STREAMING_REAL_TIME_MODE one.
    assert observed.error == "_LEGACY_ERROR_TEMP_3102"


def test_cases_have_unique_ids():
    assert len({c.id for c in CASES}) == len(CASES)


def test_generated_table_is_current():
    result = subprocess.run(
        [sys.executable, "scripts/tables.py", "support-matrix", "--check"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr

    table = (PROJECT_ROOT / "docs" / "results" / "support-matrix.md").read_text()
    assert "| Operator | dropDuplicates | ✓ runs |" in table


SINKS = "org.apache.spark.sql.execution.streaming.sources."


@pytest.mark.slow
def test_the_guides_memory_sink_is_the_continuous_one(spark):
    """Spark's guide lists "console and memory sinks" for real-time mode: the memory sink on the 4.3.0 allowlist is
    ContinuousMemorySink (the continuous-processing one, which no public writeStream option builds), not the
    MemorySink that format("memory") builds; that one is refused at start() (test_case[sink-memory])."""
    sinks = real_time_allowlist(spark, "allowedSinks")
    assert SINKS + "ContinuousMemorySink" in sinks, sinks
    assert not any(name.endswith(".MemorySink") for name in sinks), sinks
    assert any("ConsoleTable" in name for name in sinks), sinks


@pytest.mark.slow
def test_map_partitions_is_still_on_the_allowlist_and_the_python_map_operators_are_not(spark, lab):
    """SPARK-55720 proposed taking MapPartitionsExec off the real-time allowlist. The 4.3.0 allowlist still has it,
    and the JVM Dataset.mapPartitions plans it: that row runs (test_case[operator-mappartitions-jvm-dataset-scala-or-
    java]). PySpark's mapInPandas and mapInArrow plan their own operators, which the allowlist does not have."""
    from pyspark.sql import DataFrame

    from rtm_lab.probes.support_matrix import map_partitions_in_the_jvm

    operators = real_time_allowlist(spark, "allowedOperators")
    assert "org.apache.spark.sql.execution.MapPartitionsExec" in operators, operators
    assert not any(name.endswith((".MapInPandasExec", ".MapInArrowExec")) for name in operators), operators
    # A PySpark DataFrame has no mapPartitions of its own (only its RDD has, which streaming cannot use).
    assert not hasattr(DataFrame, "mapPartitions")
    # The JVM frame's plan: a MapPartitions node, which Spark runs as MapPartitionsExec (nothing is started here).
    kafka = spark.readStream.format("kafka").option("kafka.bootstrap.servers", lab.kafka_bootstrap)
    values = kafka.option("subscribe", "never-read").load().selectExpr("CAST(value AS STRING) AS value")
    plan = map_partitions_in_the_jvm(spark, values)._jdf.queryExecution().analyzed().toString()
    assert "MapPartitions" in plan, plan


@pytest.mark.slow
def test_python_transform_with_state_is_not_on_the_allowlist(spark):
    """The allowlist names the JVM TransformWithStateExec and no Python operator: by it a Python transformWithState
    would be refused with OPERATOR_OR_SINK_NOT_IN_ALLOWLIST. It is not: start() accepts the query, which then fails
    at run time with STDS_FAILED_TO_READ_OPERATOR_METADATA (tests/reference/test_transform_with_state.py)."""
    operators = real_time_allowlist(spark, "allowedOperators")
    assert any(name.endswith(".TransformWithStateExec") for name in operators), operators
    assert not any("PySpark" in name or "Python" in name for name in operators), operators


@pytest.mark.slow
def test_jvm_udf_runs_in_the_projection_without_a_python_worker(spark, lab, tmp_path, stop_after):
    """Spark's guide lists "scalar user-defined functions (UDFs)" among what real-time mode runs. A JVM UDF
    (spark.udf.registerJavaFunction, snippets/jvm/rtmlab/ShoutUdf.java) is one: under realTime= its rows come out
    transformed, and the plan has no Python evaluation node, which the refused Python UDF cases plan."""
    import json

    from rtm_lab import plans, topics
    from snippets.reference.support_matrix import shout_in_the_jvm

    p = Probe(spark, lab.kafka_bootstrap, tmp_path)
    try:
        query = stop_after(p.to_kafka(shout_in_the_jvm(spark, parsed(p.kafka()))))
        plan = plans.wait_for_real_time_scan(query, timeout_s=90)
        p.feed()
        out = topics.read_all(lab.kafka_bootstrap, p.sink_topic, expected=p.rows, timeout_s=90)
        assert query.isActive, plans.failure(query)
        query.stop()
    finally:
        p.cleanup()
    assert sorted(json.loads(r.value)["k"] for r in out) == ["K0!", "K0!", "K1!"]
    assert "shout(" in plan, plan
    assert "EvalPython" not in plan, plan


@pytest.mark.slow
def test_dedup_keys_leave_out_a_metadata_column_selected_after_it(spark, tmp_path):
    """SPARK-59315 is in 4.3.0: PR #58592's own example, two text files holding the same line, dropDuplicates() and
    then _metadata.file_path selected, writes one row (before the fix, _metadata joined the key: one row per file).
    The pinned jar has the method the fix added. A file source is micro-batch only: availableNow here."""
    source = tmp_path / "in"
    source.mkdir()
    for name in ("a.txt", "b.txt"):
        (source / name).write_text("same\n")
    deduped = spark.readStream.format("text").load(str(source)).dropDuplicates()
    table = f"dedup_metadata_{tmp_path.name}"
    query = (
        deduped.select("value", "_metadata.file_path")
        .writeStream.format("memory")
        .queryName(table)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    rows = spark.table(table).collect()
    assert [r.value for r in rows] == ["same"], rows

    jvm = spark.sparkContext._jvm
    rule = jvm.java.lang.Class.forName("org.apache.spark.sql.catalyst.analysis.ResolveDeduplicate$")
    methods = {str(m.getName()) for m in rule.getDeclaredMethods()}
    assert "recomputeKeysPreservingMetadataBoundary" in methods, sorted(methods)


@pytest.mark.timing
@pytest.mark.slow
def test_console_sink_prints_once_per_batch(lab, kafka_topic, tmp_path):
    """The console sink runs under real-time mode but prints a batch's rows together when the batch ends: two rows
    sent seconds apart within one batch show up on stdout at nearly the same moment (a wide ratio of the two gaps)."""
    import os
    import threading
    import time

    from rtm_lab import topics

    topic = kafka_topic(partitions=1)
    process = subprocess.Popen(
        [
            *(
                sys.executable,
                "-u",
                "-m",
                "rtm_lab.apps.console_sink",
                "--bootstrap",
                lab.kafka_bootstrap,
                "--topic",
                topic,
            ),
            *("--checkpoint", str(tmp_path / "checkpoint"), "--batch-duration", "10 seconds"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=dict(os.environ),
    )
    seen: dict[str, float] = {}
    ready = threading.Event()

    def read() -> None:
        for line in process.stdout:
            if line.startswith("READY"):
                ready.set()
            for marker in ("row-a", "row-b"):
                if marker in line and marker not in seen:
                    seen[marker] = time.monotonic()

    threading.Thread(target=read, daemon=True).start()
    try:
        assert ready.wait(120), "the console query did not start"
        sent_a = time.monotonic()
        topics.produce_json(lab.kafka_bootstrap, topic, [{"id": "row-a"}])
        time.sleep(3)
        sent_b = time.monotonic()
        topics.produce_json(lab.kafka_bootstrap, topic, [{"id": "row-b"}])
        deadline = time.monotonic() + 60
        while len(seen) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        process.stdin.close()
        process.wait(timeout=60)
    assert set(seen) == {"row-a", "row-b"}, seen
    # Sent 3 s apart, printed together: the first row waited for the batch to end, not for the second row alone.
    assert abs(seen["row-b"] - seen["row-a"]) < 0.25 * (sent_b - sent_a), (seen, sent_a, sent_b)
    assert seen["row-a"] - sent_a > 0.5 * (sent_b - sent_a), (seen, sent_a)

"""The readiness check (snippets/reference/readiness_check.py, scripts/rtm_check.py) on the shipped snippets, on bad
input, and its published agreement with Spark.

Its verdict on every support-matrix case and every error-gallery mistake is compared with what Spark did in the same
run inside tests/reference/test_support_matrix.py::test_case and tests/reference/test_errors.py::
test_mistake_fails_as_documented; at N and N-1 slots inside tests/reference/test_slot_sizing.py.
"""

import json
import subprocess
import sys

import pytest

from rtm_lab import topics
from rtm_lab.paths import PROJECT_ROOT
from rtm_lab.probes import public_examples
from rtm_lab.probes.mistakes import MISTAKES
from rtm_lab.probes.support_matrix import CASES
from snippets.reference import readiness_check, readiness_check_broken
from snippets.reference.readiness_check import ReadinessInputError, check_file, rtm_check

RUNS, AT_CALL, AT_START, AT_RUN_TIME = "runs", "fails at the call", "fails at start()", "fails at run time"
RT = "STREAMING_REAL_TIME_MODE"
GROUPBY = next(c for c in public_examples.CASES if c.id == "groupby-default-shuffle-partitions")
SHUFFLE_2 = "spark.sql.shuffle.partitions=2"

# Each shipped snippet whose command line starts a real-time query: its arguments ("SRC"/"OUT": fresh topics) and
# the verdict the checker gives, which the snippet's own tests show Spark agrees with.
SNIPPETS = {
    "snippets/quickstart/kafka_to_kafka.py": (["SRC", "OUT"], (RUNS, None)),
    "snippets/reference/kafka_tuning.py": (["SRC", "OUT"], (RUNS, None)),
    "snippets/reference/delivery_semantics.py": (["SRC", "OUT"], (RUNS, None)),
    "snippets/reference/setup.py": (["SRC", "OUT"], (RUNS, None)),
    "snippets/reference/latency_metrics.py": (["SRC", "OUT"], (RUNS, None)),
    "snippets/guides/kafka_to_postgres.py": (["SRC"], (RUNS, None)),
    # Micro-batch by default (its page shows the real-time version failing): refused as not a real-time query.
    "snippets/guides/ad_attribution.py": (["SRC", "OUT"], "starts a micro-batch query"),
    # Its command line runs the gallery; the first mistake is PySpark refusing trigger(realTime=True).
    "snippets/reference/errors.py": (["SRC", "OUT"], (AT_CALL, "VALUE_NOT_NON_EMPTY_STR")),
    "snippets/reference/readiness_check_broken.py": (
        ["SRC", "OUT"],
        (AT_START, "INVALID_STREAMING_REAL_TIME_MODE_TRIGGER_INTERVAL"),
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("path", SNIPPETS)
def test_checks_each_shipped_snippet(path, spark, lab, kafka_topic, monkeypatch):
    args, expected = SNIPPETS[path]
    topics = {"SRC": kafka_topic(partitions=2), "OUT": kafka_topic(partitions=1)}
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", lab.kafka_bootstrap)
    monkeypatch.setenv("POSTGRES_DSN", lab.postgres_dsn)
    if isinstance(expected, str):
        with pytest.raises(ReadinessInputError, match=expected):
            check_file(path, [topics.get(a, a) for a in args], slots=4)
        return
    report = check_file(path, [topics.get(a, a) for a in args], slots=4)
    assert report.verdict == expected, report.text()
    assert report.exit_code == (0 if report.verdict == (RUNS, None) else 1)
    if report.verdict == (RUNS, None):
        assert report.slots_needed == 2, report.text()  # the 2-partition source, no shuffle
    if path in ("snippets/reference/kafka_tuning.py", "snippets/quickstart/kafka_to_kafka.py"):
        # Both sources set kafka.fetch.max.wait.ms: no warning. The support-matrix cases leave it at its default and
        # get the warning (tests/reference/test_support_matrix.py).
        assert report.findings == [], report.text()


@pytest.mark.slow
def test_broken_example_lists_every_problem(spark, lab, kafka_topic, monkeypatch):
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", lab.kafka_bootstrap)
    source, sink = kafka_topic(partitions=2), kafka_topic(partitions=1)
    report = check_file(readiness_check_broken.__file__, [source, sink], slots=4)
    found = [(f.when, f.error) for f in report.errors]
    assert found == [
        (AT_START, "INVALID_STREAMING_REAL_TIME_MODE_TRIGGER_INTERVAL"),
        (AT_START, f"{RT}.OUTPUT_MODE_NOT_SUPPORTED"),
        (AT_RUN_TIME, f"{RT}.OPERATOR_OR_SINK_NOT_IN_ALLOWLIST"),
        (AT_RUN_TIME, "CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT"),
    ], report.text()
    assert report.slots_needed == 10 and report.shuffle_tasks == (8,)
    assert all(f.fix and f.page for f in report.findings)


@pytest.mark.slow
def test_function_takes_a_dataframe_and_the_writer_settings(spark, lab, kafka_topic):
    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", lab.kafka_bootstrap)
        .option("subscribe", kafka_topic(partitions=3))
        .load()
    )
    counts = raw.groupBy("key").count().selectExpr("CAST(count AS STRING) AS value")
    report = rtm_check(counts, 5, sink="foreachBatch")
    assert report.verdict == (AT_START, f"{RT}.OPERATOR_OR_SINK_NOT_IN_ALLOWLIST"), report.text()
    # 3 source tasks + the session's 2 shuffle partitions, from the plan Spark made.
    assert (report.source_tasks, report.shuffle_tasks, report.slots_needed) == (3, (2,), 5)
    # Production reads 6 partitions: 6 + 2 > 5 slots, and the query has a shuffle, so Spark would refuse it.
    bigger = rtm_check(counts, 5, options={"kafka.bootstrap.servers": lab.kafka_bootstrap}, source_partitions=6)
    assert bigger.verdict == (AT_RUN_TIME, "CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT"), bigger.text()


# ---- bad input: one line, exit 2, no traceback ------------------------------------------------------------------


def rtm_check_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "scripts/rtm_check.py", *args], capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=300
    )


def assert_one_line_exit_2(result: subprocess.CompletedProcess, phrase: str) -> None:
    lines = [line for line in result.stderr.splitlines() if line.startswith("rtm_check:")]
    assert result.returncode == 2, result.stdout + result.stderr
    assert len(lines) == 1 and phrase in lines[0], result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_missing_slot_count_is_refused():
    assert_one_line_exit_2(rtm_check_cli("snippets/reference/kafka_tuning.py", "a", "b"), "pass --slots N")


def test_a_path_that_is_not_a_python_file_is_refused():
    assert_one_line_exit_2(rtm_check_cli("--slots", "4", "docs/index.md"), "is not a Python file")


@pytest.mark.slow
def test_a_file_that_starts_no_streaming_query_is_refused(tmp_path):
    batch = tmp_path / "batch_job.py"
    batch.write_text("from pyspark.sql import SparkSession\nSparkSession.builder.getOrCreate().range(3).collect()\n")
    assert_one_line_exit_2(rtm_check_cli("--slots", "4", str(batch)), "started no streaming query in real-time mode")


def test_a_file_that_fails_is_named_not_traced(spark, tmp_path):
    broken = tmp_path / "typo.py"
    broken.write_text("from pyspark.sql import SparkSession\nSparkSession.builder.getOrCreate().readStrem\n")
    with pytest.raises(ReadinessInputError, match="failed before starting a real-time query: AttributeError"):
        check_file(str(broken), [], slots=4)


def test_a_batch_dataframe_is_refused(spark):
    with pytest.raises(ReadinessInputError, match=r"batch DataFrame: build it with spark\.readStream"):
        rtm_check(spark.range(3), 4)


def test_something_that_is_not_a_classic_dataframe_is_refused():
    with pytest.raises(ReadinessInputError, match="expected a classic PySpark DataFrame, got dict"):
        rtm_check({"plan": "from another Spark"}, 4)


def test_a_spark_without_the_real_time_allowlist_is_refused(spark):
    # This Spark has the allowlist: the guard passes here and refuses a Spark that lacks it (3.5 has no real-time mode).
    assert readiness_check._has_class(spark, readiness_check.ALLOWLIST)
    readiness_check.check_spark_version(spark.version, True)
    with pytest.raises(ReadinessInputError, match=r"Spark 3\.5\.1 has no real-time mode allowlist"):
        readiness_check.check_spark_version("3.5.1", False)


def test_a_missing_slot_count_is_refused_by_the_function(spark):
    with pytest.raises(ReadinessInputError, match="no task slot count"):
        rtm_check(spark.readStream.format("rate").load(), None)


@pytest.mark.slow
def test_unreachable_kafka_is_said_in_one_line(spark):
    nowhere = spark.readStream.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:1")
    with pytest.raises(ReadinessInputError, match=r"Kafka at 127\.0\.0\.1:1 did not list its topics within 15s"):
        rtm_check(nowhere.option("subscribe", "absent").load(), 4, timeout_s=5)


# ---- the published agreement ------------------------------------------------------------------------------------


def test_published_agreement_covers_every_case_and_mistake():
    """docs/results/readiness-check.json (written by `python -m rtm_lab.probes.readiness`) has one row per current case and
    mistake, and the checker agreed with Spark on each."""
    result = json.loads((PROJECT_ROOT / "docs" / "results" / "readiness-check.json").read_text())
    expected = [f"support-matrix[{c.id}]" for c in CASES] + [f"errors[{m.id}]" for m in MISTAKES]
    assert [row["case"] for row in result["rows"]] == expected
    assert result["agree"] == result["cases"] == len(expected)
    assert all(row["checker"] == row["spark"] for row in result["rows"])
    assert result["samples"]["passing"]["exit_code"] == 0 and result["samples"]["failing"]["exit_code"] == 1


# ---- the session the user's code gets, and queries written the way public examples write them -------------------


def _published() -> dict:
    return json.loads((PROJECT_ROOT / "docs" / "results" / "readiness-check.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize(
    ("conf", "needs", "exit_code"),
    [([], "needs 202 (2 source + 200 shuffle), 4 given: 198 short", 1), (["--conf", SHUFFLE_2], "needs 4", 0)],
    ids=["spark-default-shuffle-partitions", "conf-given"],
)
def test_cli_judges_the_session_the_users_code_gets(conf, needs, exit_code, lab, kafka_topic, tmp_path):
    """The repository's entry point starts no session of its own: a groupBy that leaves spark.sql.shuffle.partitions
    unset needs what Spark demands at its default (2 source + 200 shuffle = 202, the count in Spark's own
    CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT message, see the published public-example row), and --conf is what
    spark-submit would pass. The run writes nothing to the query's sink and leaves its checkpoint as it was."""
    source, sink = kafka_topic(partitions=2), kafka_topic(partitions=1)
    topics.produce_json(lab.kafka_bootstrap, source, ({"id": i} for i in range(5)))
    query = tmp_path / "key_counts.py"
    query.write_text(GROUPBY.text)
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "kept").write_text("as it was")
    done = rtm_check_cli("--slots", "4", *conf, str(query), lab.kafka_bootstrap, source, sink, str(checkpoint))
    assert done.returncode == exit_code, done.stdout + done.stderr
    assert f"Slots: {needs}" in done.stdout, done.stdout
    assert ("CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT" in done.stdout) == (exit_code == 1), done.stdout
    assert topics.read_all(lab.kafka_bootstrap, sink, expected=1, timeout_s=3.0) == []
    assert [p.name for p in checkpoint.iterdir()] == ["kept"] and (checkpoint / "kept").read_text() == "as it was"


def test_a_conf_that_is_not_key_value_is_refused(tmp_path):
    query = tmp_path / "q.py"
    query.write_text("")
    assert_one_line_exit_2(
        rtm_check_cli("--slots", "4", "--conf", "spark.sql.shuffle.partitions", str(query)), "KEY=VALUE"
    )


def test_the_groupby_case_is_the_one_spark_demands_202_slots_for():
    """The slot count the CLI test above asserts is the one Spark itself demanded of the same file (published)."""
    row = next(r for r in _published()["public"] if r["case"] == GROUPBY.id)
    assert row["steps"][0]["refused"] == ["CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT: 202"]
    assert "needs 202 concurrent task slots" in row["steps"][0]["message"]


@pytest.mark.slow
@pytest.mark.parametrize("case", public_examples.CASES, ids=lambda c: c.id)
def test_public_example_findings_are_every_refusal_spark_raised(case, spark, lab, tmp_path):
    """The checker, run now on the file as written, names the same set of refusals Spark raised on it and on each
    fixed variant in turn (published by `python -m rtm_lab.probes.readiness`), with the case's warnings."""
    row = next(r for r in _published()["public"] if r["case"] == case.id)
    ws = public_examples.Workspace(spark, lab.kafka_bootstrap, tmp_path)
    try:
        report = public_examples.checker_findings(ws, case.text, case.id)
    finally:
        ws.cleanup()
    assert public_examples.checker_keys(report) == row["spark"], report.text()
    assert set(case.warnings) <= set(public_examples.warned(report)), report.text()
    assert report.exit_code == (1 if row["spark"] else 0)
    if case.allowlist_on:  # switched off: warned about exactly what Spark refuses with the check on
        bypassed = sorted(
            f"{RT}.OPERATOR_OR_SINK_NOT_IN_ALLOWLIST: {f.subject}"
            for f in report.findings
            if "allowlistCheck" in f.what
        )
        assert bypassed == row["spark_with_allowlist_on"] != [], report.text()
    if case.id in ("rate-source-into-noop", "missing-topic"):  # the refusal stopped the trial: said so
        assert not report.complete and "Spark may refuse more once this is fixed" in report.text()


def test_published_public_examples_agree_with_spark():
    """Every public-example case is in the results, each agreeing as sets, Spark running each fixed variant."""
    public = _published()["public"]
    assert [row["case"] for row in public] == [c.id for c in public_examples.CASES]
    assert all(row["agree"] for row in public), [row["case"] for row in public if not row["agree"]]
    three = next(r for r in public if r["case"] == "three-refusals")
    assert len(three["spark"]) == 3 and len(three["steps"]) == 4  # three refusals, one at a time, then it runs


@pytest.mark.slow
def test_python_code_and_clock_functions_are_read_from_the_plan(spark):
    """Without running anything: each kind of Python code is named by the operator Spark's allowlist refuses it as
    (the names the support-matrix cases see when Spark runs them), and each clock function is named."""
    from pyspark.sql import functions as F

    rate = spark.readStream.format("rate").load()
    default_udf = F.udf(lambda v: str(v), "string")
    plain_udf = F.udf(lambda v: str(v), "string", useArrow=False)
    assert readiness_check._python_operators(rate.select(default_udf("value"))) == ["ArrowEvalPythonExec"]
    assert readiness_check._python_operators(rate.select(plain_udf("value"))) == ["BatchEvalPythonExec"]
    pandas_udf = F.pandas_udf(lambda v: v.astype(str), "string")
    assert readiness_check._python_operators(rate.select(pandas_udf("value"))) == ["ArrowEvalPythonExec"]
    assert readiness_check._python_operators(rate.mapInPandas(lambda it: it, rate.schema)) == ["MapInPandasExec"]
    assert readiness_check._python_operators(rate.mapInArrow(lambda it: it, rate.schema)) == ["MapInArrowExec"]
    assert readiness_check._python_operators(rate.select(F.upper(F.col("value").cast("string")))) == []
    clocks = rate.select(F.current_timestamp(), F.now(), F.localtimestamp())
    assert [f.subject for f in readiness_check._clock_warnings(clocks)] == [
        "current_timestamp()",
        "localtimestamp()",
        "now()",
    ]
    assert readiness_check._clock_warnings(rate) == []

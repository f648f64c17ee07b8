"""Each mistake on the errors page fails on the pinned Spark with the error class and message the page quotes."""

import re
import subprocess
import sys

import pytest

from rtm_lab import plans
from rtm_lab.paths import PROJECT_ROOT
from rtm_lab.probes import readiness
from rtm_lab.probes.harness import RUNS, Outcome, Probe, probe, session_confs
from rtm_lab.probes.mistakes import MISTAKES
from rtm_lab.probes.support_matrix import CASES, parsed
from rtm_lab.waiting import wait_until
from snippets.reference import errors


@pytest.mark.slow
@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.id for m in MISTAKES])
def test_mistake_fails_as_documented(mistake, spark, lab, tmp_path):
    """The mistake fails as the page says, and the readiness check predicted it (scripts/rtm_check.py) before."""
    checker = Probe(spark, lab.kafka_bootstrap, tmp_path / "check")
    runner = Probe(spark, lab.kafka_bootstrap, tmp_path / "run")
    try:
        report = readiness.check(mistake.start, checker)
        with errors.settings_restored(spark):
            observed = probe(mistake.start, runner, timeout_s=90)
    finally:
        checker.cleanup()
        runner.cleanup()

    assert observed == mistake.expected, observed.message
    assert mistake.expected.detail in observed.message, observed.message
    assert report.verdict == (observed.kind, observed.error), report.text()


def test_settings_a_mistake_changes_are_restored(spark):
    before = spark.conf.get("spark.sql.shuffle.partitions")
    with errors.settings_restored(spark):
        spark.conf.set("spark.sql.shuffle.partitions", "8")
    assert spark.conf.get("spark.sql.shuffle.partitions") == before


def test_every_mistake_on_the_page_is_a_case():
    assert [m.query for m in MISTAKES] == list(errors.MISTAKES)


def test_generated_table_is_current():
    result = subprocess.run(
        [sys.executable, "scripts/tables.py", "errors", "--check"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.slow
def test_allowlist_check_off_lets_a_rejected_sink_run(spark, lab, tmp_path):
    """The allowlist error's own advice works: with the check off, the noop sink runs (at your own risk)."""
    runner = Probe(spark, lab.kafka_bootstrap, tmp_path)
    try:
        with session_confs(spark, {"spark.sql.streaming.realTimeMode.allowlistCheck": "false"}):
            observed = probe(_noop_sink, runner, timeout_s=90)
    finally:
        runner.cleanup()
    assert observed == Outcome(RUNS), observed.message


def _noop_sink(p):
    return p.writer(parsed(p.kafka())).format("noop").start()


def test_every_real_time_error_class_is_reproduced_or_listed():
    """A Spark upgrade that adds or drops a real-time error class fails here until the page catches up."""
    from rtm_lab.probes.allowlist_off import CASES as ALLOWLIST_OFF

    reproduced = {m.expected.error for m in MISTAKES} | {c.expected.error for c in CASES}
    reproduced |= {c.expected.error for c in ALLOWLIST_OFF}
    defined = errors.real_time_error_classes()
    assert defined - reproduced == errors.NOT_REPRODUCED


def test_databricks_only_error_classes_are_not_in_oss_spark():
    """The page's Databricks-only table names real-time error classes the pinned Spark does not define."""
    page = (PROJECT_ROOT / "docs/reference/errors.md").read_text().split("## Databricks-only errors", 1)[1]
    named = set(re.findall(r"^\| `([A-Z_]+)` \|", page.split("\n## ", 1)[0], re.MULTILINE))
    defined = errors.real_time_error_classes()
    assert {"EXACTLY_ONCE_SINK_NOT_SUPPORTED", "SHUFFLE_MORE_THAN_ONCE"} <= named, named
    assert "STREAMING_REAL_TIME_MODE.OUTPUT_MODE_NOT_SUPPORTED" in defined, defined
    assert not {f"STREAMING_REAL_TIME_MODE.{name}" for name in named} & defined


@pytest.mark.slow
def test_error_class_comes_from_the_raised_failure_not_from_q_exception(spark, lab, tmp_path):
    """What the page says about reading the class: awaitTermination() raises it with its JVM cause, q.exception()
    is rebuilt from the message without it."""
    runner = Probe(spark, lab.kafka_bootstrap, tmp_path)
    query = errors.rate_source(spark, lab.kafka_bootstrap, runner.source(), runner.sink(), runner.checkpoint)
    try:
        raised = wait_until(lambda: plans.failure(query), 90, "the rate source query to fail")
        expected = "STREAMING_REAL_TIME_MODE.INPUT_STREAM_NOT_SUPPORTED"
        assert errors.error_class(raised) == expected, raised
        rebuilt = query.exception()
        assert errors.error_class(rebuilt) == "StreamingQueryException" and expected in str(rebuilt)
    finally:
        query.stop()
        runner.cleanup()

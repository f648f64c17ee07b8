"""Each mistake on the errors page fails on the pinned Spark with the error class and message the page quotes."""

import pytest

from snippets.reference.errors import MISTAKES, session_confs
from snippets.reference.support_matrix import RUNS, Case, Outcome, Probe, parsed, probe


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.id for m in MISTAKES])
def test_mistake_fails_as_documented(mistake, spark, lab, tmp_path):
    runner = Probe(spark, lab.kafka_bootstrap, tmp_path)
    try:
        with session_confs(spark, mistake.confs):
            observed = probe(mistake, runner, timeout_s=90)
    finally:
        runner.cleanup()

    assert observed == mistake.expected, observed.message
    assert mistake.expected.detail in observed.message, observed.message


def test_session_confs_are_restored(spark):
    before = spark.conf.get("spark.sql.shuffle.partitions")
    with session_confs(spark, {"spark.sql.shuffle.partitions": "8"}):
        assert spark.conf.get("spark.sql.shuffle.partitions") == "8"
    assert spark.conf.get("spark.sql.shuffle.partitions") == before


def test_generated_table_is_current():
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "scripts/errors_table.py", "--check"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


def test_allowlist_check_off_lets_a_rejected_sink_run(spark, lab, tmp_path):
    """The allowlist error's own advice works: with the check off, the noop sink runs (at your own risk)."""
    runner = Probe(spark, lab.kafka_bootstrap, tmp_path)
    noop = Case("Sink", "noop, allowlist check off", _noop_sink, Outcome(RUNS), "")
    try:
        with session_confs(spark, {"spark.sql.streaming.realTimeMode.allowlistCheck": "false"}):
            observed = probe(noop, runner, timeout_s=90)
    finally:
        runner.cleanup()
    assert observed == Outcome(RUNS), observed.message


def _noop_sink(p):
    return p.writer(parsed(p.kafka())).format("noop").start()


def test_every_real_time_error_class_is_reproduced_or_listed():
    """A Spark upgrade that adds or drops a real-time error class fails here until the page catches up."""
    from snippets.reference.errors import NOT_REPRODUCED, real_time_error_classes
    from snippets.reference.support_matrix import CASES

    reproduced = {m.expected.error for m in MISTAKES} | {c.expected.error for c in CASES}
    defined = real_time_error_classes()
    assert defined - reproduced == NOT_REPRODUCED

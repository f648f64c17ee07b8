"""With `spark.sql.streaming.realTimeMode.allowlistCheck=false`, each commonly bypassed refusal does what the support
matrix's "allowlist switched off" table says, under a real query on the pinned Spark; and that table is current."""

import subprocess
import sys

import pytest

from rtm_lab.probes.allowlist_off import CASES, FAILS, observe
from rtm_lab.probes.support_matrix import CASES as MATRIX


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case, spark, lab, tmp_path):
    """Each row: the query runs with the right output, or fails where and with the class the row names."""
    answer, run = observe(case, spark, lab.kafka_bootstrap, tmp_path)
    try:
        assert answer == case.expected, answer.detail
        if case.expected.kind == FAILS:
            assert case.expected.detail in answer.detail, answer.detail
        if run.calls is not None:
            # foreachBatch never got as far as calling the function: nothing written, no batch committed, so a
            # restart has nothing to replay (the questions of when it sees rows and what it commits do not arise).
            assert run.calls_made() == []
            assert case.output(run) == []
            commits = tmp_path / "checkpoint" / "commits"
            assert not commits.is_dir() or not any(commits.iterdir())
    finally:
        run.probe.cleanup()


def test_every_case_is_a_refusal_of_the_support_matrix():
    """The cases bypass refusals the support matrix shows with the check on: each one's refused there."""
    refused = {c.name for c in MATRIX if c.expected.kind != "runs"}
    for name in ("foreachBatch", "memory", "noop", "dropDuplicatesWithinWatermark", "stream-stream join", "pandas UDF"):
        assert name in refused
    assert len({c.id for c in CASES}) == len(CASES)


def test_generated_table_is_current():
    result = subprocess.run(
        [sys.executable, "scripts/tables.py", "allowlist-off", "--check"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr

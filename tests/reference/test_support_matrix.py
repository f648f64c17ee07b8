"""Every cell of the support matrix is a real outcome on the pinned Spark, and the page's table is current."""

import subprocess
import sys

import pytest

from probes.harness import RUNS, Probe, probe
from probes.support_matrix import CASES

# The Kafka -> Kafka case is both the "Kafka source" and the "Kafka sink" cell: run it once.
_seen: dict = {}


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case, spark, lab, tmp_path):
    if case.start not in _seen:
        runner = Probe(spark, lab.kafka_bootstrap, tmp_path)
        try:
            _seen[case.start] = probe(case.start, runner, timeout_s=90)
        finally:
            runner.cleanup()
    observed = _seen[case.start]

    assert observed == case.expected, observed.message
    if case.expected.kind != RUNS:
        assert case.expected.detail in observed.message


def test_cases_have_unique_ids():
    assert len({c.id for c in CASES}) == len(CASES)


def test_generated_table_is_current():
    result = subprocess.run(
        [sys.executable, "scripts/tables.py", "support-matrix", "--check"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    from pathlib import Path

    table = (Path(__file__).resolve().parents[2] / "docs" / "results" / "support-matrix.md").read_text()
    assert "| Operator | dropDuplicates | ✓ runs |" in table

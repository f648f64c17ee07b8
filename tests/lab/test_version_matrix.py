"""`scripts/version_matrix.py` (make test-versions) refuses bad input before it builds or starts anything, and the
committed version-matrix table is what its JSON renders. The matrix itself is not run here: it installs two more
PySpark versions and runs every case on three, which `make test-versions` does on demand."""

import json
import os
import subprocess
import sys

import pytest

from rtm_lab.paths import PROJECT_ROOT, jars_dir
from rtm_lab.probes.version_cases import RUNS, all_cases, cell, markdown
from rtm_lab.versions import SPARK_VERSION, VERSION_MATRIX_CONNECTORS

SCRIPT = PROJECT_ROOT / "scripts" / "version_matrix.py"
RESULTS = PROJECT_ROOT / "docs" / "results"


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    clean.update(RTM_LAB_DIR=str(tmp_path / "lab"), RTM_JARS_DIR=str(jars_dir()))
    return clean


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--pyspark", "3.5.0"], "argument --pyspark: invalid choice: '3.5.0'"),
        (["--only", "no-such-case"], "unknown case 'no-such-case'"),
        (["--output", "matrix.txt"], "must be a file name ending in .json"),
        (["--output", "/no/such/folder/m.json"], "does not exist"),
        (["--venvs", str(SCRIPT)], "exists and is not a folder"),
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--pyspark", "4.1.4"], "a partial run (--only, --pyspark) needs --output"),
    ],
    ids=["version", "case", "suffix", "folder", "venvs", "option", "partial"],
)
def test_bad_input_is_one_line_exit_2_and_nothing_started(env, tmp_path, args, why):
    result = subprocess.run([sys.executable, str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=120)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and "Traceback" not in result.stderr and result.stdout == ""
    assert why in lines[0] and "version_matrix.py --help" in lines[0]
    # Refused before any work: no lab folder (so no broker, no venv) was made.
    assert not (tmp_path / "lab").exists()


def test_help_names_every_version(env):
    result = subprocess.run([sys.executable, str(SCRIPT), "--help"], env=env, capture_output=True, text=True)
    assert result.returncode == 0
    for version in VERSION_MATRIX_CONNECTORS:
        assert version in result.stdout


def test_committed_table_is_current_and_covers_every_version_and_case():
    result = subprocess.run(
        [sys.executable, "scripts/tables.py", "version-matrix", "--check"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads((RESULTS / "version-matrix.json").read_text())
    assert list(report["versions"]) == list(VERSION_MATRIX_CONNECTORS)
    ids = [c.id for c in all_cases()]
    for version, run in report["versions"].items():
        assert run["pyspark"] == version
        assert [c["id"] for c in run["cases"]] == ids, f"PySpark {version} was run on a subset of the cases"
    # The pinned version's quick start, as written, delivers rows: the same fact the quick-start test keeps.
    pinned = {c["id"]: c for c in report["versions"][SPARK_VERSION]["cases"]}
    assert pinned["quickstart-keyword"]["kind"] == RUNS
    assert markdown(report) == (RESULTS / "version-matrix.md").read_text()


def test_each_version_loads_a_locked_connector_of_its_own_line():
    from rtm_lab import jars

    for version, group in VERSION_MATRIX_CONNECTORS.items():
        connector = {j.artifact: j.version for j in jars.locked(group)}
        line = connector["spark-sql-kafka-0-10_2.13"].rsplit(".", 1)[0]
        # The pinned 4.3.0 loads the project's connector (4.2.0, the newest on Maven Central); older lines their own.
        assert group == "spark-kafka-connector" if version == SPARK_VERSION else line == version.rsplit(".", 1)[0]
        assert {"kafka-clients", "commons-pool2", "spark-token-provider-kafka-0-10_2.13"} <= set(connector)


def test_cells_name_what_failed_where():
    assert cell({"kind": RUNS, "trigger": "py4j"}) == "✓ runs (py4j)"
    assert cell({"kind": "value", "value": "5000ms"}) == "`5000ms`"
    typed = cell({"kind": "fails at the call", "error": "TypeError", "message": "got an unexpected keyword 'realTime'"})
    assert typed == "✗ at the call: `TypeError` (got an unexpected keyword 'realTime')"
    classed = cell({"kind": "fails at start()", "error": "INVALID_X", "message": "[INVALID_X] long text"})
    assert classed == "✗ at `start()`: `INVALID_X`"
    assert cell(None) == "not run"


def test_a_restart_case_cell_says_what_was_checked():
    right = {"kind": RUNS, "trigger": "py4j", "checks": ["first run: right", "after the restart: right"]}
    assert cell(right) == "✓ runs (py4j); first run: right; after the restart: right"
    wrong = {"kind": RUNS, "checks": ["first run: right", "after the restart: wrong ([{'id': 0}])"]}
    assert cell(wrong).startswith("⚠ runs, output wrong; first run: right; after the restart: wrong")


def test_setup_page_with_the_check_off_every_version_counted_and_deduplicated_right_across_a_restart():
    """setup.md's bullet: with `allowlistCheck=false` a groupBy count and dropDuplicates wrote the right rows on
    4.1.4 (through py4j), 4.2.1 and 4.3.0, before and after a restart on their checkpoint (the committed matrix)."""
    report = json.loads((PROJECT_ROOT / "docs" / "results" / "version-matrix.json").read_text())
    for version, run in report["versions"].items():
        cases = {c["id"]: c for c in run["cases"] if c["id"].startswith("allowlist-off-")}
        assert set(cases) == {"allowlist-off-aggregation", "allowlist-off-dropduplicates"}, version
        for case in cases.values():
            assert case["kind"] == RUNS and case["checks"] == ["first run: right", "after the restart: right"], case
            assert case["trigger"] == ("py4j" if version == "4.1.4" else "as written"), (version, case)

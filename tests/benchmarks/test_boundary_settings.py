"""`scripts/bench.py settings --quick`: each setting reaches the query it claims to change (the engine class and
the JVM's garbage collectors are read from the running query), and every run delivers every record."""

import json
import subprocess
import sys

import pytest

from rtm_lab.paths import PROJECT_ROOT


@pytest.mark.timeout(900)
@pytest.mark.slow
def test_settings_take_effect_in_the_measured_query(lab, tmp_path):
    out = tmp_path / "settings.json"
    # Three runs cover the claims: each child is a Spark start-up, most of this test's time; 3 s of production
    # (after the 1 s warm-up) is enough to read the engine and the collectors and to count every record.
    cmd = [sys.executable, "scripts/bench.py", "settings", "--quick", "--seconds", "3", "--json", str(out)]
    cmd += ["--setting", "sync_progress", "--setting", "zgc", "--setting", "parallel_gc"]
    done = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=880)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    rows = {row["key"]: row for row in json.loads(out.read_text())["rows"]}
    ran = {key: row["runs"][0] for key, row in rows.items()}
    assert all(r["missing"] == 0 for r in ran.values()), ran
    # zgc changes only the collector, so its engine is the default one; sync_progress keeps the default collector.
    assert ran["zgc"]["engine"] == "AsyncProgressTrackingMicroBatchExecution"
    assert ran["sync_progress"]["engine"] == "MicroBatchExecution"
    assert any("G1" in name for name in ran["sync_progress"]["gc"]), ran["sync_progress"]["gc"]
    assert any("ZGC" in name for name in ran["zgc"]["gc"]), ran["zgc"]["gc"]
    # The Parallel collector's beans are named "PS Scavenge" and "PS MarkSweep".
    assert any(name.startswith("PS ") for name in ran["parallel_gc"]["gc"]), ran["parallel_gc"]["gc"]

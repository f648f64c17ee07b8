"""`scripts/bench.py recovery --quick`: the driver SIGKILLed mid-batch and restarted from its checkpoint loses
nothing, leaves one row per key, and writes again at most what it had written since the batch began."""

import json
import subprocess
import sys

import pytest

from rtm_lab.paths import PROJECT_ROOT


@pytest.mark.timing
@pytest.mark.timeout(900)
@pytest.mark.slow
def test_quick_recovery_run_loses_nothing_and_bounds_the_replay(lab, tmp_path):
    out = tmp_path / "recovery.json"
    cmd = [sys.executable, "scripts/bench.py", "recovery", "--quick", "--json", str(out)]
    done = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=880)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    result = json.loads(out.read_text())
    (run,) = result["runs"]
    assert run["lost"] == 0 and run["duplicate_keys"] == 0, run
    # Replayed rows were written before the kill and not committed: never more than were written then.
    assert 0 <= run["rows_replayed"] <= run["rows_written_before_kill"], run
    assert 0 < run["resume_s"] <= run["downtime_s"] and run["catch_up_s"] >= run["resume_s"], run
    assert result["load_average"]["start"] and result["command"] in out.with_suffix(".md").read_text()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--batch-duration", "1 second"], "under the 5 seconds"),
        (["--kill-at", "1.5"], "fraction of the batch duration"),
        (["--rate", "nan"], "--rate"),
    ],
)
def test_recovery_bad_input_exits_2_with_one_line(args, says, tmp_path):
    cmd = [sys.executable, "scripts/bench.py", "recovery", *args, "--json", str(tmp_path / "r.json")]
    done = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr

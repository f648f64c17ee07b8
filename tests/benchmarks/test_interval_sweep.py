"""`scripts/bench.py latency` with several `--batch-duration`s: a tiny batch duration sweep runs end to end, every record is
delivered, the 5-second row crosses a real batch boundary and reports its stall, overrun and where the time went.

Structure and delivery only: this suite shares a small machine, so no absolute time is asserted.
"""

import json
import subprocess
import sys

import pytest

from rtm_lab.benchmarks.interval_sweep import FIGURES
from rtm_lab.paths import PROJECT_ROOT


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_tiny_sweep_crosses_a_boundary_and_measures_its_stall(lab, tmp_path):
    out, plot = tmp_path / "sweep.json", tmp_path / "sweep.png"
    cmd = [
        *(sys.executable, "scripts/bench.py", "latency", "--quick", "--rate", "500", "--repeat", "1"),
        *("--batch-duration", "5 seconds", "--batch-duration", "10 seconds"),
        # Real-time mode only: micro-batch's quick run is tests/benchmarks/test_latency.py's.
        *("--mode", "realtime", "--json", str(out), "--plot", str(plot)),
    ]
    done = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=880)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    result = json.loads(out.read_text())
    assert result["benchmark"] == "latency-sweep" and result["rate"] == 500 and result["repeat"] == 1
    assert result["command"].startswith("python scripts/bench.py latency --quick")
    assert result["versions"]["spark"] == "4.3.0" and result["machine"]["cores"] >= 1
    assert all(len(result["load_average"][when]) == 3 for when in ("start", "end"))
    rows = {row["key"]: row for row in result["rows"]}
    assert list(rows) == ["realtime 5 seconds", "realtime 10 seconds"]

    for key, row in rows.items():
        assert set(row["figures"]) == set(FIGURES), key
        assert all(set(f) == {"median", "min", "max", "values"} for f in row["figures"].values()), key
        (run,) = row["runs"]
        assert run["missing"] == 0 and run["delivered"] == run["sent"] > 0, (key, run["missing"], run["sent"])
        assert run["p50_ms"] <= run["p95_ms"] <= run["p99_ms"] <= run["p99.9_ms"] <= run["max_ms"], key

    five = rows["realtime 5 seconds"]
    (run,) = five["runs"]
    assert run["ui_error"] is None, run["ui_error"]  # the Spark UI's REST API answered
    assert run["boundaries_crossed"] >= 1 and not five["no_boundary"]
    assert run["stall_median_ms"] is not None and five["figures"]["stall_median_ms"]["median"] is not None
    for boundary in run["boundaries"]:
        # The breakdown cuts the boundary's gap into pieces that add up to it, down to the next batch's task launch.
        assert sum(seg["ms"] for seg in boundary["segments"]) == boundary["gap_ms"], boundary
        assert boundary["stall_ms"] == boundary["gap_ms"] - run["normal_gap_ms"]
        assert "next_launch" in {seg["to"] for seg in boundary["segments"]}, boundary["segments"]
    assert run["timeline"]["t_s"] and run["cdf_ms"][-1][0] == 100
    ten = rows["realtime 10 seconds"]["runs"][0]
    assert rows["realtime 10 seconds"]["no_boundary"] == (ten["boundaries_crossed"] == 0)

    table = out.with_suffix(".md").read_text()
    assert "p99.9 ms" in table and "stall per boundary" in table and result["command"] in table
    assert 'realTime="5 seconds"' in table and "Load average" in table
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

"""The checkpoint-storage command without Spark: which cells it plans, how it refuses bad input, and the tables and
model it writes from runs (synthetic results here; the real ones come from `scripts/bench.py checkpoint-storage`)."""

import json
import subprocess
import sys

import pytest

from rtm_lab.benchmarks import checkpoint_storage as cs
from rtm_lab.paths import PROJECT_ROOT


def test_the_default_plan_has_the_fit_the_held_out_points_and_the_variants_asked_for():
    cells = cs.plan(["dedup", "stateless_async"], ["disk", "0", "30", "100", "10"], list(cs.SECONDS), ["changelog_off"])
    keys = [c.key for c in cells]
    assert keys[:9] == [
        "dedup / disk / 5 seconds",
        "dedup / s3 0 ms / 5 seconds",
        "dedup / s3 30 ms / 5 seconds",
        "dedup / s3 100 ms / 5 seconds",
        "dedup / s3 10 ms / 5 seconds",
        "dedup / s3 30 ms / 30 seconds",
        "dedup / disk / 5 minutes",
        "dedup / s3 30 ms / 5 minutes",
        "dedup / s3 100 ms / 5 seconds / changelog_off",
    ]
    assert "stateless_async / s3 100 ms / 5 seconds / changelog_off" not in keys  # no state store to change
    roles = {c.key: c.role for c in cells}
    assert roles["dedup / s3 30 ms / 5 seconds"] == "fit"
    assert roles["dedup / s3 10 ms / 5 seconds"] == "held-out"
    assert roles["dedup / s3 30 ms / 30 seconds"] == "held-out"
    assert roles["dedup / s3 30 ms / 5 minutes"] == "long"
    assert roles["dedup / disk / 5 seconds"] == "baseline"


def test_the_long_cell_runs_only_on_disk_and_at_30_ms_and_its_production_crosses_one_boundary():
    assert [c.key for c in cs.plan(["count"], ["30"], ["5 minutes"], [])] == ["count / s3 30 ms / 5 minutes"]
    assert cs.plan(["count"], ["100"], ["5 minutes"], []) == []
    on_disk = cs.plan(["count"], ["disk", "100"], ["5 minutes"], [])
    # On disk it is a baseline, never checked against the storage model; the planner reads it under "300".
    assert [(c.key, c.role) for c in on_disk] == [("count / disk / 5 minutes", "baseline")]
    # Production starts a few seconds after the query (the priming records), whose first batch ends at 300 s: one
    # boundary, with at least 15 s of records after it, and none at 600 s.
    assert 300 + 15 <= cs.SECONDS["5 minutes"] < 600 - 30


def test_the_runs_in_the_published_results_assemble_as_before():
    # The long cell adds rows and a table section, and changes nothing in the rows and models of the other cells.
    path = PROJECT_ROOT / "docs" / "results" / "checkpoint-storage.json"
    published = json.loads(path.read_text())
    every = cs.plan(list(cs.BY_NAME), ["disk", "0", "10", "30", "100"], list(cs.SECONDS), list(cs.VARIANTS))
    rows = cs.assemble(published["done"], every)
    short = [r for r in rows if r["role"] != "long"]
    assert short == [r for r in published["rows"] if r["role"] != "long"]
    assert [{k: v for k, v in m.items() if k != "long"} for m in cs.models(rows, published["done"])] == [
        {k: v for k, v in m.items() if k != "long"} for m in published["models"]
    ]


@pytest.mark.parametrize(
    "bad, message",
    [
        (["--shapes", "joins"], "choose from"),
        (["--delays", "fast"], "neither 'disk' nor a delay"),
        (["--until", "25:99"], "must be a UTC time as HH:MM"),
        (["--runs", "0"], ""),
    ],
)
def test_bad_input_is_one_line_and_exit_2(bad, message):
    done = subprocess.run(
        [
            sys.executable,
            str(PROJECT_ROOT / "scripts" / "bench.py"),
            "checkpoint-storage",
            "--json",
            "/tmp/x.json",
            *bad,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def _run(shape: str, storage: str, run: int, stall: float, critical: int | None, duration: str = "5 seconds") -> dict:
    storage_fields = (
        None
        if critical is None
        else {
            "requests_per_boundary": 9,
            "requests_per_boundary_by_kind": {"PUT": 4, "COPY": 2, "DELETE": 2, "HEAD": 1},
            "data_path_median": 6,
            "critical_path_median": critical,
        }
    )
    return {
        "cell": vars(cs.Cell(shape, storage, duration)),
        "run": run,
        "seconds": 40.0,
        "result": {
            "p50_ms": 20.0,
            "p99_ms": 300.0 + stall,
            "max_ms": 400.0 + stall,
            "stall_median_ms": stall,
            "boundaries_crossed": 6,
            "missing": 0,
            "boundaries": [
                {"split": {"planning_ms": 40, "offset_log_ms": 0, "commit_log_ms": 10, "state_upload_ms": None}}
            ],
            "storage": storage_fields,
        },
    }


def _results_file(rows: list[dict], models: list[dict], done: list[dict]) -> dict:
    return {
        "rate": 1000.0,
        "seconds": 40.0,
        "warmup_s": 5.0,
        "rows": rows,
        "models": models,
        "done": done,
        "versions": {"pyspark": "4.3.0"},
        "machine": {"cores": 2, "memory_gib": 8, "cpu_model": "x", "os": "Linux"},
        "command": "python scripts/bench.py checkpoint-storage",
        "started": "2026-11-27T13:00:00Z",
        "timestamp": "2026-11-27T13:30:00Z",
    }


def test_rows_and_the_model_from_runs(tmp_path):
    # 100 ms fixed + 4 sequential requests per boundary, held out at 10 ms (measured 150: off by 7 %).
    done = [_run("dedup", "disk", 0, 90, None)]
    for run in range(2):
        done += [_run("dedup", d, run, 100 + 4 * float(d), 4) for d in ("0", "30", "100")]
    done += [_run("dedup", "10", 0, 150, 4)]
    done += [_run("dedup", "disk", 0, 130, None, duration="5 minutes")]
    every = cs.plan(["dedup"], ["disk", "0", "10", "30", "100"], list(cs.SECONDS), [])
    rows = cs.assemble(done, every)
    assert [r["key"] for r in rows] == [
        "dedup / disk / 5 seconds",
        "dedup / s3 0 ms / 5 seconds",
        "dedup / s3 10 ms / 5 seconds",
        "dedup / s3 30 ms / 5 seconds",
        "dedup / s3 100 ms / 5 seconds",
        "dedup / disk / 5 minutes",
    ]
    assert rows[4]["stall_ms"]["median"] == 500 and rows[4]["runs"] == 2
    # Local disk only, keyed by the batch duration in seconds: the 5-minute cell is the planner's default.
    assert cs.planner_part(rows) == {"dedup": {"5": 90, "300": 130}}
    (model,) = cs.models(rows, done)
    assert model["slope"] == pytest.approx(4.0) and model["fixed_ms"] == pytest.approx(100.0)
    assert model["critical_path_counted"] == 4
    (held,) = model["held_out"]
    assert held["predicted_ms"] == 140 and held["error"] == pytest.approx(0.067, abs=0.001) and held["within_target"]
    result = _results_file(rows, [model], done)
    text = cs.markdown(result)
    assert "| dedup | S3, 100 ms/request | 2 |" in text
    assert "](../results/checkpoint-storage.png)" in text
    cs.plot(result, tmp_path / "plot.png")
    assert (tmp_path / "plot.png").stat().st_size > 10_000
    assert "7% ✓" in text


def test_the_long_cell_reports_its_boundary_and_the_models_error_apart_from_the_held_out_cells():
    # The 5 s model: 100 ms + 4 per ms of latency, so 220 ms predicted at 30 ms; the long run measured 1,100.
    done = [_run("count", d, 0, 100 + 4 * float(d), 4) for d in ("0", "30", "100")]
    long = _run("count", "30", 0, 1_100, 9, duration="5 minutes")
    long["result"]["boundaries_crossed"] = 1
    long["result"]["boundaries"] = [
        {
            "stall_ms": 1_100,
            "split": {"planning_ms": 40, "offset_log_ms": 0, "commit_log_ms": 10, "state_upload_ms": 700},
            "storage": {
                "by_area": {"state": {"PUT": 4, "HEAD": 8}, "offsets": {"PUT": 1}},
                "bytes_in_by_area": {"state": 31_500_000, "offsets": 400},
                "critical_path": 9,
            },
        }
    ]
    done.append(long)
    every = cs.plan(["count"], ["0", "30", "100"], list(cs.SECONDS), [])
    rows = cs.assemble(done, every)
    (row,) = [r for r in rows if r["role"] == "long"]
    assert row["long"]["state_requests"]["median"] == 12 and row["long"]["state_bytes"]["median"] == 31_500_000
    assert row["long"]["boundaries_per_run"] == [1] and row["long"]["critical_path"]["median"] == 9
    assert all("long" not in r for r in rows if r["role"] != "long")
    (model,) = cs.models(rows, done)
    assert model["held_out"] == []  # the long cell is not a held-out point
    (check,) = model["long"]
    assert check["predicted_ms"] == 220 and check["error"] == 0.8 and not check["within_target"]
    text = cs.markdown(_results_file(rows, [model], done))
    assert "| count | 1 | 1,100 | 220 | 80% ✗ | 12 | 31.5 | 9 | 1,400 | 1,500 |" in text
    assert "about 300,000 keys" in text

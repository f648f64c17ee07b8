"""The Flink checkpoint-storage command without Flink: its help and bad input, and the figures and rows it writes from
what a run records (a small synthetic run here, and one recorded by a smoke run of the real command)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rtm_lab.benchmarks import checkpoint_flink as cf
from rtm_lab.benchmarks import checkpoint_flink_figures as figures
from rtm_lab.benchmarks import checkpoint_flink_report as report
from rtm_lab.paths import PROJECT_ROOT

BENCH = [sys.executable, str(PROJECT_ROOT / "scripts" / "bench.py"), "checkpoint-storage-flink"]
RECORDED = Path(__file__).with_name("checkpoint_flink_fixture.json")


def test_help_names_the_shapes_and_the_storage_cells():
    done = subprocess.run([*BENCH, "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0
    for word in ("--shapes", "--storage", "--s3-plugin", "--until", "stateless", "dedup", "count"):
        assert word in done.stdout


@pytest.mark.parametrize(
    "bad, message",
    [
        (["--shapes", "joins"], "choose from"),
        (["--storage", "fast"], "neither 'disk' nor a delay"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(bad, message):
    done = subprocess.run([*BENCH, "--json", "/tmp/x.json", *bad], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_flink_checkpoints_at_the_spark_batch_duration_on_rocksdb_incremental():
    conf = cf.flink_conf("dedup")
    assert conf["execution.checkpointing.interval"] == "5 s"
    assert conf["execution.checkpointing.incremental"] == "true"
    assert conf["table.exec.state.ttl"] == "1 h"
    assert "table.exec.state.ttl" not in cf.flink_conf("stateless")


def synthetic_run():
    """A record out every ms from t=1000 to t=2999 but none from 1501 to 1699, inside the first checkpoint (1400 to
    1800); every latency 10 ms, except 200 ms for the records out at 1700 to 1710, which came in during it."""
    out = [t for t in range(1000, 3000) if not 1500 < t < 1700]
    samples = [(i, 200.0 if 1700 <= t <= 1710 else 10.0) for i, t in enumerate(out)]
    checkpoints = [
        {"id": 1, "trigger_ms": 1400, "ack_ms": 1800, "end_to_end_ms": 400, "state_size": 2048,
         "checkpointed_size": 1024, "sync_ms": 5, "async_ms": 390},
        {"id": 2, "trigger_ms": 2400, "ack_ms": 2500, "end_to_end_ms": 100, "state_size": 4096,
         "checkpointed_size": 1024, "sync_ms": 3, "async_ms": 90},
        {"id": 3, "trigger_ms": 3400, "ack_ms": 3500, "end_to_end_ms": 100, "state_size": 4096,
         "checkpointed_size": 0, "sync_ms": 3, "async_ms": 90},
    ]  # fmt: skip
    requests = [
        {"start_ms": 1410, "end_ms": 1500, "kind": "PUT"},
        {"start_ms": 1500, "end_ms": 1600, "kind": "PUT"},
        {"start_ms": 1550, "end_ms": 1650, "kind": "HEAD"},
        {"start_ms": 1900, "end_ms": 1950, "kind": "DELETE"},  # after the ack: the cycle's, not the chain's
        {"start_ms": 2410, "end_ms": 2450, "kind": "PUT"},
    ]
    return samples, out, checkpoints, requests


def test_a_run_splits_its_records_and_its_requests_by_checkpoint():
    samples, out, checkpoints, requests = synthetic_run()
    found = figures.run_figures(samples, out, checkpoints, requests, warmup_ids=0, window_ms=(1000, 3000))
    assert found["checkpoints_counted"] == 2  # the third ends after production
    first, second = found["checkpoints"]
    assert first["longest_gap_ms"] == 200 and second["longest_gap_ms"] == 1
    assert first["longest_gap_after_ms"] == 1
    assert first["requests"] == 4 and first["by_kind"] == {"DELETE": 1, "HEAD": 1, "PUT": 2}
    assert first["chain"] == 2  # two PUTs one after another; the HEAD overlapped the second
    assert second["requests"] == 1
    assert found["during_checkpoints"]["max_ms"] == 200
    assert found["between_checkpoints"]["max_ms"] == 10
    assert found["end_to_end_ms"] == 250 and found["sync_ms"] == 4


def test_a_run_on_local_disk_has_no_request_figures():
    samples, out, checkpoints, _ = synthetic_run()
    found = figures.run_figures(samples, out, checkpoints, None, warmup_ids=0, window_ms=(1000, 3000))
    assert found["requests_per_checkpoint"] is None and found["requests_by_kind"] is None
    assert "requests" not in found["checkpoints"][0]


def test_rows_take_the_median_of_runs_and_render():
    samples, out, checkpoints, requests = synthetic_run()
    one = figures.run_figures(samples, out, checkpoints, requests, 0, (1000, 3000))
    done = [
        {"cell": {"shape": "dedup", "storage": "100"}, "run": i, "result": {**one, "p99_ms": p99, "missing": 0}}
        for i, p99 in enumerate([10.0, 30.0, 20.0])
    ]
    (row,) = report.assemble(done, list(cf.SHAPES), cf.storages(done))
    assert row["key"] == "dedup / s3 100 ms" and row["runs"] == 3
    assert row["p99_ms"] == {"median": 20.0, "min": 10.0, "max": 30.0, "n": 3}
    assert row["checkpoints"] == 6
    assert "--8<-- [start:latency]" in report.placeholder()


def test_the_recorded_smoke_run_assembles_and_renders():
    recorded = json.loads(RECORDED.read_text())
    rows = report.assemble(recorded["done"], list(cf.SHAPES), cf.storages(recorded["done"]))
    assert [r["key"] for r in rows] == [r["key"] for r in recorded["rows"]]
    assert all(r["p99_ms"]["median"] is not None and r["checkpoints"] > 0 for r in rows)
    text = report.markdown({**recorded, "rows": rows})
    assert all(f"--8<-- [start:{name}]" in text for name in report.SECTIONS)
    assert "read back over Flink's REST API" in text


def test_the_evidence_names_flink_versions_not_spark():
    """The run record carries the Spark pins; the footer of a Flink table names the Flink ones."""
    recorded = json.loads(RECORDED.read_text())
    assert "flink" not in recorded["versions"]  # a file from before the runs recorded Flink's versions
    line = next(x for x in report.markdown(recorded).splitlines() if x.startswith("- Versions:"))
    assert f"flink {recorded['flink_version']}" in line and "flink_kafka_connector" in line
    assert "spark" not in line
    rebuilt = report.flink_versions({"flink_version": "9.9", "versions": {"spark": "4.3.0", "kafka_broker": "4.3.1"}})
    assert rebuilt["flink"] == "9.9" and "spark" not in rebuilt and rebuilt["kafka_broker"] == "4.3.1"

"""The checkpoint-storage benchmark's arithmetic on synthetic request logs (no Spark, no store): which requests belong
to a run and a boundary, which lie on the data path, the critical path's length, and the stall model's fit and its
held-out error."""

import pytest

from rtm_lab.benchmarks import checkpoint_model, checkpoint_requests

T0 = 1_800_000_000_000  # an epoch ms
RUN = "ckpt-run-7"


def req(start: float, length: float, kind: str, key: str, bucket: str = "rtm", sent: int = 0) -> dict:
    return {
        "start_ms": T0 + start,
        "end_ms": T0 + start + length,
        "kind": kind,
        "path": f"/{bucket}/{key}",
        "bytes_in": sent,
    }


def test_requests_belong_to_the_run_whose_folder_they_name_and_to_its_area():
    entries = [
        req(0, 5, "PUT", f"{RUN}/offsets/.3.abc.tmp"),
        req(6, 5, "COPY", f"{RUN}/offsets/3"),
        req(7, 5, "PUT", f"{RUN}/state/0/1/4.changelog"),
        req(8, 5, "HEAD", f"{RUN}/metadata"),
        req(9, 5, "PUT", "ckpt-run-8/commits/3"),  # another run's
        {**req(10, 5, "LIST", ""), "prefix": f"{RUN}/commits/"},
    ]
    run = checkpoint_requests.of_run(entries, RUN)
    assert [(e["kind"], e["area"]) for e in run] == [
        ("PUT", "offsets"),
        ("COPY", "offsets"),
        ("PUT", "state"),
        ("HEAD", "metadata"),
        ("LIST", "commits"),
    ]


def test_critical_path_counts_the_longest_chain_of_requests_that_did_not_overlap():
    # Two tasks upload their state at once (parallel), then the commit log: PUT, HEAD, COPY, DELETE one after another.
    entries = [
        req(0, 100, "PUT", "s/1"),
        req(10, 100, "PUT", "s/2"),
        req(120, 100, "PUT", "c/tmp"),
        req(220, 100, "HEAD", "c/5"),
        req(330, 100, "COPY", "c/5"),
        req(430, 100, "DELETE", "c/tmp"),
    ]
    chain = checkpoint_requests.critical_chain(entries)
    assert len(chain) == 5
    assert [e["kind"] for e in chain] == ["PUT", "PUT", "HEAD", "COPY", "DELETE"]


def test_a_boundary_counts_its_cycle_and_the_requests_inside_its_stall():
    # Batch 1 ends at +5000, batch 2 at +10000. Records stop coming out at +5000 and resume at +5600.
    entries = [
        req(2_000, 50, "GET", f"{RUN}/offsets/1"),  # before batch 1's cycle (+3000): batch 0's
        req(4_990, 100, "PUT", f"{RUN}/state/0/0/2.changelog", sent=3_000),
        req(4_995, 100, "PUT", f"{RUN}/state/0/1/2.changelog", sent=2_000),
        req(5_100, 100, "PUT", f"{RUN}/commits/.1.tmp"),
        req(5_200, 100, "COPY", f"{RUN}/commits/1"),
        req(5_300, 100, "DELETE", f"{RUN}/commits/.1.tmp"),
        req(5_700, 100, "PUT", f"{RUN}/offsets/.2.tmp"),  # after the stall: background, same cycle
        req(8_500, 100, "PUT", f"{RUN}/state/0/0/3.changelog"),  # batch 2's cycle
    ]
    observed = {
        "progress": [
            {"batch": 0, "start_ms": T0 - 5_000, "duration_ms": {"triggerExecution": 5_000}},
            {"batch": 1, "start_ms": T0, "duration_ms": {"triggerExecution": 5_000}},
            {"batch": 2, "start_ms": T0 + 5_000, "duration_ms": {"triggerExecution": 5_000}},
        ],
        "boundaries": [
            {
                "batch": 1,
                "at_ms": T0 + 5_000,
                "stall_ms": 598,
                "moments": {"last_out": T0 + 5_000, "first_out": T0 + 5_600},
            }
        ],
    }
    run = checkpoint_requests.of_run(entries, RUN)
    (b,) = checkpoint_requests.account(run, observed)["per_boundary"]
    assert b["requests"] == 6
    assert b["by_kind"] == {"COPY": 1, "DELETE": 1, "PUT": 4}
    assert b["by_area"]["commits"] == {"COPY": 1, "DELETE": 1, "PUT": 1}
    assert b["data_path"] == 5
    assert b["critical_path"] == 4  # the two state uploads overlap: one step, then the commit log's three
    assert b["stall_in_area_ms"]["state"] == 95  # from +5000 (stall start) to +5095 (the later upload's end)
    assert b["stall_in_area_ms"]["commits"] == 300
    assert b["bytes_in_by_area"]["state"] == 5_000  # the state upload's size: both tasks' changelogs


def test_the_stall_split_reads_progress_phases_and_the_state_uploads_time():
    boundary = {
        "duration_ms": {"walCommit": 0, "commitOffsets": 12},
        "next_duration_ms": {"latestOffset": 30, "queryPlanning": 20, "walCommit": 7},
        "stall_in_area_ms": {"state": 95.0},
        "state_commit_ms": 140,
    }
    assert checkpoint_requests.stall_split(boundary) == {
        "planning_ms": 50,
        "offset_log_ms": 0,
        "commit_log_ms": 12,
        "state_upload_ms": 95.0,
        "state_commit_ms": 140,
    }


def test_the_model_recovers_fixed_part_and_slope_and_judges_held_out_points():
    # Synthetic stalls: 120 ms fixed + 6 sequential requests per boundary.
    fit_points = [(0, 120), (0, 124), (30, 300), (30, 296), (100, 720), (100, 722)]
    model = checkpoint_model.fit(fit_points)
    assert model.fixed_ms == pytest.approx(120.4, abs=0.5)
    assert model.per_request_latency == pytest.approx(6.0, abs=0.05)
    rows = checkpoint_model.held_out(model, [(10, 180), (10, 260)])
    assert rows[0]["within_target"] and rows[0]["error"] < 0.02
    assert not rows[1]["within_target"] and rows[1]["error"] > checkpoint_model.TARGET_ERROR
    with pytest.raises(ValueError, match="two request latencies"):
        checkpoint_model.fit([(30, 300), (30, 310)])


def test_the_readers_arithmetic():
    """The page's worked example and its requests-per-day table (48 requests per boundary)."""
    assert checkpoint_model.stall_for(fixed_ms=0, critical_path=48, latency_ms=20) == 960
    assert checkpoint_model.stall_for(fixed_ms=100, critical_path=6, latency_ms=25) == 250
    assert checkpoint_model.requests_per_day(requests_per_boundary=48, batch_duration_s=5) == 829_440
    assert checkpoint_model.requests_per_day(48, 30) == 138_240
    assert checkpoint_model.requests_per_day(48, 60) == 69_120
    assert checkpoint_model.requests_per_day(48, 300) == 13_824

"""The batch duration sweep's arithmetic on synthetic timestamps (no Spark): gaps, stall per boundary, overrun, where the
stall's time goes, and the command's refusal of bad input before it starts anything."""

import math
import subprocess
import sys

import pytest

from rtm_lab.benchmarks import boundaries
from rtm_lab.benchmarks.boundaries import Batch
from rtm_lab.paths import PROJECT_ROOT

T0 = 1_800_000_000_000  # an epoch ms


def steady_stream(start: int, end: int, every: int, pauses: dict[int, int]) -> list[int]:
    """Records out every `every` ms from start to end, none during each pause (start -> length)."""
    out, t = [], start
    while t <= end:
        pause = next((length for at, length in pauses.items() if at <= t < at + length), None)
        if pause is None:
            out.append(t)
        t += every
    return out


def test_interval_strings_read_as_spark_writes_them():
    assert boundaries.interval_ms("5 seconds") == 5000
    assert boundaries.interval_ms("1 minute") == 60_000
    assert boundaries.interval_ms("5 minutes") == 300_000
    assert boundaries.interval_ms("interval 30 seconds") == 30_000
    for bad in ("", "5", "five seconds", "5 fortnights"):
        with pytest.raises(ValueError, match="cannot read the duration"):
            boundaries.interval_ms(bad)


def test_progress_and_ui_timestamps_parse_to_the_same_epoch():
    assert boundaries.epoch_ms("2026-11-22T03:11:51.610Z") == boundaries.epoch_ms("2026-11-22T03:11:51.610GMT")
    assert boundaries.epoch_ms(None) is None


def test_normal_gap_is_the_median_and_longest_gap_respects_the_window():
    out = [0, 2, 4, 6, 306, 308, 310, 900]
    assert boundaries.normal_gap_ms(out) == 2
    assert boundaries.longest_gap(out, 0, 300) == (6, 306)
    assert boundaries.longest_gap(out, 307, 320) == (310, 900)
    assert boundaries.longest_gap(out, 1000, 2000) is None


def test_stall_per_boundary_is_the_boundary_gap_minus_the_normal_gap():
    # 5 s batches; batch 0 starts at T0, its tasks end at T0+5_000, the next records come out 300 ms later.
    interval = 5000
    out = steady_stream(T0, T0 + 14_000, 2, {T0 + 5_000: 300, T0 + 10_100: 150})
    batches = [
        Batch(0, T0 - 2_000, {"triggerExecution": 7_050, "addBatch": 5_020, "commitOffsets": 3}),
        Batch(1, T0 + 5_150, {"triggerExecution": 5_010, "latestOffset": 40, "queryPlanning": 60}),
        Batch(2, T0 + 10_200, {"triggerExecution": 5_000}),
    ]
    jobs = {
        0: {"submitted": T0 - 100, "first_launch": T0 - 50, "tasks_end": T0 + 5_000},
        1: {"submitted": T0 + 5_250, "first_launch": T0 + 5_270, "tasks_end": T0 + 10_100},
        2: {"submitted": T0 + 10_220, "first_launch": T0 + 10_230, "tasks_end": None},
    }
    result = boundaries.analyse(out, batches, interval, steady_from_ms=T0 + 1_000, jobs=jobs)

    assert result["normal_gap_ms"] == 2
    assert result["boundaries_crossed"] == 2
    first, second = result["boundaries"]
    assert (first["batch"], first["gap_ms"], first["stall_ms"]) == (0, 302, 300)
    assert (second["batch"], second["gap_ms"], second["stall_ms"]) == (1, 152, 150)
    assert result["stall_median_ms"] == 225 and result["stall_max_ms"] == 300
    # Overrun: triggerExecution - interval, batch 0 (start-up) left out.
    assert first["overrun_ms"] is None and second["overrun_ms"] == 10
    assert result["overruns_ms"] == [10, 0] and result["overrun_median_ms"] == 5


def test_breakdown_segments_add_up_to_the_gap_and_merge_unknown_moments():
    moments = {
        "last_out": 0,
        "tasks_end": 20,
        "batch_end": 60,
        "next_start": 100,
        "next_job": 180,
        "next_launch": 200,
        "first_out": 230,
    }
    segments = boundaries.breakdown(moments)
    assert [s["ms"] for s in segments] == [20, 40, 40, 80, 20, 30]
    assert sum(s["ms"] for s in segments) == 230
    assert segments[4]["what"] == "task launch"

    # No progress yet for the next batch: its start is unknown, so two segments become one, and the sum holds.
    merged = boundaries.breakdown({**moments, "next_start": None})
    assert [s["ms"] for s in merged] == [20, 40, 120, 20, 30]
    assert " + " in merged[2]["what"] and sum(s["ms"] for s in merged) == 230


def test_a_run_without_a_boundary_after_the_warm_up_reports_none():
    out = steady_stream(T0, T0 + 12_000, 2, {})
    batches = [Batch(0, T0 - 2_000, {"triggerExecution": 600_000})]  # a 5-minute batch still running
    result = boundaries.analyse(out, [b for b in batches if b.end_ms <= out[-1]], 300_000, T0 + 1_000)
    assert result["boundaries_crossed"] == 0
    assert result["stall_median_ms"] is None and result["overrun_median_ms"] is None


def test_segment_medians_over_boundaries():
    a = {"segments": [{"from": "last_out", "to": "tasks_end", "what": "tasks finish", "ms": 10}]}
    b = {"segments": [{"from": "last_out", "to": "tasks_end", "what": "tasks finish", "ms": 30}]}
    (seg,) = boundaries.segment_medians([a, b])
    assert (seg["median_ms"], seg["min_ms"], seg["max_ms"], seg["n"]) == (20, 10, 30, 2)


def test_timeline_buckets_and_fine_tail_cdf():
    out = [T0 + i for i in range(0, 1000, 10)]
    t = boundaries.timeline(out, [1.0] * 99 + [500.0], T0)
    assert t["bucket_s"] == 0.1 and len(t["t_s"]) == 10 and max(t["max_ms"]) == 500.0
    cdf = boundaries.cdf(list(range(1, 10_001)))
    percentiles = [p for p, _ in cdf]
    assert 99.9 in percentiles and percentiles[-1] == 100 and percentiles == sorted(percentiles)
    assert math.isclose(dict((p, v) for p, v in cdf)[50], 5000.5)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--rate", "0"], "argument --rate: must be a finite number above 0"),
        (["--rate", "nan"], "argument --rate: must be a finite number above 0"),
        (["--rate=-5"], "argument --rate: must be a finite number above 0"),
        (["--batch-duration", "1 second"], "under the 5 seconds Spark accepts"),
        (["--batch-duration", "5 seconds", "--batch-duration", "2 seconds"], "INVALID_STREAMING_REAL_TIME_MODE"),
        (["--batch-duration", "soon"], "cannot read the duration"),
        # The flag's earlier names, which recorded commands use, read into the same setting.
        (["--interval", "soon"], "cannot read the duration"),
        (["--rtm-interval", "soon"], "cannot read the duration"),
        (["--repeat", "0"], "argument --repeat: must be an integer of at least 1"),
        (["--repeat", "2", "--rate", "1000", "--rate", "2000"], "one rate"),
        (["--repeat", "2", "--max-seconds", "1", "--warmup", "5"], "--max-seconds 1"),
    ],
)
def test_bad_input_exits_2_with_one_line_before_starting_anything(args, says, tmp_path):
    cmd = [sys.executable, "scripts/bench.py", "latency", "--json", str(tmp_path / "x.json"), *args]
    done = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "error: " in lines[0] and says in lines[0], done.stderr
    assert not (tmp_path / "x.json").exists()

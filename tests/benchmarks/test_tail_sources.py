"""The ad-attribution benchmark's repeated rows and tail attribution, on recorded inputs (no Spark, no lab): a GC log
line becomes a pause at the right wall time, a slow record is set against the pause it overlapped or the generator
lag it followed, and three runs become one row with the median and the range, as the published table shows them."""

from rtm_lab.benchmarks import latency_report
from rtm_lab.benchmarks.latency import combine_repeats
from rtm_lab.benchmarks.tail_sources import attribute_tail, gc_pauses, gc_summary

G1_LOG = """\
[0.015s] Using G1
[2.500s] GC(0) Pause Young (Normal) (G1 Evacuation Pause) 24M->8M(256M) 12.500ms
[3.000s] GC(1) Concurrent Mark Cycle
[9.000s] GC(2) Pause Remark 30M->30M(256M) 2.000ms
"""


def test_gc_log_pauses_are_placed_on_the_wall_clock():
    # A pause line is written when the pause ends: the 12.5 ms pause logged at uptime 2.5 s began at 2487.5 ms.
    assert gc_pauses(G1_LOG, jvm_start_ms=1_000_000) == [[1_002_487.5, 12.5], [1_008_998.0, 2.0]]
    summary = gc_summary(gc_pauses(G1_LOG, 1_000_000), 1_000_000, 1_005_000)
    assert summary == {"gc_pause_count": 1, "gc_pause_total_ms": 12.5, "gc_pause_max_ms": 12.5}


def test_slow_records_are_set_against_gc_pauses_and_generator_lag_or_left_unattributed():
    rate, start = 1000.0, 0.0
    samples = [(100, 2.0), (2000, 300.0), (5000, 250.0), (8000, 400.0)]  # (event id, latency ms); id / rate = s
    pauses = [[2100.0, 50.0]]  # in flight: record 2000 was produced at 2000 ms and out at 2300 ms
    lag = [[5000, 40.0], [6000, 0.0]]  # the generator ran 40 ms behind at 5 s
    tail = attribute_tail(samples, rate, start, threshold_ms=100.0, pauses=pauses, lag_timeline=lag)
    assert tail == {
        "threshold_ms": 100.0,
        "records": 3,
        "in_flight_during_gc_pause": 1,
        "produced_while_generator_lagged": 1,
        "not_attributed": 1,
    }


def _run(p50: float, p99: float, gc_max: float, behind_s: float) -> dict:
    tail = {
        "threshold_ms": p99,
        "records": 10,
        "in_flight_during_gc_pause": 2,
        "produced_while_generator_lagged": 1,
        "not_attributed": 7,
        "gc_logged": True,
    }
    return {
        "n": 1000,
        "missing": 0,
        "p50_ms": p50,
        "p95_ms": p50 * 2,
        "p99_ms": p99,
        "p99.9_ms": p99 * 2,
        "max_ms": p99 * 3,
        "gc_pause_max_ms": gc_max,
        "producer_behind_max_s": behind_s,
        "tail": tail,
        "quantiles_ms": [1.0] * 101,
    }


def test_three_runs_become_one_row_with_the_median_and_the_range():
    runs = [_run(6, 84, 10, 0.01), _run(7, 353, 30, 0.2), _run(6, 213, 20, 0.05)]
    row = combine_repeats(runs)
    assert row["figures"]["p99_ms"] == {"median": 213, "min": 84, "max": 353, "values": [84, 353, 213]}
    assert row["figures"]["p50_ms"]["median"] == 6
    assert row["representative_repeat"] == 2 and row["p99_ms"] == 213  # the run nearest the median p99
    assert all("quantiles_ms" not in r for r in row["repeats"])

    micro = combine_repeats([_run(400, 700, 5, 0.0), _run(420, 690, 5, 0.0), _run(390, 710, 5, 0.0)])
    result = {
        "pipeline": "ad_attribution",
        "seconds": 60.0,
        "warmup_s": 5.0,
        "settings": {
            "rtm_interval": "5 minutes",
            "spark_master": "local[4]",
            "partitions": 2,
            "kafka_fetch_max_wait_ms": 10,
            "producer_linger_ms": 0,
        },
        "runs": [{"rate": 1000.0, "modes": {"microbatch_500ms": micro, "realtime": row}}],
        "machine": {"cores": 2, "memory_gib": 8, "cpu_model": "test", "os": "Linux"},
        "versions": {"spark": "4.3.0"},
        "command": "python scripts/bench.py latency --pipeline ad_attribution --repeat 3 --json x.json",
        "timestamp": "2026-11-25T00:00:00Z",
        "elapsed_s": 1.0,
    }
    table = latency_report.markdown(result)
    assert "3 runs per mode, the median with the range over the runs in brackets" in table
    assert "| 6.0 (6.0–7.0) |" in table and "| 213 (84.0–353) |" in table
    # The ratio sentence is made of medians: 400 / 6.
    assert "micro-batch (500 ms) p50 / real-time p50: **67x** (medians of 3 runs each)" in table
    assert "of the 30 records above each run's p99 (3 run(s)), 6 were in flight during a GC pause" in table
    assert "21 match neither: not attributed" in table

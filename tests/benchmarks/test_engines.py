"""`bench.py engines`: how outputs are paired with inputs (no services), and a --quick run on both engines.

The quick run asserts what holds on any machine: every output of both engines arrived, the two engines' outputs are
the same, each run recorded its CPU, memory and run record, and the table and plot were written. No latency is
asserted: the figures are the benchmark's, in docs/results/engines.json.
"""

import json
import subprocess
import sys

import pytest

from rtm_lab.benchmarks import engine_output, engine_run, engines, engines_report
from rtm_lab.paths import PROJECT_ROOT
from rtm_lab.topics import Record


def rec(value: dict, ts: int, partition: int = 0, offset: int = 0, key: str | None = None) -> Record:
    key = key if key is not None else str(value.get("id", value.get("user")))
    return Record(key.encode(), json.dumps(value).encode(), partition, offset, ts, 1)


def test_a_redelivered_id_is_paired_with_its_own_copy():
    source = [rec({"id": 1, "user": "u"}, 100, offset=0), rec({"id": 1, "user": "u"}, 200, offset=1)]
    sink = [rec({"id": 1, "user": "U"}, 110, offset=0), rec({"id": 1, "user": "U"}, 230, offset=1)]
    measured = engine_output.measure("transform", source, sink, lambda v: v["id"], lambda v: True)
    assert measured.latencies == [(1, 10), (1, 30)]
    assert (measured.expected, measured.missing, measured.duplicates) == (2, 0, 0)


def test_dedup_pairs_each_kept_id_with_its_first_arrival_and_counts_extras_as_duplicates():
    source = [rec({"id": 1}, 100, offset=0), rec({"id": 1}, 150, offset=1), rec({"id": 2}, 160, offset=2)]
    sink = [rec({"id": 1}, 120, offset=0), rec({"id": 1}, 170, offset=1)]
    measured = engine_output.measure("dedup", source, sink, lambda v: v["id"], lambda v: True)
    assert measured.latencies == [(1, 20)]
    assert (measured.expected, measured.missing, measured.duplicates) == (2, 1, 1)


def test_a_folded_count_update_answers_every_event_it_counts():
    # Three events of u arrive at 100, 105, 130 (two partitions); the engine writes count 2 at 140, count 3 at 150.
    source = [rec({"id": 1, "user": "u"}, 100, 0, 0), rec({"id": 2, "user": "u"}, 105, 1, 0)]
    source.append(rec({"id": 3, "user": "u"}, 130, 0, 1))
    sink = [rec({"user": "u", "count": 2}, 140, 0, 0, "u"), rec({"user": "u", "count": 3}, 150, 0, 1, "u")]
    measured = engine_output.measure("count", source, sink, lambda v: v["id"], lambda v: True)
    assert measured.latencies == [(1, 40), (2, 35), (3, 20)]
    assert (measured.expected, measured.missing, measured.wrong) == (1, 0, [])


def test_a_count_that_ends_short_is_missing():
    source = [rec({"id": i, "user": "u"}, 100 + i, 0, i) for i in range(3)]
    sink = [rec({"user": "u", "count": 2}, 140, 0, 0, "u")]
    measured = engine_output.measure("count", source, sink, lambda v: v["id"], lambda v: True)
    assert measured.missing == 1 and measured.wrong == ["u: final count 2, 3 events"]
    assert [seq for seq, _ in measured.latencies] == [0, 1]


def test_the_digest_ignores_broker_times_and_order_but_not_content():
    a = [rec({"id": 1, "source_ts_ms": 5}, 10, offset=0), rec({"id": 2, "source_ts_ms": 6}, 11, offset=1)]
    b = [rec({"id": 2, "source_ts_ms": 9}, 20, 1, 0), rec({"id": 1, "source_ts_ms": 8}, 21, 1, 1)]
    assert engine_output.digest("transform", a) == engine_output.digest("transform", b)
    assert engine_output.digest("transform", a) != engine_output.digest("transform", a[:1])


def test_the_input_is_a_pure_function_of_the_sequence_with_one_redelivery_in_ten():
    events = [engine_run.engine_event(s) for s in range(20)]
    assert events == [engine_run.engine_event(s) for s in range(20)]
    assert [e["id"] for e in events] == [*range(9), 4, *range(10, 19), 14]
    assert engine_run.expected_outputs("transform", 20) == engine_run.PRIMING + 20
    assert engine_run.expected_outputs("dedup", 20) == engine_run.PRIMING + 18
    assert engine_run.expected_outputs("count", 20) is None


def test_only_patterns_pick_cells_and_the_engines_alternate():
    cells = engines.matrix([1000, 10000], 3, list(engine_run.PIPELINES), 10000)
    assert len(cells) == 2 * 3 * 4 * 2 + 4 * 2
    assert [c[0] for c in cells[:4]] == ["spark", "flink", "spark", "flink"]
    picked = [engines.run_id(*c) for c in cells if engines.selected(c, ["flink/count/*/default"])]
    assert picked == ["flink/count/10000/default/1"]
    assert sum(engines.selected(c, ["*/*/10000"]) for c in cells) == 3 * 4 * 2 + 4 * 2


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_quick_run_both_engines_agree_and_lose_nothing(lab, flink_venv, tmp_path):
    out = tmp_path / "engines.json"
    done = subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "scripts" / "bench.py"), "engines", "--quick", "--json", str(out)],
        capture_output=True, text=True, timeout=840, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert sorted(result["runs"]) == sorted(
        engines.run_id(e, "transform", 1000, "tuned", 1) for e in ("spark", "flink")
    )
    for run in result["runs"].values():
        assert run["missing"] == 0 and run["n"] > 0, run["engine"] + "/" + run["pipeline"]
        assert run["cpu_s"] > 0 and run["rss_peak_mib"] > 100
        assert run["load_average"]["start"] and run["versions"]["spark"]
    assert engines_report.disagreements(result) == []
    assert "| transform | 1,000 | tuned | Flink |" in out.with_suffix(".md").read_text()
    assert engines_report.plot_path(out).stat().st_size > 10_000
    # A second invocation finds every cell done and runs nothing.
    again = subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "scripts" / "bench.py"), "engines", "--quick", "--json", str(out), "--list"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert again.stdout.count("(in the results file)") == 2


def test_only_the_enrichment_drops_events_by_tier():
    """The transform writes every event, tiered or not: `kept` filters the enrichment's inputs only."""
    source = [rec({"id": 1, "user": "untiered"}, 100)]
    sink = [rec({"id": 1, "user": "UNTIERED"}, 105)]
    transform = engine_output.measure("transform", source, sink, lambda v: v["id"], lambda v: False)
    assert (transform.latencies, transform.duplicates) == ([(1, 5)], 0)
    enrich = engine_output.measure("enrich", source, [], lambda v: v["id"], lambda v: False)
    assert (enrich.expected, enrich.missing) == (0, 0)


def test_a_count_update_written_again_after_a_restart_counts_as_replayed():
    from rtm_lab.benchmarks import engine_recovery

    sink = [rec({"user": "a", "count": c}, 100 + i, offset=i, key="a") for i, c in enumerate([1, 2, 3, 2, 3, 4])]
    assert engine_recovery.replayed_counts(sink) == 2


def test_the_newest_completed_flink_checkpoint_is_the_one_restored(tmp_path):
    from rtm_lab.benchmarks import engine_recovery

    assert engine_recovery.latest_flink_checkpoint(tmp_path) is None
    for n in (2, 10, 11):
        (tmp_path / "job" / f"chk-{n}").mkdir(parents=True)
    for n in (2, 10):  # chk-11 is still being written: no _metadata yet
        (tmp_path / "job" / f"chk-{n}" / "_metadata").write_text("x")
    assert engine_recovery.latest_flink_checkpoint(tmp_path).name == "chk-10"


def test_a_capacity_step_is_held_only_with_the_generator_at_rate_the_p99_under_the_bound_and_nothing_lost():
    from rtm_lab.benchmarks import engine_capacity, held_rate

    step = {"rate": 10000, "achieved_rate": 9990.0, "p99_ms": 40.0, "missing": 0, "verdict": "fell behind"}
    assert engine_capacity.verdict(step) == "held"  # judged from the figures, not from a stored verdict
    assert engine_capacity.verdict({**step, "p99_ms": float(held_rate.BOUND_MS)}) == "not held"
    assert engine_capacity.verdict({**step, "missing": 1}) == "not held"
    assert engine_capacity.verdict({**step, "achieved_rate": 9000.0}) == "generator short"
    assert engine_capacity.verdict({**step, "p99_ms": None}) == "no p99 recorded"
    steps = [
        {**step, "rate": r, "achieved_rate": r, "p99_ms": p} for r, p in ((5000, 10.0), (10000, 3000.0), (20000, 50.0))
    ]
    assert engine_capacity.highest_held(steps) == 20000
    # Unanswered events count as infinitely late: 3 of 100 missing put the 98th percentile out of reach.
    assert engine_run._p98_with_unanswered([5.0] * 97, 100) == float("inf")
    assert engine_run._p98_with_unanswered([5.0] * 97 + [9.0, 9.0], 100) == 9.0

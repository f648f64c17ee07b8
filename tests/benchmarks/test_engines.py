"""`bench.py engines`: how outputs are paired with inputs (no services), and a --quick run on both engines.

The quick run asserts what holds on any machine: every output of both engines arrived, the two engines' outputs are
the same, each run recorded its CPU, memory and run record, and the table and plot were written. No latency is
asserted: the figures are the benchmark's, in docs/results/engines.json.
"""

import json
import os
import subprocess
import sys

import pytest

from rtm_lab import cpu_pinning
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
    assert events[9]["user"] == events[4]["user"]  # a redelivery repeats its user too
    assert engine_run.expected_outputs("transform", 20) == engine_run.PRIMING + 20
    assert engine_run.expected_outputs("dedup", 20) == engine_run.PRIMING + 18
    assert engine_run.expected_outputs("count", 20) is None


def test_only_patterns_pick_cells_and_the_engines_take_turns_going_first():
    cells = engines.matrix([1000, 10000], 3, list(engine_run.PIPELINES), 10000)
    # 4 pipelines x 2 engines, plus Flink's heap variant on the 2 stateful ones, per rate and repeat; defaults once.
    assert len(cells) == 2 * 3 * (4 * 2 + 2) + 4 * 2
    firsts = {}
    for i, cell in enumerate(cells):
        engine, pipeline, rate, profile, repeat = cell
        if profile != "tuned-heap" and (i == 0 or cells[i - 1][1:] != cell[1:] or cells[i - 1][3] == "tuned-heap"):
            firsts[(pipeline, rate, profile, repeat)] = engine
    tuned = [engine for (_, _, profile, _), engine in firsts.items() if profile == "tuned"]
    assert tuned.count("spark") == tuned.count("flink") == 2 * 3 * 4 // 2
    for pipeline in engine_run.PIPELINES:  # from one repeat to the next, the other engine goes first
        assert {firsts[(pipeline, 1000, "tuned", r)] for r in (1, 2)} == {"spark", "flink"}
    assert [c for c in cells if c[3] == "tuned-heap"][:2] == [
        ("flink", "count", 1000, "tuned-heap", 1),
        ("flink", "dedup", 1000, "tuned-heap", 1),
    ]
    picked = [engines.run_id(*c) for c in cells if engines.selected(c, ["flink/count/*/default"])]
    assert picked == ["flink/count/10000/default/1"]
    assert sum(engines.selected(c, ["*/*/10000"]) for c in cells) == 3 * (4 * 2 + 2) + 4 * 2


def test_a_results_file_refuses_runs_of_another_harness_placement_or_machine():
    from rtm_lab import machine

    here = {"harness": engines.HARNESS, "placement": "shared", "machine": machine.describe()}
    assert engines.refusal({"runs": {"a": here}}, "shared") is None
    assert "another harness" in engines.refusal({"runs": {"a": {**here, "harness": None}}}, "shared")
    assert "not isolated" in engines.refusal({"runs": {"a": here}}, "isolated")
    elsewhere = {**here, "machine": {**here["machine"], "cpu_model": "another CPU"}}
    assert "was measured on" in engines.refusal({"runs": {"a": elsewhere}}, "shared")
    both = {"runs": {"a": {**here, "engine": "spark"}, "b": {**elsewhere, "engine": "flink"}}}
    with pytest.raises(ValueError, match="2 machines"):
        engines_report.markdown(both)


def test_the_per_second_series_buckets_latency_by_the_events_second_and_records_by_broker_time():
    source = [rec({"id": i}, 1_000 + 250 * i, offset=i) for i in range(8)]  # 4 events a second for 2 s
    sink = [rec({"id": i}, 1_010 + 350 * i, offset=i) for i in range(8)]  # the last one out in the third second
    latencies = [(i, 10.0 + 10 * i) for i in range(8)]
    rows = engine_run.per_second(latencies, 4.0, source, sink, 1_000)
    assert [row[0] for row in rows] == [0, 1, 2]
    assert rows[0][3] == 40.0 and rows[1][3] == 80.0  # the worst of each second's events
    assert [row[4] for row in rows] == [4, 4, 0]
    assert [row[5] for row in rows] == [3, 3, 2]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_quick_run_both_engines_agree_and_lose_nothing(lab, flink_venv, tmp_path):
    out = tmp_path / "engines.json"
    command = [sys.executable, str(PROJECT_ROOT / "scripts" / "bench.py"), "engines", "--quick", "--json", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=840, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert sorted(result["runs"]) == sorted(engines.run_id(e, "count", 1000, "tuned", 1) for e in ("spark", "flink"))
    for run in result["runs"].values():
        assert run["missing"] == 0 and run["n"] > 0, run["engine"] + "/" + run["pipeline"]
        assert run["cpu_s"] > 0 and run["rss_peak_mib"] > 100
        assert run["load_average"]["start"] and run["versions"]["spark"]
        # Shared: the engine's processes may run on every core; each core's busy share is recorded.
        assert run["placement"] == "shared" and run["engine_cores"] == list(range(os.cpu_count() or 1))
        assert sorted(run["core_busy"]) == ["0", "1"]
        # Read back from the running engine: RocksDB's library loaded, the collector its final flags select.
        back = run["readback"]
        assert back["rocksdb_library_loaded"] is True
        assert back["gc_selected"] == ["G1"]  # from the JVM's own final flags (jcmd VM.flags)
        assert run["series"] and run["series_fields"][:3] == ["second", "p50_ms", "p99_ms"]
        assert sum(run["source_partition_records"]) == run["sent"] + engine_run.PRIMING
    spark, flink = result["runs"]["spark/count/1000/tuned/1"], result["runs"]["flink/count/1000/tuned/1"]
    assert spark["readback"]["state_store"] == engine_run.ROCKSDB_PROVIDER
    assert "Exchange" in spark["readback"]["plan_nodes"]
    assert (flink["readback"]["state_backend"], flink["readback"]["checkpoint_mode"]) == (
        "EmbeddedRocksDBStateBackend",
        "at_least_once",
    )
    # Flink's own count of the records each GroupAggregate subtask received equals the partitioner's derivation.
    assert flink["flink_counted_task_records"] == flink["task_shares"]["flink_records"]
    assert engines_report.disagreements(result) == []
    assert "| count | 1,000 | tuned | Flink |" in out.with_suffix(".md").read_text()
    assert engines_report.plot_path(out).stat().st_size > 10_000
    assert engines_report.series_plot_path(out).stat().st_size > 10_000
    # A second invocation finds every cell done and runs nothing.
    again = subprocess.run([*command, "--list"], capture_output=True, text=True, timeout=60, check=False)
    assert again.stdout.count("(in the results file)") == 2
    # Another placement is refused: one file, one placement.
    other = subprocess.run([*command, "--placement", "isolated"], capture_output=True, text=True, timeout=60,
                           check=False)  # fmt: skip
    assert other.returncode == 2 and "holds shared runs, not isolated" in other.stderr


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


def test_a_run_holds_its_rate_only_with_the_generator_at_rate_the_p99_under_the_bound_and_nothing_lost():
    from rtm_lab.benchmarks import held_rate

    def verdict(p99_ms=40.0, lost=0, reached=9990.0):
        return held_rate.verdict(p99_ms, lost, 10000, reached)

    assert verdict() == "held"
    assert verdict(p99_ms=float(held_rate.BOUND_MS)) == "not held"
    assert verdict(lost=1) == "not held"
    assert verdict(reached=9000.0) == "generator short"
    assert verdict(p99_ms=None) == "no p99 recorded"
    # Unanswered events count as infinitely late: 3 of 100 missing put the 98th percentile out of reach.
    assert engine_run._p98_with_unanswered([5.0] * 97, 100) == float("inf")
    assert engine_run._p98_with_unanswered([5.0] * 97 + [9.0, 9.0], 100) == 9.0


def test_a_read_back_cut_short_is_an_error_never_events_lost(lab, kafka_topic):
    """A 40,000 events/s run's read-back once stopped at its fixed 120 s with 142,010 outputs unread, and the run
    recorded them as lost. The read-back now gets time for its volume, and a shortfall stops the run instead."""
    from rtm_lab import topics
    from rtm_lab.errors import LabError

    topic = kafka_topic(partitions=1)
    topics.produce_json(lab.kafka_bootstrap, topic, [{"id": i} for i in range(5)])
    assert [json.loads(r.value)["id"] for r in engine_run.read_back(lab.kafka_bootstrap, topic, 5)] == list(range(5))
    with pytest.raises(LabError, match=r"read back 5 of the 6 records .* the read-back fell short, not the engine"):
        engine_run.read_back(lab.kafka_bootstrap, topic, 6, timeout_s=2.0)
    # Time for the volume: 4.8 million records get 480 s, a small read the two-minute floor.
    assert engine_run.read_back_timeout_s(4_800_010) > 480 and engine_run.read_back_timeout_s(10) == 120


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="pinning apart needs two cores")
def test_the_isolated_placement_pins_this_harness_and_the_broker_to_core_1_for_the_run_only():
    broker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])  # stands in for the broker
    try:
        with engine_run.placed("isolated", broker.pid) as engine_cores:
            assert engine_cores == {0}
            assert cpu_pinning.cores_of(os.getpid()) == cpu_pinning.cores_of(broker.pid) == {1}
        every = set(range(os.cpu_count() or 1))
        assert cpu_pinning.cores_of(os.getpid()) == cpu_pinning.cores_of(broker.pid) == every
        with engine_run.placed("shared", broker.pid) as engine_cores:
            assert engine_cores is None and cpu_pinning.cores_of(broker.pid) == every
    finally:
        broker.kill()
        broker.wait()

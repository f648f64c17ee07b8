"""The per-task capacity search (rtm_lab.benchmarks.per_task_search) on synthetic runs: it brackets a known limit
within 10 % at both bounds, resumes an unfinished step, stops where the generator falls short, and derives the
capacity part the planner reads. No Spark: the search is a pure function of the runs so far (one test reads the
lab's PostgreSQL)."""

import math

import pytest

from rtm_lab.benchmarks import per_task_report
from rtm_lab.benchmarks.per_task_search import (
    BRACKET,
    GENERATOR_LIMIT,
    SEARCH_DONE,
    bracket,
    capacity,
    decided,
    next_rate,
    steps,
)


def fake_run(shape: str, rate: float, limit_100: float, limit_1000: float, reached: float | None = None) -> dict:
    """A run of a task whose p99 is 50 ms up to limit_100, 500 ms up to limit_1000, 5 s beyond."""
    p99 = 50.0 if rate <= limit_100 else 500.0 if rate <= limit_1000 else 5000.0
    return {"shape": shape, "rate": rate, "p99_ms": p99, "lost": 0, "reached_rate": reached or rate}


def search(
    limit_100: float, limit_1000: float, start: float, runs_per_step: int = 3, shape: str = "stateless"
) -> list[dict]:
    runs: list[dict] = []
    for _ in range(200):
        rate, _why = next_rate(runs, start, runs_per_step)
        if rate is None:
            return runs
        runs.append(fake_run(shape, rate, limit_100, limit_1000))
    raise AssertionError("the search did not end")


@pytest.mark.parametrize(
    ("limit_100", "limit_1000", "start"), [(7300, 9100, 5000), (1200, 40000, 5000), (60000, 61000, 1000)]
)
def test_search_brackets_both_limits_within_10_percent(limit_100, limit_1000, start):
    runs = search(limit_100, limit_1000, start)
    by_rate = steps(runs, 1)
    for bound, limit in ((100, limit_100), (1000, limit_1000)):
        low, high = bracket(decided(runs, bound, 3))
        assert low is not None and high is not None
        assert low <= limit < high
        assert high / low <= BRACKET + 0.01  # three significant figures of rounding
        assert len(by_rate[low]) == 3, "a held step has its 3 runs"
    # A step over both limits is settled by its first run.
    assert all(len(v) == 1 for rate, v in by_rate.items() if rate > limit_1000)


def test_an_unfinished_step_is_resumed_first():
    runs = [fake_run("stateless", 5000, 7000, 9000) for _ in range(2)]
    assert next_rate(runs, 5000) == (5000, "more runs for 100 ms")


def test_the_search_stops_where_the_generator_falls_short():
    runs = [fake_run("stateless", 5000, 7000, 9000, reached=4000)]
    assert next_rate(runs, 5000) == (None, GENERATOR_LIMIT)


def test_one_failed_run_settles_the_step():
    runs = [fake_run("stateless", 5000, 7000, 9000)]
    runs[0]["lost"] = 1
    assert bracket(decided(runs, 100, 3)) == (None, 5000)
    assert next_rate(runs, 5000)[0] == 2500


def test_capacity_is_what_the_planner_reads():
    runs = search(7300, 9100, 5000)
    for run in runs:
        run["rss_peak_mib"] = 600.0
    cap = capacity(runs)["stateless"]
    assert cap["100"]["held_rate"] <= 7300 < cap["100"]["not_held_rate"]
    assert cap["100"]["runs_at_held_rate"] == 3
    assert math.isclose(cap["rss_peak_mib"], 600.0)
    assert next_rate(runs, 5000) == (None, SEARCH_DONE)


def test_the_table_shows_each_step_and_the_capacity():
    runs = search(7300, 9100, 5000)
    result = {
        "settings": {
            "runs_per_step": 3,
            "seconds": 60,
            "warmup_s": 10,
            "pinned": {"engine_cores": [0], "harness_cores": [1]},
        },
        "runs": [{**r, "started": "2026-11-27T12:00:00Z", "timestamp": "2026-11-27T12:01:10Z"} for r in runs],
        "capacity": capacity(runs),
        "machine": {"cores": 2, "memory_gib": 8, "cpu_model": "test", "os": "Linux"},
        "versions": {"spark": "4.3.0"},
        "command": "python scripts/bench.py per-task",
    }
    text = per_task_report.markdown(result)
    low = result["capacity"]["stateless"]["100"]["held_rate"]
    assert f"| stateless | {low:,.0f} held," in text
    assert text.count("| stateless | ") == 1 + len(steps(runs, 1))


def test_the_ceilings_table_sets_two_tasks_beside_the_whole_query():
    per_task = {"capacity": {"stateless": {"1000": {"held_rate": 9000.0}}}}

    def run(rate, p99):
        return {
            "engine": "spark",
            "pipeline": "transform",
            "rate": rate,
            "p99_ms": p99,
            "lost": 0,
            "reached_rate": rate,
        }

    # Three runs a step, as the engine capacity search makes them: 20,000 held, 22,000 not (10 % apart).
    searched = {
        "settings": {"runs_per_step": 3},
        "runs": [run(r, p) for r, p in ((10000, 80), (20000, 230), (22000, 3830)) for _ in range(3)],
    }
    text = per_task_report.ceilings_markdown(per_task, searched)
    assert "| stateless | 9,000 | 18,000 | transform | 20,000 | 22,000 |" in text
    assert "| groupby-count | — | — | count | — | — |" in text


def pinned_result(runs: list[dict]) -> dict:
    """A results file's parts the table reads: the runs, their capacity, the engine on core 0 and the harness on 1."""
    return {
        "runs": runs,
        "capacity": capacity(runs),
        "settings": {"pinned": {"engine_cores": [0], "harness_cores": [1]}},
    }


def test_the_table_names_the_core_that_ran_full_at_the_limit():
    runs = search(7300, 9100, 5000, shape="postgres-jvm")
    low_fail = capacity(runs)["postgres-jvm"]["100"]["not_held_rate"]
    for run in runs:
        # JSON keys: core numbers come back as strings from the results file.
        run["core_busy"] = {"0": 0.55, "1": 0.97} if run["rate"] == low_fail else {"0": 0.3, "1": 0.4}
    result = pinned_result(runs)
    assert per_task_report.limiting_core(result, "postgres-jvm") == "harness core (55% / 97%)"


def test_the_table_names_the_full_core_at_each_bound_and_none_where_nothing_above_was_decided():
    runs = search(7300, 9100, 5000, shape="postgres-jvm")
    cap = capacity(runs)["postgres-jvm"]
    low_fail, high_fail = cap["100"]["not_held_rate"], cap["1000"]["not_held_rate"]
    assert low_fail != high_fail, cap
    for run in runs:
        run["core_busy"] = {"0": 0.1, "1": 0.3} if run["rate"] == low_fail else {"0": 0.25, "1": 0.93}
    result = pinned_result(runs)
    assert per_task_report.limiting_core(result, "postgres-jvm", 100) == "neither core (10% / 30%)"
    assert per_task_report.limiting_core(result, "postgres-jvm", 1000) == "harness core (25% / 93%)"
    result["capacity"]["postgres-jvm"]["1000"]["not_held_rate"] = None  # a floor: no step above it decided
    assert per_task_report.limiting_core(result, "postgres-jvm", 1000) == "—"


def test_the_full_core_is_read_over_the_measured_minute_when_the_run_recorded_it():
    """The whole run's busy share includes the start and the read-back; the measured minute's does not."""
    runs = search(7300, 9100, 5000, shape="stateless")
    low_fail = capacity(runs)["stateless"]["100"]["not_held_rate"]
    for run in runs:
        run["core_busy"] = {"0": 0.5, "1": 0.75}
        if run["rate"] == low_fail:
            run["core_busy_measured"] = {"0": 0.3, "1": 1.0}
    result = pinned_result(runs)
    assert per_task_report.limiting_core(result, "stateless") == "harness core (30% / 100%)"


def test_a_bound_with_nothing_above_it_decided_reads_as_a_floor_not_a_bracket():
    # Stopped mid-search: 6,490 held at both bounds, 7,070 not held at 100 ms after two runs, open at 1 s.
    runs = [fake_run("stateless", 6490, 7000, 30000) for _ in range(3)]
    runs += [fake_run("stateless", 7070, 7000, 30000) for _ in range(2)]
    cells = per_task_report._capacity_rows({"capacity": capacity(runs), "runs": runs, "settings": {}})[0]
    assert cells[1] == "6,490 held, 7,070 not (within 8.9 %)"
    assert cells[2] == "6,490 held (a floor: no rate above it decided)"


def test_capacity_names_the_core_that_ran_full_at_the_rate_not_held():
    pinned = {"engine_cores": [0], "harness_cores": [1]}
    held = [{**fake_run("stateless", 6490, 7000, 7000), "core_busy_measured": {"0": 0.3, "1": 0.99}} for _ in range(3)]
    failed = [{**fake_run("stateless", 7070, 7000, 7000), "core_busy_measured": {"0": 0.28, "1": 1.0}}]
    cap = capacity(held + failed, pinned=pinned)["stateless"]
    assert cap["100"]["full_cores"] == ["harness core"]
    assert cap["1000"]["full_cores"] == ["harness core"]
    assert "full_cores" not in capacity(held + failed)["stateless"]["100"], "no pinning, no core named"


@pytest.mark.parametrize("shape", ["postgres-jvm", "ad-attribution"])
def test_the_sink_and_processor_harnesses_produce_through_warm_up_and_the_measured_seconds(monkeypatch, shape):
    """These two harnesses count their warm-up inside the production's `seconds` (the engine harness does not). Given
    only the measured seconds, a run produced for 60 s, left its first 60 s out and measured nothing."""
    from types import SimpleNamespace

    from rtm_lab import snippet_jar, spark
    from rtm_lab.benchmarks import latency_child, per_task, sink

    produced: list[float] = []

    def fake_scenario(_spark, _state, scenario, _say, prefix):
        produced.append(scenario.seconds)
        assert scenario.warmup_s == 60
        return {"e2e_p99_ms": 1.0, "e2e_p50_ms": 1.0, "e2e_max_ms": 1.0, "e2e_samples": 1, "lost": 0,
                "produced_rate": 1.0}  # fmt: skip

    def fake_child(_mode, _bootstrap, _rate, seconds, warmup, _cfg, _trace, _extra):
        produced.append(seconds)
        assert warmup == 60
        return {"p99_ms": 1.0, "n": 1, "missing": 0}

    monkeypatch.setattr(sink, "run_scenario", fake_scenario)
    monkeypatch.setattr(spark, "spark_session", lambda *a, **k: SimpleNamespace(stop=lambda: None))
    monkeypatch.setattr(snippet_jar, "session_jars", lambda: "")
    monkeypatch.setattr(latency_child, "run_child", fake_child)
    monkeypatch.setattr(per_task, "postgres_checkpoints", lambda dsn: 0)
    state = SimpleNamespace(
        kafka=SimpleNamespace(pid=1), postgres=SimpleNamespace(pid=2), kafka_bootstrap="x:1", postgres_dsn="x"
    )
    harness = per_task.Harness(state=state, seconds=60, warmup=60, say=print, pin=False)
    record = harness.run(shape, 2000.0)
    assert produced == [120], "the production covers the warm-up and then the measured seconds"
    assert record["samples"] == 1


def test_the_postgres_checkpoint_count_reads_from_the_running_server(lab):
    """The count the Postgres writer's runs record beside their tail, read from the lab's real server's statistics
    view (pg_stat_bgwriter before PostgreSQL 17, pg_stat_checkpointer from it)."""
    from rtm_lab.benchmarks import per_task

    first = per_task.postgres_checkpoints(lab.postgres_dsn)
    assert isinstance(first, int) and first >= 0
    assert per_task.postgres_checkpoints(lab.postgres_dsn) >= first


def test_a_results_file_draws_its_plot_under_its_own_name(tmp_path):
    """A second search (the ad processor with a longer warm-up) is written beside the table's: its plot must not draw
    over per-task-throughput.png."""
    import json

    from rtm_lab.benchmarks import per_task
    from rtm_lab.paths import PROJECT_ROOT

    result = json.loads((PROJECT_ROOT / "docs" / "results" / "per-task-throughput.json").read_text())
    result["runs"] = [r for r in result["runs"] if r["shape"] == "ad-attribution"]
    per_task.write(result, tmp_path / "per-task-other.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "per-task-other.json",
        "per-task-other.md",
        "per-task-other.png",
    ]

"""`bench.py engine-capacity` without services: the search on synthetic runs (3 runs every step, a bracket within
10 %, a short generator as the machine's ceiling), the table that gives both engines' medians at each step, and
`--help` and `--list`."""

import json

import pytest
from bench_help import bench_help

from rtm_lab import cli
from rtm_lab.benchmarks import engine_capacity_report, engine_capacity_search, engines_report, held_rate
from rtm_lab.errors import LabError

SETTINGS = {"start_rate": 10_000.0, "runs_per_step": 3, "seconds": 60.0, "warmup_s": 5.0, "placement": "shared"}


def fake(engine: str, rate: float, limit: float, machine_limit: float = 1e9, pipeline: str = "transform") -> dict:
    """A run of an engine whose p99 is 20 ms up to `limit` and 5 s above it, on a machine whose generator reaches
    97 % of any rate above `machine_limit`."""
    reached = rate * (0.97 if rate > machine_limit else 1.0)
    p99 = 20.0 if rate <= limit else 5000.0
    return {"engine": engine, "pipeline": pipeline, "rate": rate, "p99_ms": p99, "lost": 0, "reached_rate": reached,
            "achieved_rate": reached}  # fmt: skip


def search(engine: str, limit: float, machine_limit: float = 1e9) -> list[dict]:
    runs: list[dict] = []
    for _ in range(300):
        rate, _why = engine_capacity_search.next_step(runs, SETTINGS)
        if rate is None:
            return runs
        runs.append(fake(engine, rate, limit, machine_limit))
    raise AssertionError("the search did not end")


def test_the_search_runs_every_step_three_times_and_brackets_the_limit_within_ten_percent():
    runs = search("spark", 27_000)
    by_rate: dict[float, int] = {}
    for run in runs:
        by_rate[run["rate"]] = by_rate.get(run["rate"], 0) + 1
    assert set(by_rate.values()) == {3}, by_rate
    assert list(by_rate)[:4] == [10_000, 20_000, 40_000, 28_300]  # doubled until not held, then narrowed
    got = engine_capacity_report.capacity(runs, 3)
    assert got["held_rate"] <= 27_000 < got["not_held_rate"] <= got["held_rate"] * 1.10
    assert got["limited_by"] == "the engine"


def test_a_step_the_generator_could_not_offer_is_the_ceiling_and_the_summary_says_the_machine_set_it():
    runs = search("flink", 1e9, machine_limit=50_000)
    got = engine_capacity_report.capacity(runs, 3)
    assert got["limited_by"] == "the machine (generator short)"
    assert got["held_rate"] <= 50_000 < got["not_held_rate"] <= got["held_rate"] * 1.10
    short = [r for r in runs if r["rate"] == got["not_held_rate"]]
    assert len(short) == 3 and all(
        held_rate.verdict(r["p99_ms"], r["lost"], r["rate"], r["reached_rate"]) == held_rate.GENERATOR_SHORT
        for r in short
    )


def test_the_table_gives_both_engines_median_p99_at_each_step():
    runs = search("spark", 27_000) + search("flink", 1e9, machine_limit=50_000)
    for n, run in enumerate(runs):  # three different p99s per step: the median is the middle one
        run["p99_ms"] += n % 3
    result = {"settings": {**SETTINGS, "bound_ms": held_rate.BOUND_MS}, "runs": [
        {**r, "machine": {"cores": 2, "memory_gib": 8, "cpu_model": "x", "os": "y"}, "versions": {"pyspark": "4.3.0"},
         "command": "python scripts/bench.py engine-capacity", "started": "2026-11-27T00:00:00Z",
         "timestamp": "2026-11-27T00:01:00Z"} for r in runs]}  # fmt: skip
    text = engine_capacity_report.markdown(result)
    assert "| 10,000 | 3 | 21 (20-22) | 100.0 % | held | 3 | 21 (20-22) | 100.0 % | held |" in text
    assert "| 47,600 | - | - | - | not run |" in text  # real-time mode's search never went there
    assert "- transform, Flink:" in text and "limited by the machine (generator short)" in text
    assert "- transform, Real-time mode:" in text and "limited by the engine" in text
    assert "search open" not in text  # both searches ended within 10 %
    # Stopped after two steps 41 % apart: the summary says the search is not over.
    cut = [r for r in result["runs"] if r["engine"] == "spark" and r["rate"] in (20000.0, 40000.0)]
    assert {r["rate"] for r in cut} == {20000.0, 40000.0}
    assert "(search open: not yet within 10 %)" in engine_capacity_report.markdown({**result, "runs": cut})
    # A step with fewer than its 3 runs shows no figure: a published p99 is a median of 3.
    one = next(r for r in result["runs"] if r["engine"] == "spark" and r["rate"] == 28300.0)
    text = engine_capacity_report.markdown({**result, "runs": [*cut, one]})
    assert "| 28,300 | 1 | - | - | open (1 of 3 runs) |" in text


def test_the_plot_draws_a_panel_per_pipeline_run(tmp_path):
    """The plot beside the table: one panel per pipeline with runs (the deduplication search is in PIPELINES too)."""
    from PIL import Image

    runs = search("spark", 27_000) + [{**r, "pipeline": "dedup"} for r in search("flink", 1e9, machine_limit=50_000)]
    path = tmp_path / "engine-capacity-shared.png"
    engine_capacity_report.plot({"runs": runs}, path)
    one = tmp_path / "one.png"
    engine_capacity_report.plot({"runs": search("spark", 27_000)}, one)
    assert "dedup" in engine_capacity_search.PIPELINES
    with Image.open(path) as two_panels, Image.open(one) as one_panel:
        assert two_panels.width > 1.8 * one_panel.width  # transform and dedup side by side
        assert two_panels.height == one_panel.height


def test_help_and_list_show_each_search_and_its_expected_time(tmp_path, capsys):
    shown = bench_help("engine-capacity", capsys)
    assert "--placement" in shown and "--until HH:MM" in shown
    parser = cli.Parser(prog="engine-capacity")
    engine_capacity_search.add_arguments(parser)
    out = tmp_path / "cap.json"
    code = engine_capacity_search.main(parser.parse_args(["--list", "--json", str(out)]), "bench.py engine-capacity")
    text = capsys.readouterr().out
    assert code == 0
    for key in ("spark/transform", "flink/transform", "spark/count", "flink/count"):
        assert f"{key}: 0 runs made; next 10,000 events/s (first step)" in text
    assert "hours in all (shared)" in text
    out.write_text(json.dumps({"benchmark": "other"}))
    with pytest.raises(LabError, match="not an engine-capacity results file"):
        engine_capacity_search.main(parser.parse_args(["--list", "--json", str(out)]), "bench.py engine-capacity")


def test_a_results_file_refuses_runs_of_another_machine_or_other_settings():
    here = {"cores": 2, "memory_gib": 8, "cpu_model": "x", "os": "y"}
    settings = {**SETTINGS, "bound_ms": held_rate.BOUND_MS}
    result = {"settings": settings, "runs": [{**fake("spark", 10_000, 1e9), "machine": here}]}
    key = engines_report.machine_key({"machine": here})
    assert engine_capacity_search.refusal(result, settings, key) is None
    elsewhere = engines_report.machine_key({"machine": {**here, "cores": 4}})
    assert "was measured on 2 cores" in (engine_capacity_search.refusal(result, settings, elsewhere) or "")
    isolated = {**settings, "placement": "isolated"}
    assert "holds runs made with" in (engine_capacity_search.refusal(result, isolated, key) or "")
    assert engine_capacity_search.refusal({"runs": []}, isolated, elsewhere) is None

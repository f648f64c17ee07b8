"""The sentences the pages write around the published benchmark tables hold for the results those tables come from.

The tables themselves are generated (test_tables.py keeps them current); the prose around them is written by hand,
so each comparison it makes is checked here against the committed JSON. A rerun that changes the picture fails here
and the prose is rewritten with it.
"""

import json
import re
import statistics

import pytest

from rtm_lab.paths import PROJECT_ROOT

RESULTS = PROJECT_ROOT / "docs" / "results"


def sweep_rows() -> dict[str, dict]:
    result = json.loads((RESULTS / "latency-sweep.json").read_text())
    return {row["key"]: row for row in result["rows"]}


def fig(row: dict, name: str) -> float:
    return row["figures"][name]["median"]


def segment(row: dict, starts: str) -> float:
    """The median of a boundary's part, summing the parts a row could not tell apart (planning with progress)."""
    return sum(s["median_ms"] for s in row["segments"] if s["what"].startswith(starts))


REAL_TIME = ["realtime 5 seconds", "realtime 30 seconds", "realtime 1 minute", "realtime 5 minutes"]


def test_setup_page_the_median_does_not_depend_on_the_batch_duration_the_tail_does():
    rows = sweep_rows()
    medians = [fig(rows[key], "p50_ms") for key in REAL_TIME]
    assert max(medians) - min(medians) <= 2, medians
    five_s, five_min = rows["realtime 5 seconds"], rows["realtime 5 minutes"]
    # At 5 s the stalls reach the p99; at 5 minutes the one stall reaches the max and stays out of the p99.
    assert fig(five_s, "p99_ms") >= 10 * fig(five_min, "p99_ms"), (five_s["figures"], five_min["figures"])
    assert fig(five_min, "max_ms") >= fig(five_min, "stall_median_ms") > 10 * fig(five_min, "p99_ms")


def test_setup_page_one_stall_is_longer_at_a_longer_batch_duration_and_the_long_rows_cross_one_boundary():
    rows = sweep_rows()
    five_s = rows["realtime 5 seconds"]
    for key in REAL_TIME[1:]:
        row = rows[key]
        assert fig(row, "stall_median_ms") > fig(five_s, "stall_median_ms"), key
        for part in ("tasks finish", "batch end", "first poll"):
            assert segment(row, part) > segment(five_s, part), (key, part)
        assert segment(row, "progress report") + segment(row, "next batch planning") > segment(
            five_s, "progress report"
        ) + segment(five_s, "next batch planning"), key
    for key in ("realtime 1 minute", "realtime 5 minutes"):
        assert fig(rows[key], "boundaries_crossed") == 1, key
    p999 = {key: fig(rows[key], "p99.9_ms") for key in REAL_TIME}
    assert min(p999, key=p999.get) == "realtime 5 minutes", p999


def test_latency_page_real_time_median_is_over_a_hundred_times_below_micro_batch_at_500_ms():
    rows = sweep_rows()
    assert fig(rows["microbatch_500ms"], "p50_ms") / max(fig(rows["realtime 5 minutes"], "p50_ms"), 1.0) >= 100


@pytest.mark.parametrize("rate", [2000, 1000, 10000])
def test_latency_page_at_the_default_batch_duration_the_real_time_p99_is_below_every_micro_batch_median(rate):
    result = json.loads((RESULTS / "latency.json").read_text())
    assert result["settings"]["rtm_interval"] == "5 minutes"
    modes = next(run["modes"] for run in result["runs"] if run["rate"] == rate)
    micro = {mode: m["p50_ms"] for mode, m in modes.items() if mode.startswith("microbatch")}
    assert modes["realtime"]["p99_ms"] < min(micro.values()), (modes["realtime"], micro)
    # "a 60-second run at a 5-minute interval crosses no batch boundary": no real-time batch ended in the run.
    assert result["seconds"] == 60 and modes["realtime"]["batches_seen"] == 0, modes["realtime"]


def test_latency_page_most_of_a_boundary_is_planning_the_next_batch_and_the_first_poll():
    rows = sweep_rows()
    for key in REAL_TIME:
        row = rows[key]
        total = sum(s["median_ms"] for s in row["segments"])
        # The longer rows cannot tell the progress report from the planning: the page names them together.
        planning = segment(row, "progress report") + segment(row, "next batch planning") + segment(row, "first poll")
        assert planning > total / 2, (key, row["segments"])
        # "the stall is not the offset log write": the batch end (offset and commit logs) is a small part.
        assert segment(row, "batch end") < total / 5, (key, row["segments"])


def test_sink_page_the_dwell_sets_the_latency_and_nothing_is_lost():
    runs = json.loads((RESULTS / "sink-dwell.json").read_text())["runs"]
    by_dwell = {run["scenario"]["dwell_ms"]: run for run in runs}
    assert sorted(by_dwell) == [10, 20, 50]
    medians = [by_dwell[d]["e2e_p50_ms"] for d in (50, 20, 10)]
    assert medians[0] > medians[1] > medians[2], medians
    assert medians[2] <= medians[0] / 3, medians  # "about in proportion": 5x shorter dwell, at least 3x lower median
    assert all(run["lost"] == 0 and run["duplicate_keys"] == 0 for run in runs)
    # "At this rate the row limit is never reached": a task's rows within one dwell stay under max_rows.
    for run in runs:
        scenario = run["scenario"]
        per_dwell = run["asked_rate"] / scenario["partitions"] * scenario["dwell_ms"] / 1000
        assert per_dwell < scenario["max_rows"], (run["name"], per_dwell)


def test_sink_page_fifty_thousand_rows_a_second_keep_low_latency_and_a_hundred_thousand_fall_seconds_behind():
    from rtm_lab.benchmarks import sink

    runs = {run["name"]: run for run in json.loads((RESULTS / "sink.json").read_text())["runs"]}
    fifty = runs["jvm direct 50000/s"]
    assert fifty["generator_reached_rate"] and sink._held(fifty) == "held" and fifty["e2e_p95_ms"] <= 500, fifty
    (stretch,) = json.loads((RESULTS / "sink-stretch.json").read_text())["runs"]
    assert stretch["asked_rate"] == 100000 and stretch["generator_reached_rate"], stretch
    assert stretch["e2e_p50_ms"] >= 1000 and sink._held(stretch) == "not held", stretch
    for run in [*runs.values(), stretch]:
        assert run["lost"] == 0 and run["duplicate_keys"] == 0 and run["reconciles"], run["name"]


def test_sink_page_a_python_writer_stays_far_above_100_ms_and_the_jvm_writer_gets_under_it():
    """ "Every Python run below had a median over 0.5 s and a p99 over 2 s. Every JVM run without dropDuplicates had
    a p99 under 1 s here. At the 5-minute batch duration, every JVM run's p99 was under 100 ms." (the 5-second table,
    then the first table)."""
    recorded = json.loads((RESULTS / "sink-5s.json").read_text())
    assert recorded["recovered"]["settings"]["real_time_interval"] == "5 seconds"  # recovered, and footed as such
    five_s = recorded["runs"]
    python = [run for run in five_s if run["scenario"]["writer"] == "python"]
    jvm = [run for run in five_s if run["scenario"]["writer"] == "jvm"]
    assert python and jvm and len(python) + len(jvm) == len(five_s)
    assert all(run["e2e_p50_ms"] > 500 and run["e2e_p99_ms"] > 2000 for run in python), python
    assert all(run["e2e_p99_ms"] < 1000 for run in jvm if not run["scenario"]["dedup"]), jvm
    five_min = json.loads((RESULTS / "sink.json").read_text())["runs"]
    assert {run["scenario"]["writer"] for run in five_min} == {"jvm"}
    assert all(run["scenario"]["interval"] == "5 minutes" for run in five_min)
    assert all(run["e2e_p99_ms"] < 100 for run in five_min), [(r["name"], r["e2e_p99_ms"]) for r in five_min]


def test_front_page_headline_is_the_default_batch_duration_beside_micro_batch_from_the_sweep():
    """The front page's one-sentence answer is the generated headline (never typed): real-time mode at the batch duration
    the site's code uses, beside micro-batch with a 500 ms trigger, each figure the sweep's median for that row."""
    from rtm_lab.benchmarks.sweep_report import BATCH_DURATION as HEADLINE_BATCH_DURATION
    from rtm_lab.benchmarks.sweep_report import headline
    from snippets.quickstart.kafka_to_kafka import BATCH_DURATION

    page = (RESULTS.parent / "index.md").read_text()
    assert '--8<-- "docs/results/latency-sweep-headline.md"' in page
    # Its other includes are generated tables of answers (scripts/tables.py can-i, when-to-use); a figure in them comes
    # from a results file too (the skill's `{{ figure }}` directive).
    for include in ("latency-sweep-headline.md", "can-i.md", "when-to-use.md"):
        page = page.replace(f'--8<-- "docs/results/{include}"', "")
    assert "--8<--" not in page
    result = json.loads((RESULTS / "latency-sweep.json").read_text())
    text = headline(result)
    assert text in (RESULTS / "latency-sweep-headline.md").read_text()
    assert HEADLINE_BATCH_DURATION == BATCH_DURATION == "5 minutes"
    rows = sweep_rows()
    real, micro = rows[f"realtime {HEADLINE_BATCH_DURATION}"], rows["microbatch_500ms"]
    assert f'`realTime="{HEADLINE_BATCH_DURATION}"`' in text and "500 ms trigger" in text
    # "under 1 ms" is what a median of 0 (whole-millisecond broker stamps) means; any other figure is printed.
    assert ("under 1 ms" in text) == (fig(real, "p50_ms") < 1), text
    for value in (fig(real, "p99_ms"), fig(micro, "p50_ms"), fig(micro, "p99_ms")):
        shown = f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"
        assert f"**{shown} ms**" in text, (shown, text)
    assert f"{result['rate']:,.0f} events/s" in text and f"{result['machine']['cores']} cores" in text


def settings_rows() -> dict[str, dict]:
    result = json.loads((RESULTS / "boundary-settings.json").read_text())
    return {row["key"]: row for row in result["rows"]}


def spread(row: dict, name: str) -> tuple[float, float]:
    return row["figures"][name]["min"], row["figures"][name]["max"]


def test_latency_page_synchronous_progress_grows_the_stall_the_overrun_and_the_p99():
    """ "with progress tracking synchronous, the stall per boundary, the batch overrun and the p99 all grew": every
    synchronous run above every default run, for each of the three."""
    rows = settings_rows()
    for name in ("stall_median_ms", "overrun_median_ms", "p99_ms"):
        low, _ = spread(rows["sync_progress"], name)
        _, high = spread(rows["defaults"], name)
        assert low > high, (name, rows["sync_progress"]["figures"][name], rows["defaults"]["figures"][name])


@pytest.mark.parametrize("key", ["zgc", "parallel_gc", "fetch_wait_500"])
def test_latency_page_gc_and_fetch_wait_stay_within_the_spread_between_runs(key):
    """ "did not move the stall or the p99 beyond the spread between runs" (the collectors) and "made no difference"
    (the fetch wait): each setting's range of runs overlaps the defaults' range, for the stall and for the p99."""
    rows = settings_rows()
    for name in ("stall_median_ms", "p99_ms"):
        low, high = spread(rows[key], name)
        default_low, default_high = spread(rows["defaults"], name)
        assert low <= default_high and high >= default_low, (key, name, (low, high), (default_low, default_high))


def test_sink_page_the_dwell_and_stretch_runs_recorded_local_2_with_2_partitions_and_no_dedup():
    """The slots paragraph: the dwell and stretch runs used local[2], 2 partitions, no dropDuplicates."""
    for name in ("sink-dwell.json", "sink-stretch.json"):
        result = json.loads((RESULTS / name).read_text())
        assert result["spark_master"] == "local[2]", name
        assert all(r["scenario"]["partitions"] == 2 and not r["scenario"]["dedup"] for r in result["runs"]), name


def test_latency_page_zgcs_p99_range_only_just_touches_the_defaults():
    """ "For ZGC's p99 the two ranges only just touch (ZGC's lowest run against G1's highest)": ZGC's best run is
    within 5 ms of the defaults' worst, and ZGC's worst run is above every default run."""
    rows = settings_rows()
    zgc_low, zgc_high = spread(rows["zgc"], "p99_ms")
    default_low, default_high = spread(rows["defaults"], "p99_ms")
    assert 0 <= default_high - zgc_low <= 5 and zgc_high > default_high, (
        (zgc_low, zgc_high),
        (default_low, default_high),
    )


def progress_windows(log_name: str, mode: str, rate: int) -> list[list[tuple[float, float]]]:
    """Per run of `mode` at `rate`, the (seconds since production began, p99 ms) of each 2-second progress line in
    the benchmark's log, kept beside its results."""
    runs: list[list[tuple[float, float]]] = []
    tag = f"[{mode} @ {rate}/s] "
    for line in (RESULTS / log_name).read_text().splitlines():
        if tag not in line:
            continue
        if "priming events delivered" in line:
            runs.append([])
        window = re.search(r"t=\s*([\d.]+)s .* p99=([\d.]+) ms", line)
        if window and runs:
            runs[-1].append((float(window[1]), float(window[2])))
    return runs


def test_ad_attribution_page_the_real_time_tail_at_5000_events_a_second_is_the_start():
    """ "in each run every 2-second window of the first 10 seconds had a p99 above a second, and every window from
    20 s on stayed under a quarter of a second": the log's progress lines, for each real-time run at 5,000/s, and
    the table's p99 is above a second (what the sentence explains)."""
    runs = progress_windows("ad_attribution_latency.log", "realtime", 5000)
    result = json.loads((RESULTS / "ad_attribution_latency.json").read_text())
    assert len(runs) == result["repeat"] == 3
    for windows in runs:
        assert all(p99 > 1000 for t, p99 in windows if t < 10), windows
        assert all(p99 < 250 for t, p99 in windows if t >= 20), windows
    (at_5000,) = [run for run in result["runs"] if run["rate"] == 5000]
    assert at_5000["modes"]["realtime"]["figures"]["p99_ms"]["median"] > 1000


def engine_runs(pipeline: str, rate: int, engine: str, profile: str | None = None) -> list[dict]:
    """The engine benchmark's runs of one cell (both profiles unless one is named)."""
    result = json.loads((RESULTS / "engines.json").read_text())
    return [
        r
        for r in result["runs"].values()
        if (r["pipeline"], r["rate"], r["engine"]) == (pipeline, rate, engine) and profile in (None, r["profile"])
    ]


def engine_median(pipeline: str, rate: int, engine: str, name: str, profile: str = "tuned") -> float:
    import statistics

    return statistics.median(r[name] for r in engine_runs(pipeline, rate, engine, profile))


PIPELINES_4 = ("transform", "count", "enrich", "dedup")


def test_rtm_or_flink_page_nothing_lost_and_the_same_output():
    from rtm_lab.benchmarks.engines_report import disagreements

    result = json.loads((RESULTS / "engines.json").read_text())
    assert result["runs"] and all(r["missing"] == 0 and r["n"] > 0 for r in result["runs"].values())
    assert disagreements(result) == []
    assert {(r["pipeline"], r["engine"]) for r in result["runs"].values()} == {
        (p, e) for p in PIPELINES_4 for e in ("spark", "flink")
    }


def test_rtm_or_flink_page_at_1000_events_a_second_the_engines_are_level():
    for pipeline in PIPELINES_4:
        for engine in ("spark", "flink"):
            runs = engine_runs(pipeline, 1000, engine, "tuned")
            assert runs and all(r["p50_ms"] < 10 and r["p99_ms"] <= 25 for r in runs), (pipeline, engine)
    assert engine_median("enrich", 1000, "spark", "p99_ms") < engine_median("enrich", 1000, "flink", "p99_ms")
    assert engine_median("transform", 1000, "flink", "p99_ms") < engine_median("transform", 1000, "spark", "p99_ms")
    # "on the count and the deduplication their medians were within 1 ms": the p50s, and the p99s too.
    for pipeline in ("count", "dedup"):
        for name in ("p50_ms", "p99_ms"):
            spark, flink = (engine_median(pipeline, 1000, engine, name) for engine in ("spark", "flink"))
            assert abs(spark - flink) <= 1, (pipeline, name, spark, flink)


def test_rtm_or_flink_page_cpu_follows_state_and_rtm_peaks_higher_on_stateless():
    for rate in (1000, 10000):
        for pipeline, rtm_cheaper in (("transform", True), ("enrich", True), ("count", False), ("dedup", False)):
            spark = engine_median(pipeline, rate, "spark", "cpu_s_per_m_events")
            flink = engine_median(pipeline, rate, "flink", "cpu_s_per_m_events")
            assert (spark < flink) == rtm_cheaper, (pipeline, rate, spark, flink)
        for pipeline in ("transform", "enrich"):
            assert engine_median(pipeline, rate, "spark", "rss_peak_mib") > engine_median(
                pipeline, rate, "flink", "rss_peak_mib"
            ), (pipeline, rate)
    # Tuned medians only: at defaults (one run each, 10,000 events/s) the count reverses, 53 against 58.
    (spark_default,) = engine_runs("count", 10000, "spark", "default")
    (flink_default,) = engine_runs("count", 10000, "flink", "default")
    assert round(spark_default["cpu_s_per_m_events"]) == 53 and round(flink_default["cpu_s_per_m_events"]) == 58


def test_rtm_or_flink_page_at_defaults_an_exchange_costs_its_buffer_wait():
    with_exchange = {
        ("spark", "count"),
        ("spark", "dedup"),
        ("flink", "count"),
        ("flink", "enrich"),
        ("flink", "dedup"),
    }
    for pipeline in PIPELINES_4:
        for engine in ("spark", "flink"):
            (run,) = engine_runs(pipeline, 10000, engine, "default")
            if (engine, pipeline) in with_exchange:
                assert run["p50_ms"] > 30, (engine, pipeline, run["p50_ms"])
            else:
                assert run["p50_ms"] < 10, (engine, pipeline, run["p50_ms"])


def test_rtm_or_flink_page_at_10000_events_a_second_the_picture_splits():
    result = json.loads((RESULTS / "engines.json").read_text())
    # "the load average at a run's start reached 6"
    assert max(r["load_average"]["start"][0] for r in result["runs"].values() if r["rate"] == 10000) >= 6

    def p99s(pipeline: str, engine: str) -> list[float]:
        return [r["p99_ms"] for r in engine_runs(pipeline, 10000, engine)]

    assert max(p99s("enrich", "spark")) < min(p99s("enrich", "flink"))
    assert max(p99s("dedup", "flink")) < min(p99s("dedup", "spark"))
    assert all(r["p50_ms"] > 500 for r in engine_runs("dedup", 10000, "spark", "tuned"))
    assert all(r["p50_ms"] < 20 for r in engine_runs("dedup", 10000, "flink", "tuned"))
    for pipeline in ("transform", "count"):
        spark, flink = ([r["p99_ms"] for r in engine_runs(pipeline, 10000, e, "tuned")] for e in ("spark", "flink"))
        assert min(spark) < max(flink) and min(flink) < max(spark), (pipeline, spark, flink)  # the ranges overlap
    # On the transform, the default runs reverse the order of the tuned medians.
    (spark_default,) = [r["p99_ms"] for r in engine_runs("transform", 10000, "spark", "default")]
    (flink_default,) = [r["p99_ms"] for r in engine_runs("transform", 10000, "flink", "default")]
    tuned_order = engine_median("transform", 10000, "spark", "p99_ms") < engine_median(
        "transform", 10000, "flink", "p99_ms"
    )
    assert (spark_default < flink_default) != tuned_order


def test_rtm_or_flink_page_where_ours_agrees_with_the_published_comparisons():
    """The last column of the published-comparisons table: each figure of ours it quotes, from the second harness's
    shared-core runs (engines-shared.json)."""
    result = json.loads((RESULTS / "engines-shared.json").read_text())

    def ms(pipeline: str, rate: int, name: str, profile: str = "tuned") -> tuple[int, int]:
        """(Spark RTM, Flink): the median of the cell's runs, to the millisecond the page gives."""
        spark, flink = (round(placement_median("shared", pipeline, rate, e, name, profile)) for e in ("spark", "flink"))
        return spark, flink

    # Databricks: at defaults Flink's count and enrichment had higher p50s (89 against 165 ms; 6 against 166 ms),
    # single runs at 10,000 events/s; tuned alike (a 5 ms wait on both), the count's p99 at 1,000: 16 and 12 ms.
    assert ms("count", 10000, "p50_ms", "default") == (89, 165)
    assert ms("enrich", 10000, "p50_ms", "default") == (6, 166)
    assert all(
        len(placement_runs("shared", p, 10000, e, "default")) == 1
        for p in ("count", "enrich")
        for e in ("spark", "flink")
    )
    assert ms("count", 1000, "p99_ms") == (16, 12)
    tuned = result["settings"]["profiles"]["tuned"]
    assert tuned["spark"]["spark.shuffle.streaming.networkBufferMaxWaitTimeMs"] == "5"
    assert tuned["flink"]["execution.buffer-timeout.interval"] == "5 ms"
    # EKS: the transform's medians level (4 ms each) at 1,000 events/s, p99 7 against 8 ms; at 10,000 the p99
    # ranges overlap.
    assert ms("transform", 1000, "p50_ms") == (4, 4)
    assert ms("transform", 1000, "p99_ms") == (7, 8)
    spark, flink = ([r["p99_ms"] for r in placement_runs("shared", "transform", 10000, e)] for e in ("spark", "flink"))
    assert min(spark) < max(flink) and min(flink) < max(spark)
    # No batch boundary in a run: each ends inside real-time mode's first 5-minute batch.
    settings = result["settings"]
    assert settings["spark"]["real_time_interval"] == "5 minutes"
    assert settings["warmup_s"] + settings["seconds"] < 5 * 60
    # Spark's own: real-time deduplication held 1,000 events/s (p99 13 ms); p50 4 ms (transform), 7 (dedup).
    assert ms("dedup", 1000, "p99_ms")[0] == 13
    assert (ms("transform", 1000, "p50_ms")[0], ms("dedup", 1000, "p50_ms")[0]) == (4, 7)
    # The machine those rows ran on: a 2-core AMD EPYC.
    machines = {(r["machine"]["cores"], r["machine"]["cpu_model"]) for r in result["runs"].values()}
    assert machines == {(2, "AMD EPYC")}


def test_monitoring_page_three_runs_cannot_resolve_the_1_ms_goal_and_promql_agrees():
    """The page's reading of the monitor-cost runs: the p99 without the monitor varied by more than 1 ms between runs
    (so a 1 ms cost is not resolved), the p99.9 and the max medians were higher with the monitor, PromQL agrees."""
    from rtm_lab.benchmarks import monitor_cost

    result = json.loads((RESULTS / "monitor-cost.json").read_text())
    assert result["rate"] == 2000 and result["repeat"] >= 3
    assert monitor_cost.GOAL_MS == 1.0 and not monitor_cost.resolves_goal(result)
    without = result["figures"]["without"]["p99_ms"]
    assert without["max"] - without["min"] > 10 * monitor_cost.GOAL_MS, without
    fig = result["figures"]
    assert all(fig["with"][f]["median"] > fig["without"][f]["median"] for f in ("p99.9_ms", "max_ms"))
    runs = result["runs"]["with"]
    assert len(runs) >= 3
    assert all(r["monitor"][q]["same_bucket"] for r in runs for q in ("p50", "p99"))
    assert all(r.get("missing") == 0 for side in ("with", "without") for r in result["runs"][side])


def test_rtm_or_flink_page_after_a_kill_nothing_is_lost_and_flink_resumes_sooner():
    runs = json.loads((RESULTS / "engines.json").read_text())["recovery"]
    engines = {r["engine"] for r in runs.values()}
    assert engines == {"spark", "flink"} and {r["pipeline"] for r in runs.values()} == {"transform", "count"}
    assert len(runs) >= 8  # two runs of each engine and pipeline
    for key, r in runs.items():
        assert r["lost"] == 0 and r["checkpoint_interval_s"] == 10, key
        # "between one and ten seconds' worth of events"
        assert r["rate"] * 1 <= r["replayed"] <= r["rate"] * r["checkpoint_interval_s"], key
        # "back to outputs under 100 ms within about a second of their first output"
        assert r["back_to_real_time_s"] - r["resume_s"] <= 1.5, key

    def resume(engine):
        return [r["resume_s"] for r in runs.values() if r["engine"] == engine]

    assert max(resume("flink")) < min(resume("spark"))


def capacity_runs(engine: str, pipeline: str) -> list[dict]:
    result = json.loads((RESULTS / "engine-capacity-shared.json").read_text())
    return [r for r in result["runs"] if (r["engine"], r["pipeline"]) == (engine, pipeline)]


def p99_series(run: dict) -> list[tuple[int, float | None]]:
    at = run["series_fields"].index("p99_ms")
    return [(row[0], row[at]) for row in run["series"]]


def last_second_over(run: dict, bound_ms: float) -> int:
    """The last second whose p99 was over `bound_ms`: when the run had caught up for good."""
    return max(s for s, p in p99_series(run) if p is not None and p > bound_ms)


def stretches_over(run: dict, bound_ms: float, from_s: float) -> int:
    """How many separate stretches of seconds, from `from_s` on, had a p99 over `bound_ms`."""
    over = [s >= from_s and p is not None and p > bound_ms for s, p in p99_series(run)]
    return sum(1 for i, o in enumerate(over) if o and (i == 0 or not over[i - 1]))


def test_rtm_or_flink_page_the_highest_rate_each_holds():
    """The capacity bullets, from the search's own runs by the held-rate rule (p99 under the bound, nothing lost,
    3 runs a step)."""
    from rtm_lab.benchmarks import engine_capacity_report, held_rate, per_task_search

    settings = json.loads((RESULTS / "engine-capacity-shared.json").read_text())["settings"]
    assert (settings["runs_per_step"], settings["warmup_s"], settings["seconds"]) == (3, 60.0, 60.0)
    assert held_rate.BOUND_MS == 2000 and settings["placement"] == "shared"

    def capacity(engine: str, pipeline: str) -> dict:
        return engine_capacity_report.capacity(capacity_runs(engine, pipeline), 3)

    # Running count: RTM 6,490 held, 7,070 not; Flink 10,900 held, 11,900 not; about 1.7 times; within 10 %.
    spark, flink = capacity("spark", "count"), capacity("flink", "count")
    assert (spark["held_rate"], spark["not_held_rate"]) == (6490, 7070)
    assert (flink["held_rate"], flink["not_held_rate"]) == (10900, 11900)
    assert round(flink["held_rate"] / spark["held_rate"], 1) == 1.7
    assert all(c["bracket_pct"] <= 10 and c["limited_by"] == "the engine" for c in (spark, flink))
    # RTM fails by starting late: the step median p99 was 150-250 ms at every step; each step it lost had one run
    # of three not held, still over 2 s after the warm-up (its last second over at 67 or 75 s), then under 2 s.
    steps = per_task_search.steps(capacity_runs("spark", "count"), 1)
    assert all(150 <= statistics.median(r["p99_ms"] for r in runs) <= 250 for runs in steps.values())
    late = []
    for rate, runs in steps.items():
        failed = [r for r in runs if held_rate.verdict(r["p99_ms"], r["lost"], rate, r["reached_rate"]) != "held"]
        if rate > spark["held_rate"]:
            assert len(failed) == 1, rate
            late.append(last_second_over(failed[0], held_rate.BOUND_MS))
            assert max(p for s, p in p99_series(failed[0]) if s > late[-1] and p is not None) < held_rate.BOUND_MS
        else:
            assert not failed, rate
    assert sorted(late) == [67, 75]
    # Flink fails by its tail: above 10,900 its p99 came back over 2 s after the warm-up in 8 of 9 runs, in one to
    # four separate stretches.
    above = [r for r in capacity_runs("flink", "count") if r["rate"] > flink["held_rate"]]
    stretches = [stretches_over(r, held_rate.BOUND_MS, settings["warmup_s"]) for r in above]
    assert len(above) == 9 and sum(1 for n in stretches if n) == 8
    assert min(n for n in stretches if n) == 1 and max(stretches) == 4
    # Deduplication: RTM 7,070 held and 7,710 not, Flink 11,900 and 13,000; about 1.7 times again; within 10 %.
    spark, flink = capacity("spark", "dedup"), capacity("flink", "dedup")
    assert (spark["held_rate"], spark["not_held_rate"]) == (7070, 7710)
    assert (flink["held_rate"], flink["not_held_rate"]) == (11900, 13000)
    assert round(flink["held_rate"] / spark["held_rate"], 1) == 1.7
    assert all(c["bracket_pct"] <= 10 and c["limited_by"] == "the engine" for c in (spark, flink))
    # At its highest held rate, real-time mode's p99 last passed 2 s 36 to 52 s in; Flink's 14 to 20 s in.
    for engine, held, (first, last) in (("spark", spark, (36, 52)), ("flink", flink, (14, 20))):
        caught_up = [
            last_second_over(r, held_rate.BOUND_MS)
            for r in capacity_runs(engine, "dedup")
            if r["rate"] == held["held_rate"]
        ]
        assert len(caught_up) == 3 and (min(caught_up), max(caught_up)) == (first, last), engine
    # Every count run starts behind: the first second's p99 was 2.7 to 12.5 s.
    firsts = [p99_series(r)[0][1] for e in ("spark", "flink") for r in capacity_runs(e, "count")]
    assert round(min(firsts) / 1000, 1) == 2.7 and round(max(firsts) / 1000, 1) == 12.5
    # The transform: no engine failed a step. RTM held 56,600, and at 61,700 one run's generator fell short; Flink
    # held 51,900, and at 56,600 one run's generator fell short. Every transform run kept its p99 under 900 ms and
    # lost nothing.
    short, held = held_rate.GENERATOR_SHORT, held_rate.HELD
    expected = {
        "spark": {10_000: held, 20_000: held, 40_000: held, 56_600: held, 61_700: short, 67_300: short, 80_000: short},
        "flink": {10_000: held, 20_000: held, 40_000: held, 47_600: held, 51_900: held, 56_600: short, 80_000: short},
    }
    for engine, steps_expected in expected.items():
        decided = per_task_search.decided(capacity_runs(engine, "transform"), held_rate.BOUND_MS, 3, settle_early=False)
        assert decided == steps_expected, engine
        got = capacity(engine, "transform")
        assert got["limited_by"] == "the machine (generator short)" and got["bracket_pct"] <= 10, engine
    assert capacity("spark", "transform")["held_rate"] == 56_600
    assert capacity("flink", "transform")["held_rate"] == 51_900
    for engine, rate in (("spark", 61_700), ("flink", 56_600)):  # one short run of three settled the step
        at_rate = [r for r in capacity_runs(engine, "transform") if r["rate"] == rate]
        short_runs = [r for r in at_rate if r["reached_rate"] < held_rate.OFFERED_SHARE * rate]
        assert (len(short_runs), len(at_rate)) == (1, 3), engine
    transform = [r for e in ("spark", "flink") for r in capacity_runs(e, "transform")]
    assert max(r["p99_ms"] for r in transform) < 900 and not any(r["lost"] for r in transform)
    # From 56,600 up, 10 of 18 runs' generator fell short, reaching 54,000 to 67,000 events/s.
    high = [r for r in transform if r["rate"] >= 56_600]
    fell_short = [r["reached_rate"] for r in high if r["reached_rate"] < held_rate.OFFERED_SHARE * r["rate"]]
    assert (len(fell_short), len(high)) == (10, 18)
    assert (round(min(fell_short), -3), round(max(fell_short), -3)) == (54_000, 67_000)


def dedup_stall_cells(name: str = "dedup-stall.json") -> dict[str, list[dict]]:
    from rtm_lab.benchmarks import dedup_stall_report

    return dedup_stall_report.by_cell(json.loads((RESULTS / name).read_text()))


def seconds_over(runs: list[dict]) -> list[int]:
    return sorted(r["stall"]["series_seconds_over"] for r in runs)


def stalled(run: dict, warmup_s: float = 60.0, threshold_ms: float = 1000.0) -> bool:
    """A run stalled when a measured second's p99 passed 1 s: the factorial's rule, read off any run's series."""
    from rtm_lab.benchmarks import engines_report

    return engines_report.seconds_over(run["series"], run["series_fields"], threshold_ms, warmup_s) > 0


def test_rtm_or_flink_page_the_deduplication_stall_is_the_rate():
    """The cause, by the page's rule (one factor changed removes the stall, or brings it back, in at least three runs
    each way): real-time deduplication on the base cell's settings with a minute of warm-up, at 10,000 and 5,000."""
    from rtm_lab.benchmarks import dedup_cells, held_rate

    base = dedup_cells.BASE.name
    warm60 = dedup_stall_cells("dedup-stall-warm60.json")[base]
    watch = dedup_stall_cells("dedup-stall-watch.json")
    watched, unwatched = watch[base], watch[f"{base}/unwatched"]
    search = capacity_runs("spark", "dedup")
    # The same query and settings in each file: the event-id deduplication, 5 ms wait, 2 shuffle partitions, shared
    # cores, 60 s warm-up then 60 s measured.
    for name in ("dedup-stall-warm60.json", "dedup-stall-watch.json", "engine-capacity-shared.json"):
        settings = json.loads((RESULTS / name).read_text())["settings"]
        assert (settings["warmup_s"], settings["seconds"]) == (60.0, 60.0), name
    for run in [*warm60, *watched, *unwatched, *search]:
        assert run["pipeline"] == "dedup" and run["placement"] == "shared"
        assert run["conf"][dedup_cells.WAIT_SETTING] == "5"
    # At 10,000 events/s: 10 of 12 runs stalled.
    at_10k = [*warm60, *watched, *unwatched, *(r for r in search if r["rate"] == 10000)]
    assert len(at_10k) == 12 and sum(map(stalled, at_10k)) == 10
    # At 5,000, none of 3 did, with a median p99 of 114 ms.
    at_5k = [r for r in search if r["rate"] == 5000]
    assert len(at_5k) == 3 and not any(map(stalled, at_5k))
    assert statistics.median(r["p99_ms"] for r in at_5k) == 114

    # Flink's deduplication held 10,000 in 3 of 3 runs, real-time mode's in 1 (the capacity search's runs).
    def held(runs: list[dict]) -> int:
        return sum(held_rate.verdict(r["p99_ms"], r["lost"], r["rate"], r["reached_rate"]) == "held" for r in runs)

    flink = [r for r in capacity_runs("flink", "dedup") if r["rate"] == 10000]
    spark = [r for r in search if r["rate"] == 10000]
    assert (len(flink), held(flink)) == (3, 3) and (len(spark), held(spark)) == (3, 1)
    # The instruments: without the GC log and the dumps 3 of 3 stalled; with them 2 of 3.
    assert [len(watched), len(unwatched)] == [3, 3]
    assert not any(r["factors"]["watched"] for r in unwatched) and all(r["factors"]["watched"] for r in watched)
    assert all(r["stall"]["dumps_taken"] == 0 and r["gc"]["window"] is None for r in unwatched)
    assert sum(map(stalled, unwatched)) == 3 and sum(map(stalled, watched)) == 2


def test_rtm_or_flink_page_the_deduplication_stall_comes_with_shared_cores():
    """'Why deduplication falls behind at 10,000 events/s', each bullet from the factorial's runs."""
    from rtm_lab.benchmarks import dedup_stall_report

    cells = dedup_stall_cells()
    shared = {c: runs for c, runs in cells.items() if c.endswith("/shared")}
    isolated = {c: runs for c, runs in cells.items() if c.endswith("/isolated")}
    assert all(len(runs) == 3 for runs in cells.values()), {c: len(r) for c, r in cells.items()}
    every = [r for runs in cells.values() for r in runs]
    assert {r["rate"] for r in every} == {10000}
    # Every shared run stalled: 21 of 21 for real-time mode, 3 of 3 for Flink; both cores >= 95 % busy in each.
    spark_shared = [r for c, runs in shared.items() if c.startswith("spark/") for r in runs]
    flink_shared = shared["flink/id/5ms/p2/shared"]
    assert len(spark_shared) == 21 and len(flink_shared) == 3
    assert all(r["stall"]["series_seconds_over"] > 0 for r in spark_shared + flink_shared)
    assert all(min(r["core_busy"].values()) >= 0.95 for r in spark_shared + flink_shared)
    # Flink's p99 on shared cores: 4.0 to 6.3 s.
    assert [round(p / 1000, 1) for p in sorted(r["p99_ms"] for r in flink_shared)] == [4.0, 6.0, 6.3]
    # The first harness's Flink p99 at this rate, about half a second, on another machine with Flink's default
    # (heap) state backend: no backend set in its settings.
    first = json.loads((RESULTS / "engines.json").read_text())
    old = [
        r
        for r in first["runs"].values()
        if (r["engine"], r["pipeline"], r["rate"], r["profile"]) == ("flink", "dedup", 10000, "tuned")
    ]
    assert 400 <= statistics.median(r["p99_ms"] for r in old) <= 700
    assert {r["machine"]["cpu_model"] for r in old} != {r["machine"]["cpu_model"] for r in every}
    assert "state_backend" not in first["settings"]["flink"] and "rocksdb" not in json.dumps(first["settings"]["flink"])
    # The settings tried: the wait at 5, 20, 50 ms, 2 or 4 shuffle partitions, the id or the user as the key.
    spark_cells = {
        tuple(runs[0]["factors"][f] for f in ("keys", "wait_ms", "shuffle_partitions"))
        for runs in shared.values()
        if runs[0]["engine"] == "spark"
    }
    assert {w for _, w, _ in spark_cells} == {5, 20, 50} and {p for _, _, p in spark_cells} == {2, 4}
    assert {k for k, _, _ in spark_cells} == {"id", "user"}
    # Worst: 4 shuffle partitions at 5 ms, p50 21 s; mildest: users at 50 ms, p50 137 ms, 2-8 s over 1 s.
    medians = {c: statistics.median(r["p50_ms"] for r in runs) for c, runs in shared.items()}
    assert max(medians, key=medians.get) == "spark/id/5ms/p4/shared"
    assert round(medians["spark/id/5ms/p4/shared"] / 1000) == 21
    assert min(medians, key=medians.get) == "spark/user/50ms/p2/shared"
    assert medians["spark/user/50ms/p2/shared"] == 137
    assert seconds_over(shared["spark/user/50ms/p2/shared"]) == [2, 3, 8]
    # The wait: in each pair of real-time cells that differ only in it, 5 ms has the higher median p50 and p99.
    pairs = [(c, c.replace("/5ms/", "/50ms/")) for c in cells if c.startswith("spark/") and "/5ms/" in c]
    assert len(pairs) == 4
    for five, fifty in pairs:
        for figure in ("p50_ms", "p99_ms"):
            assert statistics.median(r[figure] for r in cells[five]) > statistics.median(
                r[figure] for r in cells[fifty]
            ), (five, figure)
    # The 5 ms wait costs CPU: isolated, 87 CPU s per million events at 5 ms against 57 at 50 ms.
    cpu = {c: statistics.median(r["cpu_s_per_m_events"] for r in runs) for c, runs in isolated.items()}
    assert round(cpu["spark/id/5ms/p2/isolated"]) == 87 and round(cpu["spark/id/50ms/p2/isolated"]) == 57, cpu
    # A core of its own: seconds over 1 s from 46-60 to 4-10 (real-time mode, 5 ms); Flink's from 13-44 to 0-1.
    assert seconds_over(shared["spark/id/5ms/p2/shared"]) == [46, 60, 60]
    assert seconds_over(isolated["spark/id/5ms/p2/isolated"]) == [4, 8, 10]
    assert seconds_over(flink_shared) == [13, 27, 44]
    assert seconds_over(isolated["flink/id/5ms/p2/isolated"]) == [0, 0, 1]
    # Isolated, the harness was the limit: its core 100 % busy; input median seconds 3,500-4,700, busiest
    # 48,000-83,000; the engine's core 57-87 % busy.
    iso = [r for runs in isolated.values() for r in runs]
    harness = [r["core_busy"][str(c)] for r in iso for c in (0, 1) if c not in r["engine_cores"]]
    engine = [r["core_busy"][str(c)] for r in iso for c in r["engine_cores"]]
    assert len(harness) == len(iso) == 9 and min(harness) >= 0.995
    assert min(engine) >= 0.57 and max(engine) <= 0.87, engine
    warmup = json.loads((RESULTS / "dedup-stall.json").read_text())["settings"]["warmup_s"]
    medians_in = [dedup_stall_report.per_second(r, warmup, "in_per_s") for r in iso]
    peaks_in = [dedup_stall_report.per_second(r, warmup, "in_per_s", max) for r in iso]
    assert min(medians_in) >= 3500 and max(medians_in) <= 4700, medians_in
    assert min(peaks_in) >= 48000 and max(peaks_in) <= 83400, peaks_in
    # Every run starts behind: past 1 s unanswered within 1.6 s of the generator's start, one Flink run at 3.6 s;
    # the JIT compilers the busiest thread in 24 of the 33 first dumps.
    firsts = sorted(r["watch"]["first_over_s"] for r in every)
    assert len(firsts) == 33 and firsts[-2] <= 1.6 and round(firsts[-1], 1) == 3.6
    (late,) = [r for r in every if r["watch"]["first_over_s"] > 1.6]
    assert late["engine"] == "flink"
    compilers = [r for r in every if "CompilerThread" in r["stall"]["busiest"][0]["thread"]]
    assert len(compilers) == 24
    # GC: the longest pause in any measured window 138 ms; at most 1.1 s of pauses per window.
    assert round(max(r["gc"]["window"]["pause_max_ms"] for r in every)) == 138
    assert round(max(r["gc"]["window"]["pause_total_ms"] for r in every) / 1000, 1) == 1.1
    # The rule for a cause, placement closest: Flink isolated passed 1 s in 1 of 3; RTM at 5 ms in 3 of 3.
    assert sum(1 for r in isolated["flink/id/5ms/p2/isolated"] if r["stall"]["series_seconds_over"] > 0) == 1
    assert all(r["stall"]["series_seconds_over"] > 0 for r in isolated["spark/id/5ms/p2/isolated"])


def test_rtm_or_flink_page_a_longer_warm_up_separates_the_engines():
    """The 60 s warm-up runs: Flink mostly caught up, real-time mode did not; and the CPU per event on shared cores."""
    warm = dedup_stall_cells("dedup-stall-warm60.json")
    assert json.loads((RESULTS / "dedup-stall-warm60.json").read_text())["settings"]["warmup_s"] == 60
    spark, flink = warm["spark/id/5ms/p2/shared"], warm["flink/id/5ms/p2/shared"]
    assert len(spark) == len(flink) == 3
    # Flink: two runs never passed 1 s, the third for 7 s; p99 0.5 to 1.3 s.
    assert seconds_over(flink) == [0, 0, 7]
    assert [round(r["p99_ms"] / 1000, 1) for r in sorted(flink, key=lambda r: r["p99_ms"])] == [0.5, 0.6, 1.3]
    # Real-time mode: past 1 s in 43 to 60 of the 60 measured seconds; p50 2.7 to 23 s, p99 10 to 31 s.
    assert seconds_over(spark) == [43, 55, 60]
    assert [round(r["p50_ms"] / 1000, 1) for r in sorted(spark, key=lambda r: r["p50_ms"])][::2] == [2.7, 23.4]
    assert [round(r["p99_ms"] / 1000) for r in sorted(spark, key=lambda r: r["p99_ms"])][::2] == [10, 31]
    assert all(r["delivered"] == r["expected"] and r["missing"] == 0 for r in spark + flink)
    # The plot's two minutes, warm-up included: p99 over 1 s in 102-120 seconds per run (RTM), 9-30 (Flink).

    def whole_run_over(run: dict) -> int:
        p99 = run["series_fields"].index("p99_ms")
        return sum(1 for row in run["series"] if row[p99] is not None and row[p99] > 1000)

    assert [min(map(whole_run_over, spark)), max(map(whole_run_over, spark))] == [102, 120]
    assert [min(map(whole_run_over, flink)), max(map(whole_run_over, flink))] == [9, 30]
    # CPU per event on shared cores, 5 s warm-up: medians of 73 (real-time mode) and 64 (Flink) CPU s per million.
    cells = dedup_stall_cells()
    cpu = {c: statistics.median(r["cpu_s_per_m_events"] for r in cells[c]) for c in cells}
    assert round(cpu["spark/id/5ms/p2/shared"]) == 73 and round(cpu["flink/id/5ms/p2/shared"]) == 64, cpu
    # The rule for a cause, for Flink's warm-up: 3 of 3 stalled after 5 s, 1 of 3 after 60 s.
    assert seconds_over(cells["flink/id/5ms/p2/shared"]) == [13, 27, 44]
    assert sum(1 for r in flink if r["stall"]["series_seconds_over"] > 0) == 1


def test_sink_page_every_retry_run_ended_one_of_two_ways_and_lost_nothing():
    """The Postgres sink page: after a failed Python task the retry committed or was denied the commit, and a query
    that failed lost nothing once restarted from its checkpoint; no run stored a key twice."""
    result = json.loads((RESULTS / "retry-outcomes.json").read_text())
    runs = [run for setting in result["settings"] for run in setting["runs"]]
    assert runs
    assert {run["outcome"] for run in runs} <= {"retried", "commit-denied"}
    assert all(run["lost"] == 0 and run["duplicate_keys"] == 0 and run["dead_letters_missing"] == 0 for run in runs)
    assert all(run["query_failures"] == (run["outcome"] == "commit-denied") for run in runs)


def test_sink_page_every_retry_committed_in_a_shared_driver_and_in_a_fresh_driver_per_run():
    """The Postgres sink page: every retry committed in 160 runs, 100 in one shared driver and 60 with a fresh driver
    per run (30 of them beside two busy loops); each row's run count is the runs it really has."""
    from rtm_lab.benchmarks import retry_outcomes

    result = retry_outcomes.normalised(json.loads((RESULTS / "retry-outcomes.json").read_text()))
    rows = {(s["driver"], s["hogs"]): retry_outcomes.summary(s) for s in result["settings"]}
    assert {key: row["runs"] for key, row in rows.items()} == {
        ("shared", 0): 50,
        ("shared", 2): 50,
        ("fresh", 0): 30,
        ("fresh", 2): 30,
    }
    assert all(row["retried"] == row["runs"] and row["commit-denied"] == 0 for row in rows.values()), rows
    table = retry_outcomes.markdown(result)
    for (driver, hogs), row in rows.items():
        assert f"| {driver} | {hogs} | {row['runs']} | {row['retried']} | 0 |" in table


def checkpoint_storage() -> tuple[dict[str, dict], dict[str, dict]]:
    """The checkpoint-storage rows by key and its fitted models by shape."""
    result = json.loads((RESULTS / "checkpoint-storage.json").read_text())
    return {row["key"]: row for row in result["rows"]}, {model["shape"]: model for model in result["models"]}


def cell(shape: str, delay_ms: int) -> str:
    return f"{shape} / s3 {delay_ms} ms / 5 seconds"


def test_checkpoint_storage_page_each_ms_of_request_latency_adds_the_critical_path_in_ms_to_the_stall():
    rows, models = checkpoint_storage()
    sync = models["stateless_sync"]
    # Synchronous stateless: 48 requests in a row, and the fitted slope is within 10 % of 48.
    assert all(rows[cell("stateless_sync", d)]["critical_path"]["median"] == 48 for d in (0, 10, 30, 100))
    assert 0.9 * 48 <= sync["slope"] <= 1.1 * 48, sync
    for shape in ("dedup", "count"):
        chain = [rows[cell(shape, d)]["critical_path"]["median"] for d in (10, 30, 100)]
        # Stateful: 136 requests per boundary, but the state uploads overlap, so the chain is about 70 long and
        # the slope follows the chain, not the request count.
        assert all(rows[cell(shape, d)]["requests_per_boundary"]["median"] == 136 for d in (0, 10, 30, 100))
        assert max(chain) < 136 * 0.6, chain
        assert 0.85 * min(chain) <= models[shape]["slope"] <= 1.15 * max(chain), (shape, chain, models[shape])


def test_checkpoint_storage_page_the_model_predicts_both_held_out_cells_within_20_percent_except_async():
    _, models = checkpoint_storage()
    held_cells = {"10 ms / 5 seconds", "30 ms / 30 seconds"}
    for shape in ("stateless_sync", "dedup", "count"):
        held = models[shape]["held_out"]
        assert {h["cell"].split(" s3 ")[1] for h in held} == held_cells, (shape, held)
        assert all(h["error"] <= 0.1 for h in held), (shape, held)
    held = models["stateless_async"]["held_out"]
    assert len(held) == 2 and all(h["error"] > 0.2 for h in held), held
    # With progress tracked asynchronously no request chain sits in the stall: the slope is a tenth of the sync one.
    assert models["stateless_async"]["slope"] < models["stateless_sync"]["slope"] / 5, models


def disk(shape: str) -> str:
    return f"{shape} / disk / 5 seconds"


def test_checkpoint_storage_page_local_disk_plus_the_chain_times_the_request_latency_predicts_the_100_ms_cells():
    rows, models = checkpoint_storage()
    stalls = {shape: rows[disk(shape)]["stall_ms"]["median"] for shape in models}
    # On disk: 0.17 s async, 0.32 s sync, 0.57 s dedup, 0.74 s count (rounded as the page gives them).
    assert [round(stalls[s] / 1000, 2) for s in ("stateless_async", "stateless_sync", "dedup", "count")] == [
        0.17,
        0.32,
        0.57,
        0.74,
    ], stalls
    # The store's own time per request: what the 0 ms cell adds to the disk stall, per request of the chain.
    own = {
        s: (models[s]["fixed_ms"] - stalls[s]) / rows[cell(s, 30)]["critical_path"]["median"]
        for s in ("stateless_sync", "dedup", "count")
    }
    assert all(3 <= v <= 6 for v in own.values()), own
    for shape in ("stateless_sync", "dedup", "count"):
        chain = rows[cell(shape, 100)]["critical_path"]["median"]
        predicted = stalls[shape] + chain * (4 + 100)
        measured = rows[cell(shape, 100)]["stall_ms"]["median"]
        assert abs(predicted - measured) <= 0.03 * measured, (shape, predicted, measured)


def test_checkpoint_storage_page_a_longer_batch_duration_leaves_the_stall_per_boundary_as_it_was():
    rows, _ = checkpoint_storage()
    page = {"stateless_sync": (2.0, 2.0), "dedup": (3.2, 2.9), "count": (3.4, 3.1)}
    for shape, (at_30_s, at_5_s) in page.items():
        long_row, short_row = rows[f"{shape} / s3 30 ms / 30 seconds"], rows[cell(shape, 30)]
        long_stall, short_stall = long_row["stall_ms"]["median"], short_row["stall_ms"]["median"]
        assert (round(long_stall / 1000, 1), round(short_stall / 1000, 1)) == (at_30_s, at_5_s), shape
        assert 0.8 <= long_stall / short_stall <= 1.25, (shape, long_stall, short_stall)
        # The same requests per boundary, one sixth of the boundaries.
        assert long_row["requests_per_boundary"]["median"] == short_row["requests_per_boundary"]["median"]


def test_checkpoint_storage_page_at_5_minutes_the_stateless_stall_fits_and_the_stateful_one_runs_a_third_over():
    rows, models = checkpoint_storage()
    long = {m["shape"]: m["long"][0] for m in models.values()}
    assert all(rows[f"{shape} / s3 30 ms / 5 minutes"]["runs"] == 1 for shape in long), long
    sync = long["stateless_sync"]
    # "2.4 s against 2.0 s predicted, 18 % off"
    assert (round(sync["measured_ms"] / 1000, 1), round(sync["predicted_ms"] / 1000, 1)) == (2.4, 2.0), sync
    assert round(sync["error"], 2) == 0.18 and sync["within_target"], sync
    sync_row = rows["stateless_sync / s3 30 ms / 5 minutes"]
    assert sync_row["p99_ms"]["median"] == 8 and round(sync_row["max_ms"]["median"] / 1000, 1) == 2.5, sync_row
    page = {"dedup": (4.7, 3.0), "count": (4.5, 3.1)}
    for shape, (measured_s, predicted_s) in page.items():
        got = long[shape]
        assert (round(got["measured_ms"] / 1000, 1), round(got["predicted_ms"] / 1000, 1)) == (measured_s, predicted_s)
        # "a third over": 30-40 %, outside the 20 % target
        assert 0.3 <= got["error"] <= 0.4 and not got["within_target"], got
        row = rows[f"{shape} / s3 30 ms / 5 minutes"]
        assert (
            row["requests_per_boundary"]["median"]
            == 164
            > 136
            == rows[cell(shape, 30)]["requests_per_boundary"]["median"]
        )
        assert row["critical_path"]["median"] in (99, 100), row["critical_path"]
        assert 1500 <= row["p99_ms"]["median"] <= 1700, row["p99_ms"]


def test_checkpoint_storage_page_on_local_disk_a_5_minute_boundary_stalls_longer_than_a_5_second_one():
    rows, _ = checkpoint_storage()
    page = {"stateless_async": (0.45, 2, 0.17), "dedup": (1.3, 1, 0.57), "count": (1.2, 1, 0.74)}
    p99s = []
    for shape, (long_s, digits, short_s) in page.items():
        long_row, short_row = rows[f"{shape} / disk / 5 minutes"], rows[disk(shape)]
        assert long_row["runs"] == 3, long_row["key"]
        long_stall, short_stall = long_row["stall_ms"]["median"], short_row["stall_ms"]["median"]
        assert (round(long_stall / 1000, digits), round(short_stall / 1000, 2)) == (long_s, short_s), shape
        assert long_stall > short_stall, shape
        p99s.append(long_row["p99_ms"]["median"])
    # "the run's p99 stayed at 4 to 53 ms"
    assert (min(p99s), max(p99s)) == (4, 53), p99s


def test_checkpoint_storage_page_the_stream_file_manager_halves_the_chain_and_the_stall_at_100_ms():
    rows, _ = checkpoint_storage()
    for shape in ("stateless_sync", "dedup", "count"):
        plain, managed = rows[cell(shape, 100)], rows[f"{cell(shape, 100)} / file_manager"]
        # Written in place: no rename, so no COPY and no DELETE.
        assert managed["requests_by_kind"].get("COPY", 0) == managed["requests_by_kind"].get("DELETE", 0) == 0, managed
        assert managed["requests_by_kind"]["PUT"] == plain["requests_by_kind"]["PUT"], shape
        assert managed["critical_path"]["median"] <= plain["critical_path"]["median"] / 2, shape
        assert managed["stall_ms"]["max"] < 0.6 * plain["stall_ms"]["min"], (shape, managed["stall_ms"])
    assert rows[cell("stateless_sync", 100) + " / file_manager"]["critical_path"]["median"] == 22
    # With async tracking as well, the p99 at 100 ms falls from over 1 s to about 0.15 s.
    both = rows[cell("stateless_async", 100) + " / file_manager"]["p99_ms"]
    assert round(both["median"] / 1000, 2) == 0.15 and both["max"] < 250, both
    assert rows[cell("stateless_async", 100)]["p99_ms"]["min"] > 1000


def test_checkpoint_storage_page_changelog_checkpointing_off_makes_each_batch_longer_at_100_ms():
    result = json.loads((RESULTS / "checkpoint-storage.json").read_text())
    for shape in ("dedup", "count"):
        runs = [d for d in result["done"] if d["cell"]["shape"] == shape and d["cell"]["storage"] == "100"]
        off = [d["result"]["batch_ms_median"] for d in runs if d["cell"]["variant"] == "changelog_off"]
        on = [d["result"]["batch_ms_median"] for d in runs if not d["cell"]["variant"]]
        assert len(off) == len(on) == 3, shape
        # "a 5 s batch took 13-15 s, against 12 s with it on"
        assert max(on) < min(off) and min(off) >= 13_000 and max(off) < 15_000 and min(on) >= 12_000, (off, on)
        assert max(on) < 12_500, on


def test_checkpoint_storage_page_a_kill_halfway_through_a_batch_replays_half_a_batch():
    result = json.loads((RESULTS / "recovery.json").read_text())
    replayed = {run["interval"]: run for run in result["runs"]}
    assert (
        replayed["1 minute"]["killed_after_batch_start_s"] == 30
        and replayed["5 minutes"]["killed_after_batch_start_s"] == 150
    )
    assert round(replayed["1 minute"]["rows_replayed"], -3) == 42_000
    assert round(replayed["5 minutes"]["rows_replayed"], -3) == 166_000
    assert replayed["1 minute"]["lost"] == replayed["5 minutes"]["lost"] == 0


def test_checkpoint_storage_page_async_progress_tracking_cuts_the_stall_but_not_every_tail_at_100_ms():
    rows, _ = checkpoint_storage()
    async_100, sync_100 = rows[cell("stateless_async", 100)], rows[cell("stateless_sync", 100)]
    assert async_100["stall_ms"]["max"] * 4 < sync_100["stall_ms"]["min"], (async_100["stall_ms"], sync_100["stall_ms"])
    # Yet at 100 ms per request the async p99 is over 1 s, against under 400 ms at 0 ms.
    assert async_100["p99_ms"]["min"] > 1000 > 400 > rows[cell("stateless_async", 0)]["p99_ms"]["max"]


def test_checkpoint_storage_page_at_100_ms_per_request_the_stateful_median_itself_is_seconds():
    rows, _ = checkpoint_storage()
    for shape in ("dedup", "count"):
        slow, fast = rows[cell(shape, 100)], rows[cell(shape, 30)]
        assert slow["p50_ms"]["min"] > 2000 > 100 > fast["p50_ms"]["max"], (shape, slow["p50_ms"], fast["p50_ms"])
        assert slow["stall_ms"]["min"] > 5000, (shape, slow["stall_ms"])


def test_checkpoint_storage_page_a_flink_checkpoint_keeps_the_stores_latency_off_the_records():
    result = json.loads((RESULTS / "checkpoint-storage-flink.json").read_text())
    rows = {row["key"]: row for row in result["rows"]}
    assert set(rows) == {"stateless / disk", "stateless / s3 100 ms", "dedup / disk", "dedup / s3 100 ms"}, rows
    assert all(row["runs"] == 3 and row["missing"] == 0 for row in rows.values())
    # No stall: the longest gap during a checkpoint was 9-23 ms, between two 16-20 ms.
    for key, row in rows.items():
        assert 9 <= row["gap_during_ms"]["median"] <= 23, (key, row["gap_during_ms"])
        assert 16 <= row["gap_between_ms"]["median"] <= 20, (key, row["gap_between_ms"])
    # p99 at 100 ms per request: 15 and 24 ms; on disk 16 and 24 ms.
    assert [rows[k]["p99_ms"]["median"] for k in ("stateless / s3 100 ms", "dedup / s3 100 ms")] == [15, 24]
    assert [rows[k]["p99_ms"]["median"] for k in ("stateless / disk", "dedup / disk")] == [16, 24]
    # The checkpoint itself: 0.5 and 1.3 s at 100 ms, 29 and 78 ms on disk, inside the 5 s interval.
    slow = [rows[k]["end_to_end_ms"]["median"] for k in ("stateless / s3 100 ms", "dedup / s3 100 ms")]
    assert [round(v / 1000, 1) for v in slow] == [0.5, 1.3] and max(slow) < 5000, slow
    assert [rows[k]["end_to_end_ms"]["median"] for k in ("stateless / disk", "dedup / disk")] == [29, 78]
    # Requests per checkpoint and their chains: 16 and 34, in chains of 4 and 10.
    assert [rows[k]["requests_per_checkpoint"]["median"] for k in ("stateless / s3 100 ms", "dedup / s3 100 ms")] == [
        16,
        34,
    ]
    assert [rows[k]["chain"]["median"] for k in ("stateless / s3 100 ms", "dedup / s3 100 ms")] == [4, 10]
    assert result["checkpoint_interval"] in ("5 s", "5 seconds", 5000, 5), result["checkpoint_interval"]
    # "Two settings still differ": 25 s runs against Spark's 40 s at the 5 s batch duration; fetch wait 50 vs 10 ms.
    # (The Flink snippet imports pyflink, which lives in the Flink venv: its setting is read from the source.)
    from rtm_lab.benchmarks import latency_child

    spark = json.loads((RESULTS / "checkpoint-storage.json").read_text())
    assert result["seconds"] == 25, result["seconds"]
    assert {r["seconds"] for r in spark["done"] if r["cell"]["batch_duration"] == "5 seconds"} == {40}
    flink_snippet = (PROJECT_ROOT / "snippets/guides/rtm_or_flink_flink.py").read_text()
    assert 'CONSUMER = {"fetch.max.wait.ms": "50"}' in flink_snippet and latency_child.FETCH_MAX_WAIT_MS == 10


WARMUP_S = 5  # the second harness's warm-up, asserted per placement file below


def placement_runs(where: str, pipeline: str, rate: int, engine: str, profile: str = "tuned") -> list[dict]:
    """The second harness's runs of one cell, from docs/results/engines-WHERE.json."""
    result = json.loads((RESULTS / f"engines-{where}.json").read_text())
    runs = [
        r
        for r in result["runs"].values()
        if (r["pipeline"], r["rate"], r["engine"], r["profile"]) == (pipeline, rate, engine, profile)
    ]
    assert runs, (where, pipeline, rate, engine, profile)
    return runs


def placement_median(where: str, pipeline: str, rate: int, engine: str, name: str, profile: str = "tuned") -> float:
    return statistics.median(r[name] for r in placement_runs(where, pipeline, rate, engine, profile))


def behind(runs: list[dict]) -> list[int]:
    """Each run's measured seconds whose p99 passed 1 s, fewest first (the warm-up, 5 s in both placement files,
    left out)."""
    from rtm_lab.benchmarks import engines_report

    counts = [engines_report.seconds_behind(r, WARMUP_S) for r in runs]
    assert None not in counts
    return sorted(c for c in counts if c is not None)


@pytest.mark.parametrize("where", ["shared", "isolated"])
def test_rtm_or_flink_page_like_for_like_the_whole_matrix_lost_nothing_and_agreed(where):
    """Each placement's file: the matrix the page describes, one machine, nothing lost, the same output at each rate,
    RocksDB loaded in every stateful tuned run and Flink's checkpoints at-least-once."""
    from rtm_lab.benchmarks import engines_report

    result = json.loads((RESULTS / f"engines-{where}.json").read_text())
    runs = list(result["runs"].values())
    assert result["settings"]["placement"] == where and {r["placement"] for r in runs} == {where}
    assert result["settings"]["warmup_s"] == WARMUP_S and result["settings"]["seconds"] == 60
    assert len(engines_report.machines(result)) == 1
    assert all(r["missing"] == 0 and r["n"] > 0 for r in runs)
    assert engines_report.disagreements(result) == []
    for pipeline in PIPELINES_4:
        for engine in ("spark", "flink"):
            for rate in (1000, 10000):
                assert len(placement_runs(where, pipeline, rate, engine)) == 3, (pipeline, rate, engine)
            assert len(placement_runs(where, pipeline, 10000, engine, "default")) == 1, (pipeline, engine)
    stateful = [r for r in runs if r["pipeline"] in ("count", "dedup") and r["profile"] != "tuned-heap"]
    assert stateful and all(r["readback"]["rocksdb_library_loaded"] is True for r in stateful)
    assert {r["readback"]["checkpoint_mode"] for r in runs if r["engine"] == "flink"} == {"at_least_once"}
    assert result["settings"]["key_space"]["keys"] == 10000 and result["settings"]["key_space"]["zipf_exponent"] == 1.0


@pytest.mark.parametrize("where", ["shared", "isolated"])
def test_rtm_or_flink_page_like_for_like_at_1000_events_a_second_level_but_flinks_python_lookup(where):
    """1,000 events/s, tuned, in each placement: transform, count and deduplication level (equal median p50s of 4 to
    7 ms, median p99s within 5 ms, never a second behind); Flink's enrichment p50 16 to 17 ms against 5, at more
    than three times the CPU."""
    for pipeline in ("transform", "count", "dedup"):
        spark, flink = (placement_median(where, pipeline, 1000, e, "p50_ms") for e in ("spark", "flink"))
        assert spark == flink and 4 <= spark <= 7, (pipeline, spark, flink)
        spark, flink = (placement_median(where, pipeline, 1000, e, "p99_ms") for e in ("spark", "flink"))
        assert abs(spark - flink) <= 5, (pipeline, spark, flink)
    for pipeline in PIPELINES_4:
        for engine in ("spark", "flink"):
            assert behind(placement_runs(where, pipeline, 1000, engine)) == [0, 0, 0], (pipeline, engine)
    spark, flink = (placement_median(where, "enrich", 1000, e, "p50_ms") for e in ("spark", "flink"))
    assert spark == 5 and 16 <= flink <= 17, (spark, flink)
    cpu = [placement_median(where, "enrich", 1000, e, "cpu_s_per_m_events") for e in ("spark", "flink")]
    assert cpu[1] > 3 * cpu[0], cpu


def test_rtm_or_flink_page_like_for_like_at_10000_events_a_second_state_falls_behind_rtm_longer():
    """Shared cores, 10,000 events/s, tuned: both cores at least 90 % busy in every run; every stateful run of both
    engines fell behind, real-time mode's for longer, its p50 above every Flink run's."""
    result = json.loads((RESULTS / "engines-shared.json").read_text())
    at_10k = [r for r in result["runs"].values() if r["rate"] == 10000]
    assert min(min(r["core_busy"].values()) for r in at_10k) >= 0.90
    figures = {}
    for pipeline in ("count", "dedup"):
        spark, flink = (placement_runs("shared", pipeline, 10000, e) for e in ("spark", "flink"))
        assert min(behind(spark + flink)) > 0, pipeline
        assert min(behind(spark)) > max(behind(flink)), (pipeline, behind(spark), behind(flink))
        assert min(r["p50_ms"] for r in spark) > max(r["p50_ms"] for r in flink), pipeline
        figures[pipeline] = [
            round(f(r["p50_ms"] for r in runs) / 1000, 2) for runs in (spark, flink) for f in (min, max)
        ]
        figures[pipeline + " behind"] = [f(behind(runs)) for runs in (spark, flink) for f in (min, max)]
    # count: 3.3-13.4 s against 0.13-0.33 s; dedup: 1.0-21.8 s against 0.09-0.85 s; behind 34-60 / 22-33, 40-60 / 22-39
    assert figures == {
        "count": [3.27, 13.41, 0.13, 0.33],
        "count behind": [34, 60, 22, 33],
        "dedup": [1.0, 21.76, 0.09, 0.85],
        "dedup behind": [40, 60, 22, 39],
    }


def test_rtm_or_flink_page_like_for_like_at_10000_events_a_second_rtms_stateless_tail_is_shorter():
    """Shared cores, 10,000 events/s, tuned: real-time mode's enrichment never a second behind and every run's p99
    under every Flink run's; Flink caught up by second 16; the transform's medians ordered alike, its ranges overlap."""
    spark, flink = (placement_runs("shared", "enrich", 10000, e) for e in ("spark", "flink"))
    assert behind(spark) == [0, 0, 0] and min(behind(flink)) > 0
    assert max(r["p99_ms"] for r in spark) < min(r["p99_ms"] for r in flink)
    fields = flink[0]["series_fields"]
    t, p99 = fields.index("second"), fields.index("p99_ms")
    last_behind = max(row[t] for r in flink for row in r["series"] if row[p99] is not None and row[p99] > 1000)
    assert last_behind <= 16, last_behind
    spark, flink = ([r["p99_ms"] for r in placement_runs("shared", "transform", 10000, e)] for e in ("spark", "flink"))
    assert statistics.median(spark) < statistics.median(flink)
    assert min(spark) < max(flink) and min(flink) < max(spark), (spark, flink)  # the ranges overlap


def test_rtm_or_flink_page_like_for_like_cpu_follows_state_and_memory():
    """Shared cores: real-time mode used less CPU per event on the stateless pipelines and more on the stateful ones,
    in the tuned medians at both rates and in the single default runs; its transform peaked at about twice Flink's
    memory, the other three pipelines within 15 %."""
    for pipeline, rtm_cheaper in (("transform", True), ("enrich", True), ("count", False), ("dedup", False)):
        for rate, profile in ((1000, "tuned"), (10000, "tuned"), (10000, "default")):
            spark, flink = (
                placement_median("shared", pipeline, rate, e, "cpu_s_per_m_events", profile) for e in ("spark", "flink")
            )
            assert (spark < flink) == rtm_cheaper, (pipeline, rate, profile, spark, flink)
        for rate in (1000, 10000):
            spark, flink = (placement_median("shared", pipeline, rate, e, "rss_peak_mib") for e in ("spark", "flink"))
            if pipeline == "transform":
                assert 1.7 <= spark / flink <= 2.0, (rate, spark, flink)
            else:
                assert abs(spark / flink - 1) <= 0.15, (pipeline, rate, spark, flink)


def test_rtm_or_flink_page_like_for_like_flinks_heap_backend_and_the_keys():
    """Shared cores: on its heap backend Flink's count and deduplication fell behind for far fewer seconds than on
    RocksDB at 10,000 events/s; at 1,000 the two were level. The count's keyed work: 61 % on one Flink task, 54 % on
    one Spark task."""
    for pipeline in ("count", "dedup"):
        heap, rocks = (placement_runs("shared", pipeline, 10000, "flink", p) for p in ("tuned-heap", "tuned"))
        assert max(behind(heap)) < min(behind(rocks)), (pipeline, behind(heap), behind(rocks))
        assert max(behind(heap)) <= 7 and min(behind(rocks)) >= 22
        assert max(r["p50_ms"] for r in heap) < min(r["p50_ms"] for r in rocks), pipeline
        heap_p50, rocks_p50 = (
            placement_median("shared", pipeline, 1000, "flink", "p50_ms", p) for p in ("tuned-heap", "tuned")
        )
        assert abs(heap_p50 - rocks_p50) <= 1, pipeline
    (count,) = {tuple(r["task_shares"]["flink"]) for r in placement_runs("shared", "count", 10000, "flink")}
    (spark_count,) = {tuple(r["task_shares"]["spark"]) for r in placement_runs("shared", "count", 10000, "spark")}
    assert round(max(count), 2) == 0.61 and round(max(spark_count), 2) == 0.54


def test_rtm_or_flink_page_like_for_like_at_defaults():
    """Shared cores, defaults, one run each at 10,000 events/s: Flink's enrichment p50 above 100 ms against real-time
    mode's under 10 (its Python bundle waits up to 1 s); real-time mode's count and deduplication fewer seconds
    behind at the default 50 ms wait than at the tuned 5 ms."""
    (spark,) = placement_runs("shared", "enrich", 10000, "spark", "default")
    (flink,) = placement_runs("shared", "enrich", 10000, "flink", "default")
    assert spark["p50_ms"] < 10 and flink["p50_ms"] > 100
    for pipeline in ("count", "dedup"):
        (default,) = behind(placement_runs("shared", pipeline, 10000, "spark", "default"))
        assert default < min(behind(placement_runs("shared", pipeline, 10000, "spark"))), pipeline


def test_rtm_or_flink_page_like_for_like_isolated_pins_the_engine_and_fills_the_harness_core():
    """Isolated: every engine process on core 0 only, read back from its affinity (shared: both cores); at 10,000
    events/s the harness's core full in every run and the input appended in bursts; /proc/stat's core share counted
    less than the engine's own CPU time in some runs, so the page calls it rough."""
    from rtm_lab.benchmarks import engines_report

    isolated = json.loads((RESULTS / "engines-isolated.json").read_text())["runs"].values()
    shared = json.loads((RESULTS / "engines-shared.json").read_text())["runs"].values()
    assert {tuple(r["engine_cores"]) for r in isolated} == {(0,)}
    assert {tuple(r["engine_cores"]) for r in shared} == {(0, 1)}
    at_10k = [r for r in isolated if r["rate"] == 10000]
    assert min(r["core_busy"]["1"] for r in at_10k) >= 0.98
    fields = at_10k[0]["series_fields"]
    t, ins = fields.index("second"), fields.index("in_per_s")
    busiest = [max(row[ins] for row in r["series"] if row[t] >= WARMUP_S) for r in at_10k]
    assert min(busiest) >= 30000, busiest
    under = [r for r in isolated if r["cpu_s"] / r["cpu_window_s"] > r["core_busy"]["0"] + 0.05]
    assert under, "no run where /proc/stat counted less than the engine's own CPU time"
    assert engines_report.placement({"runs": {k: r for k, r in enumerate(isolated)}}) == "isolated"


def test_rtm_or_flink_page_like_for_like_isolated_at_10000_events_a_second_nothing_falls_behind():
    """Isolated, 10,000 events/s, tuned: no run of either engine a second behind, on any pipeline; the stateful
    pipelines' p99 under 1 s; on the stateless ones Flink's median p50 lower than real-time mode's."""
    for pipeline in PIPELINES_4:
        for engine in ("spark", "flink"):
            runs = placement_runs("isolated", pipeline, 10000, engine)
            assert behind(runs) == [0] * len(runs), (pipeline, engine)
            if pipeline in ("count", "dedup"):
                assert max(r["p99_ms"] for r in runs) < 1000, (pipeline, engine)
    for pipeline in ("transform", "enrich"):
        spark, flink = (placement_median("isolated", pipeline, 10000, e, "p50_ms") for e in ("spark", "flink"))
        assert flink < spark, (pipeline, spark, flink)
    # At defaults, one run each: only real-time mode's deduplication and Flink's enrichment were behind, 1 s each.
    defaults = {
        (p, e): behind(placement_runs("isolated", p, 10000, e, "default"))
        for p in PIPELINES_4
        for e in ("spark", "flink")
    }
    assert {k: v for k, v in defaults.items() if v != [0]} == {("dedup", "spark"): [1], ("enrich", "flink"): [1]}


def test_rtm_or_flink_page_like_for_like_sharing_the_cores_cost_rtm_more():
    """The count and the deduplication at 10,000 events/s, tuned: real-time mode's median p50 on shared cores was
    over ten times its isolated one; Flink's less than ten times; only on shared cores did either fall behind."""
    for pipeline in ("count", "dedup"):
        ratio = {
            e: placement_median("shared", pipeline, 10000, e, "p50_ms")
            / placement_median("isolated", pipeline, 10000, e, "p50_ms")
            for e in ("spark", "flink")
        }
        assert ratio["spark"] > 10 > ratio["flink"], (pipeline, ratio)


@pytest.mark.parametrize("rate", [1000, 10000])
def test_rtm_or_flink_page_like_for_like_stateless_cpu_in_both_placements(rate):
    """Real-time mode used less CPU per event than Flink on the transform and the enrichment, in the tuned medians of
    both placements."""
    for where in ("shared", "isolated"):
        for pipeline in ("transform", "enrich"):
            spark, flink = (
                placement_median(where, pipeline, rate, e, "cpu_s_per_m_events") for e in ("spark", "flink")
            )
            assert spark < flink, (where, pipeline, rate, spark, flink)


def per_task_results() -> dict:
    return json.loads((RESULTS / "per-task-throughput.json").read_text())


def test_capacity_planning_page_one_task_held_these_rates_at_100_ms_and_the_harness_core_set_the_limit():
    result = per_task_results()
    cap = result["capacity"]
    at_100 = {shape: (cap[shape]["100"]["held_rate"], cap[shape]["100"]["not_held_rate"]) for shape in cap}
    assert at_100["stateless"] == (6490, 7070), at_100
    assert at_100["groupby-count"] == (6170, 6730), at_100
    assert at_100["dedup"] == (5190, 5660), at_100
    for shape in ("stateless", "groupby-count", "dedup"):
        assert cap[shape]["100"]["bracket_pct"] <= 10, cap[shape]
        assert cap[shape]["100"]["full_cores"] == ["harness core"], cap[shape]
    # "Stateful costs little here": the count's figure within 10 % of the stateless one.
    assert at_100["groupby-count"][0] >= 0.9 * at_100["stateless"][0], at_100
    # Over the measured minute of every run that recorded it: harness core at least 98 % busy, engine core under 60 %.
    pinned = result["settings"]["pinned"]
    engine, harness = str(pinned["engine_cores"][0]), str(pinned["harness_cores"][0])
    minutes = [r["core_busy_measured"] for r in result["runs"] if r.get("core_busy_measured")]
    assert len(minutes) >= 10, len(minutes)
    assert min(m[harness] for m in minutes) >= 0.98, minutes
    assert max(m[engine] for m in minutes) < 0.6, minutes
    # The In short box: the ad-attribution processor held 1,830, and no core was full at its limit or the writer's.
    assert at_100["ad-attribution"] == (1830, 2000), at_100
    assert at_100["postgres-jvm"][0] == 707, at_100
    assert cap["ad-attribution"]["100"]["full_cores"] == cap["postgres-jvm"]["100"]["full_cores"] == [], cap


def test_capacity_planning_page_the_ad_attribution_processor_falls_off_a_cliff_with_neither_core_full():
    """1,830 events/s held at both bounds (915 pairs a second), p99 16 to 25 ms there; at 2,000 a median of 142 ms and
    a p99 of 2.8 s; neither core full at 2,000 (65 % and 84 % over the run)."""
    result = per_task_results()
    ad = result["capacity"]["ad-attribution"]
    for bound in ("100", "1000"):
        assert (ad[bound]["held_rate"], ad[bound]["not_held_rate"]) == (1830, 2000), ad
    runs = [r for r in result["runs"] if r["shape"] == "ad-attribution"]
    held = [r for r in runs if r["rate"] == 1830]
    assert len(held) == 3 and sorted(r["p99_ms"] for r in held) == [16, 23, 25], held
    # Requests and acks count alike: each pair gives one attribution, so a run measures half its events.
    measured_s = result["settings"]["seconds"]
    assert all(r["samples"] == r["rate"] * measured_s / 2 for r in runs), [(r["rate"], r["samples"]) for r in runs]
    (cliff,) = [r for r in runs if r["rate"] == 2000]
    assert (cliff["p50_ms"], cliff["p99_ms"]) == (142, 2752), cliff
    assert cliff["lost"] == 0 and cliff["reached_rate"] == 2000, cliff
    busy = cliff["core_busy"]
    engine, harness = (str(result["settings"]["pinned"][k][0]) for k in ("engine_cores", "harness_cores"))
    assert (round(busy[engine], 2), round(busy[harness], 2)) == (0.65, 0.84), busy


def test_capacity_planning_page_a_longer_warm_up_moves_the_ad_processors_limit_by_one_step():
    """With 180 s of warm-up instead of 60 s, one task held 2,000 events/s in three runs of three, p99 29 to 80 ms; at
    2,180 one run of two was not held, p99 322 ms; the table and the planner keep 1,830."""
    from rtm_lab.benchmarks import per_task_search
    from snippets.guides.capacity_plan import Capacity, read_capacity

    warm = json.loads((RESULTS / "per-task-ad-warmup-180.json").read_text())
    main = per_task_results()
    assert warm["machine"] == main["machine"], "every cell on one machine"
    assert (warm["settings"]["warmup_s"], main["settings"]["warmup_s"]) == (180, 60), (
        warm["settings"],
        main["settings"],
    )
    assert warm["settings"]["seconds"] == main["settings"]["seconds"] == 60
    runs = [r for r in warm["runs"] if r["shape"] == "ad-attribution"]
    by_rate = per_task_search.steps(runs, 1)
    assert [per_task_search.run_verdict(r, 100) for r in by_rate[2000]] == ["held"] * 3, by_rate[2000]
    assert sorted(r["p99_ms"] for r in by_rate[2000]) == [29, 32, 80], by_rate[2000]
    verdicts = [(per_task_search.run_verdict(r, 100), r["p99_ms"]) for r in by_rate[2180]]
    assert verdicts == [("held", 57), ("not held", 322)], verdicts
    # "by one step": the search's next step above 2,000, the same bracket rule as the table's.
    cap = warm["capacity"]["ad-attribution"]["100"]
    assert (cap["held_rate"], cap["not_held_rate"]) == (2000, 2180), cap
    # The 60 s search's held rate sits one step below.
    assert (
        main["capacity"]["ad-attribution"]["100"]["held_rate"],
        main["capacity"]["ad-attribution"]["100"]["not_held_rate"],
    ) == (1830, 2000)
    # "The table and the planner keep 1,830."
    found = read_capacity(main, "ad-attribution", 100, "per-task-throughput.json")
    assert isinstance(found, Capacity) and found.rate == 1830, found


def test_capacity_planning_page_the_1_s_figures_and_the_whole_query_ceilings():
    from rtm_lab.benchmarks import engine_capacity_report, per_task_search

    result = per_task_results()
    cap = result["capacity"]
    count, stateless = cap["groupby-count"]["1000"], cap["stateless"]["1000"]
    assert (count["held_rate"], count["not_held_rate"]) == (16000, 17400), count
    # One stateless task held 40,000 at 1 s, a floor: at 80,000 the generator fell short, which ended the search.
    assert (stateless["held_rate"], stateless["not_held_rate"]) == (40000, None), stateless
    steps = per_task_search.steps([r for r in result["runs"] if r["shape"] == "stateless"], 1)
    assert [per_task_search.run_verdict(r, 1000) for r in steps[40000]] == ["held"] * 3, steps[40000]
    assert [per_task_search.run_verdict(r, 1000) for r in steps[80000]] == ["generator short"], steps[80000]
    # Two stateless tasks at that floor make 80,000; the whole transform query held 56,600 at its 2 s bound.
    whole_transform = engine_capacity_report.capacity(capacity_runs("spark", "transform"), 3)
    assert (2 * stateless["held_rate"], whole_transform["held_rate"]) == (80000, 56600), whole_transform
    # Two counting tasks at the 1 s figure: 32,000; the whole query held 6,490 and not 7,070.
    assert 2 * count["held_rate"] == 32000
    whole = engine_capacity_report.capacity(capacity_runs("spark", "count"), 3)
    assert (whole["held_rate"], whole["not_held_rate"]) == (6490, 7070), whole
    # "Plan with the 100 ms figure: it is the lower one."
    assert cap["groupby-count"]["100"]["held_rate"] < count["held_rate"]
    # "For dedup the two figures are closer: two tasks make 13,460 events/s, and the whole query held 7,070."
    dedup = cap["dedup"]["1000"]
    assert (dedup["held_rate"], dedup["not_held_rate"]) == (6730, 7340), dedup
    assert 2 * dedup["held_rate"] == 13460
    whole_dedup = engine_capacity_report.capacity(capacity_runs("spark", "dedup"), 3)
    assert whole_dedup["held_rate"] == 7070, whole_dedup


def test_capacity_planning_page_dedup_costs_more_and_the_looser_bound_buys_it_little():
    from rtm_lab import keyspace
    from rtm_lab.benchmarks import engine_run

    cap = per_task_results()["capacity"]
    held = {shape: {b: cap[shape][b]["held_rate"] for b in ("100", "1000")} for shape in ("groupby-count", "dedup")}
    stateless = cap["stateless"]["100"]["held_rate"]
    # "The count's figure is within 10 % of the stateless one, the dedup's 20 % below it."
    assert held["groupby-count"]["100"] >= 0.9 * stateless
    assert round((1 - held["dedup"]["100"] / stateless) * 100) == 20, held
    # "Its 1 s figure is 1.3 times its 100 ms one; the count's is 2.6 times."
    assert round(held["dedup"]["1000"] / held["dedup"]["100"], 1) == 1.3, held
    assert round(held["groupby-count"]["1000"] / held["groupby-count"]["100"], 1) == 2.6, held
    # "Nine events in ten carry a new id"; "the count's state stays within 10,000 users".
    events = [engine_run.engine_event(seq) for seq in range(10_000)]
    assert len({e["id"] for e in events}) == 9_000
    assert keyspace.KEYS == 10_000 and {e["user"] for e in events} <= {keyspace.user(r) for r in range(keyspace.KEYS)}


def test_capacity_planning_page_the_core_shares_behind_the_gap_and_a_tasks_cpu():
    """The warning's three bullets and "Most of a task's CPU does not grow with the rate", from the two results."""
    from rtm_lab.benchmarks import per_task_search

    whole = capacity_runs("spark", "count")
    by_rate = {r["rate"] for r in whole}
    assert {5000, 10000} <= by_rate, by_rate
    # "No core was idle: both read 86 to 100 % busy at every rate, 5,000 included."
    shares = [share for r in whole for share in r["core_busy"].values()]
    assert round(min(shares) * 100) == 86 and max(shares) <= 1.0, shares
    # "The engine used 31 to 42 CPU-seconds a minute, at 5,000 and at 10,000 alike."
    assert all(59 <= r["cpu_window_s"] <= 61 for r in whole), [r["cpu_window_s"] for r in whole]
    cpu = {rate: [r["cpu_s"] for r in whole if r["rate"] == rate] for rate in (5000, 10000)}
    assert round(min(min(v) for v in cpu.values())) == 31 and round(max(max(v) for v in cpu.values())) == 42, cpu
    # One counting task, its engine core over the measured minute.
    result = per_task_results()
    engine = str(result["settings"]["pinned"]["engine_cores"][0])
    harness = str(result["settings"]["pinned"]["harness_cores"][0])
    runs = [r for r in result["runs"] if r["shape"] == "groupby-count" and r.get("core_busy_measured")]
    low = [r["core_busy_measured"][engine] for r in runs if 4000 <= r["rate"] <= 6730]
    at_16k = [r["core_busy_measured"][engine] for r in runs if r["rate"] == 16000]
    assert (round(min(low) * 100), round(max(low) * 100)) == (25, 34), low
    assert len(at_16k) == 3 and (round(min(at_16k) * 100), round(max(at_16k) * 100)) == (35, 40), at_16k
    # "The harness core read full at 4,000 events/s too, where every run held."
    at_4k = [r for r in runs if r["rate"] == 4000]
    assert len(at_4k) == 3 and all(r["core_busy_measured"][harness] >= 0.98 for r in at_4k), at_4k
    assert all(per_task_search.run_verdict(r, 100) == "held" for r in at_4k), at_4k


def test_capacity_planning_page_the_plan_check_matched_the_planner_at_each_factor():
    from rtm_lab.benchmarks import per_task_search

    result = json.loads((RESULTS / "plan-check.json").read_text())
    assert result["settings"]["capacity"] == 6170 and result["settings"]["bound_ms"] == 100, result["settings"]
    by_rate = per_task_search.steps(result["runs"], 1)
    verdicts = {rate: {per_task_search.run_verdict(r, 100) for r in runs} for rate, runs in by_rate.items()}
    p99 = {rate: [r["p99_ms"] for r in runs] for rate, runs in by_rate.items()}
    assert sorted(verdicts) == [3085, 5553, 8021], verdicts
    assert all(len(runs) == 3 for runs in by_rate.values()), by_rate
    assert verdicts[3085] == verdicts[5553] == {"held"}, verdicts
    assert verdicts[8021] == {"not held"}, verdicts
    assert min(p99[3085] + p99[5553]) >= 58 and max(p99[3085] + p99[5553]) <= 60, p99
    assert (min(p99[8021]), max(p99[8021])) == (178, 260), p99


def test_capacity_planning_page_the_postgres_writer_is_set_by_stalls():
    from rtm_lab.benchmarks import per_task_search

    result = per_task_results()
    cap = result["capacity"]["postgres-jvm"]
    assert (cap["100"]["held_rate"], cap["100"]["not_held_rate"]) == (707, 771), cap
    assert cap["100"]["full_cores"] == [], cap  # "not by a busy core"
    # "held 16,000 events/s and not 17,400"; "the harness core, where PostgreSQL runs, was 93 % busy; the engine
    # core 25 %" at 17,400.
    assert (cap["1000"]["held_rate"], cap["1000"]["not_held_rate"]) == (16000, 17400), cap
    assert cap["1000"]["full_cores"] == ["harness core"], cap
    # "with the two cores 10 % and 31 % busy" at the step not held at 100 ms: the table's row says both bounds.
    table = (RESULTS / "per-task-throughput.md").read_text()
    assert (
        "| postgres-jvm | 707 held, 771 not (within 9.1 %) | 16,000 held, 17,400 not (within 8.7 %) "
        "| neither core (10% / 31%) | harness core (25% / 93%) |"
    ) in table
    by_rate = per_task_search.steps([r for r in result["runs"] if r["shape"] == "postgres-jvm"], 1)
    held = {rate: [per_task_search.run_verdict(r, 100) == "held" for r in by_rate[rate]] for rate in (1000, 2000)}
    assert sorted(held[2000]) == [False, True, True], held  # "At 2,000 two runs of three held"
    assert held[1000] == [False, False, False], held  # "at 1,000 none did"

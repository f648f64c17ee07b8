"""The highest rate each engine holds (`bench.py engine-capacity`), searched rather than stepped up a ladder.

A run is one rtm_lab.benchmarks.engine_run run (the engine comparison's harness, tuned profile, 60 s measured after
a 60 s warm-up). A run holds its rate by the project's one rule (rtm_lab.benchmarks.held_rate): p99 under
held_rate.BOUND_MS over the measured 60 s, nothing lost. A step (one rate) is held when all its RUNS_PER_STEP runs
held; every step gets all its runs, so each has a median to show. The search is per_task_search's: it doubles from
START_RATE until a step is not held, then narrows geometrically until the lowest rate not held is within 10 % of the
highest held. A step whose generator fell short (held_rate.OFFERED_SHARE) is the ceiling of the search too, and the
summary says the machine, not the engine, set that limit.

The six searches (transform, count and deduplication, on each engine) take turns run by run, so a drift in the
machine's load spreads over all of them. Each placement has its own results file (docs/results/engine-capacity-PLACEMENT.json), and
a file holds one machine and one set of run settings. Resumable: a rerun reads the file and carries on.

    python scripts/bench.py engine-capacity --list
    python scripts/bench.py engine-capacity --until 23:30
"""

import argparse
import datetime as dt
import sys
from pathlib import Path

from rtm_lab import cli, machine
from rtm_lab.benchmarks import (
    engine_capacity_report,
    engine_run,
    engines,
    engines_report,
    held_rate,
    results_file,
    run_record,
)
from rtm_lab.benchmarks.per_task_search import SEARCH_DONE, next_rate
from rtm_lab.paths import PROJECT_ROOT

PIPELINES = engine_capacity_report.PIPELINES
RUNS_PER_STEP = 3
START_RATE = 10_000.0
# A 60 s warm-up: every run starts behind (JIT compilation, the first fetches), and after 5 s real-time mode's count
# at 5,000 events/s still had ~30 s of start-up backlog ahead, a p99 of 4-11 s that said nothing about the rate it
# holds once warm (runs of 2026-11-28 with a 5 s warm-up, kept out of the results).
SECONDS, WARMUP_S = 60.0, 60.0
BOUNDS = (float(held_rate.BOUND_MS),)
# For --list only: where each search is guessed to end. The transform's from the old doubling ladder on this machine
# (real-time mode held 20,000 but not 40,000; Flink's generator fell short at 80,000); the count's from this search's
# first steps (real-time mode held 5,000, not 10,000; Flink 10,000, not 20,000); the deduplication's, at most the
# count's. The search never reads it.
GUESSED_LIMIT = {
    ("spark", "transform"): 30_000.0,
    ("flink", "transform"): 70_000.0,
    ("spark", "count"): 7_000.0,
    ("flink", "count"): 14_000.0,
    ("spark", "dedup"): 5_000.0,
    ("flink", "dedup"): 10_000.0,
}
RUN_SETTINGS = ("seconds", "warmup_s", "bound_ms", "runs_per_step", "start_rate", "placement")


def results_path(placement: str) -> Path:
    return PROJECT_ROOT / "docs" / "results" / f"engine-capacity-{placement}.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--list", action="store_true", help="print each search's state and its expected time, and stop")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="ENGINE/PIPELINE",
        help="only these searches (globs, e.g. 'flink/*'); repeatable",
    )
    parser.add_argument(
        "--placement",
        choices=engine_run.PLACEMENTS,
        default="shared",
        help="shared (default) or isolated: the engine on core 0, the broker and harness on core 1",
    )
    parser.add_argument("--seconds", type=cli.positive_float, default=SECONDS, help="measured seconds (default 60)")
    parser.add_argument("--warmup", type=cli.non_negative_float, default=WARMUP_S, help="warm-up seconds (default 60)")
    parser.add_argument("--runs", type=cli.positive_int, default=RUNS_PER_STEP, help="runs per step (default 3)")
    parser.add_argument(
        "--start-rate", type=cli.positive_float, default=START_RATE, help="each search's first step (default 10000)"
    )
    parser.add_argument(
        "--until",
        type=cli.clock_time,
        metavar="HH:MM",
        help="start no run that would end after HH:MM UTC (the next one: past midnight works)",
    )
    parser.add_argument("--max-runs", type=cli.positive_int, help="stop after this many runs in all (a smoke: 1)")
    parser.add_argument(
        "--json", type=cli.json_output, help="results file (default docs/results/engine-capacity-PLACEMENT.json)"
    )


def searches(only: list[str]) -> list[tuple[str, str]]:
    import fnmatch

    keys = [(engine, pipeline) for pipeline in PIPELINES for engine in engine_run.ENGINES]
    if not only:
        return keys
    return [k for k in keys if any(fnmatch.fnmatch(f"{k[0]}/{k[1]}", pattern) for pattern in only)]


def runs_of(result: dict, engine: str, pipeline: str) -> list[dict]:
    return [r for r in result["runs"] if r["engine"] == engine and r["pipeline"] == pipeline]


def next_step(runs: list[dict], settings: dict) -> tuple[float | None, str]:
    """The next rate of one search, by per_task_search's bracketing under this benchmark's choices."""
    return next_rate(
        runs, settings["start_rate"], settings["runs_per_step"], BOUNDS, settle_early=False, short_ends_search=False
    )


def guessed_runs(runs: list[dict], settings: dict, limit: float) -> list[float]:
    """The rates of the runs a search still has to make if its engine holds every rate up to `limit` and none above
    (a guess, for --list): the search itself, run on made-up runs."""
    made = list(runs)
    rates: list[float] = []
    while len(rates) < 200:
        rate, _ = next_step(made, settings)
        if rate is None:
            break
        held = rate <= limit
        made.append({"rate": rate, "p99_ms": 1.0 if held else 1e9, "lost": 0, "reached_rate": rate})
        rates.append(rate)
    return rates


def row(figures: dict) -> dict:
    """A run's row: the engine run's figures under the names the held-rate rule reads (lost, reached_rate)."""
    verdict = held_rate.verdict(
        figures.get("p99_ms"), figures.get("missing"), figures["rate"], figures.get("achieved_rate")
    )
    return {
        **figures,
        "lost": figures.get("missing"),
        "reached_rate": figures.get("achieved_rate"),
        "verdict_at_run": verdict,
    }


def load(path: Path) -> dict:
    return results_file.load(path, "engine-capacity", {"runs": [], "invocations": []})


def refusal(result: dict, settings: dict, here: str) -> str | None:
    """Why new runs may not join this results file (another machine or placement, other settings); None if they may."""
    if not result["runs"]:
        return None
    there = {engines_report.machine_key(r) for r in result["runs"]}
    if there != {here}:
        return f"was measured on {', '.join(sorted(there))}; this machine is {here}"
    old = {k: result.get("settings", {}).get(k) for k in RUN_SETTINGS}
    if old != {k: settings[k] for k in RUN_SETTINGS}:
        return f"holds runs made with {old}"
    return None


def main(args: argparse.Namespace, command: str) -> int:
    path = args.json or results_path(args.placement)
    settings = {
        "seconds": args.seconds,
        "warmup_s": args.warmup,
        "bound_ms": held_rate.BOUND_MS,
        "offered_share": held_rate.OFFERED_SHARE,
        "runs_per_step": args.runs,
        "start_rate": args.start_rate,
        "placement": args.placement,
        "bracket": "the lowest rate not held within 10 % of the highest held (per_task_search)",
    }
    keys = searches(args.only)
    if not keys:
        print("error: no search matches --only; the searches are ENGINE/PIPELINE, e.g. spark/count", file=sys.stderr)
        return 2
    result = load(path)
    refused = refusal(result, settings, engines_report.machine_key({"machine": machine.describe()}))
    if refused:
        print(f"error: {path} {refused}; give another --json", file=sys.stderr)
        return 2
    if args.list:
        return _list(result, settings, keys)
    result["settings"] = {**settings, "engines": engines.settings(args.seconds, args.warmup, args.placement)}
    made = 0
    try:
        with run_record.on_the_lab(command) as (invocation, state):
            while True:
                turn = [(k, next_step(runs_of(result, *k), settings)) for k in keys]
                turn = [(k, step) for k, step in turn if step[0] is not None]
                if not turn:
                    print("every search is over", flush=True)
                    break
                for (engine, pipeline), (rate, why) in turn:
                    assert rate is not None  # filtered above
                    expected = engines.estimate_s((engine, pipeline, rate), args.seconds, args.warmup)
                    if args.until and dt.datetime.now(dt.UTC) + dt.timedelta(seconds=expected) > args.until:
                        print(f"stopped: the next run would end after {args.until:%H:%M} UTC; rerun to resume")
                        return _finish(result, path, invocation)
                    if args.max_runs is not None and made >= args.max_runs:
                        print(f"stopped after {made} run(s) (--max-runs); rerun to resume")
                        return _finish(result, path, invocation)
                    print(f"{engine}/{pipeline} at {rate:,.0f} events/s ({why})", flush=True)
                    record = run_record.Run(command)
                    figures = engine_run.run(
                        engine,
                        pipeline,
                        rate,
                        args.seconds,
                        args.warmup,
                        "tuned",
                        state.kafka_bootstrap,
                        say=lambda line: print(f"  {line}", flush=True),
                        placement=args.placement,
                        broker_pid=None if state.kafka.external else state.kafka.pid,
                    )
                    got = {**row(figures), **record.record()}
                    result["runs"].append(got)
                    engines.save(result, path)
                    made += 1
                    print(
                        f"  {got['verdict_at_run']}: p99 {got.get('p99_ms')} ms, generator {got['reached_rate']:,.0f}"
                    )
            return _finish(result, path, invocation)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _finish(result: dict, path: Path, invocation: run_record.Run) -> int:
    result["invocations"] = [*result.get("invocations", []), invocation.record()]
    engines.save(result, path)
    md = engine_capacity_report.write(result, path)
    print(f"wrote {path} and {md}")
    return 0


def _list(result: dict, settings: dict, keys: list[tuple[str, str]]) -> int:
    total_s, total_runs = 0.0, 0
    for engine, pipeline in keys:
        runs = runs_of(result, engine, pipeline)
        rate, why = next_step(runs, settings)
        guess = guessed_runs(runs, settings, GUESSED_LIMIT[engine, pipeline])
        seconds = sum(
            engines.estimate_s((engine, pipeline, r), settings["seconds"], settings["warmup_s"]) for r in guess
        )
        total_s, total_runs = total_s + seconds, total_runs + len(guess)
        state = f"next {rate:,.0f} events/s ({why})" if rate is not None else f"over ({why or SEARCH_DONE})"
        print(
            f"{engine}/{pipeline}: {len(runs)} runs made; {state}; about {len(guess)} runs left "
            f"({seconds / 3600:.1f} h) if its limit is near {GUESSED_LIMIT[engine, pipeline]:,.0f} events/s"
        )
    print(f"about {total_runs} runs, {total_s / 3600:.1f} hours in all ({settings['placement']})")
    return 0

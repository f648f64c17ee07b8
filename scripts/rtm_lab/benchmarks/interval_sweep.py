"""The batch duration sweep of `scripts/bench.py latency`: real-time mode once per `--batch-duration` per repeat, the
micro-batch modes once per repeat at the same rate, one row per batch duration (and per micro-batch mode) with the median
and spread over the repeats.

It runs when `--batch-duration` is given more than once or `--repeat` is given. Each real-time run produces for
max(--seconds, batch duration + warm-up + MARGIN_S) seconds, capped by --max-seconds, so it crosses at least one real
batch boundary where the cap allows; a row whose runs held none says so. The runs of one repeat follow each other
(micro-batch modes, then each batch duration), so a load change on the machine spreads over rows instead of hitting one.
"""

import argparse
import math
import statistics
import sys
from typing import Any

from rtm_lab import cli
from rtm_lab.benchmarks.boundaries import segment_medians
from rtm_lab.intervals import MIN_REAL_TIME_INTERVAL_MS, interval_ms

# Past the batch duration + warm-up, time for the batch to end late and the next to start (median overrun ~0.2-0.3 s at 5 s).
MARGIN_S = 5.0
MAX_SECONDS = {"full": 600.0, "quick": 12.0}
# Spark refuses a shorter batch duration (spark.sql.streaming.realTimeMode.minBatchDuration, default 5000 ms).

# What a child adds to its production time on this machine (session start, priming, drain, stop), for the estimate.
OVERHEAD_S = 45.0
FIGURES = (
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "p99.9_ms",
    "max_ms",
    "boundaries_crossed",
    "stall_median_ms",
    "stall_max_ms",
    "overrun_median_ms",
    "missing",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--repeat",
        type=cli.positive_int,
        help="run every row this many times and report the median and the spread (min-max); giving it, or "
        "--batch-duration more than once, runs the batch duration sweep (with --pipeline ad_attribution and one batch duration: the "
        "ad pipeline's rows, every mode at every rate)",
    )
    parser.add_argument(
        "--max-seconds",
        type=cli.positive_float,
        help=f"batch duration sweep: cap on one real-time run's production time (default {MAX_SECONDS['full']:.0f}; "
        f"--quick {MAX_SECONDS['quick']:.0f})",
    )


def wanted(args: argparse.Namespace) -> bool:
    """The sweep runs for several batch durations, or for --repeat on the passthrough pipeline. With --pipeline
    ad_attribution and one batch duration, --repeat repeats the ad pipeline's rows instead (rtm_lab.benchmarks.latency.run)."""
    repeat_rows = args.repeat is not None and getattr(args, "pipeline", "passthrough") == "ad_attribution"
    return len(args.interval or []) > 1 or (args.repeat is not None and not repeat_rows)


def _finite_positive(value: float) -> bool:
    return math.isfinite(value) and value > 0


def check_arguments(args: argparse.Namespace, rates: list[float], seconds: float, warmup: float) -> str | None:
    """One line saying what is wrong with the command line, or None."""
    for rate in rates:
        if not _finite_positive(rate):
            return f"--rate {rate:g} is not a positive number of events per second"
    if not _finite_positive(seconds):
        return f"--seconds {seconds:g} must be a positive number of seconds"
    if not (math.isfinite(warmup) and 0 <= warmup < seconds):
        return f"--warmup {warmup:g} must be at least 0 and below --seconds ({seconds:g})"
    for text in args.interval or []:
        try:
            ms = interval_ms(text)
        except ValueError as exc:
            return f"--batch-duration: {exc}"
        if ms < MIN_REAL_TIME_INTERVAL_MS:
            return (
                f"--batch-duration {text!r} is under the 5 seconds Spark accepts for realTime (it would refuse the query "
                "with INVALID_STREAMING_REAL_TIME_MODE_TRIGGER_INTERVAL); use '5 seconds' or more"
            )
    if args.repeat is not None and args.repeat < 1:
        return f"--repeat {args.repeat} must be at least 1"
    if args.max_seconds is not None and not (_finite_positive(args.max_seconds) and args.max_seconds > warmup):
        return f"--max-seconds {args.max_seconds:g} must be a number of seconds above --warmup ({warmup:g})"
    if wanted(args):
        if args.rate and len(args.rate) > 1:
            return "the batch duration sweep runs at one rate: give --rate once"
        if args.trace_dir:
            return "--trace-dir is not available with the batch duration sweep (its runs record a timeline instead)"
    return None


def run_seconds(interval: str, seconds: float, warmup: float, max_seconds: float) -> float:
    """A real-time run's production time: long enough to hold a boundary after the warm-up, within the cap."""
    return min(max_seconds, max(seconds, interval_ms(interval) / 1000 + warmup + MARGIN_S))


def plan(
    modes: list[str], intervals: list[str], repeat: int, seconds: float, warmup: float, max_seconds: float
) -> list[tuple[int, str, str | None, float]]:
    """[(repeat, mode, interval or None, production seconds)] in the order they run."""
    runs: list[tuple[int, str, str | None, float]] = []
    for i in range(repeat):
        runs += [(i, mode, None, seconds) for mode in modes if mode != "realtime"]
        if "realtime" in modes:
            runs += [(i, "realtime", iv, run_seconds(iv, seconds, warmup, max_seconds)) for iv in intervals]
    return runs


def spread(values: list) -> dict:
    known = [v for v in values if v is not None]
    if not known:
        return {"median": None, "min": None, "max": None, "values": values}
    return {"median": statistics.median(known), "min": min(known), "max": max(known), "values": values}


# Kept for the representative run only: the rest of the runs keep their figures, boundaries and CDF.
BULKY = ("timeline", "quantiles_ms", "batches")


def row(key: str, mode: str, interval: str | None, runs: list[dict]) -> dict:
    results = [r["result"] for r in runs]
    figures = {name: spread([res.get(name) for res in results]) for name in FIGURES}
    p99 = figures["p99_ms"]["median"]
    # The representative repeat: the one whose p99 is nearest the median p99 (its timeline and CDF are plotted).
    rep = min(range(len(results)), key=lambda i: abs((results[i].get("p99_ms") or 0) - (p99 or 0)))
    boundaries = [b for res in results for b in res.get("boundaries") or []]
    return {
        "key": key,
        "mode": mode,
        "rtm_interval": interval,
        "seconds": runs[0]["seconds"],
        "figures": figures,
        "no_boundary": mode == "realtime" and not boundaries,
        "segments": segment_medians(boundaries),
        "representative_repeat": rep,
        "runs": [
            {"repeat": r["repeat"], **({k: v for k, v in r["result"].items() if i == rep or k not in BULKY})}
            for i, r in enumerate(runs)
        ],
    }


def assemble(done: list[dict], intervals: list[str], modes: list[str]) -> list[dict]:
    rows = [row(mode, mode, None, [d for d in done if d["mode"] == mode]) for mode in modes if mode != "realtime"]
    if "realtime" in modes:
        rows += [
            row(f"realtime {iv}", "realtime", iv, [d for d in done if d["mode"] == "realtime" and d["interval"] == iv])
            for iv in intervals
        ]
    return rows


def main(args: argparse.Namespace, command: str, rate: float, seconds: float, warmup: float, preset: dict) -> int:
    from rtm_lab.benchmarks import latency_child as latency
    from rtm_lab.benchmarks import run_record, sweep_report
    from rtm_lab.benchmarks.latency_report import TRIGGERS

    intervals = args.interval or [latency.RTM_INTERVAL]
    repeat = args.repeat or 1
    max_seconds = args.max_seconds or MAX_SECONDS["quick" if args.quick else "full"]
    modes = list(args.mode or latency.MODES)
    runs = plan(modes, intervals, repeat, seconds, warmup, max_seconds)
    estimate = sum(s + OVERHEAD_S for *_, s in runs) / 60
    print(f"batch duration sweep: {len(runs)} runs at {rate:,.0f} events/s, about {estimate:.0f} minutes", flush=True)
    with run_record.on_the_lab(command) as (record, state):
        done: list[dict[str, Any]] = []
        try:
            for n, (i, mode, interval, secs) in enumerate(runs, 1):
                label = f"{mode}" + (f' realTime="{interval}"' if interval else "")
                print(
                    f"({n}/{len(runs)}) repeat {i + 1}: {label} at {rate:.0f} events/s for {secs:.0f}s ...", flush=True
                )
                cfg = latency.settings(interval or intervals[0], args.fetch_wait_ms, args.pipeline)
                extra = ("--observe-boundaries",) if mode == "realtime" else ()
                result = latency.run_child(mode, state.kafka_bootstrap, rate, secs, warmup, cfg, None, extra)
                done.append({"repeat": i, "mode": mode, "interval": interval, "seconds": secs, "result": result})
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    cfg = latency.settings(intervals[0], args.fetch_wait_ms, args.pipeline)
    result = {
        "benchmark": "latency-sweep",
        "pipeline": args.pipeline,
        "rate": rate,
        "repeat": repeat,
        "intervals": intervals,
        "modes": modes,
        "seconds": seconds,
        "warmup_s": warmup,
        "max_seconds": max_seconds,
        "margin_s": MARGIN_S,
        "rows": assemble(done, intervals, modes),
        "triggers": {m: TRIGGERS[m] for m in modes if m != "realtime"},
        "settings": {**cfg, "rtm_interval": intervals},
        **record.record(),
    }
    md = sweep_report.write(result, args.json, args.plot)
    print(sweep_report.markdown(result))
    print(f"wrote {args.json}, {md}" + (f", {args.plot}" if args.plot else ""))
    missing = [r["key"] for r in result["rows"] if r["figures"]["missing"]["max"]]
    if missing:
        print(f"warning: records missing in {', '.join(missing)}", file=sys.stderr)
    failed = [f"{d['mode']}: {d['result']['error']}" for d in done if d["result"].get("error")]
    if failed:
        print(f"note: queries that Spark refused (recorded in the results): {'; '.join(failed)}", file=sys.stderr)
    return 1 if failed and args.pipeline == "passthrough" else 0

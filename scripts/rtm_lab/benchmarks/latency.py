"""Latency benchmark (`scripts/bench.py latency`): the same Kafka -> Kafka query in each trigger mode, one after
another, from broker timestamps; with several `--batch-duration` values, the batch duration sweep (`interval_sweep`).

Each (rate, mode) pair runs in a child process (`rtm_lab.benchmarks.latency_child`); this module runs them in turn and
writes the results file and its table.
"""

import argparse
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from rtm_lab import cli
from rtm_lab.benchmarks import interval_sweep
from rtm_lab.benchmarks.latency_child import (
    AD_MODES,
    AD_RTM_INTERVAL,
    ALL_MODES,
    FETCH_MAX_WAIT_MS,
    MODES,
    PIPELINES,
    PYTHON_MICROBATCH,
    REAL_TIME_SETTLE_S,
    RTM_INTERVAL,
    run_child,
    settings,
)
from rtm_lab.benchmarks.latency_report import TRIGGERS

# The quick run's real-time mode warms up until its backlog settled (latency_child.SETTLE_*): a fixed 3 s measured a
# freshly started query's catch-up often enough to fail the smoke test's ratio. Micro-batch keeps the fixed warm-up:
# its median is set by the trigger, which a cold start does not shorten.
# Its modes run in turn in one child session: one JVM start instead of four (the full run keeps a process per mode).
QUICK: dict[str, Any] = {
    "rates": [1000],
    "seconds": 5.0,
    "warmup": 3.0,
    "settle": {"realtime": REAL_TIME_SETTLE_S},
    "one_session": True,
}
FULL: dict[str, Any] = {"rates": [2000, 1000, 10000], "seconds": 60.0, "warmup": 5.0}
# The ad pipeline's full run: the rates the guide's targets name, each mode long enough for the state to level off.
AD_FULL: dict[str, Any] = {"rates": [1000, 5000], "seconds": 60.0, "warmup": 5.0}


# Figures a repeated row gives as median and range over its runs (the batch duration sweep's FIGURES, plus the tail's causes).
REPEAT_FIGURES = ("p50_ms", "p95_ms", "p99_ms", "p99.9_ms", "max_ms", "missing", "gc_pause_max_ms")
# Kept for the representative run only (the one whose p99 is nearest the median): the others keep their figures.
BULKY = ("quantiles_ms", "batches")


def combine_repeats(results: list[dict]) -> dict:
    """One mode's row from its repeated runs: the representative run's fields, `figures` (median, min, max and the
    values of each REPEAT_FIGURES over the runs) and `repeats` (every run, without the bulky fields)."""
    if len(results) == 1:
        return results[0]
    if any(r.get("error") for r in results):
        return next(r for r in results if r.get("error"))
    figures = {name: interval_sweep.spread([r.get(name) for r in results]) for name in REPEAT_FIGURES}
    figures["producer_behind_max_ms"] = interval_sweep.spread(
        [round(r["producer_behind_max_s"] * 1000, 1) if "producer_behind_max_s" in r else None for r in results]
    )
    p99 = figures["p99_ms"]["median"] or 0
    rep = min(range(len(results)), key=lambda i: abs((results[i].get("p99_ms") or 0) - p99))
    return {
        **results[rep],
        "figures": figures,
        "representative_repeat": rep,
        "repeats": [{k: v for k, v in r.items() if k not in BULKY} for r in results],
    }


def run(
    bootstrap: str,
    rates: list[float],
    seconds: float,
    warmup: float,
    modes: tuple[str, ...] = MODES,
    cfg: dict | None = None,
    trace_dir: str | None = None,
    repeat: int = 1,
    gc_log_dir: str | None = None,
    settle: dict[str, float] | None = None,
    one_session: bool = False,
) -> dict:
    """Every mode at every rate, `repeat` times: the modes of one repeat follow each other, so a load change on the
    machine spreads over the modes instead of hitting one."""
    cfg = cfg or settings()
    runs = []
    total, done = len(rates) * len(modes) * repeat, 0
    for rate in rates:
        gathered: dict[str, list] = {mode: [] for mode in modes}
        for i in range(repeat):
            if one_session:
                done += len(modes)
                print(
                    f"({done}/{total}) {', '.join(modes)} at {rate:.0f} events/s, {seconds:.0f}s each, in one session"
                )
                gc_log = str(Path(gc_log_dir) / f"{rate:.0f}-session-{i}.gc.log") if gc_log_dir else None
                by_mode = run_child(modes, bootstrap, rate, seconds, warmup, cfg, None, gc_log=gc_log, settle=settle)
                for mode in modes:
                    gathered[mode].append(by_mode[mode])
                continue
            for mode in modes:
                done += 1
                which = f" (repeat {i + 1} of {repeat})" if repeat > 1 else ""
                print(f"({done}/{total}) {mode} at {rate:.0f} events/s for {seconds:.0f}s{which} ...", flush=True)
                gc_log = str(Path(gc_log_dir) / f"{rate:.0f}-{mode}-{i}.gc.log") if gc_log_dir else None
                gathered[mode].append(
                    run_child(mode, bootstrap, rate, seconds, warmup, cfg, trace_dir, gc_log=gc_log, settle=settle)
                )
        runs.append({"rate": rate, "modes": {mode: combine_repeats(gathered[mode]) for mode in modes}})
    return {
        "benchmark": "latency",
        "pipeline": cfg["pipeline"],
        "rate": runs[0]["rate"],
        "modes": runs[0]["modes"],
        "runs": runs,
        "seconds": seconds,
        "warmup_s": warmup,
        "settle_s": settle or {},
        "one_session": one_session,
        "repeat": repeat,
        "triggers": {m: TRIGGERS[m].format(rtm_interval=cfg["rtm_interval"]) for m in modes},
        "settings": cfg,
    }


# ---------------------------------------------------------------- the `scripts/bench.py latency` command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"a short run for tests: {QUICK['rates'][0]} events/s, {QUICK['seconds']:.0f} s per mode (under 2 minutes)",
    )
    parser.add_argument(
        "--rate",
        type=cli.positive_float,
        action="append",
        help="events per second; repeat for several rates (default: 2000, 1000 and 10000; the first is the headline)",
    )
    parser.add_argument(
        "--seconds", type=cli.positive_float, help="seconds of production per mode (default 60; --quick 8)"
    )
    parser.add_argument(
        "--warmup", type=cli.non_negative_float, help="seconds of events left out of percentiles (default 5; --quick 3)"
    )
    parser.add_argument(
        "--mode",
        action="append",
        choices=ALL_MODES,
        help="run only these modes (repeatable; default: the four trigger modes; with --pipeline ad_attribution: "
        f"{', '.join(AD_MODES)}, where {PYTHON_MICROBATCH} is the Python processor and the others the JVM one)",
    )
    parser.add_argument(
        "--batch-duration",
        "--interval",  # its earlier names, kept so recorded commands still run
        "--rtm-interval",
        dest="interval",
        action="append",
        help=f"real-time batch duration (default {RTM_INTERVAL}; {AD_RTM_INTERVAL} with --pipeline ad_attribution); "
        "repeat it for the batch duration sweep (see --repeat)",
    )
    interval_sweep.add_arguments(parser)
    parser.add_argument(
        "--fetch-wait-ms",
        type=cli.positive_int,
        default=FETCH_MAX_WAIT_MS,
        help=f"kafka.fetch.max.wait.ms for the source, every mode (default {FETCH_MAX_WAIT_MS})",
    )
    parser.add_argument(
        "--pipeline",
        choices=PIPELINES,
        default="passthrough",
        help="passthrough: parse and re-encode JSON (default); ad_attribution: the guide's transformWithState query "
        "(JVM processor, and the Python one in micro-batch)",
    )
    parser.add_argument(
        "--json", required=True, type=cli.json_output, help="where to write the result JSON (a .md goes beside it)"
    )
    parser.add_argument("--plot", type=Path, help="also write a latency CDF plot (PNG) here")
    parser.add_argument("--trace-dir", help="also write every record's latency per mode (CSV) into this folder")
    parser.add_argument(
        "--gc-log-dir",
        help="keep each run's Spark JVM GC log in this folder (default: a temporary folder; the pauses are recorded "
        "in the results either way)",
    )


def main(args: argparse.Namespace, command: str) -> int:
    from rtm_lab.benchmarks import latency_report, run_record

    ad = args.pipeline == "ad_attribution"
    if not ad and PYTHON_MICROBATCH in (args.mode or ()):
        print(
            f"error: --mode {PYTHON_MICROBATCH} runs the ad pipeline's Python processor; add --pipeline ad_attribution",
            file=sys.stderr,
        )
        return 2
    preset = QUICK if args.quick else AD_FULL if ad else FULL
    rates = args.rate or preset["rates"]
    seconds = args.seconds if args.seconds is not None else preset["seconds"]
    warmup = args.warmup if args.warmup is not None else preset["warmup"]
    error = interval_sweep.check_arguments(args, rates, seconds, warmup)
    if error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if interval_sweep.wanted(args):
        return interval_sweep.main(args, command, rates[0], seconds, warmup, QUICK if args.quick else FULL)
    if args.trace_dir:
        Path(args.trace_dir).mkdir(parents=True, exist_ok=True)
    gc_log_dir = args.gc_log_dir or tempfile.mkdtemp(prefix="bench-lat-gc-")
    Path(gc_log_dir).mkdir(parents=True, exist_ok=True)
    try:
        with run_record.on_the_lab(command) as (record, state):
            result = run(
                state.kafka_bootstrap,
                rates,
                seconds,
                warmup,
                tuple(args.mode or (AD_MODES if ad else MODES)),
                settings(
                    (args.interval or [AD_RTM_INTERVAL if ad else RTM_INTERVAL])[0], args.fetch_wait_ms, args.pipeline
                ),
                args.trace_dir,
                repeat=args.repeat or 1,
                gc_log_dir=gc_log_dir,
                settle=preset.get("settle"),
                one_session=preset.get("one_session", False) and not args.trace_dir,
            )
            # Each run's pauses are in the results; the raw GC logs (named in each run's gc_log) only if kept.
            result["gc_log_dir"] = args.gc_log_dir or "not kept"
            result.update(record.record())
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if not args.gc_log_dir:
            shutil.rmtree(gc_log_dir, ignore_errors=True)  # the pauses are in the results; the raw logs were scratch
    md = latency_report.write(result, args.json, args.plot)
    print(latency_report.markdown(result))
    print(f"wrote {args.json}, {md}" + (f", {args.plot}" if args.plot else ""))
    incomplete = [
        f"{m} @ {run_['rate']:.0f}/s" for run_ in result["runs"] for m, r in run_["modes"].items() if r.get("missing")
    ]
    if incomplete:
        print(f"warning: records missing in {', '.join(incomplete)}", file=sys.stderr)
    failed = [f"{m}: {r['error']}" for run_ in result["runs"] for m, r in run_["modes"].items() if r.get("error")]
    if failed:
        print(f"note: queries that Spark refused (recorded in the results): {'; '.join(failed)}", file=sys.stderr)
    # The passthrough query runs in every mode; a failure there is a broken benchmark, not a finding.
    return 1 if failed and args.pipeline == "passthrough" else 0

"""Why real-time deduplication stalls at 10,000 events/s (`bench.py dedup-stall`): a fraction of a factorial, each
run watched for its stall, with its GC log and thread dumps kept.

The cells (rtm_lab.benchmarks.dedup_cells) vary the key space (id or user), the streaming-shuffle wait (5, 20, 50
ms), the shuffle partitions (2 or 4) and the placement (shared or isolated) from a base, plus Flink's deduplication
on RocksDB. Each run is one rtm_lab.benchmarks.engine_run run (the engine comparison's harness: same generator,
topics, key space, read-back and per-second series), tuned profile, with three additions:

- a GC log: the engine JVM writes `-Xlog:gc*` into the run's folder; the row sums its pauses over the whole run and
  over the measured window (rtm_lab.benchmarks.gc_log);
- a live stall watch: when the age of the oldest unanswered event first passes `--stall-ms`, the engine's JVM is
  dumped three times a second apart (`jcmd Thread.print`); the row keeps the busiest threads' top frames
  (rtm_lab.benchmarks.stall_watch, thread_dumps);
- the per-second p99 read against the same threshold: the first second over it, and how many seconds were.

The GC log and the dumps cost CPU on the cores the engine shares, so they are a factor too: `--watch both` runs each
chosen cell watched and unwatched (only the per-second series), alternating (rtm_lab.benchmarks.dedup_cells).

GC logs and dumps are kept, gzipped, under docs/results/dedup-stall-runs/RUN/ (left out of the site); the rows go
to docs/results/dedup-stall.json, run by run, so a stopped measurement resumes where it stopped. A results file holds
one machine and one set of run settings. The lead's run, then the table and plot from the file:

    python scripts/bench.py dedup-stall --list
    python scripts/bench.py dedup-stall --until 23:30
    python scripts/tables.py dedup-stall
"""

import argparse
import datetime as dt
import gzip
import shutil
import statistics
import sys
from pathlib import Path

from rtm_lab import cli, machine
from rtm_lab.benchmarks import (
    dedup_cells,
    dedup_stall_report,
    engine_run,
    engines,
    engines_report,
    gc_log,
    results_file,
    run_record,
    stall_watch,
)
from rtm_lab.benchmarks.dedup_cells import Cell
from rtm_lab.paths import PROJECT_ROOT

RESULTS = PROJECT_ROOT / "docs" / "results" / "dedup-stall.json"
ARTEFACTS = PROJECT_ROOT / "docs" / "results" / "dedup-stall-runs"
SECONDS, WARMUP_S = 60.0, 5.0
QUICK_SECONDS, QUICK_WARMUP_S = 6.0, 2.0
STALL_MS = 1000.0  # half the held-rate bound (rtm_lab.benchmarks.held_rate): a stall is caught before it fails a run
# Beyond engine comparison's estimate of a run: three dumps, a stalled run's longer drain, the GC logs' reading.
EXTRA_S = 10.0
RUN_SETTINGS = ("rate", "seconds", "warmup_s", "stall_ms")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--list", action="store_true", help="print the runs left to make and their time, and stop")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="ENGINE/KEYS/WAITms/pN/PLACEMENT[/REPEAT]",
        help="only matching runs (globs, e.g. 'spark/user/*' or '*/*/50ms/*'); repeatable",
    )
    parser.add_argument("--runs", type=cli.positive_int, default=dedup_cells.RUNS, help="runs per cell (default 3)")
    parser.add_argument("--seconds", type=cli.positive_float, help=f"measured seconds per run (default {SECONDS:.0f})")
    parser.add_argument("--warmup", type=cli.non_negative_float, help=f"warm-up seconds (default {WARMUP_S:.0f})")
    parser.add_argument(
        "--stall-ms",
        type=cli.positive_float,
        default=STALL_MS,
        help=f"the live lag that counts as a stall and triggers the thread dumps (default {STALL_MS:.0f})",
    )
    parser.add_argument(
        "--until",
        type=cli.clock_time,
        metavar="HH:MM",
        help="start no run that would end after HH:MM UTC (the next one: past midnight works)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"a smoke: {QUICK_WARMUP_S:.0f}+{QUICK_SECONDS:.0f} s runs, not the table's",
    )
    parser.add_argument(
        "--watch",
        choices=("on", "both"),
        default="on",
        help="on (default): every run keeps its GC log and thread dumps; both: each cell also unwatched (named "
        "CELL/unwatched), to measure what the watching costs",
    )
    parser.add_argument("--redo", action="store_true", help="make runs the results file holds again")
    parser.add_argument(
        "--json", type=cli.json_output, default=RESULTS, help="results file, added to run by run (default %(default)s)"
    )
    parser.add_argument(
        "--artefacts",
        type=Path,
        default=ARTEFACTS,
        help="where each run's GC logs and thread dumps are kept (default %(default)s)",
    )


def run_settings(args: argparse.Namespace) -> dict:
    seconds = args.seconds or (QUICK_SECONDS if args.quick else SECONDS)
    warmup = args.warmup if args.warmup is not None else (QUICK_WARMUP_S if args.quick else WARMUP_S)
    return {"rate": dedup_cells.RATE, "seconds": seconds, "warmup_s": warmup, "stall_ms": args.stall_ms}


def load(path: Path) -> dict:
    return results_file.load(path, "dedup-stall", {"runs": {}, "invocations": []})


def refusal(result: dict, settings: dict, here: str) -> str | None:
    """Why new runs may not join this results file (another machine, or other run settings); None when they may."""
    runs = list(result.get("runs", {}).values())
    if not runs:
        return None
    there = {engines_report.machine_key(r) for r in runs}
    if there != {here}:
        return f"was measured on {', '.join(sorted(there))}; this machine is {here}"
    old = {k: result.get("settings", {}).get(k) for k in RUN_SETTINGS}
    if old != {k: settings[k] for k in RUN_SETTINGS}:
        return f"holds runs made with {old}"
    return None


def estimate_s(cell: Cell, seconds: float, warmup: float) -> float:
    """A run's wall time: the engine comparison's estimate of one run at this rate, and EXTRA_S."""
    return engines.estimate_s((cell.engine, cell.pipeline, dedup_cells.RATE), seconds, warmup) + EXTRA_S


# ---------------------------------------------------------------- one run and its row


def folder_name(run_id: str) -> str:
    return run_id.replace("/", "_")


def first_second_over(series: list[list], fields: list[str], threshold_ms: float, from_s: float) -> int | None:
    """The first second at or after `from_s` whose p99 passed `threshold_ms` (None: none did)."""
    t, p99 = fields.index("second"), fields.index("p99_ms")
    return next((row[t] for row in series if row[t] >= from_s and row[p99] is not None and row[p99] > threshold_ms),
                None)  # fmt: skip


def gc_summary(gc_texts: dict[str, str], uptime_at_start: dict[str, float], warmup: float, seconds: float) -> dict:
    """Per JVM (by pid), its pauses over the whole log and over the measured window; and the window's over all JVMs."""
    per_jvm = {}
    for pid, text in sorted(gc_texts.items()):
        start = uptime_at_start.get(pid)
        window = None if start is None else gc_log.summarize(text, start + warmup, start + warmup + seconds)
        per_jvm[pid] = {"whole_run": gc_log.summarize(text), "measured_window": window}
    windows = [j["measured_window"] for j in per_jvm.values() if j["measured_window"]]
    over = f"pauses_over_{gc_log.LONG_PAUSE_MS:.0f}ms"
    return {
        "per_jvm": per_jvm,
        "window": {
            "pauses": sum(w["pauses"] for w in windows),
            "pause_total_ms": round(sum(w["pause_total_ms"] for w in windows), 1),
            "pause_max_ms": max((w["pause_max_ms"] for w in windows if w["pause_max_ms"] is not None), default=None),
            over: sum(w[over] for w in windows),
        }
        if windows
        else None,
    }


def busiest_frames(watch: dict | None, threads: int = 3, frames: int = 3) -> list[dict]:
    """The busiest threads of the first JVM dumped, trimmed for the row."""
    for summary in (watch or {}).get("dumps", {}).values():
        if summary.get("busiest"):
            return [{**t, "top_frames": t["top_frames"][:frames]} for t in summary["busiest"][:threads]]
    return []


def row(
    cell: Cell,
    repeat: int,
    figures: dict,
    gc_texts: dict[str, str],
    settings: dict,
    artefacts: str | None,
) -> dict:
    """One run's row: the cell's factors, the engine run's figures, the GC pauses and the stall, read off the run's
    own figures, GC logs and watch (pure: the tests build it from a recorded run)."""
    watch = figures.get("watch")
    fields, series = figures.get("series_fields") or engine_run.SERIES_FIELDS, figures.get("series") or []
    threshold = settings["stall_ms"]
    warmup = settings["warmup_s"]
    dumped = sum(len(files) for files in (watch or {}).get("dump_files", {}).values())
    return {
        "cell": cell.name,
        "repeat": repeat,
        "factors": {
            "engine": cell.engine,
            "keys": cell.keys,
            "wait_ms": cell.wait_ms,
            "shuffle_partitions": cell.partitions,
            "placement": cell.placement,
            "watched": cell.watched,
        },
        "changed": cell.changed(),
        **figures,
        "gc": gc_summary(gc_texts, (watch or {}).get("uptime_at_start_s", {}), warmup, settings["seconds"]),
        "stall": {
            "threshold_ms": threshold,
            "series_first_over_s": first_second_over(series, fields, threshold, warmup),
            "series_seconds_over": engines_report.seconds_over(series, fields, threshold, warmup),
            "live_first_over_s": (watch or {}).get("first_over_s"),
            "live_lag_max_ms": (watch or {}).get("lag_max_ms"),
            "dumps_taken": dumped,
            "busiest": busiest_frames(watch),
        },
        "artefacts": artefacts,
    }


def gzip_folder(folder: Path) -> None:
    """Compress each text file the run left (GC logs, dumps): a few hundred kB each, a tenth of that gzipped."""
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.suffix in (".log", ".txt"):
            with path.open("rb") as raw, gzip.open(path.with_name(path.name + ".gz"), "wb") as packed:
                shutil.copyfileobj(raw, packed)
            path.unlink()


def one_run(cell: Cell, repeat: int, settings: dict, state, artefacts: Path, say) -> dict:
    from rtm_lab.java import java_executable

    run_id = dedup_cells.run_id(cell, repeat)
    folder = artefacts / folder_name(run_id)
    shutil.rmtree(folder, ignore_errors=True)
    rate, seconds, warmup = settings["rate"], settings["seconds"], settings["warmup_s"]
    watch, jvm_options = None, None
    if cell.watched:
        folder.mkdir(parents=True)
        answers = engine_run.answering_seqs(cell.pipeline, int(rate * (warmup + seconds)) + 1)
        watch = stall_watch.watcher(
            state.kafka_bootstrap, answers, rate, engine_run.PRIMING, settings["stall_ms"], folder, java_executable()
        )
        jvm_options = gc_log.option(folder)
    figures = engine_run.run(
        cell.engine,
        cell.pipeline,
        rate,
        seconds,
        warmup,
        "tuned",
        state.kafka_bootstrap,
        say=say,
        extra_conf=dedup_cells.spark_conf(cell),
        placement=cell.placement,
        broker_pid=None if state.kafka.external else state.kafka.pid,
        shuffle_partitions=cell.partitions if cell.engine == "spark" else None,
        jvm_options=jvm_options,
        watch=watch,
    )
    if not cell.watched:
        return row(cell, repeat, figures, {}, settings, None)
    gc_texts = {path.stem.removeprefix("gc-"): path.read_text(errors="replace") for path in gc_log.logs(folder)}
    kept_in = folder.relative_to(PROJECT_ROOT) if folder.is_relative_to(PROJECT_ROOT) else folder
    out = row(cell, repeat, figures, gc_texts, settings, str(kept_in))
    gzip_folder(folder)
    return out


# ---------------------------------------------------------------- the command


def save(result: dict, path: Path) -> None:
    engines.save(result, path)


def _say(line: str) -> None:
    print(f"  {line}", flush=True)


def main(args: argparse.Namespace, command: str) -> int:
    settings = run_settings(args)
    cells = dedup_cells.plan() if args.watch == "on" else dedup_cells.with_unwatched(dedup_cells.plan())
    wanted = [(c, r) for c, r in dedup_cells.runs(cells, args.runs) if dedup_cells.selected(c, r, args.only)]
    if not wanted:
        print("error: no run matches --only; see --list for the names", file=sys.stderr)
        return 2
    result = load(args.json)
    refused = (
        None if args.redo else refusal(result, settings, engines_report.machine_key({"machine": machine.describe()}))
    )
    if refused:
        print(f"error: {args.json} {refused}; give another --json (or --redo to start it afresh)", file=sys.stderr)
        return 2
    todo = [(c, r) for c, r in wanted if args.redo or dedup_cells.run_id(c, r) not in result["runs"]]
    if args.list:
        return _list(wanted, todo, settings, cells)
    if args.redo and not args.only:
        result["runs"] = {}
    result["settings"] = {
        **settings,
        "cells": [c.name for c in cells],
        "full_factorial_spark_cells": dedup_cells.full_factorial_size(),
        "runs_per_cell": args.runs,
        "profile": "tuned (the engine comparison's), the cell's wait and shuffle partitions on top",
        "engines": _engine_settings(settings),
    }
    print(f"{len(todo)} of {len(wanted)} runs to make ({len(wanted) - len(todo)} already in {args.json})", flush=True)
    try:
        with run_record.on_the_lab(command) as (invocation, state):
            for n, (cell, repeat) in enumerate(todo, start=1):
                expected = estimate_s(cell, settings["seconds"], settings["warmup_s"])
                if args.until and dt.datetime.now(dt.UTC) + dt.timedelta(seconds=expected) > args.until:
                    print(f"stopped: the next run would end after {args.until:%H:%M} UTC; rerun to resume", flush=True)
                    break
                run_id = dedup_cells.run_id(cell, repeat)
                print(f"({n}/{len(todo)}) {run_id}", flush=True)
                record = run_record.Run(command)
                got = one_run(cell, repeat, settings, state, args.artefacts, _say)
                result["runs"][run_id] = {**got, **record.record()}
                save(result, args.json)
                stall = got["stall"]
                _say(
                    f"p99 {got.get('p99_ms')} ms, {stall['series_seconds_over']} s over {settings['stall_ms']:.0f} ms, "
                    f"{stall['dumps_taken']} dumps, GC {((got['gc'] or {}).get('window') or {}).get('pause_total_ms')} "
                    "ms paused in the window"
                )
            result["invocations"] = [*result.get("invocations", []), invocation.record()]
            save(result, args.json)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    md = dedup_stall_report.write(result, args.json)
    print(f"wrote {args.json}, {md} and {dedup_stall_report.plot_path(args.json)}")
    return 0


def _engine_settings(settings: dict) -> dict:
    """The engine comparison's shared settings, with what this benchmark sets per cell said so."""
    shared = engines.settings(settings["seconds"], settings["warmup_s"], "shared")
    isolated = engines.settings(settings["seconds"], settings["warmup_s"], "isolated")["cores"]
    return {
        **shared,
        "placement": "per cell",
        "cores": {"shared": shared["cores"], "isolated": isolated},
        "spark": {
            **shared["spark"],
            "shuffle_partitions": "per cell",
            "master": "local[N]: N = source partitions + shuffle partitions, so every real-time stage runs at once",
            "streaming_shuffle_wait_ms": "per cell",
            "gc_log": gc_log.option(Path("RUN")),
        },
        "flink": {**shared["flink"], "gc_log": gc_log.option(Path("RUN"))},
    }


def _list(wanted: list[tuple[Cell, int]], todo: list[tuple[Cell, int]], settings: dict, cells: list[Cell]) -> int:
    left = set(todo)
    for cell, repeat in wanted:
        note = "" if (cell, repeat) in left else "   (in the results file)"
        changed = ", ".join(cell.changed()) or "base"
        print(f"{dedup_cells.run_id(cell, repeat):<34} {changed}{note}")
    each = [estimate_s(c, settings["seconds"], settings["warmup_s"]) for c, _ in todo]
    per_run = statistics.median(each) if each else 0.0
    print(
        f"{len(todo)} of {len(wanted)} runs left ({len(cells)} cells; the full factorial has "
        f"{dedup_cells.full_factorial_size()} Spark cells), about {sum(each) / 3600:.1f} hours "
        f"({per_run:.0f} s a run)"
    )
    return 0

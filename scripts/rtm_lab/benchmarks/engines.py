"""Real-time mode or Flink (`scripts/bench.py engines`): the guide's four pipelines on both engines, one at a time,
with one harness, one broker and one latency clock.

Each run (engine, pipeline, rate, settings profile, repeat) is rtm_lab.benchmarks.engine_run: the same generator,
topics, partitions, warm-up and broker-timestamp latency as `bench.py latency`, plus the CPU seconds per million
events and peak resident memory of the engine's whole process tree (the generator runs elsewhere), and a digest of its
output that must equal the other engine's. Each finished run is written to the results file at once, so an
interrupted matrix loses nothing and the next invocation continues where it stopped; `--only` picks cells.

The full matrix: every pipeline on both engines tuned for latency at 1,000 and 10,000 events/s, three repeats each,
Flink's heap backend (`tuned-heap`) beside RocksDB on the count and the deduplication, then each engine at its
defaults at 10,000 events/s, once. Within a cell the engine that goes first alternates from repeat to repeat.

`--placement shared` (the default) runs everything on every core; `--placement isolated` pins the engine to core 0
and the broker and this harness to core 1 (rtm_lab.cpu_pinning). Each placement has its own results file
(docs/results/engines-shared.json, engines-isolated.json); a file never mixes placements, harness versions or
machines. `--recovery` adds its rows to the first harness's file (docs/results/engines.json), which likewise refuses
rows measured on another machine: give it a `--json` of its own there. Each engine's highest held rate is
`bench.py engine-capacity`. The lead's reruns, resumable (a stopped run loses only the run in flight):

    python scripts/bench.py engines --placement shared
    python scripts/bench.py engines --placement isolated
"""

import argparse
import fnmatch
import json
import os
import sys
from pathlib import Path
from typing import Any

from rtm_lab import cli, keyspace, versions
from rtm_lab.benchmarks import engine_run, engines_report, run_record
from rtm_lab.benchmarks.engine_run import ENGINES, PIPELINES

DEFAULT_JSON = Path("docs/results/engines.json")  # the first harness's runs, and --recovery


def placement_json(placement: str) -> Path:
    return Path(f"docs/results/engines-{placement}.json")


HARNESS = 2  # 2: a 10,000-key Zipf space, RocksDB on both, read-back settings, task shares, placements
FULL: dict[str, Any] = {"rates": [1000, 10000], "seconds": 60.0, "warmup": 5.0, "repeat": 3, "default_rate": 10000}
# The smoke run `make test` makes: the running count on both engines (stateful: RocksDB, the keyed exchange, each
# task's share; the four pipelines' outputs are compared in tests/guides/test_rtm_or_flink.py).
QUICK: dict[str, Any] = {
    "rates": [1000], "seconds": 6.0, "warmup": 2.0, "repeat": 1, "pipelines": ["count"], "heap": False,
}  # fmt: skip
STATEFUL = ("count", "dedup")  # where Flink's heap backend runs beside RocksDB


def run_id(engine: str, pipeline: str, rate: float, profile: str, repeat: int) -> str:
    return f"{engine}/{pipeline}/{rate:.0f}/{profile}/{repeat}"


def _engines_in_turn(turn: int) -> tuple[str, ...]:
    return ENGINES if turn % 2 == 0 else ENGINES[::-1]


def matrix(
    rates: list[float], repeat: int, pipelines: list[str], default_rate: float | None, heap: bool = True
) -> list[tuple]:
    """The runs in the order they are made: within each cell the engine that goes first alternates (Spark first on
    odd repeats, Flink on even ones, and the other way round from one pipeline to the next), and the repeats go round
    the pipelines, so a change of load on the machine spreads over both engines instead of landing on one. Flink's
    heap variant runs after the pair, on the stateful pipelines."""
    cells = []
    for rate in rates:
        for i in range(1, repeat + 1):
            for n, pipeline in enumerate(pipelines):
                cells += [(engine, pipeline, rate, "tuned", i) for engine in _engines_in_turn(i + n + 1)]
                if heap and pipeline in STATEFUL:
                    cells.append(("flink", pipeline, rate, "tuned-heap", i))
    if default_rate is not None:
        for n, pipeline in enumerate(pipelines):
            cells += [(engine, pipeline, default_rate, "default", 1) for engine in _engines_in_turn(n)]
    return cells


def refusal(result: dict, placement: str) -> str | None:
    """Why new runs may not join this results file: runs of the first harness, of another placement, or of another
    machine. None when they may."""
    runs = list(result.get("runs", {}).values())
    if not runs:
        return None
    if any(r.get("harness") != HARNESS for r in runs):
        return f"holds runs of another harness version (this is {HARNESS})"
    placements = {r.get("placement") for r in runs}
    if placements != {placement}:
        return f"holds {', '.join(sorted(map(str, placements)))} runs, not {placement}"
    from rtm_lab import machine

    here = engines_report.machine_key({"machine": machine.describe()})
    there = {engines_report.machine_key(r) for r in runs}
    if there != {here}:
        return f"was measured on {', '.join(sorted(there))}; this machine is {here}"
    return None


def recovery_refusal(result: dict) -> str | None:
    """Why `--recovery` runs may not join this results file: it is another benchmark's, it is a
    placement file (the second harness's matrix only), or rows already in it were measured on another machine. The
    rows `--redo` replaces are dropped before this is asked. None when they may."""
    benchmark = result.get("benchmark", "engines")
    if benchmark != "engines":
        return f"is the results file of the {benchmark} benchmark"
    runs = list(result.get("runs", {}).values())
    placements = sorted({str(r["placement"]) for r in runs if r.get("placement")})
    if placements:
        return f"holds the second harness's {', '.join(placements)} runs, which --recovery may not join"
    from rtm_lab import machine

    here = engines_report.machine_key({"machine": machine.describe()})
    rows = [*runs, *result.get("recovery", {}).values()]
    there = {engines_report.machine_key(r) for r in rows}
    if there - {here}:
        return f"was measured on {', '.join(sorted(there))}; this machine is {here}"
    return None


def recovery_cell(key: str) -> tuple:
    """The cell `--only` matches a `--recovery` row (ENGINE/PIPELINE/REPEAT) by."""
    from rtm_lab.benchmarks import engine_recovery

    engine, pipeline, repeat = key.split("/")
    return (engine, pipeline, engine_recovery.RATE, "tuned", int(repeat))


def selected(cell: tuple, only: list[str]) -> bool:
    """`--only` patterns name a run by ENGINE/PIPELINE/RATE[/PROFILE[/REPEAT]], each part a glob (`*`)."""
    if not only:
        return True
    parts = run_id(*cell).split("/")
    for pattern in only:
        wanted = pattern.split("/")
        if all(fnmatch.fnmatch(part, want) for part, want in zip(parts, wanted, strict=False)):
            return True
    return False


def load(path: Path) -> dict:
    if path.exists():
        return json.loads(path.read_text())
    return {"benchmark": "engines", "runs": {}, "invocations": []}


def save(result: dict, path: Path) -> None:
    """Write through a temporary file, so an interrupted write never leaves half a results file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    os.replace(tmp, path)


def settings(seconds: float, warmup: float, placement: str = "shared") -> dict:
    """Everything both engines share, and what each runs with: recorded in the results file."""
    from snippets.guides import rtm_or_flink_spark as spark_twin

    return {
        "seconds": seconds,
        "warmup_s": warmup,
        "partitions": engine_run.PARTITIONS,
        "topic_timestamps": "LogAppendTime",
        "priming_events": engine_run.PRIMING,
        "harness": HARNESS,
        "placement": placement,
        "cores": {"engine": sorted(engine_run.ENGINE_CORES), "harness_and_broker": sorted(engine_run.HARNESS_CORES)}
        if placement == "isolated"
        else "all, shared",
        "key_space": keyspace.describe(),
        "redelivered": "every tenth event repeats the one five before it",
        "consumer": spark_twin.CONSUMER,
        "producer": spark_twin.PRODUCER,
        "spark": {
            "version": versions.SPARK_VERSION,
            "kafka_connector": versions.SPARK_KAFKA_CONNECTOR_VERSION,
            "master": f"local[{4}]",
            "shuffle_partitions": engine_run.PARTITIONS,
            "state_store": "RocksDB",
            "enrichment": "broadcast hash join (no exchange, no state)",
            "real_time_interval": spark_twin.BATCH_DURATION,
            "driver_memory": _driver_memory(),
            # JVM options from the environment (spark-submit reads it): none unless the person running it set some.
            "submit_opts": os.environ.get("SPARK_SUBMIT_OPTS") or None,
        },
        "flink": {
            "version": versions.FLINK_VERSION,
            "kafka_connector": versions.FLINK_KAFKA_CONNECTOR_VERSION,
            "parallelism": engine_run.PARTITIONS,
            "checkpoint_interval": "5 min",
            "checkpoint_mode": "AT_LEAST_ONCE (the sinks are at-least-once)",
            "state_backend": "rocksdb (tuned-heap: hashmap)",
            "enrichment": "a Python scalar function over the whole table in each task (stateless; no join state)",
            "heap": _driver_memory(),
            "jvm_args": os.environ.get("JVM_ARGS") or None,  # put before the heap on the gateway JVM's command line
        },
        "profiles": engine_run.PROFILES,
    }


def _driver_memory() -> str:
    from rtm_lab.spark import driver_memory

    return driver_memory()


# ---------------------------------------------------------------- the `scripts/bench.py engines` command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run for tests: transform on both engines, 1,000 events/s, 3+6 s each",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="ENGINE/PIPELINE/RATE[/PROFILE[/REPEAT]]",
        help="run only matching cells (globs allowed, e.g. 'flink/count/*' or '*/*/10000/default'); repeatable",
    )
    parser.add_argument("--redo", action="store_true", help="run cells the results file already holds again")
    parser.add_argument("--rate", type=cli.positive_float, action="append", help="events/s (default 1000 and 10000)")
    parser.add_argument("--seconds", type=cli.positive_float, help="measured seconds per run (default 60)")
    parser.add_argument("--warmup", type=cli.non_negative_float, help="seconds left out first (default 5)")
    parser.add_argument("--repeat", type=cli.positive_int, help="runs per tuned cell (default 3)")
    parser.add_argument(
        "--placement",
        "--profile",
        dest="placement",
        choices=engine_run.PLACEMENTS,
        default="shared",
        help="shared (default): engine, broker and harness on every core; isolated: the engine pinned to core 0, the "
        "broker, generator and reader to core 1 (taskset), per-core CPU recorded to show the pinning held",
    )
    parser.add_argument(
        "--json",
        type=cli.json_output,
        help="the results file, added to run by run (default docs/results/engines-PLACEMENT.json; with --recovery "
        f"{DEFAULT_JSON}; a .md table and a CDF plot beside it); a file measured on another machine, or of "
        "another harness or placement, is refused",
    )
    parser.add_argument(
        "--list", action="store_true", help="print the cells that would run, and stop (with an estimate of the time)"
    )
    parser.add_argument(
        "--recovery",
        action="store_true",
        help="instead of latency runs: SIGKILL each engine mid-run on transform and count, restart it on its "
        "checkpoint, and measure the restart (`--repeat` runs each, default 2)",
    )


def main(args: argparse.Namespace, command: str) -> int:
    if args.recovery:
        args.json = args.json or DEFAULT_JSON
        return _recovery(args, command)
    args.json = args.json or placement_json(args.placement)
    preset = QUICK if args.quick else FULL
    rates = args.rate or preset["rates"]
    seconds = args.seconds or preset["seconds"]
    warmup = preset["warmup"] if args.warmup is None else args.warmup
    repeat = args.repeat or preset["repeat"]
    pipelines = preset.get("pipelines", list(PIPELINES))
    cells = matrix(rates, repeat, pipelines, preset.get("default_rate"), preset.get("heap", True))
    cells = [c for c in cells if selected(c, args.only)]
    result = load(args.json)
    refused = None if args.redo and not args.only else refusal(result, args.placement)
    if refused:
        print(f"error: {args.json} {refused}; give another --json (or --redo to start it afresh)", file=sys.stderr)
        return 2
    if args.redo and not args.only:
        result["runs"] = {}
    if result.get("runs") and result.get("settings", {}).get("seconds") not in (None, seconds):
        print(
            f"error: {args.json} holds {result['settings']['seconds']:.0f}-second runs; give --seconds "
            f"{result['settings']['seconds']:.0f} or another --json",
            file=sys.stderr,
        )
        return 2
    todo = [c for c in cells if args.redo or run_id(*c) not in result["runs"]]
    if args.list:
        for cell in cells:
            print(run_id(*cell) + ("" if cell in todo else "   (in the results file)"))
        minutes = sum(estimate_s(cell, seconds, warmup) for cell in todo) / 60
        print(f"about {minutes:.0f} minutes for the {len(todo)} runs to make ({args.placement})")
        return 0
    if not cells:
        print("error: no cell matches --only; see --list for the names", file=sys.stderr)
        return 2
    print(f"{len(todo)} of {len(cells)} runs to make ({len(cells) - len(todo)} already in {args.json})", flush=True)
    result["settings"] = settings(seconds, warmup, args.placement)
    try:
        with run_record.on_the_lab(command) as (invocation, state):
            for n, cell in enumerate(todo, start=1):
                engine, pipeline, rate, profile, i = cell
                print(f"({n}/{len(todo)}) {run_id(*cell)}", flush=True)
                record = run_record.Run(command)
                figures = engine_run.run(
                    engine,
                    pipeline,
                    rate,
                    seconds,
                    warmup,
                    profile,
                    state.kafka_bootstrap,
                    say=_say,
                    placement=args.placement,
                    broker_pid=None if state.kafka.external else state.kafka.pid,
                )
                result["runs"][run_id(*cell)] = {**figures, "repeat": i, "harness": HARNESS, **record.record()}
                save(result, args.json)
            result["invocations"] = [*result.get("invocations", []), invocation.record()]
            save(result, args.json)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    md = engines_report.write(result, args.json)
    print(engines_report.markdown(result))
    print(f"wrote {args.json}, {md}, {engines_report.plot_path(args.json)}")
    lost = [key for key, r in result["runs"].items() if r.get("missing")]
    if lost:
        print(f"warning: outputs missing in {', '.join(lost)}", file=sys.stderr)
    return 1 if engines_report.disagreements(result) else 0


def estimate_s(cell: tuple, seconds: float, warmup: float) -> float:
    """A run's wall time on a quiet 2-core machine: about 12 s to start and prime, the run, and about 50 us per event
    to generate, read back, pair and place (the first harness's 56 runs took 87 minutes: 79 s a run at 1,000
    events/s, 105 s at 10,000). PyFlink's Python worker adds to the enrichment's start."""
    engine, pipeline, rate = cell[0], cell[1], cell[2]
    python_worker = 15.0 if engine == "flink" and pipeline == "enrich" else 0.0
    return 12.0 + python_worker + warmup + seconds + 2.0 + rate * (warmup + seconds) * 5e-5


def _say(line: str) -> None:
    print(f"  {line}", flush=True)


def _recovery(args: argparse.Namespace, command: str) -> int:
    """`--recovery`: its runs go into the first harness's results file, under their own key, run by run."""
    from rtm_lab.benchmarks import engine_recovery

    result = load(args.json)
    done = result.setdefault("recovery", {})
    if args.redo:  # only the rows --only selects (all without it); the rest of the file stays as it is
        for key in [k for k in done if selected(recovery_cell(k), args.only)]:
            del done[key]
    refused = recovery_refusal(result)
    if refused:
        print(f"error: {args.json} {refused}; give another --json", file=sys.stderr)
        return 2
    try:
        with run_record.on_the_lab(command) as (_, state):
            for i in range(1, (args.repeat or 2) + 1):
                for pipeline in engine_recovery.PIPELINES:
                    for engine in ENGINES:
                        key = f"{engine}/{pipeline}/{i}"
                        if key in done or not selected((engine, pipeline, engine_recovery.RATE, "tuned", i), args.only):
                            continue
                        print(f"recovery {key}", flush=True)
                        record = run_record.Run(command)
                        figures = engine_recovery.run(engine, pipeline, state.kafka_bootstrap, say=_say)
                        _say(f"resume {figures['resume_s']} s, replayed {figures['replayed']}, lost {figures['lost']}")
                        done[key] = {**figures, **record.record()}
                        save(result, args.json)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    md = engines_report.write(result, args.json)
    print(engines_report.recovery_markdown(result))
    print(f"wrote {args.json} and the tables beside {md}")
    return 0

"""Real-time mode or Flink (`scripts/bench.py engines`): the guide's four pipelines on both engines, one at a time,
with one harness, one broker and one latency clock.

Each run (engine, pipeline, rate, settings profile, repeat) is rtm_lab.benchmarks.engine_run: the same generator,
topics, partitions, warm-up and broker-timestamp latency as `bench.py latency`, plus the CPU seconds per million
events and peak resident memory of the engine's whole process tree (the generator runs elsewhere), and a digest of its
output that must equal the other engine's. Each finished run is written to the results file at once, so an
interrupted matrix loses nothing and the next invocation continues where it stopped; `--only` picks cells.

The full matrix: every pipeline on both engines tuned for latency at 1,000 and 10,000 events/s, three repeats each,
then each engine at its defaults at 10,000 events/s, once.
"""

import argparse
import fnmatch
import json
import os
import sys
from pathlib import Path
from typing import Any

from rtm_lab import cli, versions
from rtm_lab.benchmarks import engine_run, engines_report, run_record
from rtm_lab.benchmarks.engine_run import ENGINES, PIPELINES

DEFAULT_JSON = Path("docs/results/engines.json")
FULL: dict[str, Any] = {"rates": [1000, 10000], "seconds": 60.0, "warmup": 5.0, "repeat": 3, "default_rate": 10000}
# The smoke run `make test` makes: one pipeline on both engines (the four pipelines' outputs are compared in
# tests/guides/test_rtm_or_flink.py, the pairing of each in this benchmark's unit tests).
QUICK: dict[str, Any] = {"rates": [1000], "seconds": 6.0, "warmup": 3.0, "repeat": 1, "pipelines": ["transform"]}


def run_id(engine: str, pipeline: str, rate: float, profile: str, repeat: int) -> str:
    return f"{engine}/{pipeline}/{rate:.0f}/{profile}/{repeat}"


def matrix(rates: list[float], repeat: int, pipelines: list[str], default_rate: float | None) -> list[tuple]:
    """The runs in the order they are made: the engines alternate within each cell and the repeats go round the
    pipelines, so a change of load on the machine spreads over both engines instead of landing on one."""
    cells = [
        (engine, pipeline, rate, "tuned", i)
        for rate in rates
        for i in range(1, repeat + 1)
        for pipeline in pipelines
        for engine in ENGINES
    ]
    if default_rate is not None:
        cells += [(engine, pipeline, default_rate, "default", 1) for pipeline in pipelines for engine in ENGINES]
    return cells


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


def settings(seconds: float, warmup: float) -> dict:
    """Everything both engines share, and what each runs with: recorded in the results file."""
    from snippets.guides import rtm_or_flink_spark as spark_twin

    return {
        "seconds": seconds,
        "warmup_s": warmup,
        "partitions": engine_run.PARTITIONS,
        "topic_timestamps": "LogAppendTime",
        "priming_events": engine_run.PRIMING,
        "users": engine_run.USERS,
        "redelivered": "every tenth event repeats the one five before it",
        "consumer": spark_twin.CONSUMER,
        "producer": spark_twin.PRODUCER,
        "spark": {
            "version": versions.SPARK_VERSION,
            "kafka_connector": versions.SPARK_KAFKA_CONNECTOR_VERSION,
            "master": f"local[{4}]",
            "shuffle_partitions": engine_run.PARTITIONS,
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
        "--json",
        type=cli.json_output,
        default=DEFAULT_JSON,
        help=f"the results file, added to run by run (default {DEFAULT_JSON}; a .md table and a CDF plot beside it)",
    )
    parser.add_argument("--list", action="store_true", help="print the cells that would run, and stop")
    extra = parser.add_mutually_exclusive_group()
    extra.add_argument(
        "--recovery",
        action="store_true",
        help="instead of latency runs: SIGKILL each engine mid-run on transform and count, restart it on its "
        "checkpoint, and measure the restart (`--repeat` runs each, default 2)",
    )
    extra.add_argument(
        "--capacity",
        action="store_true",
        help="instead of latency runs: step the rate up on transform and count until each engine falls behind",
    )


def main(args: argparse.Namespace, command: str) -> int:
    if args.recovery or args.capacity:
        return _extra(args, command)
    preset = QUICK if args.quick else FULL
    rates = args.rate or preset["rates"]
    seconds = args.seconds or preset["seconds"]
    warmup = preset["warmup"] if args.warmup is None else args.warmup
    repeat = args.repeat or preset["repeat"]
    pipelines = preset.get("pipelines", list(PIPELINES))
    cells = [c for c in matrix(rates, repeat, pipelines, preset.get("default_rate")) if selected(c, args.only)]
    result = load(args.json)
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
        return 0
    if not cells:
        print("error: no cell matches --only; see --list for the names", file=sys.stderr)
        return 2
    print(f"{len(todo)} of {len(cells)} runs to make ({len(cells) - len(todo)} already in {args.json})", flush=True)
    result["settings"] = settings(seconds, warmup)
    try:
        with run_record.on_the_lab(command) as (invocation, state):
            for n, cell in enumerate(todo, start=1):
                engine, pipeline, rate, profile, i = cell
                print(f"({n}/{len(todo)}) {run_id(*cell)}", flush=True)
                record = run_record.Run(command)
                figures = engine_run.run(
                    engine, pipeline, rate, seconds, warmup, profile, state.kafka_bootstrap, say=_say
                )
                result["runs"][run_id(*cell)] = {**figures, "repeat": i, **record.record()}
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


def _say(line: str) -> None:
    print(f"  {line}", flush=True)


def _extra(args: argparse.Namespace, command: str) -> int:
    """`--recovery` or `--capacity`: their runs go into the same results file, under their own key, run by run."""
    kind = "recovery" if args.recovery else "capacity"
    result = load(args.json)
    done = result.setdefault(kind, {})
    if args.redo:
        done.clear()
    try:
        with run_record.on_the_lab(command) as (_, state):

            def keep(key: str, figures: dict) -> None:
                done[key] = figures
                save(result, args.json)

            if kind == "recovery":
                from rtm_lab.benchmarks import engine_recovery

                for i in range(1, (args.repeat or 2) + 1):
                    for pipeline in engine_recovery.PIPELINES:
                        for engine in ENGINES:
                            key = f"{engine}/{pipeline}/{i}"
                            if key in done or not selected(
                                (engine, pipeline, engine_recovery.RATE, "tuned", i), args.only
                            ):
                                continue
                            print(f"recovery {key}", flush=True)
                            record = run_record.Run(command)
                            figures = engine_recovery.run(engine, pipeline, state.kafka_bootstrap, say=_say)
                            _say(
                                f"resume {figures['resume_s']} s, replayed {figures['replayed']}, lost {figures['lost']}"
                            )
                            keep(key, {**figures, **record.record()})
            else:
                from rtm_lab.benchmarks import engine_capacity

                for pipeline in engine_capacity.PIPELINES:
                    for engine in ENGINES:
                        if not selected((engine, pipeline, 0, "tuned", 1), args.only):
                            continue
                        engine_capacity.run_steps(
                            engine, pipeline, state.kafka_bootstrap, done, keep, command, say=_say
                        )
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    md = engines_report.write(result, args.json)
    text = engines_report.recovery_markdown(result) if kind == "recovery" else engines_report.capacity_markdown(result)
    print(text)
    print(f"wrote {args.json} and the tables beside {md}")
    return 0

#!/usr/bin/env python3
"""Flink in the lab: the pinned PyFlink venv, and the comparison pipelines' Flink twin run against the lab's Kafka.

  python scripts/flink.py venv                         build the Flink venv if missing or stale; print its python
  python scripts/flink.py versions                     PyFlink, its Kafka connector, each engine's kafka-clients
  python scripts/flink.py run count SOURCE SINK [...]  run pipelines (transform, count, enrich, dedup) until Ctrl-C

The venv is .venv-flink (RTM_FLINK_VENV overrides), built from scripts/rtm_lab/engines/flink-requirements.txt and
rebuilt when that file changes. `run` starts snippets/guides/rtm_or_flink_flink.py in it with the Spark driver's heap
and parallelism = --parallelism (the topics' partitions, default 2), against the lab's broker (`lab.py up` first) or
KAFKA_BOOTSTRAP_SERVERS; Ctrl-C or SIGTERM stops it and its JVM.
"""

import argparse
import os
import sys
import time

from rtm_lab import cli, lab, versions
from rtm_lab.engines import flink, kafka_clients
from rtm_lab.errors import LabError
from rtm_lab.paths import PROJECT_ROOT
from rtm_lab.signals import exit_cleanly_on_termination

PROGRAM = PROJECT_ROOT / "snippets" / "guides" / "rtm_or_flink_flink.py"
PIPELINES = ("transform", "count", "enrich", "dedup")


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = cli.Parser(
        prog="flink.py",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("venv", help="build the Flink venv if missing or made from other pins; print its python")
    sub.add_parser("versions", help="print PyFlink, the Kafka connector and each engine's kafka-clients")
    run = sub.add_parser("run", help="run the Flink twin's pipelines against the lab's Kafka until stopped")
    run.add_argument("--parallelism", type=cli.positive_int, default=2, help="= the topics' partitions (default 2)")
    run.add_argument("runs", nargs="+", metavar="PIPELINE SOURCE SINK", help="one or more triples")
    args = parser.parse_args(argv)
    if args.command == "run":
        if len(args.runs) % 3:
            parser.error("give PIPELINE SOURCE_TOPIC SINK_TOPIC, three words per pipeline")
        unknown = [name for name in args.runs[::3] if name not in PIPELINES]
        if unknown:
            parser.error(f"unknown pipeline {unknown[0]!r}; known: {', '.join(PIPELINES)}")
    return args


def bootstrap() -> str:
    if os.environ.get(lab.KAFKA_ENV):
        return os.environ[lab.KAFKA_ENV]
    state = lab.status()
    if not state.kafka.running:
        raise LabError("The lab's Kafka is not running: start it with `python scripts/lab.py up`.")
    return state.kafka_bootstrap


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    exit_cleanly_on_termination()  # SIGTERM stops the Flink program as Ctrl-C does
    if args.command == "venv":
        print(flink.ensure_venv(log=say))
    elif args.command == "versions":
        print(f"apache-flink {versions.FLINK_VERSION}")
        print(f"flink-sql-connector-kafka {versions.FLINK_KAFKA_CONNECTOR_VERSION}")
        for engine, version in kafka_clients.versions().items():
            print(f"kafka-clients ({engine}) {version}")
    else:
        env = {lab.KAFKA_ENV: bootstrap()}
        with flink.running(PROGRAM, ["--parallelism", str(args.parallelism), *args.runs], env) as run:
            say(f"flink     pid {run.pid}; its output: {run.log}")
            run.wait_for("started ", count=len(args.runs) // 3)
            say("flink     running; Ctrl-C stops it")
            while run.running():
                time.sleep(1)
            raise LabError(f"The Flink program exited; the end of its log ({run.log}):\n{run.output()[-2000:]}")
    return 0


if __name__ == "__main__":
    sys.exit(cli.run(main))

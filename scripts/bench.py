#!/usr/bin/env python3
"""Benchmarks on the local lab. Each subcommand writes a JSON result and a generated Markdown table beside it."""

import argparse
import shlex
import sys

from rtm_lab import bench_latency, bench_sink
from rtm_lab.signals import exit_cleanly_on_termination


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench.py", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    latency = sub.add_parser(
        "latency",
        help="micro-batch vs async progress tracking vs real-time mode, Kafka -> Kafka",
        description=bench_latency.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    bench_latency.add_arguments(latency)
    latency.set_defaults(handler=bench_latency.main)
    sink = sub.add_parser(
        "sink",
        help="Kafka -> real-time mode -> foreach -> Postgres: throughput, E2E latency, reconciliation",
        description=bench_sink.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    bench_sink.add_arguments(sink)
    sink.set_defaults(handler=bench_sink.main)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    exit_cleanly_on_termination()  # SIGTERM/SIGHUP run the benchmarks' clean-up, as Ctrl-C does
    return args.handler(args, "python scripts/bench.py " + shlex.join(argv))


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Benchmarks on the local lab. Each subcommand writes a JSON result and a generated Markdown table beside it."""

import argparse
import shlex
import sys

from rtm_lab import cli
from rtm_lab.benchmarks import adopt as bench_adopt
from rtm_lab.benchmarks import boundary_settings as bench_settings
from rtm_lab.benchmarks import checkpoint_flink as bench_checkpoint_flink
from rtm_lab.benchmarks import checkpoint_storage as bench_checkpoint
from rtm_lab.benchmarks import dedup_stall as bench_dedup_stall
from rtm_lab.benchmarks import engine_capacity_search as bench_engine_capacity
from rtm_lab.benchmarks import engines as bench_engines
from rtm_lab.benchmarks import latency as bench_latency
from rtm_lab.benchmarks import monitor_cost as bench_monitor
from rtm_lab.benchmarks import per_task as bench_per_task
from rtm_lab.benchmarks import plan_check as bench_plan_check
from rtm_lab.benchmarks import recovery as bench_recovery
from rtm_lab.benchmarks import retry_outcomes as bench_retry
from rtm_lab.benchmarks import sink as bench_sink
from rtm_lab.signals import exit_cleanly_on_termination

BENCHMARKS = (
    ("latency", bench_latency, "micro-batch vs async progress tracking vs real-time mode, Kafka -> Kafka"),
    ("sink", bench_sink, "Kafka -> real-time mode -> foreach -> Postgres: throughput, E2E latency, reconciliation"),
    ("settings", bench_settings, "settings tried against the batch-boundary stall at the 5 s worst case"),
    (
        "engines",
        bench_engines,
        "real-time mode against Flink: the guide's four pipelines, latency, CPU and memory; --recovery",
    ),
    (
        "monitor",
        bench_monitor,
        "the latency monitor's cost on the query, and PromQL's percentiles against the records'",
    ),
    ("recovery", bench_recovery, "the driver SIGKILLed mid-batch and restarted: rows replayed, time to resume"),
    ("retry-outcomes", bench_retry, "a failed Python task's retry: how often it commits, how often it is denied"),
    (
        "per-task",
        bench_per_task,
        "the highest rate one task holds per query shape, engine pinned to one core: the planner's capacities",
    ),
    (
        "plan-check",
        bench_plan_check,
        "the planner's prediction against runs on a standalone cluster at 0.5x, 0.9x and 1.3x the per-task capacity",
    ),
    (
        "checkpoint-storage",
        bench_checkpoint,
        "checkpoints on the lab's S3 store at a set delay per request: stall per boundary, requests, the model",
    ),
    (
        "dedup-stall",
        bench_dedup_stall,
        "why real-time deduplication stalls at 10,000 events/s: a fractional factorial with GC logs and thread dumps",
    ),
    (
        "engine-capacity",
        bench_engine_capacity,
        "the highest rate each engine holds (p99 under the bound, nothing lost), searched to within a tenth, 3 runs a step",
    ),
    (
        "checkpoint-storage-flink",
        bench_checkpoint_flink,
        "Flink beside it: a checkpoint every 5 s on local disk and on the S3 store, its cost to the records passing",
    ),
    (
        "adopt",
        bench_adopt,
        "not a benchmark: bring a results file made in a scratch folder into docs/results, its commands as typed",
    ),
)


def parse_args(argv: list[str]) -> argparse.Namespace:
    # cli.Parser: a bad option is one line and exit 2; subcommands inherit the parser class.
    parser = cli.Parser(prog="bench.py", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, module, summary in BENCHMARKS:
        command = sub.add_parser(
            name, help=summary, description=module.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        module.add_arguments(command)
        command.set_defaults(handler=module.main)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    exit_cleanly_on_termination()  # SIGTERM/SIGHUP run the benchmarks' clean-up, as Ctrl-C does
    return args.handler(args, "python scripts/bench.py " + shlex.join(argv))


if __name__ == "__main__":
    sys.exit(cli.run(main))

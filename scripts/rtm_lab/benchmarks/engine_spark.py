"""The Spark side of `bench.py engines`: one comparison pipeline in real-time mode, alone in its own process.

    python -m rtm_lab.benchmarks.engine_spark PIPELINE SOURCE SINK CHECKPOINT [--batch-duration D] [--conf KEY=VALUE ...]

The engine benchmark starts this and measures the CPU and memory of its whole process tree (this Python driver and
the JVM it launches), so nothing else runs here: no generator, no reader. The query is the one the guide shows
(snippets/guides/rtm_or_flink_spark.py, `start_pipeline`) on the lab's session builder. It runs until stopped.
"""

import argparse
import os
import sys

from rtm_lab.spark import spark_session
from snippets.guides.rtm_or_flink_spark import BATCH_DURATION, PIPELINES, start_pipeline

SLOTS = 4  # 2 source tasks + 2 shuffle tasks: the stateful pipelines' real-time stages all run at once


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rtm_lab.benchmarks.engine_spark", description=__doc__)
    parser.add_argument("pipeline", choices=PIPELINES)
    parser.add_argument("source")
    parser.add_argument("sink")
    parser.add_argument("checkpoint", help="the query's checkpoint folder (also this process's identity)")
    parser.add_argument(
        "--batch-duration",
        "--interval",  # its earlier name, kept so recorded commands still run
        dest="interval",
        default=BATCH_DURATION,
        help=f"the real-time batch duration (default {BATCH_DURATION!r})",
    )
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting")
    args = parser.parse_args(argv)
    conf = dict(item.split("=", 1) for item in args.conf)
    spark = spark_session(f"engines-{args.pipeline}", slots=SLOTS, conf=conf)
    bootstrap = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
    query = start_pipeline(spark, args.pipeline, bootstrap, args.source, args.sink, args.checkpoint, args.interval)
    print(f"started {args.pipeline}: {args.source} -> {args.sink}", flush=True)
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The Spark side of `bench.py engines`: one comparison pipeline in real-time mode, alone in its own process.

    python -m rtm_lab.benchmarks.engine_spark PIPELINE SOURCE SINK CHECKPOINT [--batch-duration D] [--tiers FILE]
        [--slots N] [--conf KEY=VALUE ...]

The engine benchmark starts this and measures the CPU and memory of its whole process tree (this Python driver and
the JVM it launches), so nothing else runs here: no generator, no reader. The query is the one the guide shows
(snippets/guides/rtm_or_flink_spark.py, `start_pipeline`) on the lab's session builder. It runs until stopped.
PIPELINE may also be `dedup-user`, the deduplication keyed by user (a bounded key space) that `bench.py dedup-stall`
sets beside the guide's deduplication by id.

Once the query runs, one line starting READBACK gives what the JVM really runs with (its garbage collectors, input
arguments, Java version, pid): the benchmark reads it from this process's log rather than trusting what it asked for.
"""

import argparse
import json
import os
import re
import sys
import time

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from rtm_lab.benchmarks.engine_output import DEDUP_BY_USER
from rtm_lab.spark import spark_session
from snippets.guides.rtm_or_flink_spark import BATCH_DURATION, PIPELINES, enrich, read_events, start_pipeline, write

READBACK = "READBACK "

SLOTS = 4  # 2 source tasks + 2 shuffle tasks: the stateful pipelines' real-time stages all run at once


def dedup_by_user(events: DataFrame) -> DataFrame:
    """The guide's deduplication keyed by user: its state holds at most the key space's users, however long it runs."""
    first = events.dropDuplicates(["user"])
    return first.select("key", F.to_json(F.struct("id", "user", "amount", "created_ms")).alias("value"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rtm_lab.benchmarks.engine_spark", description=__doc__)
    parser.add_argument("pipeline", choices=[*PIPELINES, DEDUP_BY_USER])
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
    parser.add_argument("--tiers", help="a JSON file of [user, tier] rows for the enrichment (default: the guide's)")
    parser.add_argument(
        "--slots", type=int, default=SLOTS, help=f"local slots: source plus shuffle tasks (default {SLOTS})"
    )
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting")
    args = parser.parse_args(argv)
    conf = dict(item.split("=", 1) for item in args.conf)
    spark = spark_session(f"engines-{args.pipeline}", slots=args.slots, conf=conf)
    bootstrap = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
    if args.pipeline == "enrich" and args.tiers:
        with open(args.tiers) as rows:
            out = enrich(read_events(spark, bootstrap, args.source), [tuple(row) for row in json.load(rows)])
        query = write(out, bootstrap, args.sink, args.checkpoint, args.interval)
    elif args.pipeline == DEDUP_BY_USER:
        out = dedup_by_user(read_events(spark, bootstrap, args.source))
        query = write(out, bootstrap, args.sink, args.checkpoint, args.interval)
    else:
        query = start_pipeline(spark, args.pipeline, bootstrap, args.source, args.sink, args.checkpoint, args.interval)
    print(f"started {args.pipeline}: {args.source} -> {args.sink}", flush=True)
    found = {**jvm_readback(spark), "plan_nodes": plan_nodes(query), "state_store": state_store(query)}
    print(READBACK + json.dumps(found), flush=True)
    query.awaitTermination()
    return 0


def plan_nodes(query, timeout_s: float = 120.0) -> list[str]:
    """The physical plan's operators, in order, once the first batch is planned (e.g. a BroadcastHashJoin and no
    Exchange for the enrichment)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        execution = query._jsq.streamingQuery().lastExecution()
        if execution is not None:
            lines = str(execution.executedPlan().treeString()).splitlines()
            return [m[1] for m in (re.match(r"^[\s:+\-*(0-9)]*([A-Za-z]\w*)", line) for line in lines) if m]
        time.sleep(0.2)
    return []


STATE_STORE_CONF = "spark.sql.streaming.stateStore.providerClass"


def state_store(query) -> str:
    """The state store provider of the query's own session (a copy taken when the query started)."""
    return str(query._jsq.streamingQuery().sparkSessionForStream().conf().get(STATE_STORE_CONF))


def jvm_readback(spark) -> dict:
    """The driver JVM's own account of itself (local mode: the executors are its threads)."""
    management = spark._jvm.java.lang.management.ManagementFactory
    runtime = management.getRuntimeMXBean()
    beans = management.getGarbageCollectorMXBeans()
    return {
        "pid": int(runtime.getPid()),
        "java": str(runtime.getVmVersion()),
        "gc": sorted({str(beans.get(i).getName()) for i in range(beans.size())}),
        "jvm_args": [str(arg) for arg in runtime.getInputArguments()],
        "max_heap_mib": round(int(spark._jvm.java.lang.Runtime.getRuntime().maxMemory()) / 2**20),
    }


if __name__ == "__main__":
    sys.exit(main())

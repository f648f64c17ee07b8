"""The slot calculator's worked examples against Spark: run each at a given number of slots and report what happened.

    python -m rtm_lab.probes.slots --slots 4
    python -m rtm_lab.probes.slots --master spark://127.0.0.1:7077 --examples aggregation --conf spark.cores.max=4

Each example prints one JSON line: what the calculator said, what Spark did. `--slots N` runs on `local[N]`;
`--master` runs on a cluster (`rtm_lab.standalone` starts one on loopback). On a cluster, pass `spark.cores.max`:
the session then waits until executors with that many cores have registered, because real-time mode counts the free
slots when its first batch starts, and a standalone cluster's executors may still be registering then.
"""

import argparse
import itertools
import json
import os
import re
import sys
import time
from dataclasses import asdict, dataclass, field

from kafka import KafkaConsumer, TopicPartition
from pyspark.sql import functions as F

from rtm_lab import plans, topics
from rtm_lab.intervals import TEST_INTERVAL
from rtm_lab.waiting import WaitTimeout, wait_until
from snippets.reference.errors import error_class
from snippets.reference.readiness_check import rtm_check
from snippets.reference.slot_sizing import EXAMPLES, slots_needed

# Every example needs 4 slots on these topics, so one run at local[4] and one at local[3] check them all.
SOURCE_PARTITIONS = {"stateless": 4, "aggregation": 2, "deduplication": 2, "repartition": 2}


@dataclass
class Outcome:
    example: str
    master: str
    needed_before_start: int
    needed_while_running: int | None = None
    stages: list[int] = field(default_factory=list)
    outcome: str = "timeout"  # "ran": rows reached the sink; "failed": the query stopped with an error
    error_class: str | None = None
    spark_needs: int | None = None  # the slot count in Spark's own error message
    spark_free: int | None = None
    arrival_spread_ms: int | None = None  # first to last source partition's row in the sink
    partitions_seen: list[int] = field(default_factory=list)  # stateless: source partitions whose row arrived
    tasks_per_executor: dict[str, int] = field(default_factory=dict)
    executors_at_start: int | None = None  # on a cluster: executors registered when the query started
    # The readiness check's prediction at local[N]'s N slots (local runs only): verdict, slots, slot finding level.
    checker_verdict: list | None = None
    checker_needs: int | None = None
    checker_slot_finding: str | None = None


# Spark's own wait for executors (off by default on a standalone cluster): all of spark.cores.max, for up to 2 min.
WAIT_FOR_EXECUTORS = {
    "spark.scheduler.minRegisteredResourcesRatio": "1.0",
    "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s",
}


def _running_tasks_per_executor(spark) -> dict[str, int]:
    infos = spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()
    counts = {f"{info.host()}:{info.port()}": info.numRunningTasks() for info in infos}
    # The driver is listed too; it runs tasks only in local mode.
    return counts


def run_example(spark, bootstrap: str, name: str, timeout_s: float = 45.0) -> Outcome:
    """Start one worked example in real-time mode, then report what the calculator said and what Spark did."""
    partitions = SOURCE_PARTITIONS[name]
    source = topics.create_topic(bootstrap, topics.unique_name(f"slots-{name}"), partitions)
    sink = topics.create_topic(bootstrap, topics.unique_name(f"slots-{name}-out"), 1)
    producer = topics.producer(bootstrap)
    for p in range(partitions):
        producer.send(source, key=f"k{p}".encode(), value=b"row", partition=p)
    producer.flush()
    producer.close()

    df = EXAMPLES[name](topics.kafka_stream(spark, bootstrap, source))
    if "partition" not in df.columns:
        df = df.withColumn("partition", F.lit(-1))
    out = df.select("key", F.to_json(F.struct("value", "partition")).alias("value"))
    outcome = Outcome(name, spark.sparkContext.master, slots_needed(out, partitions).total)
    if spark.sparkContext.master.startswith("local["):
        _predict(spark, out, bootstrap, sink, outcome)
    if not spark.sparkContext.master.startswith("local"):
        outcome.executors_at_start = len(_running_tasks_per_executor(spark)) - 1  # minus the driver
    query = topics.start_real_time_to_kafka(out, bootstrap, sink, TEST_INTERVAL)
    try:
        _watch(spark, query, bootstrap, sink, partitions, outcome, timeout_s)
    finally:
        query.stop()
        topics.delete_topic(bootstrap, source)
        topics.delete_topic(bootstrap, sink)
    return outcome


def _predict(spark, out, bootstrap: str, sink: str, outcome: Outcome) -> None:
    """What the readiness check says of this query at this session's slots, before it starts."""
    slots = int(spark.sparkContext.master[len("local[") : -1])
    options = {"kafka.bootstrap.servers": bootstrap, "topic": sink}
    report = rtm_check(out, slots, sink="kafka", options=options, batch_duration=TEST_INTERVAL)
    outcome.checker_verdict, outcome.checker_needs = list(report.verdict), report.slots_needed
    levels = [f.level for f in report.findings if f.what.startswith("slots:")]
    outcome.checker_slot_finding = levels[0] if levels else None


def _watch(spark, query, bootstrap, sink, partitions, outcome: Outcome, timeout_s: float) -> None:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    consumer.assign([TopicPartition(sink, 0)])
    consumer.seek_to_beginning()
    first_seen: dict[int, int] = {}
    rows = 0

    def settled() -> bool:
        nonlocal rows
        failed = plans.failure(query)
        if failed is not None:
            outcome.outcome, outcome.error_class = "failed", error_class(failed)
            counts = re.search(r"needs (\d+) concurrent task slots.*only (\d+) are", str(failed))
            if counts:
                outcome.spark_needs, outcome.spark_free = int(counts.group(1)), int(counts.group(2))
            return True
        for batch in consumer.poll(timeout_ms=200).values():
            for record in batch:
                rows += 1
                first_seen.setdefault(json.loads(record.value)["partition"], record.timestamp)
        outcome.partitions_seen = sorted(p for p in first_seen if p >= 0)
        # Stateless rows carry their source partition; the others count rows (one per source partition).
        return len(first_seen) == partitions if -1 not in first_seen else rows >= 1

    def rows_began() -> bool:
        settled_now = settled()
        return settled_now or rows > 0

    try:
        try:
            wait_until(rows_began, timeout_s, "the first row in the sink", interval_s=0)
            # Once rows flow, three batch durations are long enough for the others to follow.
            wait_until(settled, 15.0, "a row from every source partition", interval_s=0)
        except WaitTimeout:
            return  # outcome stays "timeout", with the partitions seen so far
        if outcome.outcome == "failed":
            return
        outcome.outcome = "ran"
        outcome.needed_while_running = slots_needed(query, SOURCE_PARTITIONS[outcome.example]).total
        _sample_running(spark, outcome, outcome.needed_while_running)
        if -1 not in first_seen:
            outcome.arrival_spread_ms = max(first_seen.values()) - min(first_seen.values())
    finally:
        consumer.close()


def _sample_running(spark, outcome: Outcome, needed: int) -> None:
    """Stages and running tasks are sampled: keep the fullest view of the running batch. Sample for at least a second
    and until both the active stages' tasks and the running tasks seen per executor reach `needed` (at most 10 s): a
    sample taken at a batch boundary, on a busy machine, sees the next batch's stages start one by one, and the status
    store takes in task starts after their stage (a CI run on a loaded machine stopped with one executor's tasks
    seen). If Spark ran the stages one after another, the sums would never reach `needed` and the test reading them
    fails."""
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + 10.0
    for n in itertools.count():
        seen_all = sum(outcome.stages) >= needed and sum(outcome.tasks_per_executor.values()) >= needed
        if n >= 10 and (seen_all or time.monotonic() > deadline):
            return
        for executor, running in _running_tasks_per_executor(spark).items():
            outcome.tasks_per_executor[executor] = max(outcome.tasks_per_executor.get(executor, 0), running)
        infos = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
        stages = sorted(info.numTasks for info in infos if info is not None)
        if sum(stages) > sum(outcome.stages):
            outcome.stages = stages
        time.sleep(0.1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--slots", type=int, help="run on local[N]: N task slots")
    where.add_argument("--master", help="a cluster's master URL, e.g. spark://127.0.0.1:7077")
    parser.add_argument("--examples", default=",".join(EXAMPLES), help="comma-separated: " + ", ".join(EXAMPLES))
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"), help="Kafka bootstrap")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting")
    args = parser.parse_args(argv)
    bad = [c for c in args.conf if "=" not in c]
    if bad:
        parser.error(f"--conf takes KEY=VALUE, got {bad}")
    names = [n for n in args.examples.split(",") if n]
    unknown = set(names) - set(EXAMPLES)
    if unknown:
        parser.error(f"unknown examples {sorted(unknown)}; choose from {list(EXAMPLES)}")
    if not args.bootstrap:
        parser.error('no Kafka: pass --bootstrap or run `eval "$(python scripts/lab.py env)"` first')
    if args.master:
        os.environ["SPARK_MASTER"] = args.master
    from rtm_lab.spark import spark_session

    conf = dict(c.split("=", 1) for c in args.conf)
    if args.master:
        conf = {**WAIT_FOR_EXECUTORS, **conf}
    # The running-task counts are read from the status store, which writes an executor's task start only if its last
    # write is 100 ms old (spark.ui.liveUpdatePeriod): a start just after the previous batch's tasks ended can wait
    # for the next heartbeat's flush (10 s), and one executor reads 0 meanwhile. 0 writes every change.
    conf = {"spark.ui.liveUpdatePeriod": "0", **conf}
    spark = spark_session("slot-sizing", slots=args.slots, conf=conf)
    for name in names:
        print(f"running {name} on {spark.sparkContext.master} ...", file=sys.stderr, flush=True)
        started = time.monotonic()
        print(json.dumps(asdict(run_example(spark, args.bootstrap, name))), flush=True)
        print(f"  {name}: {time.monotonic() - started:.1f}s", file=sys.stderr, flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

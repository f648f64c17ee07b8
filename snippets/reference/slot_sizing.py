"""How many task slots a real-time query needs, read from its physical plan, and the worked examples that check it.

Run the worked examples at a given number of slots (each prints one JSON line: what the calculator said, what Spark did):

    python -m snippets.reference.slot_sizing --slots 4
    python -m snippets.reference.slot_sizing --master spark://127.0.0.1:7077 --examples aggregation

`--slots N` runs on `local[N]`; `--master` runs on a cluster (`rtm_lab.standalone` starts one on loopback).
"""

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable

# --8<-- [start:calculator]
from dataclasses import asdict, dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql.streaming import StreamingQuery


@dataclass(frozen=True)
class SlotNeed:
    """Tasks of every stage a real-time query runs at once: one per source partition, one per shuffle partition."""

    source_tasks: int
    shuffle_tasks: tuple[int, ...] = ()

    @property
    def total(self) -> int:
        return self.source_tasks + sum(self.shuffle_tasks)


def physical_plan(df_or_query: DataFrame | StreamingQuery) -> str:
    """The physical plan as text: planned from a DataFrame before start, or what a running query last executed."""
    if isinstance(df_or_query, DataFrame):
        jvm = df_or_query.sparkSession._jvm
        return jvm.PythonSQLUtils.explainString(df_or_query._jdf.queryExecution(), "simple")
    return df_or_query._jsq.explainInternal(False)


def exchange_partitions(plan: str) -> tuple[int, ...]:
    """Output partitions of every shuffle `Exchange` in a plan's text, e.g. `hashpartitioning(key#7, 2)` -> 2."""
    found = []
    for line in plan.splitlines():
        head, sep, rest = line.partition("Exchange ")
        # BroadcastExchange and ReusedExchange add no tasks to the streaming stages.
        if not sep or (head and head[-1].isalnum()):
            continue
        if rest.startswith("SinglePartition"):
            found.append(1)
            continue
        depth, args = 0, ""
        for char in rest[rest.index("(") :]:
            depth += {"(": 1, ")": -1}.get(char, 0)
            args += char
            if depth == 0:
                break
        found.append(int(args[1:-1].rsplit(",", 1)[-1].strip().split("(")[-1]))
    return tuple(found)


def slots_needed(df_or_query: DataFrame | StreamingQuery, source_tasks: int) -> SlotNeed:
    """Slots a real-time query needs: `source_tasks` (Kafka: the subscribed topics' partition count) plus the output
    partitions of every shuffle exchange, because in real-time mode all stages of the query run at the same time."""
    plan = physical_plan(df_or_query)
    if "No physical plan" in plan:
        raise ValueError("The query has not planned a batch yet; wait for its first progress event.")
    return SlotNeed(source_tasks, exchange_partitions(plan))


def kafka_partitions(bootstrap: str, topic: str) -> int:
    """One real-time task reads one Kafka partition (OSS has no `minPartitions` in real-time mode)."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        found = consumer.partitions_for_topic(topic)
        if not found:
            raise ValueError(f"Kafka topic {topic!r} does not exist on {bootstrap}.")
        return len(found)
    finally:
        consumer.close()


# --8<-- [end:calculator]


# --8<-- [start:examples]
from pyspark.sql import functions as F  # noqa: E402


def stateless(raw: DataFrame) -> DataFrame:
    """One stage: a task per source partition."""
    return raw.select("key", F.upper(F.col("value").cast("string")).alias("value"), "partition")


def aggregation(raw: DataFrame) -> DataFrame:
    """Two stages: source tasks, then `spark.sql.shuffle.partitions` tasks holding the aggregation state."""
    return raw.groupBy("key").count().select("key", F.col("count").cast("string").alias("value"))


def deduplication(raw: DataFrame) -> DataFrame:
    """Two stages, like an aggregation: the state is sharded by the dedup key across the shuffle partitions."""
    return raw.dropDuplicates(["key"]).select("key", "value")


def repartition(raw: DataFrame, partitions: int = 2) -> DataFrame:
    """Two stages: `repartition(n)` adds n tasks even though nothing is stateful."""
    return raw.repartition(partitions).select("key", "value")


# --8<-- [end:examples]

EXAMPLES: dict[str, Callable[[DataFrame], DataFrame]] = {
    "stateless": stateless,
    "aggregation": aggregation,
    "deduplication": deduplication,
    "repartition": repartition,
}
# Every example needs 4 slots on these topics, so one run at local[4] and one at local[3] check them all.
SOURCE_PARTITIONS = {"stateless": 4, "aggregation": 2, "deduplication": 2, "repartition": 2}
SLOT_ERROR = "CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT"


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


def _error_class(message: str) -> str | None:
    match = re.search(r"\[([A-Z_.]+)\]", message)
    return match.group(1) if match else None


def _running_tasks_per_executor(spark) -> dict[str, int]:
    infos = spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()
    counts = {f"{info.host()}:{info.port()}": info.numRunningTasks() for info in infos}
    # The driver is listed too; it runs tasks only in local mode.
    return counts


def kafka_rows(spark, bootstrap: str, topic: str) -> DataFrame:
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )


def run_example(spark, bootstrap: str, name: str, timeout_s: float = 45.0) -> Outcome:
    """Start one worked example in real-time mode, then report what the calculator said and what Spark did."""
    from rtm_lab import topics

    partitions = SOURCE_PARTITIONS[name]
    source = topics.create_topic(bootstrap, topics.unique_name(f"slots-{name}"), partitions)
    sink = topics.create_topic(bootstrap, topics.unique_name(f"slots-{name}-out"), 1)
    producer = topics.producer(bootstrap)
    for p in range(partitions):
        producer.send(source, key=f"k{p}".encode(), value=b"row", partition=p)
    producer.flush()
    producer.close()

    df = EXAMPLES[name](kafka_rows(spark, bootstrap, source))
    if "partition" not in df.columns:
        df = df.withColumn("partition", F.lit(-1))
    out = df.select("key", F.to_json(F.struct("value", "partition")).alias("value"))
    outcome = Outcome(name, spark.sparkContext.master, slots_needed(out, partitions).total)
    query = (
        out.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", tempfile.mkdtemp(prefix="slots-"))
        .outputMode("update")
        .trigger(realTime="5 seconds")
        .start()
    )
    try:
        _watch(spark, query, bootstrap, sink, partitions, outcome, timeout_s)
    finally:
        query.stop()
        topics.delete_topic(bootstrap, source)
        topics.delete_topic(bootstrap, sink)
    return outcome


def _watch(spark, query, bootstrap, sink, partitions, outcome: Outcome, timeout_s: float) -> None:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    consumer.assign([TopicPartition(sink, 0)])
    consumer.seek_to_beginning()
    first_seen: dict[int, int] = {}
    rows = 0
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            outcome.partitions_seen = sorted(p for p in first_seen if p >= 0)
            if query.exception() is not None:
                message = str(query.exception())
                outcome.outcome, outcome.error_class = "failed", _error_class(message)
                counts = re.search(r"needs (\d+) concurrent task slots.*only (\d+) are", message)
                if counts:
                    outcome.spark_needs, outcome.spark_free = int(counts.group(1)), int(counts.group(2))
                return
            for batch in consumer.poll(timeout_ms=200).values():
                # Once rows flow, three batch intervals is long enough for the others to follow.
                deadline = min(deadline, time.monotonic() + 15.0)
                for record in batch:
                    rows += 1
                    source_partition = json.loads(record.value)["partition"]
                    first_seen.setdefault(source_partition, record.timestamp)
            # Stateless rows carry their source partition; the others count rows (one per source partition).
            done = len(first_seen) == partitions if -1 not in first_seen else rows >= 1
            if done:
                # Stages and running tasks are sampled: keep the fullest view over a second of the running batch.
                tracker = spark.sparkContext.statusTracker()
                for _ in range(10):
                    for executor, running in _running_tasks_per_executor(spark).items():
                        seen = outcome.tasks_per_executor.get(executor, 0)
                        outcome.tasks_per_executor[executor] = max(seen, running)
                    infos = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
                    stages = sorted(info.numTasks for info in infos if info is not None)
                    if sum(stages) > sum(outcome.stages):
                        outcome.stages = stages
                    time.sleep(0.1)
                outcome.outcome = "ran"
                outcome.needed_while_running = slots_needed(query, SOURCE_PARTITIONS[outcome.example]).total
                outcome.partitions_seen = sorted(p for p in first_seen if p >= 0)
                if -1 not in first_seen:
                    outcome.arrival_spread_ms = max(first_seen.values()) - min(first_seen.values())
                return
    finally:
        consumer.close()


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

    spark = spark_session("slot-sizing", slots=args.slots, conf=dict(c.split("=", 1) for c in args.conf))
    for name in names:
        print(f"running {name} on {spark.sparkContext.master} ...", file=sys.stderr, flush=True)
        started = time.monotonic()
        print(json.dumps(asdict(run_example(spark, args.bootstrap, name))), flush=True)
        print(f"  {name}: {time.monotonic() - started:.1f}s", file=sys.stderr, flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

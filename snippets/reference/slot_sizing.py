"""How many task slots a real-time query needs, read from its physical plan, and four
worked examples.

    python snippets/reference/slot_sizing.py SOURCE_TOPIC

plans each worked example over SOURCE_TOPIC on KAFKA_BOOTSTRAP_SERVERS and prints the
slots it needs. What Spark does at exactly that many slots and at one fewer is checked
by scripts/rtm_lab/probes/slots.py (tests/reference/test_slot_sizing.py).
"""

import os
import sys

# --8<-- [start:calculator]
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql.streaming import StreamingQuery


@dataclass(frozen=True)
class SlotNeed:
    """Tasks of every stage a real-time query runs at once: one per source partition,
    one per shuffle partition."""

    source_tasks: int
    shuffle_tasks: tuple[int, ...] = ()

    @property
    def total(self) -> int:
        return self.source_tasks + sum(self.shuffle_tasks)


def physical_plan(df_or_query: DataFrame | StreamingQuery) -> str:
    """The physical plan as text: planned from a DataFrame before start, or what a
    running query last executed."""
    if isinstance(df_or_query, DataFrame):
        jvm = df_or_query.sparkSession._jvm
        return jvm.PythonSQLUtils.explainString(
            df_or_query._jdf.queryExecution(), "simple"
        )
    return df_or_query._jsq.explainInternal(False)


def exchange_partitions(plan: str) -> tuple[int, ...]:
    """Output partitions of every shuffle `Exchange` in a plan's text, e.g.
    `hashpartitioning(key#7, 2)` -> 2."""
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


def slots_needed(
    df_or_query: DataFrame | StreamingQuery, source_tasks: int
) -> SlotNeed:
    """Slots a real-time query needs: `source_tasks` (Kafka: the subscribed topics'
    partition count) plus the output partitions of every shuffle exchange, because in
    real-time mode all stages of the query run at the same time."""
    plan = physical_plan(df_or_query)
    if "No physical plan" in plan:
        raise ValueError(
            "The query has not planned a batch yet; wait for its first progress event."
        )
    return SlotNeed(source_tasks, exchange_partitions(plan))


def kafka_partitions(bootstrap: str, topic: str) -> int:
    """One real-time task reads one Kafka partition (OSS has no `minPartitions` in
    real-time mode)."""
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
    return raw.select(
        "key", F.upper(F.col("value").cast("string")).alias("value"), "partition"
    )


def aggregation(raw: DataFrame) -> DataFrame:
    """Two stages: source tasks, then `spark.sql.shuffle.partitions` tasks holding the
    aggregation state."""
    return (
        raw.groupBy("key")
        .count()
        .select("key", F.col("count").cast("string").alias("value"))
    )


def deduplication(raw: DataFrame) -> DataFrame:
    """Two stages, like an aggregation: the state is sharded by the dedup key across the
    shuffle partitions."""
    return raw.dropDuplicates(["key"]).select("key", "value")


def repartition(raw: DataFrame, partitions: int = 2) -> DataFrame:
    """Two stages: `repartition(n)` adds n tasks even though nothing is stateful."""
    return raw.repartition(partitions).select("key", "value")


# --8<-- [end:examples]

EXAMPLES = {
    "stateless": stateless,
    "aggregation": aggregation,
    "deduplication": deduplication,
    "repartition": repartition,
}

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    from pyspark.sql import SparkSession

    # The Kafka connector comes from spark.jars.packages in spark-defaults.conf
    # (in SPARK_CONF_DIR), or from spark-submit --packages.
    spark = (
        SparkSession.builder.appName("slot-sizing")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    bootstrap, topic = os.environ["KAFKA_BOOTSTRAP_SERVERS"], sys.argv[1]
    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
    )
    for name, example in EXAMPLES.items():
        print(name, slots_needed(example(raw), kafka_partitions(bootstrap, topic)))

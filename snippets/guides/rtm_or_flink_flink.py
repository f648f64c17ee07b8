"""The four comparison pipelines in PyFlink (Table API + SQL, built-in functions only),
Kafka -> Kafka.

The PySpark twin is snippets/guides/rtm_or_flink_spark.py: same input topic and JSON,
same output records, same Kafka client settings, a checkpoint every 5 minutes. This file
runs in a venv with `apache-flink` (its pins clash with PySpark's), with Flink's SQL
Kafka connector jar:

    python snippets/guides/rtm_or_flink_flink.py \\
        --jar flink-sql-connector-kafka-5.0.0-2.2.jar \\
        PIPELINE SOURCE_TOPIC SINK_TOPIC [PIPELINE SOURCE_TOPIC SINK_TOPIC ...]

PIPELINE is one of transform, count, enrich, dedup; KAFKA_BOOTSTRAP_SERVERS names the
broker. Each pipeline is one Flink job on a local MiniCluster inside this process; it
runs until the process is stopped.
"""

import argparse
import json
import os

# --8<-- [start:setup]
import sys
from pathlib import Path

from pyflink.common import Configuration
from pyflink.table import DataTypes, EnvironmentSettings, TableEnvironment
from pyflink.table.udf import FunctionContext, ScalarFunction, udf

# The same settings as the PySpark twin: the consumer's fetch wait, the producer's
# batching and acks.
CONSUMER = {"fetch.max.wait.ms": "50"}
PRODUCER = {"linger.ms": "5", "acks": "all", "batch.size": "16384"}
# RTM checkpoints at the end of each real-time batch (its batch duration); Flink's
# checkpoint interval is set to the same 5 minutes.
CHECKPOINT_INTERVAL = "5 min"
# The sinks are at-least-once, so aligned (exactly-once) checkpoints would buy nothing.
CHECKPOINT_MODE = "AT_LEAST_ONCE"
# Keyed state in RocksDB, as real-time mode keeps it.
STATE_BACKEND = "rocksdb"


def table_environment(
    parallelism: int, connector_jar: str, extra: dict[str, str] | None = None
) -> TableEnvironment:
    """A streaming TableEnvironment; in local mode each job runs on its own MiniCluster
    in this JVM."""
    config = Configuration()
    # Parallelism = the topic's partitions.
    config.set_string("parallelism.default", str(parallelism))
    config.set_string("execution.checkpointing.interval", CHECKPOINT_INTERVAL)
    config.set_string("execution.checkpointing.mode", CHECKPOINT_MODE)
    config.set_string("state.backend.type", STATE_BACKEND)
    # Python functions (the enrichment's lookup) run in this interpreter's venv.
    config.set_string("python.executable", sys.executable)
    config.set_string("pipeline.jars", Path(connector_jar).resolve().as_uri())
    for key, value in (extra or {}).items():
        config.set_string(key, value)
    settings = (
        EnvironmentSettings.new_instance()
        .in_streaming_mode()
        .with_configuration(config)
        .build()
    )
    return TableEnvironment.create(settings)


def kafka_options(bootstrap: str, topic: str, client: dict[str, str]) -> str:
    options = {"topic": topic, "properties.bootstrap.servers": bootstrap}
    options |= {f"properties.{key}": value for key, value in client.items()}
    return ", ".join(f"'{key}' = '{value}'" for key, value in options.items())


def create_source(t_env: TableEnvironment, bootstrap: str, topic: str) -> None:
    """The input topic as a table: raw key bytes, the JSON value's fields, the record's
    Kafka timestamp."""
    t_env.execute_sql(f"""
        CREATE TEMPORARY TABLE events (
            k BYTES,
            id BIGINT, `user` STRING, amount DOUBLE, created_ms BIGINT,
            ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
            pt AS PROCTIME()
        ) WITH (
            'connector' = 'kafka', {kafka_options(bootstrap, topic, CONSUMER)},
            'properties.group.id' = 'flink-{topic}',
            'scan.startup.mode' = 'earliest-offset',
            'key.format' = 'raw', 'key.fields' = 'k',
            'value.format' = 'json', 'value.fields-include' = 'EXCEPT_KEY'
        )""")


def kafka_sink(bootstrap: str, topic: str) -> str:
    """Plain Kafka sink options: at-least-once (flushed at each checkpoint), raw key,
    JSON value."""
    return f"""'connector' = 'kafka', {kafka_options(bootstrap, topic, PRODUCER)},
            'sink.delivery-guarantee' = 'at-least-once',
            'key.format' = 'raw', 'key.fields' = 'k',
            'value.format' = 'json', 'value.fields-include' = 'EXCEPT_KEY'"""


# --8<-- [end:setup]


# --8<-- [start:transform]
def transform(t_env: TableEnvironment, bootstrap: str, sink_topic: str):
    """Pipeline 1, stateless: parse, reshape, write (the quick start)."""
    t_env.execute_sql(f"""
        CREATE TEMPORARY TABLE transformed (
            k BYTES, id BIGINT, `user` STRING, amount_cents BIGINT,
            created_ms BIGINT, source_ts_ms BIGINT
        ) WITH ({kafka_sink(bootstrap, sink_topic)})""")
    return t_env.execute_sql("""
        INSERT INTO transformed
        SELECT k, id, UPPER(`user`), CAST(ROUND(amount * 100) AS BIGINT), created_ms,
               CAST(TIMESTAMPDIFF(SECOND, TO_TIMESTAMP_LTZ(0, 3), ts) AS BIGINT) * 1000
                 + EXTRACT(MILLISECOND FROM ts)
        FROM events""")


# --8<-- [end:transform]


# --8<-- [start:count]
def count(t_env: TableEnvironment, bootstrap: str, sink_topic: str):
    """Pipeline 2, stateful: a running count per user, every change written as an upsert
    keyed by user."""
    t_env.execute_sql(f"""
        CREATE TEMPORARY TABLE counts (
            `user` STRING, `count` BIGINT, PRIMARY KEY (`user`) NOT ENFORCED
        ) WITH (
            'connector' = 'upsert-kafka',
            {kafka_options(bootstrap, sink_topic, PRODUCER)},
            'key.format' = 'raw', 'value.format' = 'json'
        )""")
    return t_env.execute_sql(
        "INSERT INTO counts SELECT `user`, COUNT(*) FROM events GROUP BY `user`"
    )


# --8<-- [end:count]


# --8<-- [start:enrich]
TIERS = [("user0", "gold"), ("user1", "silver"), ("user2", "bronze")]


class TierOf(ScalarFunction):
    """The static table as a lookup each task holds whole: stateless, no exchange, the
    same shape as Spark's broadcast hash join. A regular join would keep both sides in
    keyed state for ever."""

    def __init__(self, rows: list[tuple[str, str]]):
        self.rows = rows

    def open(self, function_context: FunctionContext) -> None:
        self.tiers = dict(self.rows)

    def eval(self, user: str):
        return self.tiers.get(user)


def enrich(
    t_env: TableEnvironment,
    bootstrap: str,
    sink_topic: str,
    rows: list[tuple[str, str]] = TIERS,
):
    """Pipeline 3: look each event's user up in a small static table (users not in it
    are dropped, as by an inner join)."""
    t_env.execute_sql(f"""
        CREATE TEMPORARY TABLE enriched (
            k BYTES, id BIGINT, `user` STRING, tier STRING, amount DOUBLE
        ) WITH ({kafka_sink(bootstrap, sink_topic)})""")
    tier_of = udf(TierOf(rows), result_type=DataTypes.STRING())
    t_env.create_temporary_function("tier_of", tier_of)
    return t_env.execute_sql("""
        INSERT INTO enriched
        SELECT k, id, `user`, tier, amount FROM (
            SELECT k, id, `user`, amount, tier_of(`user`) AS tier FROM events
        ) WHERE tier IS NOT NULL""")


# --8<-- [end:enrich]


# --8<-- [start:dedup]
def dedup(t_env: TableEnvironment, bootstrap: str, sink_topic: str):
    """Pipeline 4: keep the first event of each id (Flink's deduplication query:
    ROW_NUMBER over processing time)."""
    t_env.execute_sql(f"""
        CREATE TEMPORARY TABLE deduplicated (
            k BYTES, id BIGINT, `user` STRING, amount DOUBLE, created_ms BIGINT
        ) WITH ({kafka_sink(bootstrap, sink_topic)})""")
    return t_env.execute_sql("""
        INSERT INTO deduplicated
        SELECT k, id, `user`, amount, created_ms FROM (
            SELECT *, ROW_NUMBER() OVER (PARTITION BY id ORDER BY pt ASC) AS row_num
            FROM events
        ) WHERE row_num = 1""")


# --8<-- [end:dedup]

PIPELINES = {"transform": transform, "count": count, "enrich": enrich, "dedup": dedup}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jar", required=True, help="flink-sql-connector-kafka jar")
    parser.add_argument(
        "--parallelism",
        type=int,
        default=2,
        help="= the source topic's partitions (default 2)",
    )
    parser.add_argument("--tmp-dir", help="Flink's io.tmp.dirs (default: the system's)")
    parser.add_argument(
        "--checkpoint-dir",
        help="a folder for durable checkpoints (default: kept in memory)",
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="more Flink configuration",
    )
    parser.add_argument(
        "--tiers",
        help="a JSON file of [user, tier] rows for the enrichment (default: TIERS)",
    )
    parser.add_argument("runs", nargs="+", metavar="PIPELINE SOURCE_TOPIC SINK_TOPIC")
    args = parser.parse_args(argv)
    if len(args.runs) % 3:
        parser.error("give PIPELINE SOURCE_TOPIC SINK_TOPIC, three words per pipeline")
    args.runs = [tuple(args.runs[i : i + 3]) for i in range(0, len(args.runs), 3)]
    unknown = [run[0] for run in args.runs if run[0] not in PIPELINES]
    if unknown:
        parser.error(f"unknown pipeline {unknown[0]!r}; known: {', '.join(PIPELINES)}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    extra = dict(item.split("=", 1) for item in args.conf)
    if args.tmp_dir:
        extra["io.tmp.dirs"] = args.tmp_dir
    if args.checkpoint_dir:
        extra["execution.checkpointing.dir"] = (
            Path(args.checkpoint_dir).resolve().as_uri()
        )
    bootstrap = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
    results = []
    # One TableEnvironment per pipeline: each has its own `events` table over its own
    # source topic.
    for name, source, sink in args.runs:
        t_env = table_environment(args.parallelism, args.jar, extra)
        create_source(t_env, bootstrap, source)
        if name == "enrich" and args.tiers:
            rows = [tuple(row) for row in json.loads(Path(args.tiers).read_text())]
            results.append(enrich(t_env, bootstrap, sink, rows))
        else:
            results.append(PIPELINES[name](t_env, bootstrap, sink))
        print(f"started {name}: {source} -> {sink}", flush=True)
    for result in results:
        # Until the process is stopped (or a job fails, which raises here).
        result.wait()


if __name__ == "__main__":
    main()

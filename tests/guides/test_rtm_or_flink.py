"""Real-time mode or Flink? The four pipelines on both engines, on one input, write the same output.

One input topic (events with repeated ids) feeds both engines. Flink runs its four jobs in one PyFlink process for the
whole module (each job on its own local MiniCluster, parallelism 2 = the topic's partitions); each test starts the
pipeline's RTM query on the session's Spark (2 shuffle partitions), reads both sink topics and compares. The Flink
venv is built on first use (tests/conftest.py's `flink_venv`), so its build is counted in the run's time.
"""

import ast
import contextlib
import json
from collections import Counter
from pathlib import Path

import pytest

from rtm_lab import topics, versions
from rtm_lab.engines import flink, kafka_clients, output
from snippets.guides import rtm_or_flink_spark
from snippets.guides.rtm_or_flink_spark import start_pipeline

pytestmark = pytest.mark.slow

FLINK_PROGRAM = Path(rtm_or_flink_spark.__file__).with_name("rtm_or_flink_flink.py")
PARTITIONS = 2  # the source topic's partitions = Flink's parallelism = the RTM query's shuffle partitions
N_IDS, N_REPEATED = 200, 40
EVENTS = [{"id": i, "user": f"user{i % 7}", "amount": i + 0.25, "created_ms": 1_000 + i} for i in range(N_IDS)]
# The first ids again, unchanged: a repeated delivery, what dropDuplicates removes.
INPUT = EVENTS + EVENTS[:N_REPEATED]
TIERED = {user for user, _ in rtm_or_flink_spark.TIERS}


def flink_constants() -> dict:
    """The Flink twin's module-level constants, read without importing PyFlink (it lives in its own venv)."""
    found = {}
    for node in ast.parse(FLINK_PROGRAM.read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and node.targets[0].id.isupper():
            with contextlib.suppress(ValueError):  # PIPELINES names functions: not a literal
                found[node.targets[0].id] = ast.literal_eval(node.value)
    return found


@pytest.fixture(scope="module")
def comparison(lab, flink_venv):
    """The input topic, a sink topic per engine and pipeline, and Flink running all four pipelines on it."""
    made = []

    def topic(prefix: str) -> str:
        made.append(topics.create_topic(lab.kafka_bootstrap, topics.unique_name(prefix), PARTITIONS))
        return made[-1]

    source = topic("engines-in")
    topics.produce_json(lab.kafka_bootstrap, source, INPUT)
    sinks = {
        name: {"flink": topic(f"flink-{name}"), "spark": topic(f"rtm-{name}")} for name in rtm_or_flink_spark.PIPELINES
    }
    runs = [word for name, sink in sinks.items() for word in (name, source, sink["flink"])]
    try:
        env = {"KAFKA_BOOTSTRAP_SERVERS": lab.kafka_bootstrap}
        with flink.running(FLINK_PROGRAM, ["--parallelism", str(PARTITIONS), *runs], env) as run:
            run.wait_for("started ", count=len(sinks))
            yield source, sinks, run
    finally:
        for name in made:
            topics.delete_topic(lab.kafka_bootstrap, name)


def both_outputs(lab, spark, comparison, checkpoint, stop_after, name, done):
    """Start the RTM query of pipeline `name`; read both engines' sink topics until `done(records)` holds."""
    source, sinks, run = comparison
    query = stop_after(start_pipeline(spark, name, lab.kafka_bootstrap, source, sinks[name]["spark"], checkpoint))
    out = {engine: output.read_until(lab.kafka_bootstrap, topic, done) for engine, topic in sinks[name].items()}
    assert query.exception() is None
    assert run.running(), run.output()[-3000:]
    return out["spark"], out["flink"]


def test_transform_writes_the_same_records(lab, spark, comparison, checkpoint, stop_after):
    spark_out, flink_out = both_outputs(
        lab, spark, comparison, checkpoint, stop_after, "transform", lambda records: len(records) >= len(INPUT)
    )
    assert output.content(spark_out) == output.content(flink_out)
    assert len(spark_out) == len(INPUT)
    rows = [json.loads(r.value) for r in flink_out]
    assert Counter(r["id"] for r in rows) == Counter(e["id"] for e in INPUT)
    assert all(r["user"] == f"USER{r['id'] % 7}" and r["amount_cents"] == r["id"] * 100 + 25 for r in rows)
    assert all(r["source_ts_ms"] > 1_700_000_000_000 for r in rows)  # the Kafka timestamp, in ms, from both


def test_count_ends_with_the_same_count_per_key(lab, spark, comparison, checkpoint, stop_after):
    expected = Counter(e["user"] for e in INPUT)

    def final_counts_reached(records) -> bool:
        return {k: v["count"] for k, v in output.final_values(records).items()} == expected

    spark_out, flink_out = both_outputs(lab, spark, comparison, checkpoint, stop_after, "count", final_counts_reached)
    assert output.final_values(spark_out) == output.final_values(flink_out)
    assert output.final_values(flink_out) == {user: {"user": user, "count": n} for user, n in expected.items()}
    # Every update is written by both: at least one record per key, at most one per input event.
    assert len(expected) <= len(spark_out) <= len(INPUT) and len(expected) <= len(flink_out) <= len(INPUT)


def test_enrich_writes_the_same_joined_records(lab, spark, comparison, checkpoint, stop_after):
    wanted = [e for e in INPUT if e["user"] in TIERED]
    spark_out, flink_out = both_outputs(
        lab, spark, comparison, checkpoint, stop_after, "enrich", lambda records: len(records) >= len(wanted)
    )
    assert output.content(spark_out) == output.content(flink_out)
    assert len(flink_out) == len(wanted)


def test_dedup_writes_each_id_once_on_both(lab, spark, comparison, checkpoint, stop_after):
    spark_out, flink_out = both_outputs(
        lab, spark, comparison, checkpoint, stop_after, "dedup", lambda records: len(records) >= N_IDS
    )
    assert output.content(spark_out) == output.content(flink_out)
    assert len(flink_out) == N_IDS
    assert sorted(r.key for r in flink_out) == sorted(str(i).encode() for i in range(N_IDS))


def test_both_engines_use_the_same_kafka_settings_and_checkpoint_interval():
    twin = flink_constants()
    assert twin["CONSUMER"] == rtm_or_flink_spark.CONSUMER
    assert twin["PRODUCER"] == rtm_or_flink_spark.PRODUCER
    assert twin["TIERS"] == rtm_or_flink_spark.TIERS
    assert twin["CHECKPOINT_INTERVAL"] == "5 min" and rtm_or_flink_spark.REAL_TIME_INTERVAL == "5 minutes"


def test_each_engine_runs_the_stated_kafka_clients():
    assert kafka_clients.versions() == {
        "spark": versions.KAFKA_CLIENTS_VERSION,
        "flink": versions.FLINK_KAFKA_CLIENTS_VERSION,
    }

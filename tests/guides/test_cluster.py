"""The pipeline on a standalone cluster, submitted exactly as docs/guides/cluster.md says.

A master and two workers (2 cores each) on loopback, started with PySpark's own launcher (`rtm_lab.standalone`). The
slots the query needs come from the slot-sizing calculator, read from the pipeline's own plan; the page's
`submit_cluster.sh` runs in a folder holding the guide's files and the JVM writer's jar, built by the page's
`build_writer.sh`. Every key reaches Postgres once, dead letters all there, and the executors ran on both workers.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest
from short_lived_jvms import C1_ONLY, submit_defaults

from rtm_lab import loadgen, processes, sink_check, standalone
from rtm_lab.paths import PROJECT_ROOT
from rtm_lab.waiting import wait_until
from snippets.guides import kafka_to_postgres, postgres_jvm_writer, postgres_sink, submit_pipeline
from snippets.guides.kafka_to_postgres import parse_events, read_kafka
from snippets.guides.postgres_sink import SinkConfig, create_tables
from snippets.reference.slot_sizing import kafka_partitions, slots_needed

pytestmark = pytest.mark.slow

GUIDES = PROJECT_ROOT / "snippets" / "guides"
JVM = PROJECT_ROOT / "snippets" / "jvm"
WORKERS, CORES = 2, 2
PARTITIONS, SHUFFLE_PARTITIONS = 2, 2


def build_writer_jar(folder: Path) -> Path:
    """The page's recipe, run as a reader would: the Java source saved under rtmlab/, then build_writer.sh."""
    shutil.copytree(JVM / "rtmlab", folder / "rtmlab")
    shutil.copy(JVM / "build_writer.sh", folder)
    result = subprocess.run(
        ["sh", "build_writer.sh"],
        cwd=folder,
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"build_writer.sh failed:\n{result.stderr[-3000:]}"
    return folder / "postgres-upsert-writer.jar"


def slot_needs(spark, bootstrap: str, topic: str):
    """The calculator's count for the submitted query, at the script's 2 shuffle partitions and at Spark's 200."""
    before = spark.conf.get("spark.sql.shuffle.partitions")
    needs = []
    try:
        for shuffle in (SHUFFLE_PARTITIONS, 200):
            spark.conf.set("spark.sql.shuffle.partitions", str(shuffle))
            planned = parse_events(read_kafka(spark, bootstrap, topic)).dropDuplicates(["dedup_key"])
            needs.append(slots_needed(planned, kafka_partitions(bootstrap, topic)))
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
    return tuple(needs)


EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


def launched_executors(cluster: standalone.Cluster) -> list[int]:
    """Per worker, the executors it was asked to launch so far (the cluster is shared, so tests compare counts)."""
    logs = [cluster.work_dir / f"worker-{i}.log" for i in range(WORKERS)]
    return [log.read_text(errors="replace").count("Asked to launch executor") for log in logs]


def test_the_clusters_master_and_workers_compile_with_c1_only(standalone_cluster):
    """tests/short_lived_jvms.py's SPARK_DAEMON_JAVA_OPTS reaches the daemons (bin/spark-class execs their JVM)."""
    assert standalone_cluster.pids
    for pid in standalone_cluster.pids:
        assert C1_ONLY in processes.arguments(pid), processes.arguments(pid)


def test_pipeline_on_a_standalone_cluster_loses_nothing(
    spark, lab, standalone_cluster, kafka_topic, pg_schema, tmp_path
):
    topic = kafka_topic(partitions=PARTITIONS)
    events = loadgen.EventMix(duplicate_pct=5, bad_pct=2)
    loadgen.produce_at_rate(lab.kafka_bootstrap, topic, 2000, count=2000, event=events)

    # The calculator on the pipeline the script submits (dedup on): source tasks + shuffle partitions.
    need, default_need = slot_needs(spark, lab.kafka_bootstrap, topic)
    assert need.total == WORKERS * CORES == 4, f"the cluster is sized for 4 slots, the query needs {need}"
    assert default_need.total == 202  # the page's counter-example: 200 shuffle partitions, Spark's default

    folder = tmp_path / "app"
    folder.mkdir()
    for module in (kafka_to_postgres, postgres_sink, postgres_jvm_writer, submit_pipeline):
        shutil.copy(module.__file__, folder)
    shutil.copy(GUIDES / "submit_cluster.sh", folder)
    build_writer_jar(folder)
    create_tables(SinkConfig(dsn=lab.postgres_dsn, schema=pg_schema, table="events"))

    cluster = standalone_cluster  # two workers, 2 cores each (tests/conftest.py)
    before = launched_executors(cluster)
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_CONF_DIR")},
        "MASTER": cluster.master_url,
        "TOPIC": topic,
        "CHECKPOINT": str(tmp_path / "checkpoint"),
        "PYTHON": sys.executable,
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
        "SPARK_LOCAL_IP": standalone.HOST,
        "KAFKA_BOOTSTRAP_SERVERS": lab.kafka_bootstrap,
        "POSTGRES_DSN": lab.postgres_dsn,
        "SCHEMA": pg_schema,
        # The suite's executor option (tests/short_lived_jvms.py), from a conf file: the script is the page's.
        "SPARK_CONF_DIR": str(submit_defaults(tmp_path / "conf")),
    }
    log = tmp_path / "submit.log"
    pid = processes.spawn(["sh", "submit_cluster.sh"], log, env=env, cwd=folder)
    try:

        def complete():
            found = sink_check.counts(lab.postgres_dsn, pg_schema, "events")
            return found if found.distinct_keys >= len(events.keys) and found.dead_letters >= events.bad else None

        def died():
            return None if processes.is_alive(pid) else RuntimeError(f"spark-submit exited:\n{processes.tail(log)}")

        wait_until(complete, 300, f"{len(events.keys)} keys in Postgres", 1.0, died)
        found = sink_check.counts(lab.postgres_dsn, pg_schema, "events")
        launched = [n - b for n, b in zip(launched_executors(cluster), before, strict=True)]
        executors = [processes.arguments(pid) for pid in processes.find(EXECUTOR_CLASS)]
    finally:
        processes.stop(pid, timeout=30)

    assert set(sink_check.keys(lab.postgres_dsn, pg_schema, "events")) == events.keys, "a key was lost"
    assert found.duplicate_keys == 0
    assert found.dead_letters == events.bad
    assert found.distinct_keys == events.valid + events.bad - events.duplicates - found.dead_letters
    assert all(n >= 1 for n in launched), f"executors per worker: {launched}; both workers must run one"
    assert executors and all(C1_ONLY in args for args in executors), executors
    print(
        f"\nslots {need}; executors per worker {launched}; {found.distinct_keys} keys, {found.dead_letters} dead letters"
    )

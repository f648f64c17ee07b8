"""The JVM PostgresUpsertWriter attached from PySpark: same exact reconciliation as the Python sink, and its rows
reach Postgres far sooner than a Python foreach writer's in the same real-time query conditions."""

import json
import time

import numpy as np
import psycopg2
import pytest
from psycopg2 import sql
from sink_helpers import TABLE, assert_exact, produce, with_password

from rtm_lab import loadgen, sink_check, topics
from rtm_lab.intervals import TEST_INTERVAL
from rtm_lab.paths import PROJECT_ROOT
from rtm_lab.waiting import wait_until
from snippets.guides.kafka_to_postgres import start_pipeline
from snippets.guides.postgres_jvm_writer import jvm_postgres_writer
from snippets.guides.postgres_sink import PostgresSink, SinkConfig, create_tables

# Minutes of Spark or a browser: kept out of the fast loop (`pytest -m "not slow"`).
pytestmark = pytest.mark.slow


def test_jvm_writer_reconciles_bad_input_and_duplicates(spark, lab, kafka_topic, pg_schema, checkpoint, stop_after):
    topic = kafka_topic(partitions=2)
    events = produce(lab, topic, count=1000, duplicate_pct=10, bad_pct=5)
    config = SinkConfig(dsn=lab.postgres_dsn, schema=pg_schema, table=TABLE, max_rows=200, max_dwell_ms=20)
    create_tables(config)
    query = stop_after(
        start_pipeline(
            spark,
            lab.kafka_bootstrap,
            topic,
            jvm_postgres_writer(spark, config),
            checkpoint,
            batch_duration=TEST_INTERVAL,
        )
    )
    assert_exact(lab, pg_schema, events, query)


@pytest.mark.timing
def test_jvm_writer_beats_python_writer_latency(
    spark, lab, kafka_topic, pg_schema, tmp_path, stop_after, quiet_machine
):
    """Both writers read the same topic at once, so machine load hits both alike; only the ratio is asserted. The
    start and the warm-up run beside other tests; the measured rows, alone."""
    topic = kafka_topic(partitions=1)
    configs = {
        name: SinkConfig(dsn=lab.postgres_dsn, schema=pg_schema, table=name, max_rows=100, max_dwell_ms=20)
        for name in ("py_events", "jvm_events")
    }
    for config in configs.values():
        create_tables(config)
    python_query = stop_after(
        start_pipeline(
            spark,
            lab.kafka_bootstrap,
            topic,
            PostgresSink(configs["py_events"]),
            str(tmp_path / "py"),
            batch_duration=TEST_INTERVAL,
        )
    )
    jvm_query = stop_after(
        start_pipeline(
            spark,
            lab.kafka_bootstrap,
            topic,
            jvm_postgres_writer(spark, configs["jvm_events"]),
            str(tmp_path / "jvm"),
            batch_duration=TEST_INTERVAL,
        )
    )
    # Warm both up, then measure only what is produced after each has written something.
    warm = produce(lab, topic, count=50, rate=100)
    for name, query in (("py_events", python_query), ("jvm_events", jvm_query)):
        sink_check.wait_for(lab.postgres_dsn, pg_schema, name, len(warm.keys), timeout_s=90, query=query)
    with quiet_machine():
        since = time.time_ns() // 1_000_000
        events = loadgen.EventMix(seed=7, first_key=1_000_000)  # keys apart from the warm-up's
        loadgen.produce_at_rate(lab.kafka_bootstrap, topic, 200, count=1200, event=events)
        for name, query in (("py_events", python_query), ("jvm_events", jvm_query)):
            sink_check.wait_for(
                lab.postgres_dsn, pg_schema, name, len(warm.keys) + len(events.keys), timeout_s=90, query=query
            )
    p50 = {}
    for name in ("py_events", "jvm_events"):
        samples = sink_check.e2e_latencies_ms(lab.postgres_dsn, pg_schema, name, since_created_ms=since)
        assert len(samples) == len(events.keys)
        p50[name] = float(np.percentile(samples, 50))
    print(f"\nmedian end-to-end latency, ms: {p50}")
    assert p50["py_events"] > 5 * p50["jvm_events"], p50


def test_the_page_names_the_pinned_pgjdbc():
    """The Maven coordinate a reader fetches PgJDBC by is the version the lab pins and every test runs with."""
    lock = json.loads((PROJECT_ROOT / "scripts" / "rtm_lab" / "jars.lock.json").read_text())
    (pgjdbc,) = lock["groups"]["postgres-jdbc"]
    page = (PROJECT_ROOT / "docs" / "guides" / "postgres-sink.md").read_text()
    version = pgjdbc["version"]
    assert f"`{pgjdbc['group']}:{pgjdbc['artifact']}:{version}`" in page
    assert f"postgresql-{version}.jar" in page


def test_jvm_writer_wrong_password_fails_at_once_without_printing_it(spark, lab, kafka_topic, pg_schema, checkpoint):
    """The shared retry rule on the JVM side: an authentication failure (SQLSTATE 28P01) is not retried."""
    topic = kafka_topic(partitions=1)
    config = SinkConfig(dsn=lab.postgres_dsn, schema=pg_schema, table=TABLE, reconnect_for_s=300.0)
    create_tables(config)
    wrong = SinkConfig(
        dsn=with_password(lab.postgres_dsn, "s3cret-never-logged"), schema=pg_schema, table=TABLE, reconnect_for_s=300.0
    )
    produce(lab, topic, count=10)
    began = time.monotonic()
    query = start_pipeline(
        spark, lab.kafka_bootstrap, topic, jvm_postgres_writer(spark, wrong), checkpoint, batch_duration=TEST_INTERVAL
    )
    wait_until(lambda: not query.isActive, 120, "the query to fail")
    elapsed = time.monotonic() - began
    error = str(query.exception())
    assert "password authentication failed" in error
    assert "s3cret-never-logged" not in error
    assert elapsed < wrong.reconnect_for_s / 3  # it did not sit out the reconnect window


def test_jvm_writer_statement_timeout_cancels_a_blocked_flush_which_is_retried(
    spark, lab, kafka_topic, pg_schema, checkpoint, stop_after
):
    """A timed flush blocked on a row lock is cancelled by statement_timeout (57014, transient) and retried on a new
    connection: several backends of the writer come and go while the lock is held, then the row lands. (With the
    timeout at 600 s instead, the same test times out waiting for the backends: checked when it was written.)
    The lock is held past the end of the real-time batch, so close() meets the timer's flush in its backoff: it
    waits for it (no shutdownNow interrupting it, which would fail the task), and the query keeps running."""
    topic = kafka_topic(partitions=1)
    app = f"jvm-timeout-{pg_schema}"
    config = SinkConfig(
        dsn=lab.postgres_dsn,
        schema=pg_schema,
        table=TABLE,
        max_rows=100,
        max_dwell_ms=20,  # the timer thread does the flush
        statement_timeout_ms=300,
        application_name=app,
    )
    create_tables(config)
    query = stop_after(
        start_pipeline(
            spark,
            lab.kafka_bootstrap,
            topic,
            jvm_postgres_writer(spark, config),
            checkpoint,
            batch_duration=TEST_INTERVAL,
        )
    )
    produce(lab, topic, count=1)  # key 0
    sink_check.wait_for(lab.postgres_dsn, pg_schema, TABLE, 1, query=query)
    locker = psycopg2.connect(lab.postgres_dsn)
    backends: set[int] = set()
    try:
        with locker.cursor() as cur:
            cur.execute(sql.SQL("SELECT id FROM {} FOR UPDATE").format(sql.Identifier(pg_schema, TABLE)))
        send_newer_version(lab, topic, key=sorted(sink_check.keys(lab.postgres_dsn, pg_schema, TABLE))[0])

        def writer_backends() -> bool:
            with psycopg2.connect(lab.postgres_dsn) as conn, conn.cursor() as cur:
                cur.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s", (app,))
                backends.update(pid for (pid,) in cur.fetchall())
            conn.close()
            return len(backends) >= 3

        wait_until(writer_backends, 60, "the writer to reconnect after cancelled statements", abort=query.exception)
        # Each cancelled flush was retried on a new connection: several backends came and went under the lock.
        assert len(backends) >= 3, backends
        time.sleep(float(TEST_INTERVAL.split()[0]) + 1)  # the batch's end (and close()) falls in the hold
    finally:
        locker.rollback()
        locker.close()
    wait_until(lambda: max(sink_check.keys(lab.postgres_dsn, pg_schema, TABLE).values()) == NEWER, 60, "the newer row")
    # Retried until the lock went: the blocked row landed, and close() in the hold failed no task.
    assert max(sink_check.keys(lab.postgres_dsn, pg_schema, TABLE).values()) == NEWER
    assert query.isActive and query.exception() is None


NEWER = 10**13


def send_newer_version(lab, topic: str, key: int) -> None:
    prod = topics.producer(lab.kafka_bootstrap)
    body = {"id": key, "user": "u", "amount": 1.0, "payload": "p", "created_ms": NEWER}
    prod.send(topic, key=str(key).encode(), value=json.dumps(body).encode())
    prod.flush()
    prod.close()

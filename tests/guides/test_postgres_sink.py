"""The PostgresSink writer on its own, driven the way Spark drives it (open, process per row, close), against the
lab's Postgres: the dwell-time flush fires under sustained load and when rows stop, a lost connection costs no
buffered row, upserts keep the newest version, a wrong password fails at once and never reaches a log, identifiers
can't inject SQL, the connection budget check fails clearly, the I/O timeouts are set and a statement timeout is
retried, close() waits for a timed flush, and the password provider is asked again on every connect."""

import logging
import threading
import time

import psycopg2
import pytest
from psycopg2 import sql
from sink_helpers import with_password

from rtm_lab import sink_check
from rtm_lab.waiting import wait_until
from snippets.guides.postgres_sink import (
    ConnectionBudgetError,
    PostgresSink,
    SinkConfig,
    check_connection_budget,
    create_tables,
    redacted,
    server_connection_limit,
)

# Minutes of Spark or a browser: kept out of the fast loop (`pytest -m "not slow"`).
pytestmark = pytest.mark.slow

TABLE = "events"


def event(key: int, created_ms: int | None = None, offset: int | None = None) -> dict:
    """A row as parse_events() hands it to the writer: the columns, the Kafka coordinates, no dead-letter reason."""
    return {
        "id": key,
        "user_name": f"u{key}",
        "amount": 1.5,
        "payload": "x",
        "created_ms": created_ms if created_ms is not None else time.time_ns() // 1_000_000,
        "dlq_reason": None,
        "raw_value": None,
        "kafka_topic": "direct",
        "kafka_partition": 0,
        "kafka_offset": key if offset is None else offset,
        "kafka_timestamp": None,
        "kafka_key": None,
    }


def sink_for(lab, schema: str, **overrides) -> PostgresSink:
    config = SinkConfig(**{"dsn": lab.postgres_dsn, "schema": schema, "table": TABLE, **overrides})
    create_tables(config)
    return PostgresSink(config)


def stored(lab, schema: str) -> int:
    return sink_check.counts(lab.postgres_dsn, schema, TABLE).rows


@pytest.mark.timing
def test_dwell_flush_fires_under_sustained_load_and_when_rows_stop(lab, pg_schema):
    dwell_ms = 100
    sink = sink_for(lab, pg_schema, max_rows=1_000_000, max_dwell_ms=dwell_ms)  # the row limit never triggers
    sink.open(partition_id=0, epoch_id=0)
    samples: list[tuple[int, int]] = []  # (rows fed, rows stored) every 200 rows
    feed_s, key = 1.5, 0
    began = time.monotonic()
    while time.monotonic() - began < feed_s:  # a row every millisecond, never a pause as long as the dwell time
        sink.process(event(key))
        key += 1
        if key % 200 == 0:
            samples.append((key, stored(lab, pg_schema)))
        time.sleep(0.001)
    flushes_while_feeding = sink.flushes
    # Rows stopped: the timer thread alone must write the rest, without process() or close() being called.
    wait_until(lambda: stored(lab, pg_schema) >= key, 30 * dwell_ms / 1000, "the timer's flush", dwell_ms / 4000)
    after_stop = stored(lab, pg_schema)
    sink.close(None)

    # A sample counts only if more rows were fed after it: on a slow machine the last sample can land after a
    # flush of everything fed so far, which says nothing about flushing while the feed runs.
    mid_feed = [rows for fed, rows in samples if fed < key]
    assert any(rows > 0 for rows in mid_feed), f"rows must become visible while the feed is still running: {samples}"
    expected = feed_s * 1000 / dwell_ms
    # 14 of 15 possible on a quiet machine; a fifth still shows the timer flushing while process() is busy.
    assert flushes_while_feeding >= expected / 5, f"{flushes_while_feeding} flushes in {feed_s}s of {dwell_ms} ms dwell"
    # The dwell caps the commits: a flush waits for its oldest row to age max_dwell_ms, so at most one per dwell.
    assert flushes_while_feeding <= expected + 1, f"{flushes_while_feeding} flushes in {feed_s}s of {dwell_ms} ms dwell"
    assert after_stop == key


def test_row_limit_flushes_and_simple_mode_commits_every_row(lab, pg_schema):
    buffered = sink_for(lab, pg_schema, max_rows=50, max_dwell_ms=60_000)
    buffered.open(0, 0)
    for key in range(120):
        buffered.process(event(key))
    assert stored(lab, pg_schema) == 100  # two full buffers; the last 20 wait for the dwell time or close()
    buffered.close(None)
    assert stored(lab, pg_schema) == 120

    simple = sink_for(lab, pg_schema, max_rows=1)
    simple.open(1, 0)
    simple.process(event(1000))
    assert stored(lab, pg_schema) == 121
    simple.close(None)
    assert simple.flushes == 1


def test_upsert_keeps_the_newest_version_and_replays_are_harmless(lab, pg_schema):
    sink = sink_for(lab, pg_schema, max_rows=1000, max_dwell_ms=60_000)
    for _ in range(2):  # the second epoch replays the first, as Spark does after a failure
        sink.open(0, 0)
        sink.process(event(7, created_ms=200))
        sink.process(event(7, created_ms=100))  # a late duplicate in the same buffer
        sink.process(event(8, created_ms=100))
        sink.close(None)
    sink.open(0, 1)
    sink.process(event(8, created_ms=50))  # an older version in a later flush
    sink.close(None)
    assert sink_check.keys(lab.postgres_dsn, pg_schema, TABLE) == {7: 200, 8: 100}


def test_lost_connection_keeps_buffered_rows(lab, pg_schema, caplog):
    sink = sink_for(lab, pg_schema, max_rows=1000, max_dwell_ms=60_000, application_name=f"sink-{pg_schema}")
    sink.open(0, 0)
    for key in range(300):
        sink.process(event(key))
    with psycopg2.connect(lab.postgres_dsn) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s",
            (sink.config.application_name,),
        )
        assert cur.fetchone()[0] == 1
    conn.close()
    with caplog.at_level(logging.WARNING, logger="postgres_sink"):
        sink.close(None)  # the flush meets the dead connection, reconnects and writes the buffer
    assert stored(lab, pg_schema) == 300
    assert "retry 1" in caplog.text


def test_wrong_password_fails_at_once_and_is_never_logged(lab, pg_schema, caplog):
    """An authentication failure is not transient: no retry, no wait for the reconnect window, no password shown."""
    dsn = with_password(lab.postgres_dsn, "s3cret-never-logged")
    config = SinkConfig(dsn=dsn, schema=pg_schema, table=TABLE, reconnect_for_s=120.0)
    sink = PostgresSink(config)
    began = time.monotonic()
    with caplog.at_level(logging.DEBUG), pytest.raises(psycopg2.OperationalError) as failure:
        sink.open(0, 0)
    elapsed = time.monotonic() - began
    assert "password authentication failed" in str(failure.value)
    assert "retry" not in caplog.text
    assert elapsed < config.reconnect_for_s / 10  # it did not sit out the reconnect window
    for text in (caplog.text, str(failure.value), repr(config), redacted(dsn)):
        assert "s3cret-never-logged" not in text
    assert "password" not in redacted(dsn)


def test_identifiers_are_quoted_so_a_table_name_cannot_inject_sql(lab, pg_schema):
    hostile = 'events"; DROP TABLE dead_letter; --'
    sink = sink_for(lab, pg_schema, table=hostile, max_rows=1)
    sink.open(0, 0)
    sink.process(event(1))
    sink.close(None)
    with psycopg2.connect(lab.postgres_dsn) as conn, conn.cursor() as cur:
        cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (pg_schema,))
        assert {r[0] for r in cur.fetchall()} == {hostile, "dead_letter"}
    conn.close()


def test_connection_budget_names_every_term_when_exceeded(lab):
    limit = server_connection_limit(lab.postgres_dsn)
    with psycopg2.connect(lab.postgres_dsn) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int"
        )
        assert limit <= cur.fetchone()[0]
    conn.close()
    assert (
        check_connection_budget(sink_tasks=8, connections_per_writer=1, app_pool=10, server_limit=limit) == limit - 18
    )
    with pytest.raises(ConnectionBudgetError) as exceeded:
        check_connection_budget(sink_tasks=limit, connections_per_writer=1, app_pool=5, server_limit=limit)
    message = str(exceeded.value)
    assert f"needs {limit + 5} Postgres connections" in message and f"allows {limit}" in message


def table_writes(lab, schema: str, expect_inserts: int, timeout_s: float = 10.0) -> tuple[int, int, int]:
    """(inserted, updated, dead) tuples of the table, from pg_stat_user_tables. A backend reports its counts when
    its connection closes, so poll until the inserts show up."""

    def read() -> tuple[int, int, int] | None:
        with psycopg2.connect(lab.postgres_dsn) as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT n_tup_ins, n_tup_upd, n_dead_tup FROM pg_stat_user_tables WHERE schemaname = %s AND relname = %s",
                (schema, TABLE),
            )
            found = cur.fetchone()
        conn.close()
        return found if found[0] >= expect_inserts else None

    return wait_until(read, timeout_s, f"{expect_inserts} inserts in pg_stat_user_tables")


def test_hot_key_updates_leave_dead_tuples_and_the_buffer_folds_them(lab, pg_schema):
    versions = 100
    simple = sink_for(lab, pg_schema, max_rows=1)
    simple.open(0, 0)
    for version in range(versions):  # one key, a newer version each time: every upsert after the first is an UPDATE
        simple.process(event(1, created_ms=version))
    simple.close(None)
    inserted, updated, dead = table_writes(lab, pg_schema, expect_inserts=1)
    assert (inserted, updated) == (1, versions - 1)
    assert dead > 0  # until (auto)vacuum reclaims them

    buffered = sink_for(lab, pg_schema, max_rows=1000, max_dwell_ms=60_000)
    buffered.open(0, 1)
    for version in range(versions):
        buffered.process(event(2, created_ms=version))
    buffered.close(None)
    inserted, updated, _ = table_writes(lab, pg_schema, expect_inserts=2)
    assert (inserted, updated) == (2, versions - 1)  # the 100 versions of key 2 cost one INSERT
    assert sink_check.keys(lab.postgres_dsn, pg_schema, TABLE) == {1: versions - 1, 2: versions - 1}


def hold_row_lock(lab, schema: str, key: int, seconds: float) -> threading.Thread:
    """Another session locks row `key` for `seconds`: a writer's upsert of that key waits for it."""
    conn = psycopg2.connect(lab.postgres_dsn)
    with conn.cursor() as cur:
        cur.execute(sql.SQL("SELECT id FROM {} WHERE id = %s FOR UPDATE").format(sql.Identifier(schema, TABLE)), (key,))
    thread = threading.Timer(seconds, lambda: (conn.rollback(), conn.close()))
    thread.start()
    return thread


def test_statement_timeout_cancels_a_blocked_flush_which_is_retried(lab, pg_schema, caplog):
    sink = sink_for(lab, pg_schema, max_rows=1, statement_timeout_ms=200)
    sink.open(0, 0)
    sink.process(event(1, created_ms=1))
    release = hold_row_lock(lab, pg_schema, key=1, seconds=1.5)
    with caplog.at_level(logging.WARNING, logger="postgres_sink"):
        sink.process(event(1, created_ms=2))  # waits on the lock: cancelled (57014, transient), retried, then through
    release.join()
    sink.close(None)
    assert "canceling statement due to statement timeout" in caplog.text
    assert sink_check.keys(lab.postgres_dsn, pg_schema, TABLE) == {1: 2}


def test_close_with_an_error_waits_for_a_timed_flush_in_progress(lab, pg_schema, caplog):
    """close(error) takes the writer's lock, so it can't close the connection under the timer's flush."""
    sink = sink_for(lab, pg_schema, max_rows=1000, max_dwell_ms=20)
    sink.open(0, 0)
    sink.process(event(1, created_ms=1))
    wait_until(lambda: stored(lab, pg_schema) == 1, 10, "the first timed flush")
    hold = 6.0  # longer than a bounded join of the timer thread (5 s before): close() must wait for the flush itself
    release = hold_row_lock(lab, pg_schema, key=1, seconds=hold)
    sink.process(event(1, created_ms=2))  # the timer's next flush blocks on the lock
    time.sleep(0.2)
    began = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="postgres_sink"):
        sink.close(RuntimeError("the task failed"))
    waited = time.monotonic() - began
    release.join()
    assert waited > (hold - 0.2) / 2  # close() waited for the flush instead of cutting its connection
    assert sink.failure is None and "retry" not in caplog.text
    assert sink_check.keys(lab.postgres_dsn, pg_schema, TABLE) == {1: 2}


def test_password_command_is_run_again_on_reconnect(own_postgres, tmp_path):
    """On the test's own server: the lab's role keeps its password for every other test."""
    pg_schema = own_postgres.schema
    secret = tmp_path / "secret"
    secret.write_text(own_postgres.password)
    config = SinkConfig(
        dsn=with_password(own_postgres.dsn, None),
        schema=pg_schema,
        table=TABLE,
        max_rows=1000,
        max_dwell_ms=60_000,
        password_command=f"cat {secret}",
        application_name=f"cmd-{pg_schema}",
    )
    create_tables(config)
    sink = PostgresSink(config)
    sink.open(0, 0)
    sink.process(event(1))
    new = f"cmd-{pg_schema}"
    own_postgres.set_role_password(new)
    secret.write_text(new)
    current = own_postgres.dsn
    with psycopg2.connect(current) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s",
            (config.application_name,),
        )
        assert cur.fetchone()[0] == 1
    conn.close()
    sink.close(None)  # the flush meets the cut connection and logs in again with the command's new output
    assert sink_check.keys(current, pg_schema, TABLE).keys() == {1}


def test_sink_config_repr_hides_the_password():
    config = SinkConfig(dsn="postgresql://ada:s3cret@db:5432/sales", table="t")
    assert "s3cret" not in repr(config) and "s3cret" not in str(config)
    assert "user=ada" in repr(config) and "table='t'" in repr(config)


def test_connections_carry_the_io_timeouts(lab, pg_schema):
    sink = sink_for(lab, pg_schema, io_timeout_s=30, statement_timeout_ms=4000, connect_timeout_s=5)
    sink.open(0, 0)
    params = sink.conn.get_dsn_parameters()
    with sink.conn.cursor() as cur:
        cur.execute("SHOW statement_timeout")
        statement_timeout = cur.fetchone()[0]
    sink.close(None)
    assert statement_timeout == "4s"
    assert (params["keepalives"], params["tcp_user_timeout"], params["connect_timeout"]) == ("1", "30000", "5")


def test_password_provider_callable_is_called_on_every_connect(lab, pg_schema):
    calls = []
    password = psycopg2.extensions.parse_dsn(lab.postgres_dsn)["password"]

    def provider() -> str:
        calls.append(time.monotonic())
        return password

    sink = sink_for(
        lab,
        pg_schema,
        dsn=with_password(lab.postgres_dsn, None),
        password_provider=provider,
        max_rows=1000,
        max_dwell_ms=60_000,
        application_name=f"callable-{pg_schema}",
    )
    calls.clear()  # create_tables() asked it too
    sink.open(0, 0)
    sink.process(event(1))
    with psycopg2.connect(lab.postgres_dsn) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (sink.config.application_name,),
        )
    conn.close()
    sink.close(None)
    assert len(calls) == 2  # open() and the reconnect in close()'s flush
    assert sink_check.keys(lab.postgres_dsn, pg_schema, TABLE).keys() == {1}


def test_pyspark_has_no_foreach_writer_base_class_and_checks_for_process(spark, lab):
    """PySpark has no ForeachWriter class to extend (the JVM one is Scala's): foreach() takes any object with a
    callable process(), which is all PostgresSink relies on; an object without one is refused when foreach() is
    called."""
    import pyspark.sql
    import pyspark.sql.streaming
    from pyspark.errors import PySparkAttributeError

    assert not any("ForeachWriter" in dir(m) for m in (pyspark.sql, pyspark.sql.streaming))
    assert PostgresSink.__mro__ == (PostgresSink, object)
    stream = spark.readStream.format("kafka").option("kafka.bootstrap.servers", lab.kafka_bootstrap)
    writer = stream.option("subscribe", "unused").load().writeStream
    writer.foreach(PostgresSink(SinkConfig(dsn=lab.postgres_dsn, table="unused")))  # accepted, nothing started
    with pytest.raises(PySparkAttributeError) as refused:
        writer.foreach(object())
    assert refused.value.getCondition() == "ATTRIBUTE_NOT_CALLABLE" and "process" in str(refused.value)

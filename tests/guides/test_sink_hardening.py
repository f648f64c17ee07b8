"""Both Postgres writers (the Python PostgresSink and the JVM PostgresUpsertWriter) under real real-time queries:
every poison row ends in the dead-letter table with its reason while the query keeps running, and a rotated
password is read again from the provider's file when the writer reconnects, losing nothing."""

import json
import threading
from collections import Counter

import pytest
from psycopg2 import sql
from sink_helpers import run_sql, with_password

from rtm_lab import loadgen, sink_check, topics
from rtm_lab.intervals import TEST_INTERVAL
from rtm_lab.waiting import wait_until
from snippets.guides.kafka_to_postgres import start_pipeline
from snippets.guides.postgres_jvm_writer import jvm_postgres_writer
from snippets.guides.postgres_sink import PostgresSink, SinkConfig, create_tables

# Minutes of Spark or a browser: kept out of the fast loop (`pytest -m "not slow"`).
pytestmark = pytest.mark.slow

WRITERS = ("py", "jvm")


def writer_for(spark, name: str, config: SinkConfig):
    return PostgresSink(config) if name == "py" else jvm_postgres_writer(spark, config)


def send(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    prod = topics.producer(bootstrap)
    try:
        for key, value in records:
            prod.send(topic, key=key, value=value)
        prod.flush()
    finally:
        prod.close()


def event(key: int, **fields) -> tuple[bytes, bytes]:
    body = {"id": key, "user": f"u{key}", "amount": 1.0, "payload": "p", "created_ms": 1000 + key, **fields}
    return f"k{key}".encode(), json.dumps(body).encode()


MALFORMED_WITH_NUL = b'{"id": 22, "user": "\x00 not json'
# Each poison record, and the reason its dead letter must give (a SQLSTATE for what Postgres itself refused).
POISON = [
    (event(5, created_ms=None), "null_version"),  # meets the good key 5 below
    (event(21, user="a\u0000b"), "nul_character"),  # valid JSON; Postgres text can't hold the NUL
    ((b"k22", MALFORMED_WITH_NUL), "malformed_json"),  # its raw bytes, NUL included, kept as bytea
    (event(23, amount=-1.0), "23514"),  # check_violation: the table's CHECK (amount >= 0)
]
GOOD = [event(key) for key in range(1, 21)]
AFTER_CHANGE = [event(key) for key in range(100, 105)]  # the table lost a column: each row is refused (42703)


def dead_letters(dsn: str, schema: str, table: str) -> list[tuple]:
    return run_sql(
        dsn,
        sql.SQL("SELECT kafka_key, kafka_offset, kafka_timestamp, raw_value, reason FROM {}").format(
            sql.Identifier(schema, table)
        ),
    )


def test_poison_rows_are_dead_lettered_by_both_writers_and_the_query_keeps_running(
    spark, lab, kafka_topic, pg_schema, tmp_path, stop_after
):
    dsn, topic = lab.postgres_dsn, kafka_topic(partitions=1)
    configs = {
        name: SinkConfig(
            dsn=dsn,
            schema=pg_schema,
            table=f"{name}_events",
            dead_letter_table=f"{name}_dead",
            max_rows=100,
            max_dwell_ms=20,
            application_name=f"poison-{name}",
        )
        for name in WRITERS
    }
    for config in configs.values():
        create_tables(config)
        run_sql(
            dsn,
            sql.SQL("ALTER TABLE {} ADD CONSTRAINT amount_not_negative CHECK (amount >= 0)").format(
                sql.Identifier(pg_schema, config.table)
            ),
        )
    queries = {
        name: stop_after(
            start_pipeline(
                spark,
                lab.kafka_bootstrap,
                topic,
                writer_for(spark, name, config),
                str(tmp_path / name),
                batch_duration=TEST_INTERVAL,
            )
        )
        for name, config in configs.items()
    }

    def landed(name: str, rows: int, dead: int) -> bool:
        found = sink_check.counts(dsn, pg_schema, configs[name].table, configs[name].dead_letter_table)
        return found.rows >= rows and found.dead_letters >= dead

    send(lab.kafka_bootstrap, topic, [record for record, _ in POISON] + GOOD)
    for name, query in queries.items():
        wait_until(lambda n=name: landed(n, len(GOOD), len(POISON)), 90, f"{name}: first rows", abort=query.exception)

    # A changed table: every row after this is refused by Postgres, and dead-lettered, not replayed forever.
    for config in configs.values():
        run_sql(dsn, sql.SQL("ALTER TABLE {} DROP COLUMN payload").format(sql.Identifier(pg_schema, config.table)))
    send(lab.kafka_bootstrap, topic, AFTER_CHANGE)
    dead_total = len(POISON) + len(AFTER_CHANGE)
    for name, query in queries.items():
        wait_until(lambda n=name: landed(n, 0, dead_total), 90, f"{name}: dead letters", abort=query.exception)

    produced = len(POISON) + len(GOOD) + len(AFTER_CHANGE)
    for name, query in queries.items():
        config = configs[name]
        assert query.isActive and query.exception() is None, name
        found = sink_check.counts(dsn, pg_schema, config.table, config.dead_letter_table)
        # produced = written + deduplicated (none here) + dead-lettered, each counted on its own side
        assert (found.distinct_keys, found.duplicate_keys, found.dead_letters) == (len(GOOD), 0, dead_total), name
        assert produced == found.distinct_keys + found.dead_letters
        letters = dead_letters(dsn, pg_schema, config.dead_letter_table)
        reasons = Counter(reason.split(":")[0] for *_, reason in letters)
        assert reasons == Counter({**Counter(r for _, r in POISON), "42703": len(AFTER_CHANGE)}), (name, letters)
        by_key = {bytes(key): (offset, stamp, bytes(raw)) for key, offset, stamp, raw, _ in letters}
        assert by_key[b"k22"][2] == MALFORMED_WITH_NUL, name  # the raw bytes, byte for byte
        assert all(offset is not None and stamp is not None for offset, stamp, _ in by_key.values()), name
        # A row refused after parsing keeps the row itself, as JSON, in place of raw bytes.
        assert b'"id":100' in by_key[b"k100"][2].replace(b" ", b""), name
        assert sink_check.keys(dsn, pg_schema, config.table)[5] == 1005, name  # the versioned key 5 won


def test_rotated_password_is_read_again_on_reconnect_by_both_writers(
    spark, lab, kafka_topic, own_postgres, tmp_path, stop_after
):
    """ALTER ROLE ... PASSWORD mid-stream, the provider's file updated, the writers' connections terminated: each
    writer reconnects with the new password and no row is lost. The password changes once both writers' first rows
    are in, while more events flow; each writer's connection is then terminated as soon as it holds one. The server
    is the test's own, so the lab's role keeps its password for every other test."""
    old, pg_schema = own_postgres.password, own_postgres.schema
    new = f"rotated-{pg_schema}"
    secret = tmp_path / "pg-password"
    secret.write_text(old + "\n")
    dsn = with_password(own_postgres.dsn, None)  # the password comes from the file only
    configs = {
        name: SinkConfig(
            dsn=dsn,
            schema=pg_schema,
            table=f"{name}_events",
            dead_letter_table=f"{name}_dead",
            max_rows=100,
            max_dwell_ms=20,
            password_file=str(secret),
            application_name=f"rotate-{name}",
        )
        for name in WRITERS
    }
    for config in configs.values():
        create_tables(config)
    topic = kafka_topic(partitions=1)
    queries = {
        name: stop_after(
            start_pipeline(
                spark,
                lab.kafka_bootstrap,
                topic,
                writer_for(spark, name, config),
                str(tmp_path / name),
                batch_duration="15 seconds",
            )
        )
        for name, config in configs.items()
    }
    events = loadgen.EventMix(seed=3, duplicate_pct=5)
    loadgen.produce_at_rate(lab.kafka_bootstrap, topic, 200, count=200, event=events)
    for name, query in queries.items():
        wait_until(
            lambda n=name: sink_check.counts(own_postgres.dsn, pg_schema, configs[n].table, None).rows > 0,
            90,
            f"{name}: first rows",
            abort=query.exception,
        )
    producer = threading.Thread(
        target=loadgen.produce_at_rate,
        args=(lab.kafka_bootstrap, topic, 200),
        kwargs={"count": 1000, "event": events},
        daemon=True,
    )
    producer.start()
    own_postgres.set_role_password(new)
    secret.write_text(new + "\n")
    current = own_postgres.dsn
    names = [c.application_name for c in configs.values()]
    # Each writer's connection is terminated at least once after the rotation. A writer between two epochs holds
    # none (the JVM writer connects in open() and disconnects in close()), so the kill is retried until each writer
    # had one to lose: a single attempt found only the Python writer connected on a busy machine.
    killed: set[str] = set()

    def each_writer_killed() -> bool:
        rows = run_sql(
            current,
            "SELECT application_name, count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = ANY(%s) GROUP BY 1",
            ([n for n in names if n not in killed],),
        )
        killed.update(app for app, n in rows if n > 0)
        return killed == set(names)

    assert wait_until(each_writer_killed, 60, "each writer's connection terminated after the rotation")
    producer.join(timeout=60)
    assert not producer.is_alive()

    for name, query in queries.items():
        config = configs[name]
        found = sink_check.wait_for(
            current, pg_schema, config.table, len(events.keys), timeout_s=90, query=query, dead_letter_table=None
        )
        assert query.exception() is None, name
        assert set(sink_check.keys(current, pg_schema, config.table)) == events.keys, name
        assert found.duplicate_keys == 0, name
        assert events.valid == found.distinct_keys + events.duplicates, name

    # The writers logged in again, with the new password (the old one no longer opens a connection).
    def logged_in() -> bool:
        found = run_sql(
            current, "SELECT DISTINCT application_name FROM pg_stat_activity WHERE application_name = ANY(%s)", (names,)
        )
        return {app for (app,) in found} == set(names)

    wait_until(logged_in, 60, "both writers connected with the new password")
    for query in queries.values():
        query.stop()

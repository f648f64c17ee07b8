"""Helpers the Postgres sink tests share (tests/guides): one SQL statement on its own connection, the lab's DSN with
another password, paced events, and the exact reconciliation of what was sent with what Postgres holds. Importable by name: pyproject.toml puts tests/ on
pytest's `pythonpath`."""

import psycopg2
import psycopg2.extensions

from rtm_lab import loadgen, sink_check

TABLE = "events"
# Which dead-letter reason each kind of bad input the generator sends must get.
EXPECTED_REASON = {
    "malformed_json": "malformed_json",
    "missing_key": "missing_key",
    "null_key": "missing_key",
    "wrong_type": "wrong_type",
    "oversized": "oversized",
}


def run_sql(dsn: str, statement, params=None):
    """Run one statement on a connection of its own, committed at once; return its rows, if it has any."""
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute(statement, params)
            return cur.fetchall() if cur.description else None
    finally:
        conn.close()


def with_password(dsn: str, password: str | None) -> str:
    """`dsn` with `password`, or with none (then a writer's password provider gives it)."""
    parts = psycopg2.extensions.parse_dsn(dsn)
    parts.pop("password", None)
    if password is not None:
        parts["password"] = password
    return psycopg2.extensions.make_dsn(**parts)


def produce(lab, topic: str, count: int, rate: float = 5000, **mix) -> loadgen.EventMix:
    events = loadgen.EventMix(**mix)
    loadgen.produce_at_rate(lab.kafka_bootstrap, topic, rate, count=count, event=events)
    return events


def expected_reasons(events: loadgen.EventMix) -> dict[str, int]:
    reasons: dict[str, int] = {}
    for kind, reason in EXPECTED_REASON.items():
        if events.counts[kind]:
            reasons[reason] = reasons.get(reason, 0) + events.counts[kind]
    return reasons


def assert_exact(lab, schema: str, events: loadgen.EventMix, query, dsn: str | None = None) -> sink_check.SinkCounts:
    """Every key in `schema` once, every bad record a dead letter, on the lab's server unless `dsn` names another."""
    dsn = dsn or lab.postgres_dsn
    found = sink_check.wait_for(dsn, schema, TABLE, len(events.keys), events.bad, timeout_s=90, query=query)
    assert query.exception() is None
    lost = len(events.keys) - found.distinct_keys
    assert lost == 0, f"{lost} keys never reached Postgres"
    assert found.duplicate_keys == 0
    assert set(sink_check.keys(dsn, schema, TABLE)) == events.keys
    assert dict(found.reasons) == expected_reasons(events)
    # The equation the issue asks for, every term counted on its own side.
    assert events.valid + events.bad == found.distinct_keys + events.duplicates + found.dead_letters
    return found

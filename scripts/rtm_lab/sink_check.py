"""What reached the Postgres sink: row and key counts, dead letters by reason, end-to-end latency per row.

Tests, the benchmark and the demo reconcile these against the generator's own counts (`loadgen.EventMix`).
"""

import contextlib
from collections import Counter
from dataclasses import dataclass, field

import psycopg2
from psycopg2 import sql

from rtm_lab.waiting import WaitTimeout, wait_until


@dataclass
class SinkCounts:
    rows: int = 0
    distinct_keys: int = 0
    dead_letters: int = 0
    reasons: Counter = field(default_factory=Counter)

    @property
    def duplicate_keys(self) -> int:
        return self.rows - self.distinct_keys


def counts(dsn: str, schema: str, table: str, dead_letter_table: str | None = "dead_letter") -> SinkCounts:
    result = SinkCounts()
    with psycopg2.connect(dsn, connect_timeout=5) as conn, conn.cursor() as cur:
        cur.execute(sql.SQL("SELECT count(*), count(DISTINCT id) FROM {}").format(sql.Identifier(schema, table)))
        result.rows, result.distinct_keys = cur.fetchone()
        if dead_letter_table:
            cur.execute(
                sql.SQL("SELECT reason, count(*) FROM {} GROUP BY reason").format(
                    sql.Identifier(schema, dead_letter_table)
                )
            )
            result.reasons = Counter(dict(cur.fetchall()))
            result.dead_letters = sum(result.reasons.values())
    conn.close()
    return result


class Landed:
    """Rows and dead letters in the tables right now, on one connection kept open, for polling a backlog: a fresh
    connection per poll (tens of ms on a busy machine) and count(DISTINCT) would let the producer run ahead of the
    snapshot and show rows behind that are not. In autocommit each call sees the tables as of its own start."""

    def __init__(self, dsn: str, schema: str, table: str, dead_letter_table: str = "dead_letter"):
        self._conn = psycopg2.connect(dsn, connect_timeout=5)
        self._conn.autocommit = True
        self._query = sql.SQL("SELECT (SELECT count(*) FROM {}), (SELECT count(*) FROM {})").format(
            sql.Identifier(schema, table), sql.Identifier(schema, dead_letter_table)
        )

    def __call__(self) -> tuple[int, int]:
        with self._conn.cursor() as cur:
            cur.execute(self._query)
            return cur.fetchone()

    def close(self) -> None:
        self._conn.close()


def keys(dsn: str, schema: str, table: str) -> dict[int, int]:
    """Every stored key with its `created_ms`, to check which version of a key won."""
    with psycopg2.connect(dsn, connect_timeout=5) as conn, conn.cursor() as cur:
        cur.execute(sql.SQL("SELECT id, created_ms FROM {}").format(sql.Identifier(schema, table)))
        found = dict(cur.fetchall())
    conn.close()
    return found


def wait_for(
    dsn: str,
    schema: str,
    table: str,
    rows: int,
    dead_letters: int = 0,
    timeout_s: float = 90.0,
    query=None,
    progress=None,
    dead_letter_table: str | None = "dead_letter",
) -> SinkCounts:
    """Poll until the table holds `rows` rows and `dead_letters` dead letters, the timeout passes, or `query`
    (a StreamingQuery) fails; return the last counts either way (callers assert on them)."""
    last: list[SinkCounts] = []

    def check() -> bool:
        found = counts(dsn, schema, table, dead_letter_table)
        last[:] = [found]
        if progress:
            progress(found)
        failed = query is not None and query.exception() is not None
        return failed or (found.rows >= rows and found.dead_letters >= dead_letters)

    with contextlib.suppress(WaitTimeout):
        wait_until(check, timeout_s, f"{rows} rows in {schema}.{table}", interval_s=0.5)
    return last[-1] if last else counts(dsn, schema, table, dead_letter_table)


def e2e_latencies_ms(
    dsn: str, schema: str, table: str, since_created_ms: int = 0, until_created_ms: int | None = None
) -> list[float]:
    """Per row created in [since_created_ms, until_created_ms): the time it was written in Postgres
    (clock_timestamp() in the upsert, same host clock as the producer) minus its creation time in the producer."""
    with psycopg2.connect(dsn, connect_timeout=5) as conn, conn.cursor() as cur:
        cur.execute(
            sql.SQL(
                "SELECT extract(epoch FROM written_at) * 1000 - created_ms FROM {} "
                "WHERE created_ms >= %s AND created_ms < %s"
            ).format(sql.Identifier(schema, table)),
            (since_created_ms, until_created_ms if until_created_ms is not None else 2**62),
        )
        samples = [float(r[0]) for r in cur.fetchall()]
    conn.close()
    return samples

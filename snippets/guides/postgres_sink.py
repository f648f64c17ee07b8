"""A Postgres sink for `writeStream.foreach`: upserts, buffering with a row and a time limit, dead letters, reconnect.

Copy the `PostgresSink` class into your job. It works with any Postgres (Databricks Lakebase included): Spark hands
each task's rows to `process()` between `open()` and `close()`, and the sink upserts them with `INSERT ... ON CONFLICT`,
so a batch replayed after a failure leaves the table as it was.
"""

# --8<-- [start:config]
import contextlib
import logging
import threading
import time
from dataclasses import dataclass

import psycopg2
import psycopg2.extensions
import psycopg2.extras
from psycopg2 import sql
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

log = logging.getLogger("postgres_sink")


@dataclass(frozen=True)
class SinkConfig:
    dsn: str  # libpq DSN or URL; it travels to the executors inside the pickled writer, so treat it as a secret
    table: str
    schema: str = "public"
    key_columns: tuple[str, ...] = ("id",)
    columns: tuple[str, ...] = ("id", "user_name", "amount", "payload", "created_ms")
    # A row only replaces the stored one when it is at least as new: a replay or a late duplicate can't go back in time.
    version_column: str | None = "created_ms"
    # max_rows=1 is simple mode (one transaction per row). Otherwise a flush happens at max_rows rows or when the
    # oldest buffered row has waited max_dwell_ms, whichever comes first, even if no more rows arrive.
    max_rows: int = 1000
    max_dwell_ms: int = 50
    # Rows whose `reason_column` is set go to this table with their raw value instead; None = no dead letters.
    dead_letter_table: str | None = "dead_letter"
    reason_column: str = "dlq_reason"
    dead_letter_columns: tuple[str, ...] = ("kafka_topic", "kafka_partition", "kafka_offset", "raw_value")
    # How long a flush keeps reconnecting (exponential backoff) before the task fails and Spark retries it.
    reconnect_for_s: float = 60.0
    connect_timeout_s: int = 5
    application_name: str = "rtm-postgres-sink"

    @property
    def buffered(self) -> bool:
        return self.max_rows > 1


def redacted(dsn: str) -> str:
    """The DSN with its password removed: the only form of it that may reach a log."""
    parts = psycopg2.extensions.parse_dsn(dsn)
    parts.pop("password", None)
    return " ".join(f"{k}={v}" for k, v in sorted(parts.items()))


# --8<-- [end:config]


# --8<-- [start:tables]
def create_tables(config: SinkConfig) -> None:
    """The target table (keyed, with the time each row was written) and the dead-letter table."""
    target = sql.Identifier(config.schema, config.table)
    statements = [
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (id bigint PRIMARY KEY, user_name text, amount double precision, "
            "payload text, created_ms bigint, written_at timestamptz NOT NULL DEFAULT clock_timestamp())"
        ).format(target)
    ]
    if config.dead_letter_table:
        statements.append(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (kafka_topic text, kafka_partition int, kafka_offset bigint, "
                "raw_value text, reason text NOT NULL, written_at timestamptz NOT NULL DEFAULT clock_timestamp(), "
                "PRIMARY KEY (kafka_topic, kafka_partition, kafka_offset))"
            ).format(sql.Identifier(config.schema, config.dead_letter_table))
        )
    with psycopg2.connect(config.dsn, connect_timeout=config.connect_timeout_s) as conn, conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)
    conn.close()


# --8<-- [end:tables]


# --8<-- [start:sink]
RETRYABLE = (psycopg2.OperationalError, psycopg2.InterfaceError)


class PostgresSink:
    """A ForeachWriter: one instance per task and epoch, one connection per instance."""

    def __init__(self, config: SinkConfig):
        self.config = config
        self._statements = self._build_statements(config)

    # ---- SQL, built once on the driver; identifiers are quoted, never pasted into the string
    @staticmethod
    def _build_statements(c: SinkConfig) -> dict[str, str]:
        cols = sql.SQL(", ").join(map(sql.Identifier, c.columns))
        keys = sql.SQL(", ").join(map(sql.Identifier, c.key_columns))
        updates = [
            sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(col)) for col in c.columns if col not in c.key_columns
        ]
        updates.append(sql.SQL("written_at = clock_timestamp()"))
        newer = sql.SQL("")
        if c.version_column:
            newer = sql.SQL(" WHERE {t}.{v} IS NULL OR {t}.{v} <= EXCLUDED.{v}").format(
                t=sql.Identifier(c.table), v=sql.Identifier(c.version_column)
            )
        upsert = sql.SQL(
            "INSERT INTO {target} AS {alias} ({cols}) VALUES %s ON CONFLICT ({keys}) DO UPDATE SET {set}{newer}"
        )
        statements = {
            "upsert": upsert.format(
                target=sql.Identifier(c.schema, c.table),
                alias=sql.Identifier(c.table),
                cols=cols,
                keys=keys,
                set=sql.SQL(", ").join(updates),
                newer=newer,
            )
        }
        if c.dead_letter_table:
            dl_cols = sql.SQL(", ").join(map(sql.Identifier, (*c.dead_letter_columns, "reason")))
            statements["dead_letter"] = sql.SQL("INSERT INTO {} ({}) VALUES %s ON CONFLICT DO NOTHING").format(
                sql.Identifier(c.schema, c.dead_letter_table), dl_cols
            )
        # Composed SQL needs a connection to render; keep the objects and render them in open().
        return statements

    # ---- the ForeachWriter protocol
    def open(self, partition_id: int, epoch_id: int) -> bool:
        self.partition_id, self.epoch_id = partition_id, epoch_id
        self.conn = None
        self.rows: dict[tuple, tuple] = {}  # key -> newest row: rows with the same key fold before they are sent
        self.dead: list[tuple] = []
        self.oldest_at: float | None = None  # monotonic time the oldest buffered row arrived
        self.lock = threading.Lock()
        self.failure: BaseException | None = None
        self.flushes = 0
        self._connect()
        self.sql = {name: stmt.as_string(self.conn) for name, stmt in self._statements.items()}
        self._key_idx = [self.config.columns.index(k) for k in self.config.key_columns]
        self._version_idx = (
            self.config.columns.index(self.config.version_column) if self.config.version_column else None
        )
        self._stop = threading.Event()
        self.timer = None
        if self.config.buffered:
            # The dwell limit must hold when rows stop arriving too, and process() is not called then.
            self.timer = threading.Thread(target=self._flush_on_time, name=f"pg-flush-{partition_id}", daemon=True)
            self.timer.start()
        return True

    def process(self, row) -> None:
        if self.failure is not None:
            raise RuntimeError("a timed flush failed") from self.failure
        c = self.config
        with self.lock:
            if self.oldest_at is None:
                self.oldest_at = time.monotonic()
            if c.dead_letter_table and row[c.reason_column] is not None:
                self.dead.append((*(row[col] for col in c.dead_letter_columns), row[c.reason_column]))
            else:
                values = tuple(row[col] for col in c.columns)
                key = tuple(values[i] for i in self._key_idx)
                held = self.rows.get(key)
                if held is None or self._version_idx is None or held[self._version_idx] <= values[self._version_idx]:
                    self.rows[key] = values
            # The time check is here as well as in the timer: under sustained load the timer thread may starve.
            if len(self.rows) + len(self.dead) >= c.max_rows or self._dwell_exceeded():
                self._flush()

    def close(self, error) -> None:
        if self.timer is not None:
            self._stop.set()
            self.timer.join(timeout=5)
        try:
            # After an error Spark replays this task's rows, so what is buffered is dropped, not written twice.
            if error is None and self.failure is None:
                with self.lock:
                    self._flush()
        finally:
            if self.conn is not None:
                self.conn.close()
        if self.failure is not None and error is None:
            raise RuntimeError("a timed flush failed") from self.failure

    # ---- buffering
    def _dwell_exceeded(self) -> bool:
        return self.oldest_at is not None and (time.monotonic() - self.oldest_at) * 1000 >= self.config.max_dwell_ms

    def _flush_on_time(self) -> None:
        period = max(self.config.max_dwell_ms / 4000, 0.001)
        while not self._stop.wait(period):
            try:
                with self.lock:
                    if self._dwell_exceeded():
                        self._flush()
            except BaseException as exc:  # surfaced by the next process() or close()
                self.failure = exc
                return

    def _flush(self) -> None:
        """Write and commit everything buffered. Call with the lock held. The buffer is kept until the commit
        succeeds, so a lost connection costs a retry, not rows."""
        if not self.rows and not self.dead:
            self.oldest_at = None
            return
        rows, dead = list(self.rows.values()), self.dead
        for attempt in self._retrying():
            with attempt:
                self._write(rows, dead)
        self.rows, self.dead, self.oldest_at = {}, [], None
        self.flushes += 1

    def _write(self, rows: list[tuple], dead: list[tuple]) -> None:
        try:
            if self.conn is None or self.conn.closed:
                self._connect_once()
            with self.conn.cursor() as cur:
                if rows:
                    psycopg2.extras.execute_values(cur, self.sql["upsert"], rows, page_size=len(rows))
                if dead:
                    psycopg2.extras.execute_values(cur, self.sql["dead_letter"], dead, page_size=len(dead))
            self.conn.commit()
        except RETRYABLE:
            self._drop_connection()
            raise

    # ---- connection
    def _retrying(self) -> Retrying:
        return Retrying(
            retry=retry_if_exception_type(RETRYABLE),
            wait=wait_exponential(multiplier=0.05, max=5),
            stop=stop_after_delay(self.config.reconnect_for_s),
            before_sleep=self._log_retry,
            reraise=True,
        )

    def _log_retry(self, state) -> None:
        # psycopg2's messages name host, port and user, never the password; the DSN is logged redacted.
        log.warning(
            "partition %s: writing to %s failed (%s); retry %d in %.2fs",
            self.partition_id,
            redacted(self.config.dsn),
            str(state.outcome.exception()).strip(),
            state.attempt_number,
            state.next_action.sleep,
        )

    def _connect(self) -> None:
        for attempt in self._retrying():
            with attempt:
                self._connect_once()

    def _connect_once(self) -> None:
        self.conn = psycopg2.connect(
            self.config.dsn,
            connect_timeout=self.config.connect_timeout_s,
            application_name=self.config.application_name,
        )

    def _drop_connection(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(psycopg2.Error):
                self.conn.close()
        self.conn = None


# --8<-- [end:sink]


# --8<-- [start:budget]
class ConnectionBudgetError(ValueError):
    pass


def server_connection_limit(dsn: str) -> int:
    """Connections ordinary roles may open: max_connections less the slots reserved for superusers (and, from
    Postgres 16, for pg_use_reserved_connections)."""
    with psycopg2.connect(dsn, connect_timeout=5) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT sum(setting::int * CASE name WHEN 'max_connections' THEN 1 ELSE -1 END) FROM pg_settings "
            "WHERE name IN ('max_connections', 'superuser_reserved_connections', 'reserved_connections')"
        )
        limit = int(cur.fetchone()[0])
    conn.close()
    return limit


def check_connection_budget(
    sink_tasks: int, connections_per_writer: int = 1, app_pool: int = 0, server_limit: int = 100
) -> int:
    """Raise ConnectionBudgetError unless the stream's writers plus the application's own pool fit the server.

    `sink_tasks` is how many sink tasks run at once: the Kafka partition count for a stateless query, the shuffle
    partition count when the sink follows a shuffle (dropDuplicates, aggregation). Returns the connections left.
    """
    needed = sink_tasks * connections_per_writer + app_pool
    if needed > server_limit:
        raise ConnectionBudgetError(
            f"The stream needs {needed} Postgres connections ({sink_tasks} sink tasks x {connections_per_writer} "
            f"per writer + {app_pool} for the application pool) but the server allows {server_limit} for ordinary "
            "roles. Use fewer source or shuffle partitions, a smaller application pool, a connection pooler "
            "(e.g. PgBouncer in transaction mode), or raise max_connections on the server."
        )
    return server_limit - needed


# --8<-- [end:budget]

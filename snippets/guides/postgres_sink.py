"""A Postgres sink for `writeStream.foreach`: upserts, buffering with a row and a time
limit, dead letters for rows Postgres refuses, transient-only retries, I/O timeouts, and
a password re-read on every (re)connect.

Copy the regions the page shows into your job. It works with any Postgres (Databricks
Lakebase included): Spark hands each task's rows to `process()` between `open()` and
`close()`, and the sink upserts them with `INSERT ... ON CONFLICT`, so a batch replayed
after a failure leaves the table as it was.

After `eval "$(python scripts/lab.py env)"`, this writes three rows:

    python snippets/guides/postgres_sink.py
"""

# --8<-- [start:config]
import contextlib
import json
import logging
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path

import psycopg2
import psycopg2.extensions
import psycopg2.extras
from psycopg2 import sql
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential

log = logging.getLogger("postgres_sink")


@dataclass(frozen=True, repr=False)
class SinkConfig:
    """Every option of both writers (this Python one and the JVM `PostgresUpsertWriter`,
    which receives these same names and values), with their defaults: the one place they
    are set."""

    # libpq DSN or URL; it travels to the executors inside the pickled writer, so treat
    # it as a secret.
    dsn: str
    table: str
    schema: str = "public"
    key_columns: tuple[str, ...] = ("id",)
    columns: tuple[str, ...] = ("id", "user_name", "amount", "payload", "created_ms")
    # A row only replaces the stored one when it is at least as new: a replay or a late
    # duplicate can't go back in time. A row without a version can't be ordered against
    # the others: it is dead-lettered ("null_version").
    version_column: str | None = "created_ms"
    # max_rows=1 is simple mode (one transaction per row). Otherwise a flush happens at
    # max_rows rows or when the oldest buffered row has waited max_dwell_ms, whichever
    # comes first, even if no more rows arrive.
    max_rows: int = 1000
    max_dwell_ms: int = 50
    # Rows whose `reason_column` is set, and rows Postgres refuses, go to this table
    # with the Kafka coordinates of the record and its raw bytes (`raw_column`, or the
    # row as JSON). None = no dead letters: a bad row fails the task.
    dead_letter_table: str | None = "dead_letter"
    reason_column: str = "dlq_reason"
    raw_column: str = "raw_value"
    dead_letter_columns: tuple[str, ...] = (
        "kafka_topic",
        "kafka_partition",
        "kafka_offset",
        "kafka_timestamp",
        "kafka_key",
    )
    # How long a flush keeps retrying a transient error (exponential backoff) before the
    # task fails.
    reconnect_for_s: float = 60.0
    # Retried: SQLSTATE classes/codes that a later attempt can clear (connection lost,
    # server restarting, deadlock, serialization failure, too many connections,
    # statement timeout). Never an authentication failure.
    transient_sqlstates: tuple[str, ...] = (
        "08",
        "57P01",
        "57P02",
        "57P03",
        "40001",
        "40P01",
        "53300",
        "57014",
    )
    # I/O limits, so a half-open connection can't hold a flush (and its lock) forever.
    connect_timeout_s: int = 5
    io_timeout_s: int = (
        30  # unacknowledged writes / dead peer (TCP keepalives; JDBC socketTimeout)
    )
    statement_timeout_ms: int = 30_000
    # Where the password comes from, read again on every (re)connect so a rotated secret
    # is picked up: a file, a shell command printing it (both writers), or a picklable
    # callable (this writer). None = the DSN's password.
    password_file: str | None = None
    password_command: str | None = None
    password_provider: Callable[[], str] | None = None
    application_name: str = "rtm-postgres-sink"

    @property
    def buffered(self) -> bool:
        return self.max_rows > 1

    def __repr__(
        self,
    ) -> str:  # the DSN may hold a password: a repr reaches logs and tracebacks
        shown = ", ".join(
            f"{f.name}={getattr(self, f.name)!r}"
            for f in fields(self)
            if f.name != "dsn"
        )
        return f"SinkConfig(dsn={redacted(self.dsn)!r}, {shown})"


def redacted(dsn: str) -> str:
    """The DSN with its password removed: the only form of it that may reach a log."""
    parts = psycopg2.extensions.parse_dsn(dsn)
    parts.pop("password", None)
    return " ".join(f"{k}={v}" for k, v in sorted(parts.items()))


# Connection failures libpq reports without a SQLSTATE that no retry can fix.
FINAL_CONNECT_ERRORS = (
    "authentication failed",
    "no pg_hba.conf entry",
    "no password supplied",
    "does not exist",
)


def is_transient(exc: BaseException, sqlstates: tuple[str, ...]) -> bool:
    """The retry rule both writers share: a SQLSTATE in `sqlstates` (a prefix matches a
    class), or a connection-level failure without one (refused, reset, timed out) that
    is not an authentication or a missing database/role."""
    code = getattr(exc, "pgcode", None)
    if code:
        return code.startswith(sqlstates)
    if isinstance(exc, (psycopg2.OperationalError, psycopg2.InterfaceError)):
        return not any(marker in str(exc) for marker in FINAL_CONNECT_ERRORS)
    return False


def read_password(config: SinkConfig) -> str | None:
    if config.password_provider is not None:
        return config.password_provider()
    if config.password_file is not None:
        return Path(config.password_file).read_text().strip()
    if config.password_command is not None:
        done = subprocess.run(
            config.password_command,
            shell=True,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if (
            done.returncode != 0
        ):  # its output may hold a secret: report the exit code only
            raise RuntimeError(f"password_command exited with {done.returncode}")
        return done.stdout.strip()
    return None


# --8<-- [end:config]


# --8<-- [start:tables]
def create_tables(config: SinkConfig) -> None:
    """The target table (keyed, with the time each row was written) and the dead-letter
    table. Dead letters keep the record's bytes as `bytea`, so no value (a NUL byte,
    invalid UTF-8) can make the dead-letter write fail."""
    target = sql.Identifier(config.schema, config.table)
    statements = [
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (id bigint PRIMARY KEY, user_name text, "
            "amount double precision, "
            "payload text, created_ms bigint, written_at timestamptz NOT NULL DEFAULT "
            "clock_timestamp())"
        ).format(target)
    ]
    if config.dead_letter_table:
        statements.append(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (kafka_topic text, kafka_partition int, "
                "kafka_offset bigint, "
                "kafka_timestamp timestamptz, kafka_key bytea, raw_value bytea, reason "
                "text NOT NULL, "
                "written_at timestamptz NOT NULL DEFAULT clock_timestamp(), "
                "PRIMARY KEY (kafka_topic, kafka_partition, kafka_offset))"
            ).format(sql.Identifier(config.schema, config.dead_letter_table))
        )
    password = read_password(config)
    extra = {"password": password} if password is not None else {}
    with (
        psycopg2.connect(
            config.dsn, connect_timeout=config.connect_timeout_s, **extra
        ) as conn,
        conn.cursor() as cur,
    ):
        for statement in statements:
            cur.execute(statement)
    conn.close()


# --8<-- [end:tables]


# --8<-- [start:sink]
class PostgresSink:
    """A ForeachWriter: one instance per task and epoch, one connection per instance."""

    def __init__(self, config: SinkConfig):
        self.config = config
        self._statements = self._build_statements(config)

    # ---- SQL, built once on the driver; identifiers are quoted, never pasted into the
    # string
    @staticmethod
    def _build_statements(c: SinkConfig) -> dict[str, sql.Composable]:
        cols = sql.SQL(", ").join(map(sql.Identifier, c.columns))
        keys = sql.SQL(", ").join(map(sql.Identifier, c.key_columns))
        updates = [
            sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(col))
            for col in c.columns
            if col not in c.key_columns
        ]
        updates.append(sql.SQL("written_at = clock_timestamp()"))
        newer = sql.SQL("")
        if c.version_column:
            newer = sql.SQL(" WHERE {t}.{v} IS NULL OR {t}.{v} <= EXCLUDED.{v}").format(
                t=sql.Identifier(c.table), v=sql.Identifier(c.version_column)
            )
        upsert = sql.SQL(
            "INSERT INTO {target} AS {alias} ({cols}) VALUES %s ON CONFLICT ({keys}) "
            "DO UPDATE SET {set}{newer}"
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
            dl_cols = sql.SQL(", ").join(
                map(sql.Identifier, (*c.dead_letter_columns, "raw_value", "reason"))
            )
            statements["dead_letter"] = sql.SQL(
                "INSERT INTO {} ({}) VALUES %s ON CONFLICT DO NOTHING"
            ).format(sql.Identifier(c.schema, c.dead_letter_table), dl_cols)
        # Composed SQL needs a connection to render; keep the objects and render them in
        # open().
        return statements

    # ---- the ForeachWriter protocol
    def open(self, partition_id: int, epoch_id: int) -> bool:
        c = self.config
        self.partition_id, self.epoch_id = partition_id, epoch_id
        self.conn = None
        self.rows: dict[
            tuple, tuple
        ] = {}  # key -> (values, row) of its newest version: duplicates fold here
        self.dead: list[tuple] = []
        self.oldest_at: float | None = (
            None  # monotonic time the oldest buffered row arrived
        )
        self.lock = (
            threading.Lock()
        )  # process(), the timer's flush and close() take turns
        self.failure: BaseException | None = None
        self.flushes = 0
        self._key_idx = [c.columns.index(k) for k in c.key_columns]
        self._version_idx = (
            c.columns.index(c.version_column) if c.version_column else None
        )
        self._connect()
        self.sql = {
            name: stmt.as_string(self.conn) for name, stmt in self._statements.items()
        }
        self._stop = threading.Event()
        self.timer = None
        if c.buffered:
            # The dwell limit must hold when rows stop arriving too, and process() is
            # not called then.
            self.timer = threading.Thread(
                target=self._flush_on_time, name=f"pg-flush-{partition_id}", daemon=True
            )
            self.timer.start()
        return True

    def process(self, row) -> None:
        if self.failure is not None:
            raise RuntimeError("a timed flush failed") from self.failure
        c = self.config
        with self.lock:
            if self.oldest_at is None:
                self.oldest_at = time.monotonic()
            values = tuple(row[col] for col in c.columns)
            reason = (
                row[c.reason_column] if c.dead_letter_table else None
            ) or self._poison(values)
            if reason is not None:
                self.dead.append(self._dead_letter(row, reason))
            else:
                key = tuple(values[i] for i in self._key_idx)
                held = self.rows.get(key)
                v = self._version_idx
                if held is None or v is None or held[0][v] <= values[v]:
                    self.rows[key] = (values, row)
            # The time check is here as well as in the timer: under sustained load the
            # timer thread may starve.
            if len(self.rows) + len(self.dead) >= c.max_rows or self._dwell_exceeded():
                self._flush()

    def close(self, error) -> None:
        self._stop.set()
        # The lock waits out a timed flush in progress; the timer starts none after
        # _stop is set.
        with self.lock:
            try:
                # After an error Spark replays this task's rows, so what is buffered is
                # dropped, not written twice.
                if error is None and self.failure is None:
                    self._flush()
            finally:
                self._drop_connection()
        if self.timer is not None:
            self.timer.join()
        if self.failure is not None and error is None:
            raise RuntimeError("a timed flush failed") from self.failure

    # ---- poison rows: each one is dead-lettered with its reason, so a replay can't
    # fail on it again
    def _poison(self, values: tuple) -> str | None:
        if (
            None in values
        ):  # a C-speed scan; which column is null is only looked up when one is
            if any(values[i] is None for i in self._key_idx):
                return "null_key"
            if self._version_idx is not None and values[self._version_idx] is None:
                return "null_version"
        for v in values:
            if v.__class__ is str and "\x00" in v:
                return "nul_character"  # Postgres text can't hold NUL
        return None

    def _dead_letter(self, row, reason: str) -> tuple:
        c = self.config
        if not c.dead_letter_table:
            raise ValueError(
                f"row refused ({reason}) and no dead_letter_table is configured"
            )
        raw = row[c.raw_column] if c.raw_column in _names(row) else None
        if raw is None:  # a parsed row Postgres refused: keep the row itself
            raw = json.dumps(
                row.asDict() if hasattr(row, "asDict") else dict(row), default=str
            ).encode()
        meta = (
            row[col] if col in _names(row) else None for col in c.dead_letter_columns
        )
        return (*meta, bytes(raw), reason.replace("\x00", "")[:1000])

    # ---- buffering
    def _dwell_exceeded(self) -> bool:
        return (
            self.oldest_at is not None
            and (time.monotonic() - self.oldest_at) * 1000 >= self.config.max_dwell_ms
        )

    def _flush_on_time(self) -> None:
        period = max(self.config.max_dwell_ms / 4000, 0.001)
        while not self._stop.wait(period):
            try:
                with self.lock:
                    if not self._stop.is_set() and self._dwell_exceeded():
                        self._flush()
            except BaseException as exc:  # surfaced by the next process() or close()
                self.failure = exc
                return

    def _flush(self) -> None:
        """Write and commit everything buffered. Call with the lock held. The buffer is
        kept until the commit succeeds, so a lost connection costs a retry, not rows."""
        if not self.rows and not self.dead:
            self.oldest_at = None
            return
        # In key order: two tasks upserting overlapping keys lock them in the same order
        # and can't deadlock.
        pending = [self.rows[key] for key in sorted(self.rows)]
        for attempt in self._retrying():
            with attempt:
                self._write(pending, self.dead)
        self.rows, self.dead, self.oldest_at = {}, [], None
        self.flushes += 1

    def _write(self, pending: list[tuple], dead: list[tuple]) -> None:
        try:
            if self.conn is None:
                self._connect_once()
            try:
                with self.conn.cursor() as cur:
                    if pending:
                        values = [values for values, _ in pending]
                        psycopg2.extras.execute_values(
                            cur, self.sql["upsert"], values, page_size=len(values)
                        )
                    if dead:
                        psycopg2.extras.execute_values(
                            cur, self.sql["dead_letter"], dead, page_size=len(dead)
                        )
                self.conn.commit()
            except (psycopg2.Error, ValueError) as exc:
                if self._transient(exc):
                    raise
                # A row Postgres refuses (a constraint, a changed table, bad data): find
                # it, dead-letter it.
                self.conn.rollback()
                self._write_row_by_row(pending, dead)
        except (psycopg2.Error, ValueError) as exc:
            if self._transient(exc):
                self._drop_connection()
            raise

    def _write_row_by_row(self, pending: list[tuple], dead: list[tuple]) -> None:
        refused = []
        with self.conn.cursor() as cur:
            for values, row in pending:
                cur.execute("SAVEPOINT one_row")
                try:
                    psycopg2.extras.execute_values(cur, self.sql["upsert"], [values])
                except (psycopg2.Error, ValueError) as exc:
                    if self._transient(exc):
                        raise
                    cur.execute("ROLLBACK TO SAVEPOINT one_row")
                    refused.append(
                        self._dead_letter(
                            row,
                            f"{exc.pgcode or type(exc).__name__}: {_first_line(exc)}",
                        )
                    )
            if dead or refused:
                psycopg2.extras.execute_values(
                    cur, self.sql["dead_letter"], [*dead, *refused]
                )
        self.conn.commit()
        log.warning(
            "partition %s: %d row(s) refused by Postgres, dead-lettered",
            self.partition_id,
            len(refused),
        )

    # ---- connection
    def _transient(self, exc: BaseException) -> bool:
        return is_transient(exc, self.config.transient_sqlstates)

    def _retrying(self) -> Retrying:
        return Retrying(
            retry=retry_if_exception(self._transient),
            wait=wait_exponential(multiplier=0.05, max=5),
            stop=stop_after_delay(self.config.reconnect_for_s),
            before_sleep=self._log_retry,
            reraise=True,
        )

    def _log_retry(self, state) -> None:
        # psycopg2's messages name host, port and user, never the password; the DSN is
        # logged redacted.
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
        c = self.config
        password = read_password(
            c
        )  # every (re)connect: a rotated password or a fresh token is picked up
        self.conn = psycopg2.connect(
            c.dsn,
            connect_timeout=c.connect_timeout_s,
            application_name=c.application_name,
            keepalives=1,
            keepalives_idle=max(1, c.io_timeout_s // 3),
            keepalives_interval=max(1, c.io_timeout_s // 6),
            keepalives_count=3,
            tcp_user_timeout=c.io_timeout_s * 1000,
            **({"password": password} if password is not None else {}),
        )
        self.conn.autocommit = True
        with self.conn.cursor() as cur:
            cur.execute("SET statement_timeout = %s", (c.statement_timeout_ms,))
        self.conn.autocommit = False

    def _drop_connection(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(psycopg2.Error):
                self.conn.close()
        self.conn = None


def _names(row) -> tuple[str, ...] | dict:
    return row.__fields__ if hasattr(row, "__fields__") else row


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0]


# --8<-- [end:sink]


# --8<-- [start:budget]
class ConnectionBudgetError(ValueError):
    pass


def server_connection_limit(dsn: str) -> int:
    """Connections ordinary roles may open: max_connections less the slots reserved for
    superusers (and, from Postgres 16, for pg_use_reserved_connections)."""
    import psycopg2  # imported here too, so this section runs when copied on its own

    with psycopg2.connect(dsn, connect_timeout=5) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT sum(setting::int * CASE name WHEN 'max_connections' THEN 1 ELSE -1 "
            "END) FROM pg_settings "
            "WHERE name IN ('max_connections', 'superuser_reserved_connections', "
            "'reserved_connections')"
        )
        limit = int(cur.fetchone()[0])
    conn.close()
    return limit


def check_connection_budget(
    sink_tasks: int,
    connections_per_writer: int = 1,
    app_pool: int = 0,
    server_limit: int = 100,
) -> int:
    """Raise ConnectionBudgetError unless the stream's writers plus the application's
    own pool fit the server.

    `sink_tasks` is how many sink tasks run at once: the Kafka partition count for a
    stateless query, the shuffle partition count when the sink follows a shuffle
    (dropDuplicates, aggregation). Returns the connections left.
    """
    needed = sink_tasks * connections_per_writer + app_pool
    if needed > server_limit:
        raise ConnectionBudgetError(
            f"The stream needs {needed} Postgres connections ({sink_tasks} sink tasks "
            f"x {connections_per_writer} "
            f"per writer + {app_pool} for the application pool) but the server allows "
            f"{server_limit} for ordinary "
            "roles. Use fewer source or shuffle partitions, a smaller application "
            "pool, a connection pooler "
            "(e.g. PgBouncer in transaction mode), or raise max_connections on the "
            "server."
        )
    return server_limit - needed


# --8<-- [end:budget]


if __name__ == "__main__":
    import os
    import sys

    # Three rows through the sink, driven the way Spark drives a ForeachWriter; the
    # third is dead-lettered.
    logging.basicConfig(level=logging.INFO)
    config = SinkConfig(dsn=os.environ["POSTGRES_DSN"], table="sink_example")
    create_tables(config)
    sink = PostgresSink(config)
    sink.open(partition_id=0, epoch_id=0)
    for key, created_ms in ((1, 100), (2, 100), (3, None)):
        sink.process(
            {
                "id": key,
                "user_name": "ada",
                "amount": 1.0,
                "payload": "x",
                "created_ms": created_ms,
                "dlq_reason": None,
            }
            | {
                "kafka_topic": "example",
                "kafka_partition": 0,
                "kafka_offset": key,
                "kafka_timestamp": None,
            }
            | {"kafka_key": None, "raw_value": None}
        )
    sink.close(None)
    print(
        f"wrote 2 rows to {config.schema}.{config.table}, 1 dead letter to "
        f"{config.dead_letter_table}",
        file=sys.stderr,
    )

"""The Kafka -> real-time mode -> Postgres pipeline as its own `spark-submit` application, for kills and restarts.

A kill must hit a real driver process, not the caller's session, so `Driver` starts the guide's
`snippets/guides/submit_pipeline.py` with `spark-submit` in its own process group. A trigger on the target table
(`add_write_log`) records every insert or update in a `writes` table, so rows Spark wrote twice are counted even
though the upsert leaves one row per key. Used by the kill tests and by `scripts/bench.py recovery`.
"""

import json
from pathlib import Path

import psycopg2
from psycopg2 import sql

from rtm_lab.apps.submitted_app import SubmittedApp
from rtm_lab.spark import LOG4J_CONFIG, connector_jars
from snippets.guides import kafka_to_postgres, postgres_jvm_writer, postgres_sink, submit_pipeline

TABLE = "events"


def add_write_log(dsn: str, schema: str, table: str = TABLE) -> None:
    """A row in `writes` for every insert or update of the target table: what the sink wrote, replays included."""
    target, writes = sql.Identifier(schema, table), sql.Identifier(schema, "writes")
    function = sql.Identifier(schema, "log_write")
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute(sql.SQL("CREATE TABLE {} (id bigint, at timestamptz DEFAULT clock_timestamp())").format(writes))
        cur.execute(
            sql.SQL(
                "CREATE FUNCTION {f}() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN INSERT INTO {w} (id) VALUES (NEW.id); RETURN NULL; END $$"
            ).format(f=function, w=writes)
        )
        cur.execute(
            sql.SQL(
                "CREATE TRIGGER log_write AFTER INSERT OR UPDATE ON {t} FOR EACH ROW EXECUTE FUNCTION {f}()"
            ).format(t=target, f=function)
        )
    conn.close()


def query_one(dsn: str, statement: sql.Composable, params: tuple = ()) -> tuple:
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute(statement, params)
        row = cur.fetchone()
    conn.close()
    return row


def first_write_after(dsn: str, schema: str, epoch_s: float) -> float | None:
    """Epoch seconds of the first write at or after `epoch_s` (server clock, same host as the caller)."""
    statement = sql.SQL("SELECT extract(epoch FROM min(at)) FROM {} WHERE at >= to_timestamp(%s)").format(
        sql.Identifier(schema, "writes")
    )
    value = query_one(dsn, statement, (epoch_s,))[0]
    return float(value) if value is not None else None


def writes_per_key(dsn: str, schema: str, table: str = TABLE) -> dict[int, tuple[int, float]]:
    """Per key: how many times the sink wrote it, and its created_ms."""
    statement = sql.SQL(
        "SELECT w.id, count(*), max(t.created_ms) FROM {w} w JOIN {t} t USING (id) GROUP BY w.id"
    ).format(w=sql.Identifier(schema, "writes"), t=sql.Identifier(schema, table))
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute(statement)
        found = {key: (n, created) for key, n, created in cur.fetchall()}
    conn.close()
    return found


class Driver(SubmittedApp):
    """The pipeline in its own `spark-submit` process group, so one SIGKILL takes the JVM and its Python together."""

    def __init__(
        self,
        kafka_bootstrap: str,
        postgres_dsn: str,
        topic: str,
        schema: str,
        checkpoint: Path,
        log_dir: Path,
        interval: str,
        writer: str = "python",
        slots: int = 3,
    ):
        super().__init__(log_dir)
        self.kafka_bootstrap, self.postgres_dsn = kafka_bootstrap, postgres_dsn
        self.topic, self.schema, self.checkpoint = topic, schema, checkpoint
        self.interval, self.writer, self.slots = interval, writer, slots

    def command(self) -> list[str]:
        py_files = [kafka_to_postgres.__file__, postgres_sink.__file__]
        if self.writer == "jvm":
            from rtm_lab import snippet_jar

            jars = snippet_jar.session_jars()
            py_files.append(postgres_jvm_writer.__file__)
        else:
            jars = ",".join(str(p) for p in connector_jars())
        cmd = [str(self.spark_submit()), "--master", f"local[{self.slots}]", "--jars", jars]
        cmd += [
            "--conf",
            "spark.ui.enabled=false",
            "--driver-java-options",
            f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG}",
        ]
        cmd += ["--py-files", ",".join(py_files), submit_pipeline.__file__]
        cmd += ["--topic", self.topic, "--schema", self.schema, "--table", TABLE, "--writer", self.writer]
        cmd += ["--checkpoint", str(self.checkpoint), "--batch-duration", self.interval]
        return cmd

    def environment(self) -> dict[str, str]:
        return {"KAFKA_BOOTSTRAP_SERVERS": self.kafka_bootstrap, "POSTGRES_DSN": self.postgres_dsn}


def committed_batches(checkpoint: Path) -> list[int]:
    commits = checkpoint / "commits"
    return sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit()) if commits.is_dir() else []


def committed_offsets(checkpoint: Path) -> dict[int, int]:
    """Per partition, the next offset after the last committed batch: where a restart resumes reading."""
    batch = committed_batches(checkpoint)[-1]
    lines = (checkpoint / "offsets" / str(batch)).read_text().splitlines()
    (positions,) = json.loads(lines[-1]).values()  # one source: {topic: {partition: offset}}
    return {int(partition): offset for partition, offset in positions.items()}


def last_commit_time(checkpoint: Path) -> float:
    return (checkpoint / "commits" / str(committed_batches(checkpoint)[-1])).stat().st_mtime

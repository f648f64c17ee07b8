"""Hard kills under a running stream: the Kafka broker, then the Spark driver, each SIGKILLed and restarted.

The pipeline (Kafka -> real-time mode -> Postgres upsert) runs as its own `spark-submit` application
(`snippets/guides/submit_pipeline.py`), so a kill hits a real driver process, not the test's session. A trigger on the
target table records every write (insert or update), so the rows Spark wrote twice are counted even though the upsert
leaves one row per key. Each test asserts: no key lost; the rows written again are bounded by what was produced in the
last checkpoint interval before the kill; the table holds each key once (distinct keys = produced - duplicates - dead
letters); dead letters all there. It prints rows replayed and time to resume.
"""

import json
import os
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import psycopg2
import pyspark
import pytest
from psycopg2 import sql

from rtm_lab import lab as lab_module
from rtm_lab import loadgen, processes, sink_check, topics
from rtm_lab.spark import LOG4J_CONFIG, connector_jars
from rtm_lab.waiting import wait_until
from snippets.guides import kafka_to_postgres, postgres_sink, submit_pipeline
from snippets.guides.postgres_sink import SinkConfig, create_tables

pytestmark = [pytest.mark.lab, pytest.mark.slow]

TABLE = "events"
INTERVAL_S = 10  # long enough that a kill lands mid-interval with rows uncommitted
RATE = 200  # rows/s: a steady stream across the kill and the restart


def add_write_log(dsn: str, schema: str) -> None:
    """A row in `writes` for every insert or update of the target table: what the sink wrote, replays included."""
    target, writes = sql.Identifier(schema, TABLE), sql.Identifier(schema, "writes")
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


def total_writes(dsn: str, schema: str) -> int:
    return query_one(dsn, sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, "writes")))[0]


def first_write_after(dsn: str, schema: str, epoch_s: float) -> float | None:
    """Epoch seconds of the first write at or after `epoch_s` (server clock, same host as the test)."""
    statement = sql.SQL("SELECT extract(epoch FROM min(at)) FROM {} WHERE at >= to_timestamp(%s)").format(
        sql.Identifier(schema, "writes")
    )
    value = query_one(dsn, statement, (epoch_s,))[0]
    return float(value) if value is not None else None


class Driver:
    """The pipeline in its own `spark-submit` process group, so one SIGKILL takes the JVM and its Python together."""

    def __init__(self, lab, topic: str, schema: str, checkpoint: Path, log_dir: Path):
        self.lab, self.topic, self.schema, self.checkpoint, self.log_dir = lab, topic, schema, checkpoint, log_dir
        self.pid: int | None = None
        self.runs = 0

    def start(self) -> float:
        self.runs += 1
        spark_submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
        py_files = ",".join([kafka_to_postgres.__file__, postgres_sink.__file__])
        cmd = [str(spark_submit), "--master", "local[3]", "--jars", ",".join(str(p) for p in connector_jars())]
        cmd += [
            "--conf",
            "spark.ui.enabled=false",
            "--driver-java-options",
            f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG}",
        ]
        cmd += ["--py-files", py_files, submit_pipeline.__file__]
        cmd += ["--topic", self.topic, "--schema", self.schema, "--table", TABLE]
        cmd += ["--checkpoint", str(self.checkpoint), "--interval", f"{INTERVAL_S} seconds"]
        env = {
            **{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
            "KAFKA_BOOTSTRAP_SERVERS": self.lab.kafka_bootstrap,
            "POSTGRES_DSN": self.lab.postgres_dsn,
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
        }
        started = time.time()
        self.pid = processes.spawn(cmd, self.log_dir / f"driver-{self.runs}.log", env=env)
        return started

    def alive(self) -> bool:
        return processes.is_alive(self.pid)

    def died(self) -> BaseException | None:
        if self.alive():
            return None
        return RuntimeError(f"the driver exited; log: {self.log_dir / f'driver-{self.runs}.log'}\n{self.log_tail()}")

    def log_tail(self) -> str:
        return processes.tail(self.log_dir / f"driver-{self.runs}.log", 40)

    def kill(self) -> float:
        """SIGKILL the driver's whole process group: no shutdown hook, no final commit."""
        killed_at = time.time()
        os.killpg(self.pid, signal.SIGKILL)
        wait_until(lambda: not self.alive(), 15, "the killed driver to exit", 0.1)
        return killed_at

    def stop(self) -> None:
        processes.stop(self.pid, timeout=20.0)


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


@pytest.fixture
def pipeline(lab, kafka_topic, pg_schema, tmp_path):
    topic = kafka_topic(partitions=2)
    create_tables(SinkConfig(dsn=lab.postgres_dsn, schema=pg_schema, table=TABLE))
    add_write_log(lab.postgres_dsn, pg_schema)
    driver = Driver(lab, topic, pg_schema, tmp_path / "checkpoint", tmp_path)
    yield driver
    driver.stop()


class Counted:
    """The generator's events, with how many records each key was sent in (first send and duplicates)."""

    def __init__(self, events: loadgen.EventMix):
        self.events, self.sent = events, Counter()

    def __call__(self, seq: int):
        event = self.events(seq)
        if isinstance(event, dict):
            self.sent[event["id"]] += 1
        return event


def stream(lab, topic: str, events: Counted, seconds: float) -> tuple[threading.Thread, list[BaseException]]:
    """Produce at RATE from a thread; librdkafka buffers and retries while the broker is away (acks=1)."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            loadgen.produce_at_rate(lab.kafka_bootstrap, topic, RATE, count=int(RATE * seconds), event=events)
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors


def wait_mid_interval(driver: Driver, batches: int = 3) -> None:
    """Until `batches` real-time batches have committed (the first ones work off the backlog of the start-up), then
    half an interval into the next one: a kill at the operating point, not during start-up."""
    wait_until(
        lambda: len(committed_batches(driver.checkpoint)) >= batches,
        240,
        f"{batches} real-time batches to commit",
        0.5,
        driver.died,
    )
    time.sleep(max(0.0, last_commit_time(driver.checkpoint) + INTERVAL_S / 2 - time.time()))


def writes_per_key(dsn: str, schema: str) -> dict[int, tuple[int, float]]:
    """Per key: how many times the sink wrote it, and its created_ms."""
    statement = sql.SQL(
        "SELECT w.id, count(*), max(t.created_ms) FROM {w} w JOIN {t} t USING (id) GROUP BY w.id"
    ).format(w=sql.Identifier(schema, "writes"), t=sql.Identifier(schema, TABLE))
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute(statement)
        found = {key: (n, created) for key, n, created in cur.fetchall()}
    conn.close()
    return found


def reconcile(lab, schema: str, counted: Counted, driver: Driver, kill_at: float, committed: dict) -> dict:
    """Wait until every key is in; assert nothing lost, one row per key, dead letters all there, replay bounded."""
    dsn, events = lab.postgres_dsn, counted.events

    def complete():
        found = sink_check.counts(dsn, schema, TABLE)
        return found if found.distinct_keys >= len(events.keys) and found.dead_letters >= events.bad else None

    wait_until(complete, 240, f"{len(events.keys)} keys and {events.bad} dead letters", 1.0, driver.died)
    time.sleep(2 * INTERVAL_S)  # anything still to be (re)written lands before the counts are read
    found = sink_check.counts(dsn, schema, TABLE)
    assert set(sink_check.keys(dsn, schema, TABLE)) == events.keys, "a key was lost or an unknown key was written"
    assert found.duplicate_keys == 0
    assert found.dead_letters == events.bad
    assert found.distinct_keys == events.valid + events.bad - events.duplicates - found.dead_letters
    # A key's records each upsert once (a later duplicate replaces the row); writes beyond that were replayed.
    replays = {
        key: (n - counted.sent[key], created)
        for key, (n, created) in writes_per_key(dsn, schema).items()
        if n > counted.sent[key]
    }
    replayed = sum(extra for extra, _ in replays.values())
    # Bounded by the batch the kill cut short: only records after the last commit's offsets, read before the kill.
    uncommitted = [
        r
        for r in topics.read_all(lab.kafka_bootstrap, driver.topic, expected=events.valid + events.bad, timeout_s=60)
        if r.offset >= committed[r.partition] and r.timestamp_ms <= kill_at * 1000
    ]
    uncommitted_keys = {int(r.key) for r in uncommitted if r.key and r.key.isdigit()}
    outside = [key for key in replays if key not in uncommitted_keys]
    assert not outside, f"{len(outside)} keys written again from batches already committed, e.g. {outside[:5]}"
    assert replayed <= len(uncommitted), (
        f"{replayed} rows written twice, more than the {len(uncommitted)} records after the last commit"
    )
    ages = sorted(kill_at - created / 1000 for _, created in replays.values())
    return {
        "replayed": replayed,
        "uncommitted": len(uncommitted),
        "oldest_replayed_s": round(ages[-1], 1) if ages else 0.0,
    }


def test_driver_sigkill_mid_interval_resumes_from_checkpoint(lab, pipeline):
    driver = pipeline
    counted = Counted(loadgen.EventMix(duplicate_pct=5, bad_pct=2))
    events = counted.events
    driver.start()
    producer, errors = stream(lab, driver.topic, counted, seconds=100)
    wait_mid_interval(driver)
    killed_at = driver.kill()
    # Read after the kill: what the restart resumes from.
    last_commit, committed = last_commit_time(driver.checkpoint), committed_offsets(driver.checkpoint)

    restarted_at = driver.start()
    first = wait_until(
        lambda: first_write_after(lab.postgres_dsn, driver.schema, restarted_at),
        180,
        "a write after the restart",
        0.5,
        driver.died,
    )
    producer.join(timeout=120)
    assert not producer.is_alive() and not errors, errors or "the producer did not finish"
    result = reconcile(lab, driver.schema, counted, driver, killed_at, committed)
    print(
        f"\ndriver SIGKILL {killed_at - last_commit:.1f} s after the last commit (interval {INTERVAL_S} s, "
        f"{RATE} rows/s): {result['replayed']} rows replayed (of {result['uncommitted']} records after the last commit, "
        f"oldest created {result['oldest_replayed_s']} s before the kill); first write {first - restarted_at:.1f} s after the restart, {first - killed_at:.1f} s after the kill; "
        f"{len(events.keys)} keys, {events.duplicates} duplicates, {events.bad} dead letters; load {os.getloadavg()}"
    )


def test_kafka_broker_sigkill_mid_stream_loses_nothing(lab, pipeline):
    state = lab_module.status()
    if state.kafka.external:
        pytest.skip("KAFKA_BOOTSTRAP_SERVERS names a broker the lab did not start: this test only kills its own")
    driver = pipeline
    counted = Counted(loadgen.EventMix(duplicate_pct=5, bad_pct=2))
    events = counted.events
    driver.start()
    producer, errors = stream(lab, driver.topic, counted, seconds=100)
    wait_mid_interval(driver)
    last_commit = last_commit_time(driver.checkpoint)
    committed = committed_offsets(driver.checkpoint)

    killed_at = time.time()
    os.killpg(state.kafka.pid, signal.SIGKILL)
    wait_until(lambda: not processes.is_alive(state.kafka.pid), 15, "the killed broker to exit", 0.1)
    time.sleep(3)  # the producer and the query see the broker gone
    restored, _ = lab_module.up(log=lambda line: print(line))
    restarted_at = time.time()
    assert restored.kafka_bootstrap == lab.kafka_bootstrap, "the broker came back on another address"

    first = wait_until(
        lambda: first_write_after(lab.postgres_dsn, driver.schema, restarted_at),
        180,
        "a write after the broker restart",
        0.5,
        driver.died,
    )
    producer.join(timeout=180)
    assert not producer.is_alive() and not errors, errors or "the producer did not finish"
    result = reconcile(lab, driver.schema, counted, driver, killed_at, committed)
    assert driver.alive(), "the query did not survive the broker restart"
    print(
        f"\nbroker SIGKILL {killed_at - last_commit:.1f} s after the last commit, back {restarted_at - killed_at:.1f} s "
        f"later: {result['replayed']} rows replayed (of {result['uncommitted']} records after the last commit); first write "
        f"{first - restarted_at:.1f} s after the broker was back; {len(events.keys)} keys, {events.duplicates} "
        f"duplicates, {events.bad} dead letters; driver runs {driver.runs}; load {os.getloadavg()}"
    )

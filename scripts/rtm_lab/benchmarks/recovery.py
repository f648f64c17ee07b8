"""What a failure costs at each batch duration: the driver SIGKILLed mid-batch, restarted from its checkpoint.

A longer batch duration makes fewer batch boundaries (fewer stalls, see the batch duration sweep) but commits less often, so a
crash replays more. For each `--batch-duration`, the Kafka -> real-time mode -> Postgres pipeline (the guide's
`submit_pipeline.py`, JVM writer by default) runs as its own `spark-submit` application while events stream in at
`--rate`; `--kill-at` of a batch duration after the batch began, the driver's process group is SIGKILLed (no shutdown
hook, no commit) and the same command starts again with the same checkpoint. Every key is sent once, and a trigger
logs every write to the table, so:

- rows replayed = writes - distinct keys written (each written again was read, written, and not committed);
- resume = the restart's first write minus the restart; downtime = the same from the kill;
- catch-up = from the restart until the last key produced before the restart is written;
- lost = keys produced and not in the table; duplicate keys = keys in the table more than once (the upsert's job).

The kill lands in the batch the query is in when `--kill-at` x batch duration has passed since that batch began (its
offsets file, or for the first batch its first write): at 1 and 5 minutes, the first batch, so "since the last commit"
is since the query started.
"""

import argparse
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg2
from psycopg2 import sql

from rtm_lab import cli, loadgen, sink_check, topics
from rtm_lab.apps.submitted_pipeline import (
    TABLE,
    Driver,
    add_write_log,
    committed_batches,
    first_write_after,
    query_one,
)
from rtm_lab.benchmarks.run_record import record_lines
from rtm_lab.generated import markdown_table
from rtm_lab.intervals import TEST_INTERVAL, interval_ms
from rtm_lab.waiting import wait_until
from snippets.guides.postgres_sink import SinkConfig, create_tables

FULL: dict[str, Any] = {"intervals": ["1 minute", "5 minutes"], "rate": 1000.0, "tail_s": 30.0}
# The smoke run (the test suite's) needs only a moment of normal running after the catch-up, not a stretch to read.
QUICK: dict[str, Any] = {"intervals": [TEST_INTERVAL], "rate": 200.0, "tail_s": 2.0}
KILL_AT = 0.5
PARTITIONS = 2
SLOTS = PARTITIONS  # one task per source partition: the pipeline has no shuffle without --dedup


class Numbered:
    """The generator's events (no duplicates, no bad rows: every key is sent once), remembering how many went out
    and when, so the keys produced before a moment are known."""

    def __init__(self) -> None:
        self.events = loadgen.EventMix(duplicate_pct=0, bad_pct=0)
        self.sent = 0

    def __call__(self, seq: int):
        self.sent += 1
        return self.events(seq)


def _schema(dsn: str, action: str, name: str) -> None:
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        statement = "CREATE SCHEMA {}" if action == "create" else "DROP SCHEMA IF EXISTS {} CASCADE"
        cur.execute(sql.SQL(statement).format(sql.Identifier(name)))
    conn.close()


def batch_started_at(checkpoint: Path) -> float | None:
    """When the current batch began: the mtime of its offsets file (written when the batch is planned)."""
    offsets = checkpoint / "offsets"
    batches = sorted(int(p.name) for p in offsets.iterdir() if p.name.isdigit()) if offsets.is_dir() else []
    return (offsets / str(batches[-1])).stat().st_mtime if batches else None


def run_one(bootstrap: str, dsn: str, interval: str, rate: float, kill_at: float, tail_s: float, writer: str, say):
    schema = f"recovery_{uuid.uuid4().hex[:8]}"
    topic = topics.create_topic(bootstrap, topics.unique_name("recovery"), PARTITIONS)
    work = Path(tempfile.mkdtemp(prefix="bench-recovery-"))
    _schema(dsn, "create", schema)
    create_tables(SinkConfig(dsn=dsn, schema=schema, table=TABLE))
    add_write_log(dsn, schema)
    driver = Driver(bootstrap, dsn, topic, schema, work / "checkpoint", work, interval, writer, SLOTS)
    events, stop = Numbered(), threading.Event()
    errors: list[BaseException] = []

    def produce() -> None:
        try:
            loadgen.produce_at_rate(bootstrap, topic, rate, seconds=24 * 3600, event=events, stop=stop)
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    producer = threading.Thread(target=produce, daemon=True)
    try:
        launched = driver.start()
        producer.start()
        first = wait_until(lambda: first_write_after(dsn, schema, launched), 300, "the first write", 0.5, driver.died)
        say(f"first row written {first - launched:.1f}s after launch; killing the driver {kill_at:g} batch duration in")
        # Rows flow as soon as the first batch starts, so its first write stands for its start: a stateless query
        # tracks progress asynchronously (Spark 4.3's default), and this run saw no offsets file within a minute of
        # the first write at realTime="1 minute".
        kill_due = (batch_started_at(driver.checkpoint) or first) + kill_at * interval_ms(interval) / 1000
        while time.time() < kill_due:
            time.sleep(min(10.0, kill_due - time.time()))
            say(f"{max(0.0, kill_due - time.time()):.0f}s to the kill; {events.sent:,} events produced")
        batch_began = batch_started_at(driver.checkpoint) or first
        commits_before = len(committed_batches(driver.checkpoint))
        killed_at = driver.kill()
        writes_before, keys_before = _writes(dsn, schema)
        restarted_at = driver.start()
        sent_at_restart = events.sent
        resumed = wait_until(
            lambda: first_write_after(dsn, schema, restarted_at), 300, "a write after the restart", 0.5, driver.died
        )
        say(f"restarted; first write {resumed - restarted_at:.1f}s after the restart")
        caught_up = wait_until(
            lambda: _last_write_of_keys_below(dsn, schema, sent_at_restart, restarted_at),
            600,
            "every key produced before the restart",
            1.0,
            driver.died,
        )
        time.sleep(tail_s)  # a stretch of normal running after the catch-up, then stop producing
        stop.set()
        producer.join(timeout=60)
        if errors:
            raise RuntimeError(f"the producer failed: {errors[0]}")
        wait_until(
            lambda: sink_check.counts(dsn, schema, TABLE).distinct_keys >= events.sent,
            300,
            "every produced key in the table",
            1.0,
            driver.died,
        )
        writes, keys = _writes(dsn, schema)
        found = sink_check.counts(dsn, schema, TABLE)
        return {
            "interval": interval,
            "rate": rate,
            "writer": writer,
            "killed_after_batch_start_s": round(killed_at - batch_began, 1),
            "commits_before_kill": commits_before,
            "rows_written_before_kill": writes_before,
            "keys_written_before_kill": keys_before,
            "rows_replayed": writes - keys,
            "replayed_input_s": round((writes - keys) / rate, 1),
            "resume_s": round(resumed - restarted_at, 1),
            "downtime_s": round(resumed - killed_at, 1),
            "catch_up_s": round(caught_up - restarted_at, 1),
            "produced": events.sent,
            "lost": events.sent - found.distinct_keys,
            "duplicate_keys": found.duplicate_keys,
        }
    finally:
        stop.set()
        driver.stop()
        _schema(dsn, "drop", schema)
        topics.delete_topic(bootstrap, topic)
        shutil.rmtree(work, ignore_errors=True)


def _writes(dsn: str, schema: str) -> tuple[int, int]:
    statement = sql.SQL("SELECT count(*), count(DISTINCT id) FROM {}").format(sql.Identifier(schema, "writes"))
    return query_one(dsn, statement)


def _last_write_of_keys_below(dsn: str, schema: str, keys: int, since: float) -> float | None:
    """When every key below `keys` is in the table, the latest of their writes since `since` (epoch s), else None."""
    table, writes = sql.Identifier(schema, TABLE), sql.Identifier(schema, "writes")
    present = query_one(dsn, sql.SQL("SELECT count(*) FROM {} WHERE id < %s").format(table), (keys,))[0]
    if present < keys:
        return None
    statement = sql.SQL("SELECT extract(epoch FROM max(at)) FROM {} WHERE id < %s AND at >= to_timestamp(%s)")
    value = query_one(dsn, statement.format(writes), (keys, since))[0]
    return float(value) if value is not None else since


COLUMNS = (
    ("batch duration", "interval", ""),
    ("killed after (s into the batch)", "killed_after_batch_start_s", "right"),
    ("rows replayed", "rows_replayed", "right"),
    ("replayed input (s at the rate)", "replayed_input_s", "right"),
    ("resume after restart s", "resume_s", "right"),
    ("kill to first write s", "downtime_s", "right"),
    ("catch-up after restart s", "catch_up_s", "right"),
    ("lost", "lost", "right"),
    ("duplicate keys", "duplicate_keys", "right"),
)


def markdown(result: dict) -> str:
    from rtm_lab.generated import generated_note

    rows = [[f"{r[key]:,}" if isinstance(r[key], int) else r[key] for _, key, _ in COLUMNS] for r in result["runs"]]
    return "\n".join(
        [
            generated_note("python scripts/tables.py recovery"),
            "",
            markdown_table([c[0] for c in COLUMNS], rows, [c[2] for c in COLUMNS]),
            f"- Pipeline: Kafka ({PARTITIONS} partitions) -> real-time mode -> `foreach` {result['writer']} writer "
            f"-> Postgres upsert, `local[{SLOTS}]`, {result['rate']:,.0f} events/s, every key sent once; the driver "
            "(`spark-submit`) SIGKILLed and started again with the same checkpoint.",
            *record_lines(result, runs=len(result["runs"])),
            "",
        ]
    )


def write(result: dict, json_path: Path) -> Path:
    import json

    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(result, indent=1) + "\n")
    md = json_path.with_suffix(".md")
    md.write_text(markdown(result))
    return md


def _fraction(text: str) -> float:
    value = cli.positive_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"{text} must be a fraction of the batch duration, above 0 and below 1")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run for tests: one 5 s batch duration at 200 events/s"
    )
    parser.add_argument(
        "--batch-duration",
        "--interval",  # its earlier name, kept so recorded commands still run
        dest="interval",
        action="append",
        type=cli.spark_interval,
        help=f"real-time batch duration to measure; repeatable (default: {', '.join(FULL['intervals'])})",
    )
    parser.add_argument("--rate", type=cli.positive_float, help=f"events per second (default {FULL['rate']:.0f})")
    parser.add_argument(
        "--kill-at", type=_fraction, default=KILL_AT, help=f"how far into the batch to kill, 0-1 (default {KILL_AT})"
    )
    parser.add_argument("--writer", choices=("jvm", "python"), default="jvm", help="the foreach writer (default jvm)")
    parser.add_argument(
        "--json", required=True, type=cli.json_output, help="where to write the result JSON (a .md goes beside it)"
    )


def main(args: argparse.Namespace, command: str) -> int:
    from rtm_lab.benchmarks import run_record
    from rtm_lab.errors import LabError

    preset = QUICK if args.quick else FULL
    intervals = args.interval or preset["intervals"]
    rate = args.rate or preset["rate"]
    with run_record.on_the_lab(command) as (record, state):
        runs = []
        try:
            for n, interval in enumerate(intervals, 1):
                print(f"({n}/{len(intervals)}) realTime={interval!r} at {rate:,.0f} events/s ...", flush=True)

                def say(line: str, iv: str = interval) -> None:
                    print(f"  [{iv}] {line}", flush=True)

                runs.append(
                    run_one(
                        state.kafka_bootstrap,
                        state.postgres_dsn,
                        interval,
                        rate,
                        args.kill_at,
                        preset["tail_s"],
                        args.writer,
                        say,
                    )
                )
                say(", ".join(f"{k}={v}" for k, v in runs[-1].items() if k not in ("interval", "rate", "writer")))
        except (RuntimeError, LabError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    result = {
        "benchmark": "recovery",
        "rate": rate,
        "writer": args.writer,
        "kill_at": args.kill_at,
        "runs": runs,
        **record.record(),
    }
    md = write(result, Path(args.json))
    print(markdown(result))
    print(f"wrote {args.json}, {md}")
    return 1 if any(r["lost"] or r["duplicate_keys"] for r in runs) else 0

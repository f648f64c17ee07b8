"""How often a failed Python task's retry commits, and how often it is denied the commit and fails the query.

Each run is the retry test's case (tests/guides/test_kafka_to_postgres.py): 1,000 events (10 % duplicates, 2 % bad
records) on a 2-partition topic, the Kafka -> real-time mode -> Python `foreach` -> Postgres pipeline at `local[4,2]`
(two attempts per task), and a writer that raises once on one key (rtm_lab.apps.faults.FailOnceSink). The driver logs
who holds each partition's commit (rtm_lab.task_commits), which tells the two outcomes apart:

- retried: the driver freed the failed attempt's permission before the retry asked; the query keeps running;
- commit denied: the retry asked first, was denied, the task failed twice and the query failed; it is then started
  again from its checkpoint, once.

Every run ends with the same check: every key in the table once, every bad record a dead letter.

All runs share one Spark driver (one JVM start, paid before any hog starts): each run has its own topic, tables and
checkpoint, and its part of the driver's log. `--hogs N` runs N busy loops (`sh -c 'while :; do :; done'`) beside
the runs, stopped when they end.
"""

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import psycopg2
from psycopg2 import sql

from rtm_lab import cli, loadgen, task_commits, topics
from rtm_lab.apps.faults import FailOnceSink, commit_log_conf, run_until_written
from rtm_lab.benchmarks.run_record import record_lines
from rtm_lab.generated import markdown_table
from snippets.guides.postgres_sink import SinkConfig, create_tables

MASTER = "local[4,2]"  # the retry test's: 4 slots, two attempts per task
PARTITIONS = 2
EVENTS = 1000
TABLE = "events"
NO_FAILURE = "no failure"  # the writer never met its key, or the driver logged no lost task: the run says nothing


def _schema(dsn: str, action: str, name: str) -> None:
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        statement = "CREATE SCHEMA {}" if action == "create" else "DROP SCHEMA IF EXISTS {} CASCADE"
        cur.execute(sql.SQL(statement).format(sql.Identifier(name)))
    conn.close()


def run_one(spark, bootstrap: str, dsn: str, log: Path) -> dict:
    """One failing query (restarted once if it fails), its outcome read from the part of `log` it wrote."""
    schema = f"retry_{uuid.uuid4().hex[:8]}"
    topic = topics.create_topic(bootstrap, topics.unique_name("retry"), PARTITIONS)
    work = Path(tempfile.mkdtemp(prefix="bench-retry-"))
    _schema(dsn, "create", schema)
    began = time.monotonic()
    try:
        config = SinkConfig(dsn=dsn, schema=schema, table=TABLE, max_rows=200, max_dwell_ms=50)
        create_tables(config)
        events = loadgen.EventMix(duplicate_pct=10, bad_pct=2)
        loadgen.produce_at_rate(bootstrap, topic, 5000, count=EVENTS, event=events)
        marker = work / "failed-once"
        sink = FailOnceSink(config, sorted(events.keys)[len(events.keys) // 2], str(marker))
        log_start = log.stat().st_size if log.exists() else 0
        found, errors = run_until_written(
            spark, sink, bootstrap, topic, str(work / "checkpoint"), (len(events.keys), events.bad), restarts=1
        )
        with log.open() as text:
            text.seek(log_start)
            retry = task_commits.trace(text.read())
        outcome = retry.outcome if retry is not None and marker.exists() else None
        return {
            "outcome": outcome or NO_FAILURE,
            "released_before_retry_asked": retry.released_before_retry_asked if retry else None,
            "query_failures": len(errors),
            "query_error": str(errors[0]).strip().splitlines()[0][:200] if errors else None,
            "lost": len(events.keys) - found.distinct_keys,
            "duplicate_keys": found.duplicate_keys,
            "dead_letters_missing": events.bad - found.dead_letters,
            "seconds": round(time.monotonic() - began, 1),
        }
    finally:
        _schema(dsn, "drop", schema)
        topics.delete_topic(bootstrap, topic)
        shutil.rmtree(work, ignore_errors=True)


def start_hogs(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(count)]


def stop_hogs(hogs: list[subprocess.Popen]) -> None:
    for hog in hogs:
        hog.kill()
        hog.wait()


def summary(setting: dict) -> dict:
    """The counts of one --hogs setting."""
    runs = setting["runs"]
    outcomes = Counter(r["outcome"] for r in runs)
    return {
        "hogs": setting["hogs"],
        "runs": len(runs),
        **{outcome: outcomes.get(outcome, 0) for outcome in (*task_commits.OUTCOMES, NO_FAILURE)},
        "lost": sum(r["lost"] for r in runs),
        "duplicate_keys": sum(r["duplicate_keys"] for r in runs),
        "median_s": statistics.median(r["seconds"] for r in runs) if runs else None,
    }


COLUMNS = (
    ("CPU hogs beside", "hogs", ""),
    ("runs", "runs", "right"),
    ("retried: query kept running", task_commits.RETRIED, "right"),
    ("commit denied: query failed", task_commits.COMMIT_DENIED, "right"),
    ("no failure seen", NO_FAILURE, "right"),
    ("keys lost (after a restart)", "lost", "right"),
    ("duplicate keys", "duplicate_keys", "right"),
    ("median s per run", "median_s", "right"),
)


def markdown(result: dict) -> str:
    from rtm_lab.generated import generated_note

    rows = [[summary(setting)[key] for _, key, _ in COLUMNS] for setting in result["settings"]]
    return "\n".join(
        [
            generated_note("python scripts/tables.py retry-outcomes"),
            "",
            markdown_table([c[0] for c in COLUMNS], rows, [c[2] for c in COLUMNS]),
            f"- Each run: {EVENTS:,} events (10 % duplicates, 2 % bad records) on a {PARTITIONS}-partition topic, "
            f"Kafka -> real-time mode -> Python `foreach` writer -> Postgres upsert at `{MASTER}` (two attempts "
            "per task); the writer raises once, on one key. A query that failed was started again from its "
            "checkpoint, once. The outcome is read from the driver's log of commit permissions. All runs share one "
            "Spark driver.",
            *record_lines(result, runs=sum(len(s["runs"]) for s in result["settings"])),
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=cli.positive_int, default=50, help="failing queries per setting (default 50)")
    parser.add_argument(
        "--hogs",
        action="append",
        type=cli.non_negative_int,
        help="busy loops beside the runs; repeatable, one row each (default: 0)",
    )
    parser.add_argument(
        "--json", required=True, type=cli.json_output, help="where to write the result JSON (a .md goes beside it)"
    )


def main(args: argparse.Namespace, command: str) -> int:
    from rtm_lab.benchmarks import run_record
    from rtm_lab.spark import spark_session

    settings = []
    with run_record.on_the_lab(command) as (record, state):
        work = Path(tempfile.mkdtemp(prefix="bench-retry-log-"))
        log = work / "spark.log"
        # One driver for every run, started before any hog: its start-up is not what is measured.
        spark = spark_session("rtm-retry-outcomes", conf={"spark.master": MASTER, **commit_log_conf(str(log))})
        try:
            for hogs in args.hogs or [0]:
                settings.append({"hogs": hogs, "master": MASTER, "runs": _runs(spark, state, log, hogs, args.runs)})
        finally:
            spark.stop()
            shutil.rmtree(work, ignore_errors=True)
        result = {"settings": settings, **record.record()}
    md = write(result, args.json)
    print(md.read_text())
    return 0


def _runs(spark, state, log: Path, hogs: int, count: int) -> list[dict]:
    runs: list[dict] = []
    hog_processes = start_hogs(hogs)
    try:
        for i in range(count):
            run = run_one(spark, state.kafka_bootstrap, state.postgres_dsn, log)
            runs.append(run)
            so_far = dict(Counter(r["outcome"] for r in runs))
            print(
                f"hogs={hogs} run {i + 1}/{count}: {run['outcome']}, lost {run['lost']}, duplicate keys "
                f"{run['duplicate_keys']}, {run['seconds']} s; so far {so_far}",
                flush=True,
            )
    finally:
        stop_hogs(hog_processes)
    return runs

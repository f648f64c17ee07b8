"""How often a failed Python task's retry commits, and how often it is denied the commit and fails the query.

Each run is the retry test's case (tests/guides/test_kafka_to_postgres.py): 1,000 events (10 % duplicates, 2 % bad
records) on a 2-partition topic, the Kafka -> real-time mode -> Python `foreach` -> Postgres pipeline at `local[4,2]`
(two attempts per task), and a writer that raises once on one key (rtm_lab.apps.faults.FailOnceSink). The driver logs
who holds each partition's commit (rtm_lab.task_commits), which tells the two outcomes apart:

- retried: the driver freed the failed attempt's permission before the retry asked; the query keeps running;
- commit denied: the retry asked first, was denied, the task failed twice and the query failed; it is then started
  again from its checkpoint, once.

Every run ends with the same check: every key in the table once, every bad record a dead letter.

Two kinds of driver (the table's "driver" column):

- shared (the default): all runs share one Spark driver, started before any hog: each run has its own topic, tables
  and checkpoint, and its part of the driver's log. The --hogs settings run one after the other.
- fresh (--fresh-driver): each run starts its own driver, as the test does: the fault app (`python -m
  rtm_lab.apps.faults`, the command from rtm_lab.apps.faults.command) in a new process, its outcome read from its own
  commit log. A cold JVM may free the failed attempt's permission later. The runs take turns between the --hogs
  settings, so a deadline leaves each row about as many runs.

`--hogs N` runs N busy loops (`sh -c 'while :; do :; done'`) beside the runs, stopped when they end. The JSON is
written after every run, so a stopped measurement keeps what it has; `--until HH:MM` (UTC) or `--max-minutes M`
starts no run that would not end in time, and the table shows the runs each row really has. An existing --json file
is merged: its rows of another driver kind or another --hogs stay, with their own command and load; rows this
command measures are replaced.
"""

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import psycopg2
from psycopg2 import sql

from rtm_lab import cli, loadgen, sink_check, task_commits, topics
from rtm_lab.apps import faults
from rtm_lab.apps.faults import FailOnceSink, commit_log_conf, run_until_written
from rtm_lab.benchmarks.run_record import record_lines
from rtm_lab.generated import markdown_table
from snippets.guides.postgres_sink import SinkConfig, create_tables

MASTER = "local[4,2]"  # the retry test's: 4 slots, two attempts per task
PARTITIONS = 2
EVENTS = 1000
TABLE = "events"
NO_FAILURE = "no failure"  # the writer never met its key, or the driver logged no lost task: the run says nothing
SHARED, FRESH = "shared", "fresh"
FRESH_TIMEOUT_S = 300  # the fault app waits up to 180 s for the rows, per query, and it may run two queries


def _schema(dsn: str, action: str, name: str) -> None:
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        statement = "CREATE SCHEMA {}" if action == "create" else "DROP SCHEMA IF EXISTS {} CASCADE"
        cur.execute(sql.SQL(statement).format(sql.Identifier(name)))
    conn.close()


class _Case:
    """One run's topic with its events, its schema with the sink's tables, and a work folder; removed on exit."""

    def __init__(self, bootstrap: str, dsn: str) -> None:
        self.bootstrap, self.dsn = bootstrap, dsn
        self.schema = f"retry_{uuid.uuid4().hex[:8]}"
        self.config = SinkConfig(dsn=dsn, schema=self.schema, table=TABLE, max_rows=200, max_dwell_ms=50)
        self.events = loadgen.EventMix(duplicate_pct=10, bad_pct=2)

    def __enter__(self) -> "_Case":
        self.topic = topics.create_topic(self.bootstrap, topics.unique_name("retry"), PARTITIONS)
        self.work = Path(tempfile.mkdtemp(prefix="bench-retry-"))
        _schema(self.dsn, "create", self.schema)
        self.began = time.monotonic()  # a run's seconds: its events sent, its queries run
        create_tables(self.config)
        loadgen.produce_at_rate(self.bootstrap, self.topic, 5000, count=EVENTS, event=self.events)
        self.poison = sorted(self.events.keys)[len(self.events.keys) // 2]
        self.expected = (len(self.events.keys), self.events.bad)
        return self

    def __exit__(self, *exc) -> None:
        _schema(self.dsn, "drop", self.schema)
        topics.delete_topic(self.bootstrap, self.topic)
        shutil.rmtree(self.work, ignore_errors=True)

    def record(self, retry, marker: Path, errors: list[str], found) -> dict:
        outcome = retry.outcome if retry is not None and marker.exists() else None
        return {
            "outcome": outcome or NO_FAILURE,
            "released_before_retry_asked": retry.released_before_retry_asked if retry else None,
            "query_failures": len(errors),
            "query_error": errors[0][:200] if errors else None,
            "lost": len(self.events.keys) - found.distinct_keys,
            "duplicate_keys": found.duplicate_keys,
            "dead_letters_missing": self.events.bad - found.dead_letters,
            "seconds": round(time.monotonic() - self.began, 1),
        }


def run_one(spark, bootstrap: str, dsn: str, log: Path) -> dict:
    """One failing query in the shared driver `spark` (restarted once if it fails), its outcome read from the part of
    `log` it wrote."""
    with _Case(bootstrap, dsn) as case:
        marker = case.work / "failed-once"
        sink = FailOnceSink(case.config, case.poison, str(marker))
        log_start = log.stat().st_size if log.exists() else 0
        found, errors = run_until_written(
            spark, sink, bootstrap, case.topic, str(case.work / "checkpoint"), case.expected, restarts=1
        )
        with log.open() as text:
            text.seek(log_start)
            retry = task_commits.trace(text.read())
        return case.record(retry, marker, [str(e).strip().splitlines()[0] for e in errors], found)


def run_one_fresh(bootstrap: str, dsn: str) -> dict:
    """One failing query in a driver of its own: the fault app in a new process, as the retry test starts it (one
    restart); the outcome read from the app's commit log, the query errors from the lines it prints."""
    with _Case(bootstrap, dsn) as case:
        argv = faults.command(
            bootstrap, case.topic, dsn, case.schema, case.work, case.poison, case.expected, restarts=1
        )
        run = subprocess.run(
            argv,
            env=dict(os.environ, SPARK_MASTER=MASTER),
            capture_output=True,
            text=True,
            timeout=FRESH_TIMEOUT_S,
        )
        log = case.work / "spark.log"
        retry = task_commits.trace(log.read_text()) if log.exists() else None
        # The app prints `query_error[i]=<first line>` for each failed query it restarted.
        errors = [line.split("=", 1)[1] for line in run.stdout.splitlines() if line.startswith("query_error[")]
        if run.returncode != 0:  # the restarted query failed too, or the app did not run
            errors.append(f"exit {run.returncode}: {(run.stderr.strip().splitlines() or ['no output'])[-1]}")
        found = sink_check.counts(dsn, case.schema, TABLE)
        return case.record(retry, case.work / "failed-once", errors, found)


def start_hogs(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(count)]


def stop_hogs(hogs: list[subprocess.Popen]) -> None:
    for hog in hogs:
        hog.kill()
        hog.wait()


def summary(setting: dict) -> dict:
    """The counts of one setting (a driver kind and a --hogs count)."""
    runs = setting["runs"]
    outcomes = Counter(r["outcome"] for r in runs)
    return {
        "driver": setting["driver"],
        "hogs": setting["hogs"],
        "runs": len(runs),
        **{outcome: outcomes.get(outcome, 0) for outcome in (*task_commits.OUTCOMES, NO_FAILURE)},
        "lost": sum(r["lost"] for r in runs),
        "duplicate_keys": sum(r["duplicate_keys"] for r in runs),
        "median_s": statistics.median(r["seconds"] for r in runs) if runs else None,
    }


COLUMNS = (
    ("driver", "driver", ""),
    ("CPU hogs beside", "hogs", ""),
    ("runs", "runs", "right"),
    ("retried: query kept running", task_commits.RETRIED, "right"),
    ("commit denied: query failed", task_commits.COMMIT_DENIED, "right"),
    ("no failure seen", NO_FAILURE, "right"),
    ("keys lost (after a restart)", "lost", "right"),
    ("duplicate keys", "duplicate_keys", "right"),
    ("median s per run", "median_s", "right"),
)

DRIVERS = {
    SHARED: "one Spark driver for all the row's runs, started before the hogs",
    FRESH: "a new Spark driver per run (the fault app in its own process, as the test runs it), started beside the hogs",
}

# The fields of a results file written before each setting named its driver and its measurement.
_RECORD_KEYS = ("versions", "machine", "load_average", "command", "timestamp", "elapsed_s")


def normalised(result: dict) -> dict:
    """`result` with every setting naming its driver and its measurement (the command, load and time it was measured
    under): a file from before fresh drivers had one shared-driver measurement, at the top level."""
    if "measurements" in result:
        return result
    measurement = {key: result[key] for key in _RECORD_KEYS if key in result}
    settings = [{"driver": SHARED, **setting, "measurement": 0} for setting in result["settings"]]
    return {"settings": settings, "measurements": [measurement]}


def merged(old: dict | None, settings: list[dict], measurement: dict) -> dict:
    """`old`'s settings that `settings` does not measure again (another driver or --hogs), then `settings`, each
    pointing at its own measurement."""
    kept: list[dict] = []
    measurements: list[dict] = []
    measured = {(s["driver"], s["hogs"]) for s in settings}
    if old is not None:
        old = normalised(old)
        for setting in old["settings"]:
            if (setting["driver"], setting["hogs"]) in measured:
                continue
            record = old["measurements"][setting["measurement"]]
            if record not in measurements:
                measurements.append(record)
            kept.append({**setting, "measurement": measurements.index(record)})
    measurements.append(measurement)
    new = [{**setting, "measurement": len(measurements) - 1} for setting in settings]
    return {"settings": kept + new, "measurements": measurements}


def markdown(result: dict) -> str:
    from rtm_lab.generated import generated_note

    result = normalised(result)
    rows = [[summary(setting)[key] for _, key, _ in COLUMNS] for setting in result["settings"]]
    # Named sections, not line numbers, for the page: it shows the table open and the measurements in its evidence
    # block, and a rerun that adds a row or a measurement moves every line after it.
    lines = [
        generated_note("python scripts/tables.py retry-outcomes"),
        "",
        "--8<-- [start:table]",
        markdown_table([c[0] for c in COLUMNS], rows, [c[2] for c in COLUMNS]),
        f"- Each run: {EVENTS:,} events (10 % duplicates, 2 % bad records) on a {PARTITIONS}-partition topic, "
        f"Kafka -> real-time mode -> Python `foreach` writer -> Postgres upsert at `{MASTER}` (two attempts "
        "per task); the writer raises once, on one key. A query that failed was started again from its "
        "checkpoint, once. The outcome is read from the driver's log of commit permissions.",
    ]
    for driver in (SHARED, FRESH):
        if any(s["driver"] == driver for s in result["settings"]):
            lines.append(f"- A {driver} driver: {DRIVERS[driver]}.")
    lines += ["--8<-- [end:table]", "--8<-- [start:evidence]"]
    for i, measurement in enumerate(result["measurements"]):
        settings = [s for s in result["settings"] if s["measurement"] == i]
        hogs = " and ".join(str(s["hogs"]) for s in settings)
        lines.append(f"- The {settings[0]['driver']}-driver rows ({hogs} hogs):")
        if measurement.get("stopped"):
            planned = settings[0].get("planned_runs")
            lines.append(f"  - Stopped at {measurement['stopped']}, before the {planned} runs per row asked for")
        lines += ["  " + line for line in record_lines(measurement, runs=sum(len(s["runs"]) for s in settings))]
    return "\n".join([*lines, "--8<-- [end:evidence]", ""])


def write(result: dict, json_path: Path) -> Path:
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
        "--fresh-driver",
        action="store_true",
        help="start a new Spark driver for each run (the fault app in its own process), as the retry test does",
    )
    stop = parser.add_mutually_exclusive_group()
    stop.add_argument(
        "--until",
        type=cli.clock_time,
        metavar="HH:MM",
        help="start no run that would end after HH:MM UTC (the next one: past midnight works)",
    )
    stop.add_argument(
        "--max-minutes", type=cli.positive_float, metavar="M", help="start no run that would end after M minutes"
    )
    parser.add_argument(
        "--json",
        required=True,
        type=cli.json_output,
        help="where to write the result JSON (a .md goes beside it); rows of an existing file that this command does "
        "not measure are kept",
    )


class _Clock:
    """Whether another run fits before the deadline, judged by the runs so far (median length)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.deadline = args.until
        if args.max_minutes is not None:
            self.deadline = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=args.max_minutes)
        self.lengths: list[float] = []

    def fits(self) -> bool:
        if self.deadline is None:
            return True
        expected = statistics.median(self.lengths) if self.lengths else 0.0
        return dt.datetime.now(dt.UTC) + dt.timedelta(seconds=expected) <= self.deadline

    def stopped_at(self) -> str:
        return f"the deadline, {self.deadline:%H:%M} UTC"


def main(args: argparse.Namespace, command: str) -> int:
    from rtm_lab.benchmarks import run_record

    old = None
    if args.json.exists():
        try:
            old = normalised(json.loads(args.json.read_text()))
        except (ValueError, KeyError, TypeError) as exc:
            print(
                f"error: {args.json} is not a retry-outcomes results file ({exc}); choose another --json",
                file=sys.stderr,
            )
            return 2
    driver = FRESH if args.fresh_driver else SHARED
    settings = [
        {"driver": driver, "hogs": hogs, "master": MASTER, "planned_runs": args.runs, "runs": []}
        for hogs in args.hogs or [0]
    ]
    clock = _Clock(args)
    with run_record.on_the_lab(command) as (record, state):

        def save(stopped: bool = False) -> None:
            measurement = {**record.record(), "stopped": clock.stopped_at() if stopped else None}
            write(merged(old, settings, measurement), args.json)

        measure = _fresh_runs if args.fresh_driver else _shared_runs
        finished = measure(state, settings, args.runs, clock, save)
        save(stopped=not finished)
    print(args.json.with_suffix(".md").read_text())
    return 0


def _one_run(setting: dict, run: dict, count: int, clock: _Clock, save) -> None:
    setting["runs"].append(run)
    clock.lengths.append(run["seconds"])
    save()
    so_far = dict(Counter(r["outcome"] for r in setting["runs"]))
    print(
        f"{setting['driver']} driver, hogs={setting['hogs']} run {len(setting['runs'])}/{count}: {run['outcome']}, "
        f"lost {run['lost']}, duplicate keys {run['duplicate_keys']}, {run['seconds']} s; so far {so_far}",
        flush=True,
    )


def _shared_runs(state, settings: list[dict], count: int, clock: _Clock, save) -> bool:
    """Every setting's runs in one driver, setting after setting; False when the deadline stopped them."""
    from rtm_lab.spark import spark_session

    work = Path(tempfile.mkdtemp(prefix="bench-retry-log-"))
    log = work / "spark.log"
    # One driver for every run, started before any hog: its start-up is not what is measured.
    spark = spark_session("rtm-retry-outcomes", conf={"spark.master": MASTER, **commit_log_conf(str(log))})
    try:
        for setting in settings:
            hog_processes = start_hogs(setting["hogs"])
            try:
                for _ in range(count):
                    if not clock.fits():
                        return False
                    run = run_one(spark, state.kafka_bootstrap, state.postgres_dsn, log)
                    _one_run(setting, run, count, clock, save)
            finally:
                stop_hogs(hog_processes)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return True


def _fresh_runs(state, settings: list[dict], count: int, clock: _Clock, save) -> bool:
    """Each run in a driver of its own, the settings taking turns (run 1 of each, then run 2 of each...), the hogs
    started before the driver; False when the deadline stopped them."""
    for _ in range(count):
        for setting in settings:
            if not clock.fits():
                return False
            hog_processes = start_hogs(setting["hogs"])
            try:
                run = run_one_fresh(state.kafka_bootstrap, state.postgres_dsn)
            finally:
                stop_hogs(hog_processes)
            _one_run(setting, run, count, clock, save)
    return True

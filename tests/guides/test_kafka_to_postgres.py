"""The Kafka -> real-time mode -> Postgres pipeline: bad input reconciles exactly, and after a stop/restart from the
checkpoint, a Postgres restart and a failed task no row is lost and no key is stored twice."""

import os
import re
import subprocess
import threading
from collections import Counter
from pathlib import Path

import pytest
from sink_helpers import TABLE, assert_exact, produce

from rtm_lab import loadgen, sink_check, standalone, task_commits
from rtm_lab.apps import faults
from rtm_lab.apps.faults import RecordingSink
from rtm_lab.benchmarks.sink import dropped_by_spark
from rtm_lab.intervals import TEST_INTERVAL
from rtm_lab.waiting import wait_until
from snippets.guides.kafka_to_postgres import start_pipeline
from snippets.guides.postgres_sink import PostgresSink, SinkConfig, create_tables

# Minutes of Spark or a browser: kept out of the fast loop (`pytest -m "not slow"`).
pytestmark = pytest.mark.slow


def make_sink(lab, schema: str, **overrides) -> SinkConfig:
    config = SinkConfig(schema=schema, table=TABLE, **{"dsn": lab.postgres_dsn, "max_rows": 200, **overrides})
    create_tables(config)
    return config


def produce_in_background(lab, topic: str, events: loadgen.EventMix, count: int, rate: float) -> threading.Thread:
    """Continue the stream of `events` (same keys and counts) from a thread, so a fault hits a running stream."""
    thread = threading.Thread(
        target=loadgen.produce_at_rate,
        args=(lab.kafka_bootstrap, topic, rate),
        kwargs={"count": count, "event": events},
        daemon=True,
    )
    thread.start()
    return thread


def test_bad_input_is_dead_lettered_and_counts_reconcile_with_dedup(
    spark, lab, kafka_topic, pg_schema, checkpoint, stop_after
):
    topic = kafka_topic(partitions=2)
    events = produce(lab, topic, count=1000, duplicate_pct=10, bad_pct=5)
    assert events.duplicates > 0 and all(events.counts[k] > 0 for k in loadgen.BAD_KINDS)
    config = make_sink(lab, pg_schema)

    query = stop_after(
        start_pipeline(
            spark,
            lab.kafka_bootstrap,
            topic,
            PostgresSink(config),
            checkpoint,
            dedup=True,
            batch_duration=TEST_INTERVAL,
        )
    )
    assert_exact(lab, pg_schema, events, query)
    # dropDuplicates keeps the first record of a key: its row holds the created_ms the key was first sent with.
    # Spark's own count of dropped rows matches the generator's duplicates once the batch that saw them has ended.
    wait_until(lambda: dropped_by_spark(query) >= events.duplicates, 30, "Spark's dropped-row count")
    assert dropped_by_spark(query) == events.duplicates


def test_stop_and_restart_from_checkpoint_loses_nothing(spark, lab, kafka_topic, pg_schema, checkpoint, stop_after):
    topic = kafka_topic(partitions=2)
    config = make_sink(lab, pg_schema)
    events = produce(lab, topic, count=600, duplicate_pct=10, bad_pct=2)

    first = stop_after(
        start_pipeline(
            spark, lab.kafka_bootstrap, topic, PostgresSink(config), checkpoint, batch_duration=TEST_INTERVAL
        )
    )
    mid = sink_check.wait_for(lab.postgres_dsn, pg_schema, TABLE, rows=1, timeout_s=90, query=first)
    producer = produce_in_background(lab, topic, events, count=600, rate=150)
    assert mid.rows > 0 and producer.is_alive(), "the stop must come while rows are still being produced"
    first.stop()

    second = stop_after(
        start_pipeline(
            spark, lab.kafka_bootstrap, topic, PostgresSink(config), checkpoint, batch_duration=TEST_INTERVAL
        )
    )
    producer.join(timeout=60)
    assert_exact(lab, pg_schema, events, second)


def test_postgres_restart_mid_stream_loses_nothing(spark, lab, kafka_topic, own_postgres, checkpoint, stop_after):
    """The sink writes to a server of the test's own, restarted mid-stream (the lab's serves every other test)."""
    topic = kafka_topic(partitions=2)
    dsn, schema = own_postgres.dsn, own_postgres.schema
    config = make_sink(lab, schema, dsn=dsn)
    events = produce(lab, topic, count=600, duplicate_pct=10)

    query = stop_after(
        start_pipeline(
            spark, lab.kafka_bootstrap, topic, PostgresSink(config), checkpoint, batch_duration=TEST_INTERVAL
        )
    )
    mid = sink_check.wait_for(dsn, schema, TABLE, rows=1, timeout_s=90, query=query)
    producer = produce_in_background(lab, topic, events, count=600, rate=150)
    assert mid.rows > 0 and producer.is_alive()
    own_postgres.restart()

    producer.join(timeout=60)
    assert_exact(lab, schema, events, query, dsn=dsn)


def run_fail_once(
    lab,
    topic: str,
    schema: str,
    folder: Path,
    master: str,
    *confs: str,
    dedup: bool = False,
    restarts: int = 0,
    hold_scheduler: bool = False,
) -> tuple[subprocess.CompletedProcess, loadgen.EventMix, list[tuple[int, ...]], list[tuple]]:
    """Run the pipeline in its own process with a writer that fails one task once (rtm_lab.apps.faults) on `master`,
    the driver logging who holds each partition's commit to `folder/spark.log`; assert nothing was lost and no key is
    stored twice. Return the run, the events sent, the opens of the task that failed as (partition, epoch, attempt),
    and every close() as (run, partition, epoch, attempt, rows_seen, error_type)."""
    make_sink(lab, schema)
    events = produce(lab, topic, count=1000, duplicate_pct=10, bad_pct=2)
    poison = sorted(events.keys)[len(events.keys) // 2]
    marker = folder / "failed-once"
    env = dict(os.environ, SPARK_MASTER=master)
    run = subprocess.run(
        faults.command(
            *(lab.kafka_bootstrap, topic, lab.postgres_dsn, schema, folder, poison, (len(events.keys), events.bad)),
            *confs,
            dedup=dedup,
            restarts=restarts,
            hold_scheduler=hold_scheduler,
        ),
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )
    log = folder / "spark.log"
    output = run.stdout[-2000:] + run.stderr[-2000:] + (log.read_text()[-4000:] if log.exists() else "")
    assert marker.exists(), "the injected failure never fired\n" + output
    assert run.returncode == 0, output  # 0: the last query had no error
    found = sink_check.counts(lab.postgres_dsn, schema, TABLE)
    assert found.distinct_keys == len(events.keys) and found.duplicate_keys == 0
    assert set(sink_check.keys(lab.postgres_dsn, schema, TABLE)) == events.keys
    assert found.dead_letters == events.bad
    failed = marker.read_text().split()  # "failed partition P epoch E"
    partition, epoch = int(failed[2]), int(failed[4])
    opens = [tuple(int(x) for x in line.split()) for line in Path(f"{marker}.opens").read_text().splitlines()]
    closes = [
        (*(int(x) for x in line.split()[:5]), line.split()[5])
        for line in Path(f"{marker}.closes").read_text().splitlines()
    ]
    return run, events, [o for o in opens if o[:2] == (partition, epoch)], closes


def assert_retried_or_denied_the_commit(run: subprocess.CompletedProcess, log: Path, task_opens, closes) -> str:
    """What holds for a Python writer's failed task under real-time mode whichever way the race goes; return which
    way it went (rtm_lab.task_commits.RETRIED or COMMIT_DENIED).

    The JVM task hands rows to the Python worker and hears of its exception only in close(), after it asked for and
    got the permission to commit its partition. The retry starts after the real-time batch's end time: it reads no
    row (they go to the next batch) and asks for the permission at once. It gets it only if the driver's DAG
    scheduler has handled the first attempt's failure, which frees that attempt's permission; otherwise it is denied,
    the task has failed twice and the query fails with "Commit denied"; a restart from the checkpoint runs the batch
    again (run_fail_once then checks nothing was lost)."""
    retry = task_commits.trace(log.read_text())
    assert retry is not None, run.stdout[-2000:]
    assert retry.allowed_before_failing, retry  # attempt 0 held the commit when its failure reached the driver
    partition, epoch = task_opens[0][:2]
    # The same partition and batch ran again as attempt 1, and that attempt read no row.
    first_run = [c for c in closes if c[:3] == (0, partition, epoch)]
    assert [c[3] for c in first_run] == [0, 1] and first_run[1][4] == 0, closes
    if retry.outcome == task_commits.RETRIED:
        assert [o[2] for o in task_opens] == [0, 1], task_opens
        assert retry.released_before_retry_asked, retry
        assert "query_error[" not in run.stdout and "restarts=0 query_error=None" in run.stdout, run.stdout[-2000:]
    else:
        assert retry.outcome == task_commits.COMMIT_DENIED, retry
        assert [o[2] for o in task_opens] == [0, 1, 0], task_opens  # the restart opened the batch again
        assert not retry.released_before_retry_asked, retry
        task = rf"\(task \d+, attempt 1, stage {retry.stage}\.0\)"
        denied = rf"^query_error\[0\]=Commit denied for partition {partition} {task}"
        assert re.search(denied, run.stdout, re.MULTILINE), run.stdout[-2000:]
        assert f"Task {partition} in stage {retry.stage}.0 failed 2 times; aborting job" in log.read_text()
        assert "restarts=1 query_error=None" in run.stdout, run.stdout[-2000:]
    assert f"retry_outcome={retry.outcome}" in run.stdout, run.stdout[-2000:]
    return retry.outcome


def test_failed_task_is_retried_or_denied_its_commit_and_nothing_is_lost(lab, kafka_topic, pg_schema, tmp_path):
    """Under real-time mode Spark 4.3.0 retries a failed task when spark.task.maxFailures allows it: the same
    partition and real-time batch is opened again as attempt 1. Whether the retry may commit is a race inside the
    driver (assert_retried_or_denied_the_commit); either way nothing is lost once a failed query is restarted."""
    # local[4, 2]: 4 slots, and a task may fail twice before the job fails (local mode allows no retry by default).
    run, _, task_opens, closes = run_fail_once(
        lab, kafka_topic(partitions=2), pg_schema, tmp_path, "local[4,2]", restarts=1
    )
    assert_retried_or_denied_the_commit(run, tmp_path / "spark.log", task_opens, closes)


def test_failed_task_is_retried_or_denied_its_commit_on_a_standalone_cluster(
    lab, standalone_cluster, kafka_topic, pg_schema, tmp_path
):
    """The same on a loopback standalone cluster (two workers, 2 cores each) with spark.task.maxFailures=2."""
    run, _, task_opens, closes = run_fail_once(
        lab,
        kafka_topic(partitions=2),
        pg_schema,
        tmp_path,
        standalone_cluster.master_url,
        "spark.task.maxFailures=2",
        f"spark.driver.host={standalone.HOST}",
        restarts=1,
    )
    assert_retried_or_denied_the_commit(run, tmp_path / "spark.log", task_opens, closes)


def test_a_retry_that_asks_before_the_failed_attempt_is_released_is_denied_its_commit(
    lab, kafka_topic, pg_schema, tmp_path
):
    """The failing order, forced: the driver's DAG scheduler is held (rtm_lab.apps.faults.SchedulerHold) from before
    the Python writer raises until the retry has had its answer. The first attempt's permission to commit is then
    still held when the retry asks: the retry is denied ("already committed by TaskIdentifier(0,0)"), the permission
    is freed only after that, the task has failed twice, the query fails with "Commit denied", and a restart from
    the checkpoint loses nothing and stores no key twice."""
    run, _, task_opens, closes = run_fail_once(
        lab, kafka_topic(partitions=2), pg_schema, tmp_path, "local[4,2]", restarts=1, hold_scheduler=True
    )
    outcome = assert_retried_or_denied_the_commit(run, tmp_path / "spark.log", task_opens, closes)
    assert outcome == task_commits.COMMIT_DENIED
    retry = task_commits.trace((tmp_path / "spark.log").read_text())
    assert retry is not None and retry.released is not None and retry.retry_denied is not None
    assert retry.retry_denied < retry.released, retry


def test_failed_task_in_a_stateful_query_fails_the_query_and_a_restart_replays_the_batch(
    lab, kafka_topic, pg_schema, tmp_path
):
    """With dropDuplicates (a shuffle: the source and the writer's stage run as one pipelined group) Spark 4.3.0 does
    not retry a failed task even when spark.task.maxFailures allows it (local[4,2]: 2 attempts): the task fails
    "1 times", the job is aborted and the query stops with the writer's error (PYTHON_EXCEPTION). Restarted from its
    checkpoint, the query runs the same batch again from its first offset: every row of the batch goes through the
    writer again, including those the other task had already written; the upserts leave one row per key."""
    run, events, task_opens, closes = run_fail_once(
        lab, kafka_topic(partitions=2), pg_schema, tmp_path, "local[4,2]", dedup=True, restarts=1
    )
    assert run.stdout.startswith("query_error[0]=[PYTHON_EXCEPTION]"), run.stdout[-2000:]
    assert "restarts=1 query_error=None" in run.stdout, run.stdout[-2000:]
    # Spark's log: one attempt, then the job aborted (the one-stage query above got attempt 1 at the same master).
    log = (tmp_path / "spark.log").read_text()
    assert re.search(r"Task \d+ in stage [\d.]+ failed 1 times; aborting job", log), log[-4000:]
    # The failed task's partition and batch were opened twice, both as attempt 0: once before, once after the restart.
    assert sorted(task_opens) == [task_opens[0]] * 2 and task_opens[0][2] == 0, task_opens
    epoch = task_opens[0][1]
    first = [c for c in closes if c[0] == 0 and c[2] == epoch]
    again = [c for c in closes if c[0] == 1]
    assert "RuntimeError" in [c[5] for c in first], first
    # After the restart both partitions ran the failed batch again from its first offset: every row not in a batch
    # committed before it went through the writer again (post-dedup: each key once, each dead letter once), the rows
    # the first run had already handed to the writer in the failed batch included; the state of dropDuplicates held
    # nothing of the failed batch (it would have dropped those keys).
    assert sorted(c[1] for c in again if c[2] == epoch) == [0, 1], again
    assert all(c[5] == "NoneType" for c in again), again
    committed = sum(c[4] for c in closes if c[0] == 0 and c[2] < epoch)
    assert committed + sum(c[4] for c in again) == len(events.keys) + events.bad, (closes, len(events.keys), events.bad)
    assert sum(c[4] for c in first) > 0, first  # rows replayed


def test_spark_opens_and_closes_the_writer_once_per_task_and_real_time_batch(
    spark, lab, kafka_topic, pg_schema, checkpoint, tmp_path, stop_after
):
    """What the page says about the lifecycle, under a real real-time query: per task and real-time batch one open(),
    the rows, one close(None) when the batch ends; one Postgres connection per task, held from open() to close();
    the batch's offsets are committed only after close() returned; every row goes through process() once."""
    topic = kafka_topic(partitions=2)
    config = make_sink(lab, pg_schema)
    calls = tmp_path / "calls.log"
    events = produce(lab, topic, count=300)
    sink = RecordingSink(config, str(calls), checkpoint)
    query = stop_after(
        start_pipeline(spark, lab.kafka_bootstrap, topic, sink, checkpoint, batch_duration=TEST_INTERVAL)
    )
    sink_check.wait_for(lab.postgres_dsn, pg_schema, TABLE, len(events.keys), timeout_s=90, query=query)
    wait_until(lambda: len(query.recentProgress) >= 3, 60, "three finished real-time batches", abort=query.exception)
    query.stop()
    finished = {p["batchId"] for p in query.recentProgress}
    lines = [line.split() for line in calls.read_text().splitlines()]
    opens = Counter((int(p), int(e)) for kind, p, e, *_ in lines if kind == "open")
    open_pid = {(int(p), int(e)): int(pid) for kind, p, e, pid in (ln for ln in lines if ln[0] == "open")}
    closes = [
        (int(p), int(e), int(seen), error, int(pid), committed)
        for kind, p, e, seen, error, pid, committed in (ln for ln in lines if ln[0] == "close")
    ]
    for epoch in finished:
        assert {p: n for (p, e), n in opens.items() if e == epoch} == {0: 1, 1: 1}, epoch  # one open per task
        ended = [c for c in closes if c[1] == epoch]
        assert sorted(c[0] for c in ended) == [0, 1] and all(c[3] == "NoneType" for c in ended), ended
        # One connection per task: close() sees the connection open() made, and the two tasks hold two.
        assert all(c[4] == open_pid[(c[0], epoch)] > 0 for c in ended), (ended, open_pid)
        assert len({c[4] for c in ended}) == 2, ended
        # Offsets are committed after close(): commits/<epoch> did not exist yet when close() was called.
        assert all(c[5] == "0" for c in ended), ended
        assert (Path(checkpoint) / "commits" / str(epoch)).exists()
    assert sum(c[2] for c in closes) == len(events.keys)  # each row once, in the batch that read it

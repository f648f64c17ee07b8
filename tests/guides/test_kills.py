"""Hard kills under a running stream: the Kafka broker, then the Spark driver, each SIGKILLed and restarted.

The pipeline (Kafka -> real-time mode -> Postgres upsert) runs as its own `spark-submit` application
(`snippets/guides/submit_pipeline.py`), so a kill hits a real driver process, not the test's session. A trigger on the
target table records every write (insert or update), so the rows Spark wrote twice are counted even though the upsert
leaves one row per key. Each test asserts: no key lost; the rows written again are bounded by what was produced in the
last batch before the kill; the table holds each key once (distinct keys = produced - duplicates - dead
letters); dead letters all there. It prints rows replayed and time to resume.

The stream runs from the start until the query writes again after the restart, so it spans the kill and the
restart; the counts are read once a commit covers every record in the topic, when nothing is left to be written.
"""

import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from rtm_lab import loadgen, processes, sink_check, topics
from rtm_lab.apps.submitted_pipeline import (
    TABLE,
    Driver,
    add_write_log,
    committed_batches,
    committed_offsets,
    first_write_after,
    last_commit_time,
    writes_per_key,
)
from rtm_lab.waiting import wait_until
from snippets.guides.postgres_sink import SinkConfig, create_tables

pytestmark = pytest.mark.slow

# Real-time mode's minimum: half of it is still 500 rows produced since the last commit when the kill lands.
INTERVAL_S = 5
RATE = 200  # rows/s: a steady stream across the kill and the restart
STREAM_LIMIT_S = 600  # the stream stops when the test says so; this only bounds a test that never does


def new_driver(bootstrap: str, dsn: str, topic: str, schema: str, folder: Path) -> Driver:
    """The pipeline's driver (not started yet), with its target table and the write log in `schema`."""
    create_tables(SinkConfig(dsn=dsn, schema=schema, table=TABLE))
    add_write_log(dsn, schema)
    return Driver(bootstrap, dsn, topic, schema, folder / "checkpoint", folder, f"{INTERVAL_S} seconds")


@pytest.fixture
def pipeline(lab, kafka_topic, pg_schema, tmp_path):
    driver = new_driver(lab.kafka_bootstrap, lab.postgres_dsn, kafka_topic(partitions=2), pg_schema, tmp_path)
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


class Stream:
    """Produce at RATE from a thread until `finish()`; librdkafka buffers and retries while the broker is away
    (acks=1)."""

    def __init__(self, lab, topic: str, events: Counted):
        self.stop, self.errors = threading.Event(), []
        self.thread = threading.Thread(target=self._run, args=(lab.kafka_bootstrap, topic, events), daemon=True)
        self.thread.start()

    def _run(self, bootstrap: str, topic: str, events: Counted) -> None:
        try:
            loadgen.produce_at_rate(bootstrap, topic, RATE, STREAM_LIMIT_S, event=events, stop=self.stop)
        except BaseException as exc:  # reported by the test, not lost in the thread
            self.errors.append(exc)

    def finish(self, timeout_s: float) -> None:
        """Stop producing, wait until every record was delivered to the broker, and fail on any send error."""
        self.stop.set()
        self.thread.join(timeout=timeout_s)
        assert not self.thread.is_alive() and not self.errors, self.errors or "the producer did not finish"


def end_offsets(bootstrap: str, topic: str, partitions: dict[int, int]) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kill-test-offsets"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
    finally:
        consumer.close()


def wait_mid_interval(driver: Driver, batches: int = 2) -> None:
    """Until `batches` real-time batches have committed (the first works off the backlog of the start-up), then
    half a batch duration into the next one: a kill at the operating point, not during start-up."""
    wait_for_batches(driver, batches)
    sleep_to_mid_interval(driver)


def wait_for_batches(driver: Driver, batches: int = 2) -> None:
    wait_until(
        lambda: len(committed_batches(driver.checkpoint)) >= batches,
        240,
        f"{batches} real-time batches to commit",
        0.5,
        driver.died,
    )


def sleep_to_mid_interval(driver: Driver) -> None:
    """Half a batch duration after the last commit; when that moment has passed (a wait in between), after the next one."""
    if time.time() > last_commit_time(driver.checkpoint) + INTERVAL_S / 2:
        seen = len(committed_batches(driver.checkpoint))
        wait_until(lambda: len(committed_batches(driver.checkpoint)) > seen, 120, "the next commit", 0.2, driver.died)
    time.sleep(max(0.0, last_commit_time(driver.checkpoint) + INTERVAL_S / 2 - time.time()))


def wait_for_first_write(lab, driver: Driver, since: float, after: str) -> float:
    """When the pipeline's first row after `since` reached Postgres (it fails at once if the driver dies)."""
    return wait_until(
        lambda: first_write_after(lab.postgres_dsn, driver.schema, since),
        180,
        f"a write after {after}",
        0.5,
        driver.died,
    )


def reconcile(lab, schema: str, counted: Counted, driver: Driver, kill_at: float, committed: dict) -> dict:
    """Wait until every key is in; assert nothing lost, one row per key, dead letters all there, replay bounded."""
    dsn, events = lab.postgres_dsn, counted.events

    def complete():
        found = sink_check.counts(dsn, schema, TABLE)
        return found if found.distinct_keys >= len(events.keys) and found.dead_letters >= events.bad else None

    wait_until(complete, 240, f"{len(events.keys)} keys and {events.bad} dead letters", 1.0, driver.died)
    # Nothing is left to be (re)written once a batch that read every record has committed (a batch commits after its
    # writes are done): then the counts are final.
    ends = end_offsets(lab.kafka_bootstrap, driver.topic, committed)
    wait_until(
        lambda: all(committed_offsets(driver.checkpoint)[p] >= end for p, end in ends.items()),
        120,
        "a commit covering every record in the topic",
        0.5,
        driver.died,
    )
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


def test_driver_sigkill_mid_batch_resumes_from_checkpoint(lab, pipeline):
    driver = pipeline
    counted = Counted(loadgen.EventMix(duplicate_pct=5, bad_pct=2))
    events = counted.events
    driver.start()
    producer = Stream(lab, driver.topic, counted)
    wait_mid_interval(driver)
    killed_at = driver.kill()
    # Read after the kill: what the restart resumes from.
    last_commit, committed = last_commit_time(driver.checkpoint), committed_offsets(driver.checkpoint)

    restarted_at = driver.start()
    first = wait_for_first_write(lab, driver, restarted_at, "the restart")
    producer.finish(timeout_s=120)
    result = reconcile(lab, driver.schema, counted, driver, killed_at, committed)
    print(
        f"\ndriver SIGKILL {killed_at - last_commit:.1f} s after the last commit (interval {INTERVAL_S} s, "
        f"{RATE} rows/s): {result['replayed']} rows replayed (of {result['uncommitted']} records after the last commit, "
        f"oldest created {result['oldest_replayed_s']} s before the kill); first write {first - restarted_at:.1f} s after the restart, {first - killed_at:.1f} s after the kill; "
        f"{len(events.keys)} keys, {events.duplicates} duplicates, {events.bad} dead letters; load {os.getloadavg()}"
    )


def test_kafka_broker_sigkill_mid_stream_loses_nothing(lab, own_broker, pg_schema, tmp_path):
    services = SimpleNamespace(kafka_bootstrap=own_broker.bootstrap, postgres_dsn=lab.postgres_dsn)
    topic = topics.create_topic(own_broker.bootstrap, topics.unique_name("kill"), 2)
    driver = new_driver(own_broker.bootstrap, lab.postgres_dsn, topic, pg_schema, tmp_path)
    counted = Counted(loadgen.EventMix(duplicate_pct=5, bad_pct=2))
    events = counted.events
    try:
        driver.start()
        producer = Stream(services, driver.topic, counted)
        wait_mid_interval(driver)
        last_commit = last_commit_time(driver.checkpoint)
        committed = committed_offsets(driver.checkpoint)

        killed_at = time.time()
        os.killpg(own_broker.pid, signal.SIGKILL)
        wait_until(lambda: not processes.is_alive(own_broker.pid), 15, "the killed broker to exit", 0.1)
        time.sleep(3)  # the producer and the query see the broker gone
        own_broker.start()  # same folder and ports: the same broker, back
        restarted_at = time.time()

        first = wait_for_first_write(services, driver, restarted_at, "the broker restart")
        producer.finish(timeout_s=180)
        result = reconcile(services, driver.schema, counted, driver, killed_at, committed)
        assert driver.alive(), "the query did not survive the broker restart"
    finally:
        driver.stop()
    print(
        f"\nbroker SIGKILL {killed_at - last_commit:.1f} s after the last commit, back {restarted_at - killed_at:.1f} s "
        f"later: {result['replayed']} rows replayed (of {result['uncommitted']} records after the last commit); first write "
        f"{first - restarted_at:.1f} s after the broker was back; {len(events.keys)} keys, {events.duplicates} "
        f"duplicates, {events.bad} dead letters; driver runs {driver.runs}; load {os.getloadavg()}"
    )

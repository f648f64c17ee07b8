"""Checkpoints on object storage: real-time queries checkpoint through `s3a://` to the lab's S3 store (versitygw), their
driver is SIGKILLed, and a new driver resumes from those checkpoints with nothing lost.

One `spark-submit` driver (snippets/guides/s3_checkpoints.py) runs two Kafka -> Kafka queries: `transform`
(stateless) and `dedup` (dropDuplicates on id: its state lives in the checkpoint). The test waits until both have
committed every record of a first wave (read back through the S3 API), kills the driver's process group, produces a
second wave while it is down (new ids, and repeats of ids the first wave had), and starts a new driver on the same
checkpoints, this one with the stream-based checkpoint file manager. Asserted: the stateless output holds every record once; the dedup output holds every id once, so the
repeats sent while the driver was down were dropped by state restored from the store; the store's keys appear in no
command line or log, and Spark's event log shows both S3A key settings redacted (as Spark settings and as Hadoop
properties).
"""

import json
import os
import time
import uuid
from collections import Counter

import pytest

from rtm_lab import processes, s3store, topics
from rtm_lab.apps.s3_checkpointed import S3Driver
from rtm_lab.s3a import STREAM_FILE_MANAGER
from rtm_lab.waiting import wait_until
from snippets.guides import s3_checkpoints

pytestmark = pytest.mark.slow

FIRST_WAVE = [*range(0, 200), *range(0, 50)]  # 200 ids, 50 of them twice
SECOND_WAVE = [*range(200, 300), *range(0, 50)]  # 100 new ids, and 50 the first wave had
COMMIT_WAIT_S = 240  # two driver start-ups on a loaded 2-core machine fit well inside this


def produce(bootstrap: str, topic: str, ids: list[int]) -> None:
    events = [{"id": i, "user": f"u{i % 7}", "amount": 1.0, "created_ms": 0} for i in ids]
    topics.produce_json(bootstrap, topic, events)


def topic_ends(bootstrap: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "s3-checkpoint-test"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in (0, 1)}
    finally:
        consumer.close()


def wait_until_committed(driver: S3Driver, ends: dict[int, int]) -> None:
    """Until every query's last commit (read from the store) covers the source up to `ends`."""
    wait_until(
        lambda: all(driver.committed_offsets(name) == ends for name in driver.sinks),
        COMMIT_WAIT_S,
        f"both queries to commit up to {ends} in the s3a checkpoints",
        0.5,
        driver.died,
    )


def ids_in(bootstrap: str, topic: str, expected: int) -> Counter:
    return Counter(json.loads(r.value)["id"] for r in topics.read_all(bootstrap, topic, expected, timeout_s=30))


def test_snippet_settings_match_the_labs(s3_store):
    from rtm_lab import s3a

    keys = s3_store.credentials
    assert s3_checkpoints.s3a_settings(s3_store.endpoint, keys.access_key, keys.secret_key) == s3a.spark_conf(s3_store)


def test_killed_driver_resumes_from_s3a_checkpoints_with_nothing_lost(lab, s3_store, kafka_topic, tmp_path):
    bootstrap = lab.kafka_bootstrap
    source = kafka_topic(partitions=2)
    sinks = {"transform": kafka_topic(partitions=2), "dedup": kafka_topic(partitions=2)}
    prefix = f"tests/{uuid.uuid4().hex[:10]}"
    driver = S3Driver(s3_store, bootstrap, source, sinks, prefix, tmp_path)
    produce(bootstrap, source, FIRST_WAVE)
    try:
        started = driver.start()
        wait_until_committed(driver, topic_ends(bootstrap, source))
        first_commit_s = time.time() - started
        command_line = " ".join(processes.arguments(driver.pid))
        driver.kill()
        produce(bootstrap, source, SECOND_WAVE)
        # The new driver writes with Spark's stream-based checkpoint file manager (spark-hadoop-cloud 4.1.1 on Spark
        # 4.3.0): a class that failed to load would fail both queries at start.
        driver.file_manager = STREAM_FILE_MANAGER
        restarted = driver.start()
        wait_until_committed(driver, topic_ends(bootstrap, source))
        print(
            f"\nfirst wave committed {first_commit_s:.1f} s after the first start; the second, "
            f"{time.time() - restarted:.1f} s after the restart (each a spark-submit start, then a 5 s batch)"
        )
    finally:
        driver.stop()

    produced = Counter(FIRST_WAVE + SECOND_WAVE)
    assert ids_in(bootstrap, sinks["transform"], len(FIRST_WAVE + SECOND_WAVE)) == produced
    assert ids_in(bootstrap, sinks["dedup"], len(produced)) == Counter(set(produced))
    # The checkpoints, state included, are objects in the store: nothing was written to a local folder.
    for name in sinks:
        keys = driver.checkpoint_keys(name)
        assert {"metadata", "commits/0", "offsets/0"} <= set(keys), keys
    assert any(key.startswith("state/0/") for key in driver.checkpoint_keys("dedup"))
    # S3A's default (fs.s3a.checksum.generation=false) sent no CRC32 trailer with the PUT: the store kept a CRC64NVME
    # of its own (versitygw's POSIX backend keeps an object's checksums in an extended attribute of its file).
    offsets = s3store.data_dir() / s3store.BUCKET / prefix / "transform" / "offsets" / "0"
    checksums = json.loads(os.getxattr(offsets, "user.checksums"))
    assert checksums["Algorithm"] == "CRC64NVME" and checksums["CRC32"] is None, checksums
    # The store's keys reached the driver by environment: not on its command line, nor in its logs. Spark's event log
    # lists both settings, redacted by the default spark.redaction.regex.
    logs = "".join(path.read_text() for path in tmp_path.glob("s3-driver-*.log"))
    events = "".join(path.read_text() for path in driver.event_log_dir.rglob("events_*"))
    for key in (s3_store.credentials.access_key, s3_store.credentials.secret_key):
        assert key not in command_line and key not in logs and key not in events
    for setting in ("fs.s3a.access.key", "fs.s3a.secret.key"):  # as Spark settings, and as Hadoop properties
        assert f'"spark.hadoop.{setting}":"*********(redacted)"' in events
        assert f'"{setting}":"*********(redacted)"' in events

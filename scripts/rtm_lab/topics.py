"""Kafka topics and records for tests and benchmarks: create, produce JSON, read back with broker timestamps."""

import json
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError


@dataclass(frozen=True)
class Record:
    key: bytes | None
    value: bytes
    partition: int
    offset: int
    timestamp_ms: int
    timestamp_type: int  # 0 = CreateTime (set by the producer), 1 = LogAppendTime (set by the broker)


def unique_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create_topic(bootstrap: str, name: str, partitions: int = 2, configs: dict[str, str] | None = None) -> str:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="rtm-lab-admin")
    try:
        admin.create_topics([NewTopic(name, partitions, 1, topic_configs=configs or {})])
    except TopicAlreadyExistsError:
        pass
    finally:
        admin.close()
    _wait_for_leaders(bootstrap, name, partitions)
    return name


def delete_topic(bootstrap: str, name: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="rtm-lab-admin")
    try:
        admin.delete_topics([name])
    except Exception:
        pass
    finally:
        admin.close()


def _wait_for_leaders(bootstrap: str, name: str, partitions: int, timeout_s: float = 30.0) -> None:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = consumer.partitions_for_topic(name)
            if found and len(found) == partitions:
                return
            time.sleep(0.1)
            consumer.topics()  # refreshes metadata
        raise TimeoutError(f"topic {name} has no leaders for {partitions} partitions after {timeout_s}s")
    finally:
        consumer.close()


def producer(bootstrap: str, **overrides) -> KafkaProducer:
    settings = {"bootstrap_servers": bootstrap, "linger_ms": 0, "acks": 1}
    settings.update(overrides)
    return KafkaProducer(**settings)


def produce_json(bootstrap: str, topic: str, events: Iterable[dict], key_field: str | None = "id") -> int:
    """Send each event as JSON (keyed by `key_field` when given); return how many were sent."""
    sent = 0
    with_key = key_field is not None
    prod = producer(bootstrap)
    try:
        for event in events:
            key = str(event[key_field]).encode() if with_key else None
            prod.send(topic, key=key, value=json.dumps(event).encode())
            sent += 1
        prod.flush()
    finally:
        prod.close()
    return sent


def read_all(bootstrap: str, topic: str, expected: int, timeout_s: float = 60.0) -> list[Record]:
    """Read a topic from the start until `expected` records arrived or the timeout passed."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=500)
    try:
        parts = consumer.partitions_for_topic(topic) or set()
        deadline = time.monotonic() + timeout_s
        while not parts and time.monotonic() < deadline:
            time.sleep(0.2)
            consumer.topics()
            parts = consumer.partitions_for_topic(topic) or set()
        assigned = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(assigned)
        consumer.seek_to_beginning(*assigned)
        records: list[Record] = []
        while len(records) < expected and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(
                    Record(m.key, m.value, m.partition, m.offset, m.timestamp, m.timestamp_type) for m in batch
                )
        return records
    finally:
        consumer.close()

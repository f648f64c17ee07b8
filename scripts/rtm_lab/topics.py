"""Kafka topics and records for tests and benchmarks: create, produce JSON, read back with broker timestamps."""

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Consumer
from confluent_kafka import TopicPartition as ConfluentPartition
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError

from rtm_lab.waiting import WaitTimeout, wait_until


@dataclass(frozen=True)
class Record:
    key: bytes | None
    value: bytes
    partition: int
    offset: int
    timestamp_ms: int
    timestamp_type: int  # 0 = CreateTime (set by the producer), 1 = LogAppendTime (set by the broker)


# librdkafka's timestamp kinds as kafka-python numbers them (Record.timestamp_type).
_TIMESTAMP_TYPES = {TIMESTAMP_CREATE_TIME: 0, TIMESTAMP_LOG_APPEND_TIME: 1}


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

    def led() -> bool:
        if len(consumer.partitions_for_topic(name) or ()) == partitions:
            return True
        consumer.topics()  # refreshes metadata for the next look
        return False

    try:
        wait_until(led, timeout_s, f"leaders for the {partitions} partitions of topic {name}", interval_s=0.1)
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
    """Read a topic from the start until `expected` records arrived or the timeout passed.

    librdkafka's consumer, not kafka-python's: a benchmark reads back tens of millions of records, and kafka-python
    decodes about 60,000 a second in Python (nearly six minutes for one 80,000 events/s run)."""
    deadline = time.monotonic() + timeout_s
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique_name("read-all"),
            "enable.auto.commit": False,
            # Larger fetches than the defaults: a third less time on a loopback broker sharing the two cores.
            "max.partition.fetch.bytes": 16 << 20,
            "fetch.max.bytes": 64 << 20,
        }
    )
    try:

        def partitions() -> list[int]:
            found = consumer.list_topics(topic, timeout=5).topics.get(topic)
            return sorted(found.partitions) if found is not None and found.error is None else []

        with contextlib.suppress(WaitTimeout):
            wait_until(partitions, timeout_s, f"topic {topic}")
        consumer.assign([ConfluentPartition(topic, p, OFFSET_BEGINNING) for p in partitions()])
        records: list[Record] = []
        # What arrived by the deadline is returned either way: callers assert the count they need.
        while len(records) < expected and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=10_000, timeout=0.5):
                if m.error() is not None:
                    continue  # end-of-partition notices and transient errors; the count decides when to stop
                kind, at = m.timestamp()
                # A message without an error has its partition and offset (the stubs allow None for error events).
                records.append(Record(m.key(), m.value(), m.partition(), m.offset(), at, _TIMESTAMP_TYPES[kind]))  # type: ignore[arg-type]
        return records
    finally:
        consumer.close()


def kafka_stream(spark, bootstrap: str, topic: str, starting_offsets: str = "earliest"):
    """A Kafka topic read as a stream, from its first record by default."""
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", starting_offsets)
        .load()
    )


def start_real_time_to_kafka(df, bootstrap: str, topic: str, interval: str, checkpoint: str | None = None):
    """Start `df` (key/value columns) into a Kafka topic in real-time mode, update output, on a fresh checkpoint."""
    import tempfile

    return (
        df.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("checkpointLocation", checkpoint or tempfile.mkdtemp(prefix="rtm-checkpoint-"))
        .outputMode("update")
        .trigger(realTime=interval)
        .start()
    )


class SinkLatencyReader:
    """Reads a sink topic in a background thread and records, per output record, its broker timestamp minus the
    source record's (carried in the payload as `source_ts_ms`). With LogAppendTime on both topics both stamps come
    from the broker's clock, so the figure is Kafka-in to Kafka-out and nothing of the producer."""

    def __init__(self, bootstrap: str, topic: str, ts_field: str = "source_ts_ms", id_field: str = "id"):
        self.bootstrap, self.topic, self.ts_field, self.id_field = bootstrap, topic, ts_field, id_field
        self.samples: list[tuple[int, float]] = []  # (event id, latency ms)
        # The sink record's broker timestamp, one per sample in the same order: gaps between records out (the stall
        # at a batch boundary) are measured on these.
        self.out_ts_ms: list[int] = []
        self.seen_ids: set[int] = set()
        self.duplicates = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"reader-{topic}", daemon=True)

    def start(self) -> "SinkLatencyReader":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        # The broker's default fetch wait (500 ms): with fetch.min.bytes 1 it answers as soon as a record is there, so
        # records are seen no later, and the figures are broker stamps anyway. A 10 ms wait cost an idle reader 0.14
        # of a core, and the broker about as much again, in empty fetches: CPU taken from the Spark being measured.
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=500)
        parts = [TopicPartition(self.topic, p) for p in sorted(consumer.partitions_for_topic(self.topic) or [])]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        try:
            while not self._stop.is_set():
                for batch in consumer.poll(timeout_ms=100).values():
                    for message in batch:
                        body = json.loads(message.value)
                        event_id = body[self.id_field]
                        if event_id in self.seen_ids:
                            self.duplicates += 1
                            continue
                        self.seen_ids.add(event_id)
                        self.samples.append((event_id, message.timestamp - body[self.ts_field]))
                        self.out_ts_ms.append(message.timestamp)
        finally:
            consumer.close()

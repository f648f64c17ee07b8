"""A sink topic read back and reduced to what two engines must agree on, whatever order they wrote in.

Records: the multiset of (key, JSON value parsed), for pipelines that write each result once. Final values: the last
value written for each key (Kafka keeps one key's records in order within its partition), for a pipeline that writes
every update of a key; how many intermediate updates each engine wrote may differ.
"""

import contextlib
import json
import time
from collections import Counter
from collections.abc import Callable

from kafka import KafkaConsumer, TopicPartition

from rtm_lab.topics import Record
from rtm_lab.waiting import WaitTimeout, wait_until


def read_until(
    bootstrap: str, topic: str, done: Callable[[list[Record]], bool], timeout_s: float = 90.0
) -> list[Record]:
    """Read the topic from the start until `done(records so far)` holds or the timeout passes; return what came."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=500)
    deadline = time.monotonic() + timeout_s
    records: list[Record] = []
    try:
        found = wait_until(lambda: consumer.partitions_for_topic(topic), timeout_s, f"topic {topic}")
        assigned = [TopicPartition(topic, p) for p in sorted(found)]
        consumer.assign(assigned)
        consumer.seek_to_beginning(*assigned)

        def enough() -> bool:
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(
                    Record(m.key, m.value, m.partition, m.offset, m.timestamp, m.timestamp_type) for m in batch
                )
            return done(records)

        # What arrived by the deadline is returned either way: callers assert what they need.
        with contextlib.suppress(WaitTimeout):
            wait_until(enough, max(deadline - time.monotonic(), 0.001), f"the output of {topic}", 0)
        return records
    finally:
        consumer.close()


def _key(record: Record) -> str | None:
    return None if record.key is None else record.key.decode()


def content(records: list[Record]) -> Counter:
    """Each record as (key, value) with the value's JSON in one canonical form, counted."""
    return Counter((_key(r), json.dumps(json.loads(r.value), sort_keys=True)) for r in records)


def final_values(records: list[Record]) -> dict[str | None, dict]:
    """The last value written for each key (records of one key come from one partition, in offset order)."""
    last: dict[str | None, Record] = {}
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        previous = last.get(_key(record))
        if previous is not None and previous.partition != record.partition:
            raise ValueError(
                f"key {_key(record)!r} was written to partitions {previous.partition} and {record.partition}"
            )
        last[_key(record)] = record
    return {key: json.loads(r.value) for key, r in last.items()}

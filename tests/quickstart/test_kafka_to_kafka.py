"""The quick-start pipeline: every event arrives transformed, and Spark really ran it in real-time mode."""

import json

import pytest

from rtm_lab import plans, topics
from snippets.quickstart.kafka_to_kafka import start_pipeline

# Every test here runs Spark queries for many seconds (or a benchmark): not part of the fast loop.
pytestmark = pytest.mark.slow

N_EVENTS = 200


def test_every_event_arrives_transformed_in_real_time_mode(spark, lab, kafka_topic, checkpoint, stop_after):
    source, sink = kafka_topic(partitions=2), kafka_topic(partitions=2)
    events = [{"id": i, "user": f"user{i % 7}", "amount": i + 0.25, "created_ms": 1_000 + i} for i in range(N_EVENTS)]
    topics.produce_json(lab.kafka_bootstrap, source, events)

    query = stop_after(start_pipeline(spark, lab.kafka_bootstrap, source, sink, checkpoint))
    records = topics.read_all(lab.kafka_bootstrap, sink, expected=N_EVENTS, timeout_s=90)

    assert query.exception() is None
    out = {json.loads(r.value)["id"]: json.loads(r.value) for r in records}
    assert len(records) == N_EVENTS
    assert sorted(out) == list(range(N_EVENTS))
    for event in events:
        row = out[event["id"]]
        assert row["user"] == event["user"].upper()
        assert row["amount_cents"] == round(event["amount"] * 100)
        assert row["created_ms"] == event["created_ms"]
        assert row["source_ts_ms"] > 0
    assert {r.key for r in records} == {str(i).encode() for i in range(N_EVENTS)}

    plan = plans.wait_for_real_time_scan(query)
    assert plans.REAL_TIME_SCAN in plan and "MicroBatchScan" not in plan, plan

"""Ad attribution with Python transformWithState: what the guide claims, on the lab's Kafka.

Micro-batch: requests and acks are matched per session in either order; when a session's window ends, orphan acks
and unacknowledged requests are reported and its state is cleared, so the state store empties. Real-time mode: OSS
Spark 4.3.0 does not run the Python operator.
"""

import json
import time

import pytest
from pyspark.errors import StreamingQueryException

from rtm_lab import topics
from snippets.guides.ad_attribution import start_pipeline

# Minutes of Spark or a browser: kept out of the fast loop (`pytest -m "not slow"`).
pytestmark = pytest.mark.slow

WINDOW_MS = 8_000
MICRO_BATCH = {"processingTime": "500 milliseconds"}


def request(session: str, event_id: int, ad: str = "ad-1") -> dict:
    return {"session_id": session, "kind": "request", "event_id": event_id, "ad_id": ad}


def ack(session: str, event_id: int) -> dict:
    return {"session_id": session, "kind": "ack", "event_id": event_id, "ad_id": None}


def wait_until(condition, query, timeout_s: float = 90.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert query.exception() is None, query.exception()
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def state_rows(query) -> int:
    progress = query.lastProgress or {}
    return sum(op.get("numRowsTotal", 0) for op in progress.get("stateOperators", []))


def outputs(bootstrap: str, sink: str, expected: int, timeout_s: float = 60) -> list[tuple]:
    records = topics.read_all(bootstrap, sink, expected=expected, timeout_s=timeout_s)
    rows = [json.loads(r.value) for r in records]
    return sorted((row["session_id"], row["outcome"], row["id"], row.get("request_id")) for row in rows)


def test_pairs_late_requests_orphans_and_bounded_state(spark, lab, kafka_topic, checkpoint, stop_after):
    bootstrap = lab.kafka_bootstrap
    source, sink = kafka_topic(partitions=2), kafka_topic(partitions=2)
    query = stop_after(start_pipeline(spark, bootstrap, source, sink, checkpoint, WINDOW_MS, MICRO_BATCH))
    # The first batch with data starts the Python worker and the state store, which takes long on a busy machine;
    # one warm-up session goes through it so the windows below are not spent waiting for it.
    topics.produce_json(bootstrap, source, [request("s-warm", 0)], key_field="session_id")
    wait_until(lambda: state_rows(query) > 0, query, timeout_s=180, what="the warm-up event in state")
    topics.produce_json(
        bootstrap,
        source,
        [request("s-both", 1), ack("s-both", 2), ack("s-both", 3), ack("s-late", 4), request("s-unacked", 5)],
        key_field="session_id",
    )
    topics.produce_json(bootstrap, source, [ack("s-orphan", 6)], key_field="session_id")
    wait_until(lambda: len(topics.read_all(bootstrap, sink, 2, timeout_s=1)) >= 2, query, what="the first matches")

    # s-late's request comes batches after its ack: the ack waited in list state and is attributed now.
    topics.produce_json(bootstrap, source, [request("s-late", 7, ad="ad-2")], key_field="session_id")
    assert outputs(bootstrap, sink, expected=6) == [
        ("s-both", "matched", 2, 1),
        ("s-both", "matched", 3, 1),
        ("s-late", "matched", 4, 7),
        ("s-orphan", "orphan_ack", 6, None),
        ("s-unacked", "unacked_request", 5, 5),
        ("s-warm", "unacked_request", 0, 0),
    ]

    # A request after its session's window closed is not attributed to the ack that expired before it.
    topics.produce_json(bootstrap, source, [request("s-orphan", 8)], key_field="session_id")
    assert ("s-orphan", "unacked_request", 8, 8) in outputs(bootstrap, sink, expected=7)

    # Every timer has fired and cleared its session: nothing stays in the state store.
    wait_until(lambda: state_rows(query) == 0, query, timeout_s=30, what="state to empty")
    assert query.exception() is None
    # With the state empty no more output can come: the sink holds exactly these rows, so the late request was
    # neither matched to the expired ack nor emitted twice (one more than expected is asked for, to see an extra).
    assert outputs(bootstrap, sink, expected=8, timeout_s=10) == [
        ("s-both", "matched", 2, 1),
        ("s-both", "matched", 3, 1),
        ("s-late", "matched", 4, 7),
        ("s-orphan", "orphan_ack", 6, None),
        ("s-orphan", "unacked_request", 8, 8),
        ("s-unacked", "unacked_request", 5, 5),
        ("s-warm", "unacked_request", 0, 0),
    ]


def test_real_time_mode_rejects_python_transform_with_state(spark, lab, kafka_topic, checkpoint, stop_after):
    source, sink = kafka_topic(partitions=2), kafka_topic(partitions=2)
    topics.produce_json(lab.kafka_bootstrap, source, [request("s-1", 1), ack("s-1", 2)], key_field="session_id")
    query = stop_after(
        start_pipeline(spark, lab.kafka_bootstrap, source, sink, checkpoint, WINDOW_MS, {"realTime": "5 seconds"})
    )
    # Accepted at start(); the query then dies on its first batch.
    with pytest.raises(StreamingQueryException) as failed:
        query.awaitTermination(timeout=120)
    assert "STDS_FAILED_TO_READ_OPERATOR_METADATA" in str(failed.value), failed.value
    assert not query.isActive
    assert topics.read_all(lab.kafka_bootstrap, sink, expected=1, timeout_s=2) == []

"""The JVM ad-attribution processor in real-time mode, on the lab's Kafka: what the guide claims for OSS Spark 4.3.

Two real-time queries. The first (default settings) shows matches in either order as rows arrive, the composite key,
orphans expired by their timers, an ack after its window not matched, state back to 0 keys, when the timers of idle
keys fire, and that RocksDB changelog checkpointing is on by default. The second (changelog checkpointing off) is
stopped mid-batch and restarted from its checkpoint: the state is intact and rows since the last commit are replayed.
"""

import glob
import json
import os
import time

import pytest

from rtm_lab import plans, topics
from rtm_lab.probes.harness import session_confs
from rtm_lab.waiting import wait_until
from snippets.guides.ad_attribution import start_real_time_pipeline

pytestmark = pytest.mark.slow

CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
# A longer batch than the 5 s minimum, so that "at the batch end" and "at the timer's deadline" are seconds apart.
INTERVAL, INTERVAL_MS = "10 seconds", 10_000
WINDOW_MS = 2_000


def event(session: str, kind: str, event_id: int, campaign: str = "c-1") -> dict:
    return {
        "session_id": session,
        "campaign_id": campaign,
        "kind": kind,
        "event_id": event_id,
        "ad_id": f"ad-{campaign}",
    }


class Sink:
    """Every record of the sink topic so far, read again from the start each time (the topic is small)."""

    def __init__(self, bootstrap: str, topic: str):
        self.bootstrap, self.topic = bootstrap, topic

    def rows(self, expected: int = 10**6, timeout_s: float = 1.0) -> list[dict]:
        records = topics.read_all(self.bootstrap, self.topic, expected=expected, timeout_s=timeout_s)
        return [{**json.loads(r.value), "out_ts_ms": r.timestamp_ms} for r in records]

    def wait_for(self, query, count: int, what: str, timeout_s: float = 90.0, outcome: str | None = None) -> list[dict]:
        """All rows, once `count` of them (of `outcome`, if given) are in the topic."""

        def enough() -> list[dict] | None:
            rows = self.rows()
            return rows if sum(outcome in (None, r["outcome"]) for r in rows) >= count else None

        return wait_until(
            enough,
            timeout_s,
            what,
            interval_s=0.2,
            abort=lambda: plans.failure(query),
        )


def outcomes(rows: list[dict]) -> list[tuple]:
    return sorted((r["session_id"], r["campaign_id"], r["outcome"], r["id"], r.get("request_id")) for r in rows)


def batch_ends(query) -> dict[int, dict]:
    """batchId -> its progress, with `end_ms` (start + duration): a real-time query reports only at batch ends."""
    import datetime as dt

    ends = {}
    for p in query.recentProgress:
        start = dt.datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp() * 1000
        ends[p["batchId"]] = {**p, "end_ms": start + p["durationMs"].get("triggerExecution", 0)}
    return ends


def next_batch_end(query, timeout_s: float = 90.0) -> dict:
    """Block until the query reports one more batch end; return that batch's progress."""
    seen = max(batch_ends(query), default=-1)
    return wait_until(
        lambda: batch_ends(query).get(seen + 1), timeout_s, "the next batch end", abort=lambda: plans.failure(query)
    )


def state_rows(progress: dict) -> int:
    return sum(op["numRowsTotal"] for op in progress["stateOperators"])


def stream_conf(query, key: str) -> str | None:
    """A setting as the running query sees it (its own copy of the session's settings, with real-time defaults)."""
    return query._jsq.streamingQuery().sparkSessionForStream().conf().get(key, None)


def changelog_files(checkpoint: str) -> list[str]:
    return glob.glob(os.path.join(checkpoint, "state", "0", "*", "*.changelog"))


def test_jvm_processor_matches_expires_and_bounds_state_under_real_time_mode(
    spark, lab, kafka_topic, checkpoint, stop_after
):
    bootstrap = lab.kafka_bootstrap
    source, sink_topic = kafka_topic(partitions=2), kafka_topic(partitions=2)
    sink = Sink(bootstrap, sink_topic)
    assert spark.conf.get(CHANGELOG, None) is None  # the session leaves it at Spark's default
    topics.produce_json(bootstrap, source, [event("s-warm", "request", 0)], key_field="session_id")
    query = stop_after(start_real_time_pipeline(spark, bootstrap, source, sink_topic, checkpoint, WINDOW_MS, INTERVAL))
    next_batch_end(query, timeout_s=180)  # the first batch (start-up, the warm-up key) is over
    plan = query._jsq.explainInternal(False)
    assert "TransformWithState" in plan and "RealTimeStreamScan" in plan, plan

    # A: right after a batch end, so the next one is INTERVAL away. Pairs in either order, the composite key, orphans.
    topics.produce_json(
        bootstrap,
        source,
        [
            event("s-both", "request", 1),
            event("s-both", "ack", 2),
            event("s-both", "ack", 3),
            event("s-both", "ack", 4, campaign="c-2"),  # same session, other campaign: another key, never matched
            event("s-late", "ack", 5),
            event("s-unacked", "request", 6),
            event("s-orphan", "ack", 7),
            event("s-window", "request", 8),
        ],
        key_field="session_id",
    )
    time.sleep(0.5)
    topics.produce_json(bootstrap, source, [event("s-late", "request", 9)], key_field="session_id")
    rows = sink.wait_for(query, 3, "the three matches", outcome="matched")
    matched = [r for r in rows if r["outcome"] == "matched"]
    assert outcomes(matched) == [
        ("s-both", "c-1", "matched", 2, 1),
        ("s-both", "c-1", "matched", 3, 1),
        ("s-late", "c-1", "matched", 5, 9),  # the ack waited in list state for its request
    ]
    # The matches came out as the rows arrived: each long before the batch they arrived in ended.
    a_batch_end = next_batch_end(query)
    assert all(r["out_ts_ms"] < a_batch_end["end_ms"] - INTERVAL_MS / 3 for r in matched), (matched, a_batch_end)

    # The timers of A's keys passed their deadline seconds before this batch end, but no row came after them: they
    # fired at the batch end. Then nothing was left in state.
    rows = sink.wait_for(query, 8, "the expiries of A's keys")
    expired = [r for r in rows if r["outcome"] != "matched" and r["session_id"] != "s-warm"]
    assert outcomes(expired) == [
        ("s-both", "c-2", "orphan_ack", 4, None),
        ("s-orphan", "c-1", "orphan_ack", 7, None),
        ("s-unacked", "c-1", "unacked_request", 6, 6),
        ("s-window", "c-1", "unacked_request", 8, 8),
    ]
    for r in expired:
        assert r["out_ts_ms"] > r["source_ts_ms"] + WINDOW_MS + INTERVAL_MS / 5, r  # well past the deadline ...
        assert abs(r["out_ts_ms"] - a_batch_end["end_ms"]) < INTERVAL_MS / 5, (r, a_batch_end)  # ... at the end
    assert a_batch_end["stateOperators"][0]["customMetrics"]["numExpiredTimers"] >= 6
    assert state_rows(a_batch_end) == 0, a_batch_end["stateOperators"]

    # B: an ack after its request's window closed, and an orphan; after their deadlines, rows on other keys arrive.
    b_start = time.time() * 1000
    topics.produce_json(
        bootstrap, source, [event("s-window", "ack", 10), event("s-idle", "ack", 11)], key_field="session_id"
    )
    time.sleep(WINDOW_MS / 1000 + 1.0)
    pokes = [event(f"s-poke-{i}", "request", 100 + i) for i in range(8)]  # keys on both state partitions
    topics.produce_json(bootstrap, source, pokes, key_field="session_id")
    poked_ms = time.time() * 1000
    rows = sink.wait_for(query, 10, "B's expiries")
    b_expired = [r for r in rows if r["id"] in (10, 11)]
    # Fired by the next rows, not at the batch end: within the same batch, long before its end.
    b_batch_end = next_batch_end(query)
    assert b_batch_end["batchId"] == a_batch_end["batchId"] + 1, "B ran across a batch end: the machine was too slow"
    for r in b_expired:
        assert poked_ms - 1000 < r["out_ts_ms"] < b_batch_end["end_ms"] - INTERVAL_MS / 5, (r, poked_ms, b_batch_end)
    assert b_start < poked_ms

    # The pokes expired at this batch end too; the state is empty again, and the sink holds exactly this
    # (one more record than expected is asked for, to see an extra).
    assert state_rows(b_batch_end) == 0, b_batch_end["stateOperators"]
    sink.wait_for(query, 18, "the pokes' expiries")
    rows = sink.rows(expected=19, timeout_s=3)
    assert outcomes(rows) == sorted(
        [
            ("s-both", "c-1", "matched", 2, 1),
            ("s-both", "c-1", "matched", 3, 1),
            ("s-both", "c-2", "orphan_ack", 4, None),
            ("s-idle", "c-1", "orphan_ack", 11, None),
            ("s-late", "c-1", "matched", 5, 9),
            ("s-orphan", "c-1", "orphan_ack", 7, None),
            ("s-unacked", "c-1", "unacked_request", 6, 6),
            ("s-warm", "c-1", "unacked_request", 0, 0),
            # Outside the window: the request expired before this ack came, so the ack is an orphan, not a match.
            ("s-window", "c-1", "orphan_ack", 10, None),
            ("s-window", "c-1", "unacked_request", 8, 8),
            *[(f"s-poke-{i}", "c-1", "unacked_request", 100 + i, 100 + i) for i in range(8)],
        ]
    )

    # RocksDB changelog checkpointing: on by default for this real-time query, though the session never set it.
    assert changelog_files(checkpoint), os.listdir(os.path.join(checkpoint, "state", "0", "0"))


def test_restart_keeps_state_and_replays_rows_since_the_last_commit_with_changelog_checkpointing_off(
    spark, lab, kafka_topic, checkpoint, stop_after
):
    bootstrap = lab.kafka_bootstrap
    source, sink_topic = kafka_topic(partitions=2), kafka_topic(partitions=2)
    sink = Sink(bootstrap, sink_topic)
    window_ms = 300_000  # no key expires during the test: the request must outlive the restart

    def start():
        with session_confs(spark, {CHANGELOG: "false"}):
            return stop_after(
                start_real_time_pipeline(spark, bootstrap, source, sink_topic, checkpoint, window_ms, "5 seconds")
            )

    first = start()
    topics.produce_json(
        bootstrap,
        source,
        [event("s-pair", "request", 1), event("s-pair", "ack", 2), event("s-restart", "request", 3)],
        key_field="session_id",
    )
    sink.wait_for(first, 1, "the first match", timeout_s=180)
    committed = next_batch_end(first)
    assert state_rows(committed) >= 2, committed["stateOperators"]
    assert stream_conf(first, CHANGELOG) == "false"
    # An ack after the last commit: matched at once, then the query stops before its batch ends.
    topics.produce_json(bootstrap, source, [event("s-restart", "ack", 4)], key_field="session_id")
    sink.wait_for(first, 2, "the match of the uncommitted ack")
    first.stop()
    # Without the changelog, every commit uploads a full RocksDB snapshot (.zip) and writes no .changelog file.
    assert not changelog_files(checkpoint)
    assert glob.glob(os.path.join(checkpoint, "state", "0", "*", "*.zip"))

    second = start()
    topics.produce_json(bootstrap, source, [event("s-restart", "ack", 5)], key_field="session_id")
    sink.wait_for(second, 4, "the replayed match and the match after the restart", timeout_s=180)
    # One more than expected is asked for, to see an extra.
    assert outcomes(sink.rows(expected=5, timeout_s=3)) == [
        ("s-pair", "c-1", "matched", 2, 1),  # committed before the stop: not replayed
        # The ack after the last commit is read again from its committed offset: its match comes out twice
        # (at-least-once), as the state it updated was not committed either.
        ("s-restart", "c-1", "matched", 4, 3),
        ("s-restart", "c-1", "matched", 4, 3),
        # The request from before the restart is still in state: the new ack is matched to it.
        ("s-restart", "c-1", "matched", 5, 3),
    ]


def test_the_streaming_shuffle_wait_is_read_when_the_session_starts(spark):
    """The page's advice to build the session with SESSION_CONF: the wait is a Spark core setting, read when the
    session starts, so a running session refuses to change it."""
    from pyspark.errors import AnalysisException

    from snippets.guides.ad_attribution import SESSION_CONF

    assert SESSION_CONF == {"spark.shuffle.streaming.networkBufferMaxWaitTimeMs": "5"}
    with pytest.raises(AnalysisException) as refused:
        spark.conf.set("spark.shuffle.streaming.networkBufferMaxWaitTimeMs", "5")
    assert refused.value.getCondition() == "CANNOT_MODIFY_CONFIG", refused.value

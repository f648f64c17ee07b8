"""At-least-once, shown: rows sent mid-batch are sent again after a restart; committed rows are not."""

from collections import Counter

import pytest

from rtm_lab import plans, topics
from rtm_lab.waiting import wait_until
from snippets.reference.delivery_semantics import (
    foreach_output,
    latest_per_key,
    rows_committed,
    start_copy,
    start_foreach_copy,
)

# Every test here runs Spark queries for many seconds (or a benchmark): not part of the fast loop.
pytestmark = pytest.mark.slow

# The minimum batch duration, not the default 5 minutes: these runs need batches to commit within seconds.
SHORT = "5 seconds"


def until(query, condition, what: str, timeout_s: float = 60.0):
    """Poll `condition` while the query runs; a query failure raises at once instead of timing out."""
    return wait_until(condition, timeout_s, what, interval_s=0.3, abort=query.exception)


def planned(query) -> bool:
    return plans.REAL_TIME_SCAN in plans.executed_plan(query)


def sink_records(lab, sink, expected):
    return topics.read_all(lab.kafka_bootstrap, sink, expected=expected, timeout_s=1.0)


# Not `timing`: the one time it depends on is rows B reaching the sink inside a 60-second batch (they take about a
# second), a margin no load on this machine comes near; the rest is counted in rows and commits.
def test_restart_mid_batch_replays_uncommitted_rows_only(spark, lab, kafka_topic, checkpoint, stop_after):
    source, sink = kafka_topic(partitions=2), kafka_topic(partitions=2)
    produce = lambda ids: topics.produce_json(lab.kafka_bootstrap, source, ({"id": i} for i in ids))  # noqa: E731

    # Run 1: rows A arrive, and the batches that read them commit (A may span two 5-second batches).
    q1 = stop_after(start_copy(spark, lab.kafka_bootstrap, source, sink, checkpoint, SHORT))
    until(q1, lambda: planned(q1), "the real-time scan")
    produce(range(0, 5))
    until(q1, lambda: len(sink_records(lab, sink, 5)) >= 5, "rows A in the sink")
    until(q1, lambda: rows_committed(checkpoint) == 5, "a commit covering rows A")
    q1.stop()

    # Run 2: a 60-second batch duration; rows B reach the sink long before it ends. Stop mid-batch.
    q2 = stop_after(start_copy(spark, lab.kafka_bootstrap, source, sink, checkpoint, "60 seconds"))
    until(q2, lambda: planned(q2), "the real-time scan")
    produce(range(5, 10))
    until(q2, lambda: len(sink_records(lab, sink, 10)) >= 10, "rows B in the sink")
    assert rows_committed(checkpoint) == 5, "rows B should be in the sink before their batch commits"
    q2.stop()

    # Run 3: same checkpoint. B is read again (never committed); A is not. Wait for the batch holding B to commit.
    q3 = stop_after(start_copy(spark, lab.kafka_bootstrap, source, sink, checkpoint, SHORT))
    until(q3, lambda: len(sink_records(lab, sink, 15)) >= 15, "replayed rows")
    until(q3, lambda: rows_committed(checkpoint) == 10, "the replay's commit")
    q3.stop()

    records = sink_records(lab, sink, 100)
    ids = Counter(int(r.value.decode().split(":")[1].rstrip("}")) for r in records)
    assert {i: ids[i] for i in range(0, 5)} == dict.fromkeys(range(0, 5), 1)  # committed: written once
    assert {i: ids[i] for i in range(5, 10)} == dict.fromkeys(range(5, 10), 2)  # mid-batch: written twice
    assert len(records) == 15

    # The replay is byte-identical (same key, same value), so keeping one value per key restores exactly-once.
    pairs = Counter((r.key, r.value) for r in records)
    assert sorted(pairs.values()) == [1] * 5 + [2] * 5
    assert len(latest_per_key(records)) == 10


def test_python_foreach_gets_few_rows_before_the_batch_ends(spark, lab, kafka_topic, checkpoint, tmp_path, stop_after):
    """Python foreach, low volume: rows wait in Spark's buffers for the batch end, so 5 s into a 60 s batch the
    writer has none of them. The stop may hand some over as the task closes (a race with its interruption: seen both
    ways); it commits nothing, so the restart delivers every row again."""
    source = kafka_topic(partitions=2)
    produce = lambda ids: topics.produce_json(lab.kafka_bootstrap, source, ({"id": i} for i in ids))  # noqa: E731
    # One output folder per run: a row the stopped run's worker writes after stop() returns still counts as that
    # run's, so no read has to race the worker.
    out = {run: tmp_path / run for run in ("a", "stopped", "replay")}
    for folder in out.values():
        folder.mkdir()
    written = lambda run: foreach_output(str(out[run]))  # noqa: E731

    q1 = stop_after(start_foreach_copy(spark, lab.kafka_bootstrap, source, str(out["a"]), checkpoint, SHORT))
    until(q1, lambda: planned(q1), "the real-time scan")
    produce(range(0, 5))
    until(q1, lambda: rows_committed(checkpoint) == 5 and len(written("a")) >= 5, "rows A written and committed")
    q1.stop()

    q2 = stop_after(
        start_foreach_copy(spark, lab.kafka_bootstrap, source, str(out["stopped"]), checkpoint, "60 seconds")
    )
    until(q2, lambda: planned(q2), "the real-time scan")
    produce(range(5, 10))
    q2.awaitTermination(5)  # a window well inside the 60-second batch
    assert written("stopped") == [], "a Python foreach writer got rows before the batch ended"
    q2.stop()
    assert rows_committed(checkpoint) == 5

    q3 = stop_after(start_foreach_copy(spark, lab.kafka_bootstrap, source, str(out["replay"]), checkpoint, SHORT))
    until(q3, lambda: rows_committed(checkpoint) == 10 and len(written("replay")) >= 5, "the replay's commit")
    q3.stop()

    # Keys are source positions (topic/partition/offset): rows A are the first run's five, rows B the replay's.
    a_keys, b_keys = Counter(written("a")), Counter(written("replay"))
    assert len(a_keys) == 5 and max(a_keys.values()) == 1, a_keys
    # The restart delivers every row of B again, once each, and no row of A: committed rows are not replayed.
    assert len(b_keys) == 5 and max(b_keys.values()) == 1 and not set(a_keys) & set(b_keys), b_keys
    # The stop may have handed over some of B (at most once each), never a row of A.
    delivered_by_stop = Counter(written("stopped"))
    assert set(delivered_by_stop) <= set(b_keys) and max(delivered_by_stop.values(), default=0) <= 1, delivered_by_stop

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
    out = tmp_path / "foreach"
    out.mkdir()
    produce = lambda ids: topics.produce_json(lab.kafka_bootstrap, source, ({"id": i} for i in ids))  # noqa: E731
    written = lambda: foreach_output(str(out))  # noqa: E731

    q1 = stop_after(start_foreach_copy(spark, lab.kafka_bootstrap, source, str(out), checkpoint, SHORT))
    until(q1, lambda: planned(q1), "the real-time scan")
    produce(range(0, 5))
    until(q1, lambda: rows_committed(checkpoint) == 5 and len(written()) >= 5, "rows A written and committed")
    q1.stop()
    after_a = written()

    q2 = stop_after(start_foreach_copy(spark, lab.kafka_bootstrap, source, str(out), checkpoint, "60 seconds"))
    until(q2, lambda: planned(q2), "the real-time scan")
    produce(range(5, 10))
    q2.awaitTermination(5)  # a window well inside the 60-second batch
    assert written() == after_a, "a Python foreach writer got rows before the batch ended"
    q2.stop()
    delivered_by_stop = Counter(written()) - Counter(after_a)
    assert max(delivered_by_stop.values(), default=0) <= 1, delivered_by_stop
    assert rows_committed(checkpoint) == 5

    q3 = stop_after(start_foreach_copy(spark, lab.kafka_bootstrap, source, str(out), checkpoint, SHORT))
    until(q3, lambda: rows_committed(checkpoint) == 10 and len(written()) >= 10, "the replay's commit")
    q3.stop()

    counts = Counter(written())
    assert len(after_a) == 5 and all(counts[key] == 1 for key in after_a)  # committed rows are not replayed
    b_keys = set(counts) - set(after_a)
    assert len(b_keys) == 5
    for key in b_keys:  # a row the stopped query had delivered comes again: at-least-once
        assert counts[key] == 1 + delivered_by_stop[key]

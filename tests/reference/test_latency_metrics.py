"""OSS progress has no latency metrics; the snippet measures them from Kafka stamps; current_timestamp() is per batch."""

import json
import statistics

import pytest

from rtm_lab.plans import wait_for_first_batch
from rtm_lab.probes.stamped_rows import LOG_APPEND_TIME, produce_paced, read_latencies
from snippets.reference.latency_metrics import DATABRICKS_LATENCY_KEYS, latency_keys_in_progress, start_stamped_query

# Every test here runs Spark queries for many seconds (or a benchmark): not part of the fast loop.
pytestmark = pytest.mark.slow

BACKLOG_ROWS = 20
LIVE_ROWS = 20


@pytest.mark.timing
def test_three_latencies_measured_and_oss_progress_has_none(spark, lab, kafka_topic, checkpoint, stop_after):
    source = kafka_topic(partitions=2, configs=LOG_APPEND_TIME)
    sink = kafka_topic(partitions=2, configs=LOG_APPEND_TIME)
    # A backlog: rows already in Kafka when the query starts.
    produce_paced(lab.kafka_bootstrap, source, BACKLOG_ROWS, rate=1000)
    # The minimum batch duration, so a batch ends (and reports progress) within this test.
    query = stop_after(start_stamped_query(spark, lab.kafka_bootstrap, source, sink, checkpoint, "5 seconds"))
    backlog = read_latencies(lab.kafka_bootstrap, sink, BACKLOG_ROWS, timeout_s=90)
    assert len(backlog) == BACKLOG_ROWS
    # Live rows: sent while the query runs, paced so they do not queue.
    produce_paced(lab.kafka_bootstrap, source, LIVE_ROWS, rate=20, first_id=BACKLOG_ROWS)
    rows = read_latencies(lab.kafka_bootstrap, sink, BACKLOG_ROWS + LIVE_ROWS, timeout_s=60)
    assert len(rows) == BACKLOG_ROWS + LIVE_ROWS
    live = [r for r in rows if r["source_append_ms"] > max(b["source_append_ms"] for b in backlog)]
    assert len(live) == LIVE_ROWS

    for r in rows:
        # Every stage of the path is measurable and ordered in time.
        # Spark's executor clock, read per row by reflect(), falls between the two broker append times: the row
        # is read after its source append and its output is ready before its sink append.
        assert r["source_queuing_ms"] >= 0 and r["processing_ms"] >= 0 and r["sink_write_ms"] >= 0, r
    # The sink write is real time that e2e does not count.
    assert any(r["sink_write_ms"] > 0 for r in rows), rows
    # A backlog inflates queuing: rows that waited for the query to start queued far longer than live rows.
    backlog_queuing = statistics.median(r["source_queuing_ms"] for r in backlog)
    live_queuing = statistics.median(r["source_queuing_ms"] for r in live)
    assert backlog_queuing > 5 * max(live_queuing, 1), (backlog_queuing, live_queuing)

    wait_for_first_batch(query, timeout_s=90)
    assert latency_keys_in_progress(query) == set()
    progress = json.loads(query.recentProgress[-1].json)
    # What OSS does report per batch: durations of the batch's phases and offsets, not per-row latencies.
    assert {"durationMs", "sources", "sink", "batchDuration"} <= set(progress), sorted(progress)
    assert not set(DATABRICKS_LATENCY_KEYS) & set(progress["durationMs"])


def test_current_timestamp_is_fixed_for_the_whole_batch(spark, lab, kafka_topic, checkpoint, stop_after):
    source = kafka_topic(partitions=1, configs=LOG_APPEND_TIME)
    sink = kafka_topic(partitions=1, configs=LOG_APPEND_TIME)
    query = stop_after(start_stamped_query(spark, lab.kafka_bootstrap, source, sink, checkpoint, "5 seconds"))
    # One row first, so the query is surely reading; then four rows about 330 ms apart, which span less than one
    # real-time batch (5 s): at most two batches, so at least two of them share a batch.
    produce_paced(lab.kafka_bootstrap, source, 1, rate=1)
    first = read_latencies(lab.kafka_bootstrap, sink, 1, timeout_s=90)
    assert len(first) == 1, query.exception()
    produce_paced(lab.kafka_bootstrap, source, 4, rate=3, first_id=1)
    rows = read_latencies(lab.kafka_bootstrap, sink, 5, timeout_s=30)
    assert len(rows) == 5
    by_batch: dict[int, list[dict]] = {}
    for r in rows:
        by_batch.setdefault(r["batch_ts_ms"], []).append(r)
    # Rows read at different times share one current_timestamp() value when they fall in the same batch...
    shared = [group for group in by_batch.values() if len(group) > 1]
    assert shared, by_batch
    for group in shared:
        assert max(r["read_ms"] for r in group) - min(r["read_ms"] for r in group) >= 300, group
    # ...fixed when the batch was planned, before these rows even reached Kafka (a row appended just as the
    # previous batch ended may be read by the next one, hence "all but one").
    assert sum(r["batch_ts_ms"] < r["source_append_ms"] for r in rows) >= len(rows) - 1, rows

"""What one real-time run of the batch duration sweep records about its batch boundaries, gathered in the child process
while the query still runs: progress batches, the Spark UI's job timings, and the records out with their timestamps.
"""

import contextlib

from rtm_lab.benchmarks import boundaries, spark_ui
from rtm_lab.waiting import WaitTimeout, wait_until

# With async progress tracking (on by default for stateless real-time queries in 4.3) a batch's progress is reported
# after its commit is written, a little after its tasks end: wait this long for it before leaving the batch out.
PROGRESS_WAIT_S = 10.0


def _progress_batches(query) -> list[boundaries.Batch]:
    return [boundaries.Batch.from_progress(p) for p in query.recentProgress if p.get("durationMs")]


def observe(spark, query, reader, interval: str, warmup_ids: int) -> dict:
    """The run's boundaries (stall, overrun, breakdown), its latency timeline and CDF. Call before the query stops."""
    jobs, ui_error = spark_ui.try_batch_jobs(spark)
    ended = {batch_id for batch_id, job in jobs.items() if job["tasks_end"] is not None}
    with contextlib.suppress(WaitTimeout):
        wait_until(
            lambda: ended <= {b.batch_id for b in _progress_batches(query)},
            PROGRESS_WAIT_S,
            "progress of the finished batches",
            interval_s=0.2,
        )
    batches = _progress_batches(query)
    records = [(event_id, ms, ts) for (event_id, ms), ts in zip(reader.samples, reader.out_ts_ms, strict=False)]
    measured = [(ms, ts) for event_id, ms, ts in records if event_id >= 0]
    steady = [(ms, ts) for event_id, ms, ts in records if event_id >= warmup_ids]
    steady_from = min((ts for _, ts in steady), default=float("inf"))
    every_ms = boundaries.interval_ms(interval)
    analysis = boundaries.analyse([ts for _, ts in measured], batches, every_ms, steady_from, jobs)
    t0 = steady_from if steady else 0
    anchors = []
    for batch in batches:
        at = jobs.get(batch.batch_id, {}).get("tasks_end") or batch.end_ms
        if at is not None:
            anchors.append(round((at - t0) / 1000, 3))
    return {
        "rtm_interval": interval,
        "interval_ms": every_ms,
        **{k: v for k, v in analysis.items() if k != "boundaries"},
        "boundaries": analysis["boundaries"],
        "batch_ends_s": anchors,  # every batch end the run saw, seconds after the first steady record out
        "timeline": boundaries.timeline([ts for _, ts in steady], [ms for ms, _ in steady], t0),
        "cdf_ms": boundaries.cdf([ms for ms, _ in steady]),
        "progress": [{"batch": b.batch_id, "start_ms": b.start_ms, "duration_ms": b.duration_ms} for b in batches],
        # The state stores' commit time per batch (Spark sums it over the tasks, which commit in parallel).
        "state_commit_ms": {
            str(p["batchId"]): sum(op.get("commitTimeMs", 0) for op in p["stateOperators"])
            for p in query.recentProgress
            if p.get("stateOperators")
        },
        "ui_jobs": {str(k): v for k, v in sorted(jobs.items())},
        "ui_error": ui_error,
    }

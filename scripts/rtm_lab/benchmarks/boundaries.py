"""Batch boundaries in a real-time query: the stall in records out at each one, and where its time goes.

Pure arithmetic on timestamps (epoch ms, all from clocks of the one machine: the Kafka broker's LogAppendTime for
records out, the driver's clock for progress and the Spark UI), so it is unit-tested without Spark.

- A *boundary* is the end of batch k and the start of batch k + 1. Real-time tasks read for the whole interval, then
  stop; the batch commits and the next batch's tasks start. Records arriving meanwhile wait.
- The *stall* at a boundary is the longest gap between consecutive records out whose start lies in a window around
  the boundary, minus the normal (median) gap between records out at that rate.
- The *overrun* of a batch is its progress `triggerExecution` minus the batch duration (Spark's own figure; batch 0 also
  holds the query's start-up, so it is left out).
- *Where it goes*: the stall's gap cut at the moments Spark reports, in the order they happen on the critical path:
  last record out -> batch k's tasks end (stage completion) -> batch k ends (progress) -> batch k + 1 starts
  (progress) -> its job is submitted -> its first task launches (UI) -> first record out. A moment that is not known
  (no UI, or no progress yet for batch k + 1) merges its two neighbouring segments.
"""

import datetime as dt
import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from rtm_lab.intervals import interval_ms  # noqa: F401  (re-exported: the benchmarks read intervals through here)

# A gap must start this close to the boundary's anchor (tasks end, else the batch's end less its log writes, which
# follow the tasks: tasks_end_from_progress) to be the boundary's stall.
WINDOW_BEFORE_MS = 2000
WINDOW_AFTER_MS = 1000


# The path from the last record out before a boundary to the first record after it.
MOMENTS = ("last_out", "tasks_end", "batch_end", "next_start", "next_job", "next_launch", "first_out")
SEGMENTS = {
    ("last_out", "tasks_end"): "tasks finish",
    ("tasks_end", "batch_end"): "batch end (offset and commit logs when synchronous)",
    ("batch_end", "next_start"): "progress report, next trigger",
    ("next_start", "next_job"): "next batch planning (latestOffset, queryPlanning)",
    ("next_job", "next_launch"): "task launch",
    ("next_launch", "first_out"): "first poll to first record out",
}


def epoch_ms(stamp: str | None) -> int | None:
    """Epoch ms of a progress timestamp ("...T03:11:51.610Z") or a Spark UI date ("...T03:12:05.496GMT")."""
    if not stamp:
        return None
    text = stamp.replace("GMT", "+00:00").replace("Z", "+00:00")
    return int(dt.datetime.fromisoformat(text).timestamp() * 1000)


@dataclass
class Batch:
    batch_id: int
    start_ms: int
    duration_ms: dict = field(default_factory=dict)

    @property
    def end_ms(self) -> int | None:
        took = self.duration_ms.get("triggerExecution")
        return None if took is None else self.start_ms + took

    @classmethod
    def from_progress(cls, progress: dict) -> "Batch":
        start_ms = epoch_ms(progress["timestamp"])
        assert start_ms is not None  # every progress event has a timestamp
        return cls(int(progress["batchId"]), start_ms, dict(progress.get("durationMs") or {}))


def tasks_end_from_progress(batch: Batch) -> int | None:
    """When batch's tasks ended, from progress alone: its end less the two log writes that follow the tasks in
    real-time mode, the offset log's (`walCommit`: a real-time batch's end offsets are known only when its tasks end)
    and the commit log's (`commitOffsets`). Both are near 0 when progress tracking is asynchronous; on a slow store
    they take seconds, so the batch's end alone would place the boundary after its stall began."""
    end = batch.end_ms
    if end is None:
        return None
    return end - int(batch.duration_ms.get("walCommit", 0)) - int(batch.duration_ms.get("commitOffsets", 0))


def normal_gap_ms(out_ts: Sequence[int]) -> float | None:
    """The median gap between consecutive records out (sorted broker timestamps)."""
    if len(out_ts) < 2:
        return None
    return float(statistics.median(b - a for a, b in itertools.pairwise(out_ts)))


def longest_gap(out_ts: Sequence[int], lo: float, hi: float) -> tuple[int, int] | None:
    """(last record before, first record after) of the longest gap whose start lies in [lo, hi]; `out_ts` sorted."""
    best = None
    for a, b in itertools.pairwise(out_ts):
        if a < lo:
            continue
        if a > hi:
            break
        if best is None or b - a > best[1] - best[0]:
            best = (a, b)
    return best


def breakdown(moments: dict[str, int | None]) -> list[dict]:
    """Consecutive segments between the known moments, in path order; a missing moment merges its neighbours."""
    known = {name: ms for name in MOMENTS if (ms := moments.get(name)) is not None}
    segments = []
    for start, end in itertools.pairwise(known):
        names = MOMENTS[MOMENTS.index(start) : MOMENTS.index(end) + 1]
        label = " + ".join(SEGMENTS[pair] for pair in itertools.pairwise(names))
        segments.append({"from": start, "to": end, "what": label, "ms": known[end] - known[start]})
    return segments


def overruns_ms(batches: Sequence[Batch], interval: float) -> list[float]:
    """triggerExecution minus the batch duration for every finished batch but the first."""
    return [b.duration_ms["triggerExecution"] - interval for b in batches if b.batch_id >= 1 and b.end_ms]


def analyse(
    out_ts: Sequence[int],
    batches: Sequence[Batch],
    interval: float,
    steady_from_ms: float,
    jobs: dict[int, dict] | None = None,
) -> dict:
    """Boundaries inside [steady_from_ms, last record out], each with its stall and breakdown, plus the run's figures.

    `out_ts` are the broker timestamps of the records out (any order); `jobs` maps a batch id to what the Spark UI
    said of it: `submitted`, `first_launch`, `tasks_end` (epoch ms, any may be None).
    """
    out_ts = sorted(out_ts)
    jobs = jobs or {}
    by_id = {b.batch_id: b for b in batches}
    normal = normal_gap_ms([t for t in out_ts if t >= steady_from_ms])
    steady_to = out_ts[-1] if out_ts else 0
    result: dict = {"normal_gap_ms": normal, "boundaries": []}
    for batch in sorted(batches, key=lambda b: b.batch_id):
        tasks_end = jobs.get(batch.batch_id, {}).get("tasks_end")
        anchor = tasks_end if tasks_end is not None else tasks_end_from_progress(batch)
        if anchor is None or not steady_from_ms + WINDOW_BEFORE_MS <= anchor <= steady_to - WINDOW_AFTER_MS:
            continue  # records must flow on both sides of a boundary for its stall to mean anything
        gap = longest_gap(out_ts, anchor - WINDOW_BEFORE_MS, anchor + WINDOW_AFTER_MS)
        if gap is None:
            continue
        following, job = by_id.get(batch.batch_id + 1), jobs.get(batch.batch_id + 1, {})
        moments = {
            "last_out": gap[0],
            "tasks_end": tasks_end,
            "batch_end": batch.end_ms,
            "next_start": following.start_ms if following else None,
            "next_job": job.get("submitted"),
            "next_launch": job.get("first_launch"),
            "first_out": gap[1],
        }
        result["boundaries"].append(
            {
                "batch": batch.batch_id,
                "at_ms": anchor,
                "gap_ms": gap[1] - gap[0],
                "stall_ms": gap[1] - gap[0] - (normal or 0.0),
                "overrun_ms": batch.duration_ms["triggerExecution"] - interval if batch.batch_id >= 1 else None,
                "duration_ms": batch.duration_ms,
                "next_duration_ms": following.duration_ms if following else None,
                "segments": breakdown(moments),
                "moments": moments,  # epoch ms: the storage accounting finds the requests inside the stall with them
            }
        )
    stalls = [b["stall_ms"] for b in result["boundaries"]]
    overruns = overruns_ms(batches, interval)
    result.update(
        boundaries_crossed=len(stalls),
        stall_median_ms=statistics.median(stalls) if stalls else None,
        stall_max_ms=max(stalls) if stalls else None,
        overrun_median_ms=statistics.median(overruns) if overruns else None,
        overruns_ms=overruns,
    )
    return result


def segment_medians(boundaries: Sequence[dict]) -> list[dict]:
    """Per segment (by what it covers), the median, min and max over the given boundaries, in path order."""
    values: dict[tuple[str, str, str], list[float]] = {}
    for boundary in boundaries:
        for seg in boundary["segments"]:
            values.setdefault((seg["from"], seg["to"], seg["what"]), []).append(seg["ms"])
    order = {name: i for i, name in enumerate(MOMENTS)}
    return [
        {
            "from": a,
            "to": b,
            "what": what,
            "n": len(v),
            "median_ms": statistics.median(v),
            "min_ms": min(v),
            "max_ms": max(v),
        }
        for (a, b, what), v in sorted(values.items(), key=lambda kv: (order[kv[0][0]], order[kv[0][1]]))
    ]


def timeline(out_ts: Sequence[int], latencies: Sequence[float], t0: float, max_points: int = 2000) -> dict:
    """Latency over time in buckets (at least 100 ms, at most `max_points` of them): seconds since t0, p50, max."""
    if not out_ts:
        return {"bucket_s": None, "t_s": [], "p50_ms": [], "max_ms": []}
    span = (max(out_ts) - t0) / 1000
    width = max(0.1, math.ceil(span / max_points * 10) / 10)
    buckets: dict[int, list[float]] = {}
    for ts, ms in zip(out_ts, latencies, strict=True):
        buckets.setdefault(int((ts - t0) / 1000 / width), []).append(ms)
    keys = sorted(buckets)
    return {
        "bucket_s": width,
        "t_s": [round(k * width, 3) for k in keys],
        "p50_ms": [round(statistics.median(buckets[k]), 1) for k in keys],
        "max_ms": [round(max(buckets[k]), 1) for k in keys],
    }


CDF_PERCENTILES = (
    [*range(100)]
    + [round(99 + i / 10, 1) for i in range(1, 10)]
    + [round(99.9 + i / 100, 2) for i in range(1, 10)]
    + [100]
)


def cdf(samples: Sequence[float]) -> list[list[float]]:
    """[percentile, latency ms] pairs, finer in the tail (to 99.99) so p99.9 and the max show on a plot."""
    import numpy as np

    if not len(samples):
        return []
    values = np.percentile(np.asarray(samples, dtype=float), CDF_PERCENTILES)
    return [[p, round(float(v), 2)] for p, v in zip(CDF_PERCENTILES, values, strict=True)]

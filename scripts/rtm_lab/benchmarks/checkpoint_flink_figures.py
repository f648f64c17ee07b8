"""The figures of the Flink checkpoint-storage runs: pure arithmetic on what one run recorded, so it is tested without
Flink (rtm_lab.benchmarks.checkpoint_flink runs them).

What a run records: each output record's latency and broker timestamp (rtm_lab.topics.SinkLatencyReader), Flink's
completed checkpoints from its REST API (rtm_lab.engines.flink_rest.checkpoint_history), and on the object store the
delay proxy's log of the run's requests. From those, per run:

- p50, p99 and max latency of the steady records (the warm-up's left out);
- the same split by whether the record came in while a checkpoint ran (its trigger to its last acknowledgement) or
  between checkpoints: does a checkpoint slow the records that pass during it?
- the longest gap in records out during each checkpoint, beside the longest gap between two checkpoints: does a
  checkpoint stall the output, as a real-time batch boundary does?
- per checkpoint, the requests of its cycle (its trigger to the next one's) by kind, classified as for Spark
  (rtm_lab.s3_proxy), and the longest chain of them that ran one after another within the checkpoint.
"""

import bisect
import statistics
from collections.abc import Sequence

from rtm_lab import percentiles
from rtm_lab.benchmarks import checkpoint_requests


def _summary(values: Sequence[float]) -> dict:
    found = percentiles.summarize(list(values))
    return {"n": found["n"], **{k: found.get(k) for k in ("p50_ms", "p99_ms", "max_ms")}}


def longest_gap(out_ms: Sequence[float], lo: float, hi: float) -> float | None:
    """The longest time without a record out (between two consecutive records) that overlaps [lo, hi]; `out_ms` is
    sorted. None when no gap overlaps it."""
    first = max(bisect.bisect_left(out_ms, lo) - 1, 0)
    last = min(bisect.bisect_right(out_ms, hi), len(out_ms) - 1)
    gaps = [out_ms[i + 1] - out_ms[i] for i in range(first, last)]
    return max(gaps, default=None)


def counted(checkpoints: Sequence[dict], measured_from_ms: float, until_ms: float) -> list[dict]:
    """The checkpoints that ran wholly inside the measured window (after the warm-up, before production ended)."""
    return [c for c in checkpoints if c["trigger_ms"] >= measured_from_ms and c["ack_ms"] <= until_ms]


def _cycles(requests: Sequence[dict], ran: Sequence[dict], every: Sequence[dict]) -> list[list[dict]]:
    """Per checkpoint of `ran`, the requests that started from its trigger to the next checkpoint's among `every`
    (after the last one: to the end of the log)."""
    triggers = sorted(c["trigger_ms"] for c in every)
    found = []
    for c in ran:
        later = [t for t in triggers if t > c["trigger_ms"]]
        hi = later[0] if later else float("inf")
        found.append([r for r in requests if c["trigger_ms"] <= r["start_ms"] < hi])
    return found


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def run_figures(
    samples: Sequence[tuple[int, float]],
    out_ms: Sequence[float],
    checkpoints: Sequence[dict],
    requests: Sequence[dict] | None,
    warmup_ids: int,
    window_ms: tuple[float, float],
) -> dict:
    """One run's figures (see the module's text). `samples` are (event id, latency ms) in the order read, `out_ms`
    each one's broker timestamp out; `window_ms` the measured window (the warm-up's end, the end of production);
    `requests` the proxy log's entries of the run (None on local disk)."""
    steady = [(i, ms, out) for (i, ms), out in zip(samples, out_ms, strict=True) if i >= warmup_ids]
    ran = counted(checkpoints, *window_ms)
    spans = [(c["trigger_ms"], c["ack_ms"]) for c in ran]

    def during(source_ms: float) -> bool:
        return any(lo <= source_ms <= hi for lo, hi in spans)

    inside = [ms for _, ms, out in steady if during(out - ms)]
    outside = [ms for _, ms, out in steady if not during(out - ms)]
    ordered = sorted(out_ms)
    per_checkpoint = []
    cycles = _cycles(requests, ran, checkpoints) if requests is not None else [None] * len(ran)
    for i, (c, cycle) in enumerate(zip(ran, cycles, strict=True)):
        entry = {**c, "longest_gap_ms": longest_gap(ordered, c["trigger_ms"], c["ack_ms"])}
        nxt = ran[i + 1]["trigger_ms"] if i + 1 < len(ran) else window_ms[1]
        entry["longest_gap_after_ms"] = longest_gap(ordered, c["ack_ms"], nxt) if nxt > c["ack_ms"] else None
        if cycle is not None:
            within = [r for r in cycle if r["start_ms"] < c["ack_ms"]]
            entry |= {
                "requests": len(cycle),
                "by_kind": checkpoint_requests.count_by(cycle, "kind"),
                "chain": len(checkpoint_requests.critical_chain(within)),
            }
        per_checkpoint.append(entry)
    return {
        **_summary([ms for _, ms, _ in steady]),
        "during_checkpoints": _summary(inside),
        "between_checkpoints": _summary(outside),
        "checkpoints_counted": len(ran),
        "checkpoints": per_checkpoint,
        "end_to_end_ms": _median([c["end_to_end_ms"] for c in ran]),
        "sync_ms": _median([c["sync_ms"] for c in ran]),
        "async_ms": _median([c["async_ms"] for c in ran]),
        "state_size": _median([c["state_size"] for c in ran]),
        "checkpointed_size": _median([c["checkpointed_size"] for c in ran]),
        "gap_during_ms": _median([c["longest_gap_ms"] for c in per_checkpoint]),
        "gap_between_ms": _median([c["longest_gap_after_ms"] for c in per_checkpoint]),
        "requests_per_checkpoint": None if requests is None else _median([c["requests"] for c in per_checkpoint]),
        "requests_by_kind": None
        if requests is None
        else {
            kind: _median([c["by_kind"].get(kind, 0) for c in per_checkpoint])
            for kind in sorted({k for c in per_checkpoint for k in c["by_kind"]})
        },
        "chain": None if requests is None else _median([c["chain"] for c in per_checkpoint]),
    }

"""Which storage requests a real-time query makes at each batch boundary, and how many of them wait on each other.

Pure arithmetic on the delay proxy's log (rtm_lab.s3_proxy: one entry per request, start and end in epoch ms) and on
what the boundary observer recorded (rtm_lab.benchmarks.boundary_observer), so it is unit-tested without Spark.

- A request belongs to the run whose checkpoint folder its key holds (each run checkpoints to a folder of its own).
- Its *area* is the checkpoint's subfolder: `offsets` (offset log), `commits` (commit log), `state` (state store
  files), anything else `metadata` (the query's metadata file, source metadata).
- Boundary k's *cycle* runs from WINDOW_BEFORE_MS before batch k's tasks ended (from the UI, else from progress) to
  the same point before batch k + 1's: every request of the run falls in one cycle, background ones included.
- Its *data path* is the requests that overlap the stall, from the last record out before the boundary to the first
  one after it: while they run, no record comes out.
- The *critical path* is the longest chain of data-path requests that ran one after another (none overlapping the
  next). Requests that overlap ran in parallel (state files of several tasks), so the chain is the number of request
  latencies the stall must contain: with a delay of d per request, stall >= chain x d.
"""

import statistics
from collections.abc import Iterable, Sequence

from rtm_lab.benchmarks.boundaries import WINDOW_BEFORE_MS, Batch, tasks_end_from_progress

AREAS = ("offsets", "commits", "state", "metadata")
AREA_NAMES = {"offsets": "offset log", "commits": "commit log", "state": "state store", "metadata": "metadata"}


def key_of(entry: dict) -> str:
    """The object key a request names (a LIST's prefix), without the bucket."""
    if entry.get("prefix") is not None and entry["kind"] == "LIST":
        return entry["prefix"]
    return entry["path"].lstrip("/").partition("/")[2]


def area_of(key: str, folder: str) -> str:
    """The checkpoint area of `key` under the run's checkpoint `folder` (a name unique to the run)."""
    rest = key.partition(folder)[2].lstrip("/")
    top = rest.partition("/")[0]
    return top if top in AREAS else "metadata"


def of_run(entries: Iterable[dict], folder: str) -> list[dict]:
    """The run's requests (those naming its checkpoint folder), each with its area, in start order."""
    return sorted(
        ({**e, "area": area_of(key_of(e), folder)} for e in entries if folder in key_of(e)),
        key=lambda e: e["start_ms"],
    )


def count_by(entries: Iterable[dict], field: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for entry in entries:
        counts[entry[field]] = counts.get(entry[field], 0) + 1
    return dict(sorted(counts.items()))


def critical_chain(entries: Sequence[dict]) -> list[dict]:
    """The longest chain of requests that did not overlap each other (greedy by earliest end, which is optimal for
    intervals); two requests that touch end to start count as one after the other."""
    chain: list[dict] = []
    for entry in sorted(entries, key=lambda e: e["end_ms"]):
        if not chain or entry["start_ms"] >= chain[-1]["end_ms"]:
            chain.append(entry)
    return chain


def _overlap_ms(entries: Iterable[dict], lo: float, hi: float) -> float:
    """How long, within [lo, hi], at least one of the requests was running (their union, clipped)."""
    spans = sorted((max(lo, e["start_ms"]), min(hi, e["end_ms"])) for e in entries)
    total, reach = 0.0, lo
    for start, end in spans:
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def cycles(requests: Sequence[dict], anchors: dict[int, float]) -> dict[int, list[dict]]:
    """Batch id -> the requests of its boundary's cycle (see the module's text); `anchors` maps a batch id to its end
    (epoch ms). Requests before the first cycle (the query's start) are left out; the last cycle runs to the end."""
    ends = sorted(anchors.items(), key=lambda kv: kv[1])
    found: dict[int, list[dict]] = {batch: [] for batch, _ in ends}
    for entry in requests:
        owner = None
        for batch, at in ends:
            if entry["start_ms"] >= at - WINDOW_BEFORE_MS:
                owner = batch
        if owner is not None:
            found[owner].append(entry)
    return found


def boundary_requests(cycle: Sequence[dict], last_out_ms: float, first_out_ms: float) -> dict:
    """One boundary's requests: all of its cycle by kind and by area, those on the data path, and its critical path."""
    on_path = [e for e in cycle if e["start_ms"] < first_out_ms and e["end_ms"] > last_out_ms]
    chain = critical_chain(on_path)
    return {
        "requests": len(cycle),
        "by_kind": count_by(cycle, "kind"),
        "by_area": {area: count_by([e for e in cycle if e["area"] == area], "kind") for area in AREAS},
        # Bytes the query sent to the store per area (request bodies as the proxy counted them, chunk framing
        # included): the state area's is the size of the state upload.
        "bytes_in_by_area": {area: sum(e.get("bytes_in") or 0 for e in cycle if e["area"] == area) for area in AREAS},
        "data_path": len(on_path),
        "data_path_by_kind": count_by(on_path, "kind"),
        "critical_path": len(chain),
        "critical_path_kinds": [f"{e['area']}:{e['kind']}" for e in chain],
        # Time within the stall during which a request of each area was running (areas can overlap each other).
        "stall_in_area_ms": {
            area: round(_overlap_ms([e for e in on_path if e["area"] == area], last_out_ms, first_out_ms), 1)
            for area in AREAS
        },
    }


def account(requests: Sequence[dict], observed: dict) -> dict:
    """Per boundary the observer analysed (it has a stall), its requests; and the run's medians over them.

    `observed` is a run's result with the boundary observer's fields: `boundaries` (each with `batch`, `at_ms` and
    `moments`) and `progress` (each batch's start and durations).
    """
    anchors: dict[int, float] = {}
    for p in observed.get("progress", []):
        end = tasks_end_from_progress(Batch(p["batch"], p["start_ms"], p["duration_ms"]))
        if end is not None:
            anchors[p["batch"]] = end
    for b in observed.get("boundaries", []):
        anchors[b["batch"]] = b["at_ms"]  # the tasks' end when the UI gave it: the observer's own anchor
    by_cycle = cycles(requests, anchors)
    per_boundary = []
    for b in observed.get("boundaries", []):
        moments = b["moments"]
        detail = boundary_requests(by_cycle.get(b["batch"], []), moments["last_out"], moments["first_out"])
        per_boundary.append({"batch": b["batch"], "stall_ms": b["stall_ms"], **detail})
    return {"per_boundary": per_boundary, **summary(per_boundary)}


def summary(per_boundary: Sequence[dict]) -> dict:
    """Medians over a run's boundaries: requests per boundary by kind and area, data path, critical path."""
    if not per_boundary:
        return {"requests_per_boundary": None, "critical_path_median": None}
    kinds = sorted({k for b in per_boundary for k in b["by_kind"]})
    return {
        "requests_per_boundary": statistics.median(b["requests"] for b in per_boundary),
        "requests_per_boundary_by_kind": {
            k: statistics.median(b["by_kind"].get(k, 0) for b in per_boundary) for k in kinds
        },
        "requests_per_boundary_by_area": {
            area: statistics.median(sum(b["by_area"][area].values()) for b in per_boundary) for area in AREAS
        },
        "data_path_median": statistics.median(b["data_path"] for b in per_boundary),
        "critical_path_median": statistics.median(b["critical_path"] for b in per_boundary),
    }


def stall_split(boundary: dict) -> dict[str, float | None]:
    """Where a boundary's stall went, from Spark's progress (driver-side phases) and, on the store, from the proxy.

    - planning: the next batch's `latestOffset` + `queryPlanning`;
    - offset log: this batch's `walCommit` (in real-time mode the offset log is written when the tasks end, since a
      batch's end offsets are known only then; near 0 when async progress tracking writes it off the query's thread);
    - commit log: this batch's `commitOffsets`;
    - state upload: the time within the stall during which a state-store request ran (store runs only; None on disk);
    - state commit: Spark's own `commitTimeMs` of the batch's state operators, summed over the tasks (which commit in
      parallel), on disk and on the store alike.
    """
    now, nxt = boundary.get("duration_ms") or {}, boundary.get("next_duration_ms") or {}
    planning = None if not nxt else nxt.get("latestOffset", 0) + nxt.get("queryPlanning", 0)
    state = boundary.get("stall_in_area_ms", {}).get("state")
    return {
        "planning_ms": planning,
        "offset_log_ms": now.get("walCommit"),
        "commit_log_ms": now.get("commitOffsets"),
        "state_upload_ms": state,
        "state_commit_ms": boundary.get("state_commit_ms"),
    }

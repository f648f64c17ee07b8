"""Per-batch job timings from the driver's monitoring REST API (`/api/v1`), for the batch duration sweep's boundaries.

The benchmark sessions keep the UI off (`rtm_lab.spark`); a sweep run turns it on, on a free port, only to ask when
each batch's job was submitted, when its first task launched and when its tasks ended. A streaming query's jobs carry
the description Spark sets per batch ("...\\nbatch = N"), which ties them to progress batch ids. Fields used (Spark
4.3 `status/api/v1/api.scala`): JobData `submissionTime`, `description`, `stageIds`; StageData `stageId`, `attemptId`,
`completionTime`; TaskData `launchTime` (from `stages/<id>/<attempt>/taskList`).
"""

import json
import re
import urllib.request

from rtm_lab.benchmarks.boundaries import epoch_ms

_BATCH = re.compile(r"\bbatch = (\d+)\s*$")
TIMEOUT_S = 10


def ui_conf() -> dict[str, str]:
    from rtm_lab.ports import free_port

    return {"spark.ui.enabled": "true", "spark.ui.port": str(free_port())}


def _get(base: str, path: str):
    with urllib.request.urlopen(f"{base}{path}", timeout=TIMEOUT_S) as response:
        return json.load(response)


def api_base(spark) -> str:
    sc = spark.sparkContext
    port = sc.getConf().get("spark.ui.port")
    return f"http://127.0.0.1:{port}/api/v1/applications/{sc.applicationId}"


def batch_jobs(base: str) -> dict[int, dict]:
    """{batch id: {"submitted", "first_launch", "last_launch", "tasks_end"}} (epoch ms; None when not yet known)."""
    stages = {(s["stageId"], s["attemptId"]): s for s in _get(base, "/stages")}
    seen: dict[int, dict[str, list]] = {}
    for job in _get(base, "/jobs"):
        match = _BATCH.search(job.get("description") or "")
        if not match:
            continue
        batch = seen.setdefault(int(match.group(1)), {"submitted": [], "launches": [], "ends": []})
        batch["submitted"].append(epoch_ms(job.get("submissionTime")))
        for (stage_id, attempt), stage in stages.items():
            if stage_id in job.get("stageIds", []):
                tasks = _get(base, f"/stages/{stage_id}/{attempt}/taskList?length=10000")
                batch["launches"] += [epoch_ms(t["launchTime"]) for t in tasks if t.get("launchTime")]
                batch["ends"].append(epoch_ms(stage.get("completionTime")))
    return {
        batch_id: {
            "submitted": min(filter(None, seen_["submitted"]), default=None),
            "first_launch": min(seen_["launches"], default=None),
            "last_launch": max(seen_["launches"], default=None),
            # The batch's tasks have ended only when every stage of it completed.
            "tasks_end": max(seen_["ends"]) if seen_["ends"] and None not in seen_["ends"] else None,
        }
        for batch_id, seen_ in seen.items()
    }


def try_batch_jobs(spark) -> tuple[dict[int, dict], str | None]:
    """The per-batch timings, or ({}, why not) when the UI does not answer: a missing figure, never a failed run."""
    try:
        return batch_jobs(api_base(spark)), None
    except (OSError, ValueError, KeyError) as exc:
        return {}, f"Spark UI REST API unavailable: {exc}"

"""What a running local Flink job really runs with, read from its MiniCluster's REST API.

A PyFlink program's MiniCluster serves Flink's REST API on the port it logs ("Rest endpoint listening at HOST:PORT";
give it `rest.port=0` so two programs never contend for 8081). From there: the checkpoint mode and state backend the
job runs with, the JVM's options and garbage collectors, each vertex's parallelism and maxParallelism, and each
subtask's records in and out (Flink's own count of what reached each task).
"""

import json
import re
import urllib.request
from pathlib import Path

LISTENING = re.compile(r"Rest endpoint listening at ([\w.\-]+):(\d+)")


def address(log_dir: Path) -> str | None:
    """The REST address a MiniCluster logged in `log_dir`, or None before it has."""
    for log in sorted(log_dir.glob("*.log")):
        found = LISTENING.findall(log.read_text(errors="replace"))
        if found:
            host, port = found[-1]
            return f"http://{host}:{port}"
    return None


def get(base: str, path: str, timeout_s: float = 10.0):
    with urllib.request.urlopen(base + path, timeout=timeout_s) as answer:
        return json.loads(answer.read())


def running_job(base: str) -> str | None:
    jobs = [job["id"] for job in get(base, "/jobs")["jobs"] if job["status"] == "RUNNING"]
    return jobs[0] if jobs else None


def gc_names(base: str) -> list[str]:
    """The garbage collectors in Flink's JVM metrics (the JobManager's, else the TaskManagers'; in a MiniCluster
    they are one JVM)."""
    prefix = "Status.JVM.GarbageCollector."
    managers = get(base, "/taskmanagers")["taskmanagers"]
    for source in ["/jobmanager/metrics", *(f"/taskmanagers/{tm['id']}/metrics" for tm in managers)]:
        ids = [m["id"] for m in get(base, source)]
        names = {i[len(prefix) :].rsplit(".", 1)[0].replace("_", " ") for i in ids if i.startswith(prefix)} - {"All"}
        if names:
            return sorted(names)
    return []


def subtask_records(base: str, job: str) -> list[dict]:
    """Per vertex: its name, parallelism, maxParallelism, and each subtask's records read and written."""
    vertices = []
    for vertex in get(base, f"/jobs/{job}")["vertices"]:
        detail = get(base, f"/jobs/{job}/vertices/{vertex['id']}")
        subtasks = sorted(detail.get("subtasks", []), key=lambda s: s["subtask"])
        vertices.append(
            {
                "name": vertex["name"],
                "parallelism": vertex["parallelism"],
                "max_parallelism": vertex.get("maxParallelism"),
                "read_records": [s["metrics"]["read-records"] for s in subtasks],
                "write_records": [s["metrics"]["write-records"] for s in subtasks],
            }
        )
    return vertices


def job_config(base: str, job: str) -> dict[str, str]:
    """The job's configuration as the JobManager holds it (options set on the program's environment)."""
    entries = get(base, f"/jobs/{job}/jobmanager/config")
    return {entry["key"]: entry["value"] for entry in entries}


def readback(base: str, job: str) -> dict:
    checkpoints = get(base, f"/jobs/{job}/checkpoints/config")
    environment = get(base, "/jobmanager/environment")
    config = job_config(base, job)
    return {
        "checkpoint_mode": checkpoints.get("mode"),
        "state_backend": checkpoints.get("state_backend"),
        "checkpoint_storage": checkpoints.get("checkpoint_storage"),
        "checkpoint_interval_ms": checkpoints.get("interval"),
        "state_ttl": config.get("table.exec.state.ttl", "not set (Flink's default: 0 ms, state kept for ever)"),
        "buffer_timeout": config.get("execution.buffer-timeout.interval", "not set (Flink's default: 100 ms)"),
        "java": environment.get("jvm", {}).get("version"),
        "jvm_args": environment.get("jvm", {}).get("options", []),
        "gc": gc_names(base),
    }


def checkpoint_history(base: str, job: str) -> list[dict]:
    """The job's completed checkpoints, oldest first: trigger time and last acknowledgement (epoch ms), end-to-end
    duration, state size and what this checkpoint uploaded (`checkpointed_size`: less than the state with incremental
    checkpoints), and the slowest subtask's synchronous and asynchronous parts (ms). The REST API keeps the last
    `web.checkpoints.history` of them (10 by default)."""
    found = []
    history = get(base, f"/jobs/{job}/checkpoints").get("history", [])
    for entry in sorted(history, key=lambda e: e["id"]):
        if entry.get("status") != "COMPLETED" or entry.get("is_savepoint"):
            continue
        sync, asynchronous = [], []
        # The history leaves each checkpoint's tasks out; its details name them.
        tasks = get(base, f"/jobs/{job}/checkpoints/details/{entry['id']}").get("tasks", {})
        for vertex in tasks:
            detail = get(base, f"/jobs/{job}/checkpoints/details/{entry['id']}/subtasks/{vertex}")
            for subtask in detail.get("subtasks", []):
                parts = subtask.get("checkpoint") or {}
                sync.append(parts.get("sync", 0))
                asynchronous.append(parts.get("async", 0))
        found.append(
            {
                "id": entry["id"],
                "trigger_ms": entry["trigger_timestamp"],
                "ack_ms": entry["latest_ack_timestamp"],
                "end_to_end_ms": entry["end_to_end_duration"],
                "state_size": entry.get("state_size"),
                "checkpointed_size": entry.get("checkpointed_size"),
                "sync_ms": max(sync, default=None),
                "async_ms": max(asynchronous, default=None),
            }
        )
    return found

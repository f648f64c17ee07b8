"""Recovery on both engines (`bench.py engines --recovery`): each engine SIGKILLed mid-run, then started again from
its checkpoint, with the same harness as the latency runs (rtm_lab.benchmarks.engine_run).

Both engines checkpoint every CHECKPOINT_S seconds here (real-time mode at the end of each batch, so a 10-second
batch duration; Flink on its checkpoint interval), not at the latency runs' 5 minutes: a kill inside the first 5 minutes
would replay everything on both and show nothing but the replay of the whole run. The generator sends at RATE for
SECONDS; KILL_AT_S seconds in, the engine's whole process group gets SIGKILL (no shutdown hook, no last commit) and
the same program starts at once on the same checkpoint (Spark: the same checkpoint folder; Flink: the last completed
checkpoint, given as `execution.state-recovery.path`). Measured from the topics afterwards, on the broker's clock:

- resume: the restart until the first output record appended after it; downtime: the same from the kill;
- back to real time: the restart until the first output whose latency is under REAL_TIME_MS again;
- replayed: outputs written again (an id's output beyond its inputs; for the count, an update a user already had);
- lost: inputs with no output (the count: users whose last count is not their number of events).
"""

import json
import os
import re
import shutil
import signal
import threading
import time
from collections import defaultdict
from pathlib import Path

import psutil
from kafka import KafkaConsumer

from rtm_lab import loadgen, processes, topics
from rtm_lab.benchmarks import engine_output
from rtm_lab.benchmarks.engine_run import (
    LOG_APPEND_TIME,
    PARTITIONS,
    PRIMING,
    PROFILES,
    QUIET_S,
    end_offsets,
    engine_event,
    kept,
    priming_event,
    read_back,
    start_engine,
    wait_until_primed,
)
from rtm_lab.errors import LabError
from rtm_lab.topics import Record
from rtm_lab.waiting import wait_until

PIPELINES = ("transform", "count")  # the pipelines 1 and 2: one stateless, one stateful
CHECKPOINT_S = 10
RATE = 1000
SECONDS = 60
KILL_AT_S = 25  # 2.5 checkpoints into production: half a checkpoint period since the last one on both
REAL_TIME_MS = 100
DRAIN_S = 120.0


def latest_flink_checkpoint(folder: Path) -> Path | None:
    """The newest completed checkpoint under a Flink run's checkpoint folder (JOB/chk-N with its _metadata)."""
    done = [p.parent for p in folder.glob("*/chk-*/_metadata")]
    return max(done, key=lambda p: int(p.name.split("-")[1]), default=None)


def spark_commits(checkpoint: Path) -> int:
    """Batches the query committed: the numbered files of its checkpoint's commits folder."""
    commits = checkpoint / "commits"
    return sum(1 for p in commits.iterdir() if re.fullmatch(r"\d+", p.name)) if commits.exists() else 0


def kill_group(proc: processes.Started) -> None:
    """SIGKILL the engine's process group (the Python program and its JVM), and wait until all of it is gone."""
    members = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    os.killpg(proc.pid, signal.SIGKILL)
    _, alive = psutil.wait_procs(members, timeout=30)
    if alive:
        raise LabError(f"processes {[p.pid for p in alive]} outlived SIGKILL")


def replayed_counts(sink: list[Record]) -> int:
    """Count updates a user had already received: each is an update written again after the restart."""
    seen: dict[str, set[int]] = defaultdict(set)
    again = 0
    for record in sorted(sink, key=lambda r: (r.partition, r.offset)):
        value = json.loads(record.value)
        if value["count"] in seen[value["user"]]:
            again += 1
        seen[value["user"]].add(value["count"])
    return again


def run(engine: str, pipeline: str, bootstrap: str, say=print) -> dict:
    """Kill one engine mid-run and start it again; return what the restart cost (see the module docstring)."""
    conf = dict(PROFILES["tuned"][engine])
    spark_args: tuple[str, ...] = ()
    if engine == "flink":
        conf["execution.checkpointing.interval"] = f"{CHECKPOINT_S} s"
    else:
        spark_args = ("--batch-duration", f"{CHECKPOINT_S} seconds")
    source = topics.create_topic(bootstrap, topics.unique_name(f"rec-{pipeline}-in"), PARTITIONS, LOG_APPEND_TIME)
    sink = topics.create_topic(
        bootstrap, topics.unique_name(f"rec-{engine}-{pipeline}-out"), PARTITIONS, LOG_APPEND_TIME
    )
    procs: list[processes.Started] = []
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    stop = threading.Event()
    try:
        topics.produce_json(bootstrap, source, [priming_event(i) for i in range(PRIMING)])
        procs.append(start_engine(engine, pipeline, source, sink, conf, bootstrap, spark_args))
        wait_until_primed(procs[0], bootstrap, pipeline, sink, timeout_s=300.0)
        say(f"{engine} primed; {RATE} events/s for {SECONDS} s, SIGKILL at {KILL_AT_S} s")
        stats: list[loadgen.LoadStats] = []
        producer = threading.Thread(
            target=lambda: stats.append(
                loadgen.produce_at_rate(bootstrap, source, RATE, SECONDS, event=engine_event, stop=stop)
            ),
            daemon=True,
        )
        produce_from = time.monotonic()
        producer.start()
        time.sleep(max(0.0, produce_from + KILL_AT_S - time.monotonic()))
        if engine == "flink":
            checkpoint = latest_flink_checkpoint(procs[0].folder / "checkpoints")
            checkpoints_before = int(checkpoint.name.split("-")[1]) if checkpoint else 0
        else:
            checkpoints_before = spark_commits(Path(procs[0].marker))
        kill_ms = time.time() * 1000
        kill_group(procs[0])
        restart_conf = dict(conf)
        if engine == "flink":
            # Read after the kill: a checkpoint completed in the last moments counts.
            checkpoint = latest_flink_checkpoint(procs[0].folder / "checkpoints")
            if checkpoint is not None:
                restart_conf["execution.state-recovery.path"] = checkpoint.resolve().as_uri()
                checkpoints_before = int(checkpoint.name.split("-")[1])
        restart_ms = time.time() * 1000
        say(f"  killed at t={KILL_AT_S} s after {checkpoints_before} checkpoints; starting again")
        spark_checkpoint = procs[0].marker if engine == "spark" else None
        procs.append(
            start_engine(engine, pipeline, source, sink, restart_conf, bootstrap, spark_args, spark_checkpoint)
        )
        producer.join()
        sent = stats[0].sent
        # Drained: production over, and the sink quiet for QUIET_S (replays make the output count unknowable ahead).
        last_total, last_change = -1, time.monotonic()

        def quiet() -> bool:
            nonlocal last_total, last_change
            if not procs[-1].running():
                raise LabError(
                    f"the restarted {engine} exited; the end of {procs[-1].log}:\n{processes.tail(procs[-1].log)}"
                )
            total = end_offsets(consumer, sink)
            if total != last_total:
                last_total, last_change = total, time.monotonic()
            return time.monotonic() - last_change >= QUIET_S

        wait_until(quiet, DRAIN_S, "the sink to go quiet after the restart", interval_s=0.25)
        procs[-1].stop()
        source_records = read_back(bootstrap, source, PRIMING + sent)
        sink_records = read_back(bootstrap, sink, last_total)
        return measure(engine, pipeline, source_records, sink_records, sent, kill_ms, restart_ms, checkpoints_before)
    finally:
        stop.set()
        consumer.close()
        for proc in procs:
            if proc.running():
                proc.stop()
            shutil.rmtree(proc.folder, ignore_errors=True)
        for name in (source, sink):
            topics.delete_topic(bootstrap, name)


def measure(engine, pipeline, source, sink, sent, kill_ms, restart_ms, checkpoints_before) -> dict:
    measured = engine_output.measure(pipeline, source, sink, lambda v: v["id"], kept)
    source_ts = {json.loads(r.value)["id"]: r.timestamp_ms for r in source}
    after = sorted((source_ts[seq] + ms, ms) for seq, ms in measured.latencies if source_ts[seq] + ms >= restart_ms)
    first_after = min((r.timestamp_ms for r in sink if r.timestamp_ms >= restart_ms), default=None)
    back = next((out for out, ms in after if ms < REAL_TIME_MS), None)
    return {
        "engine": engine,
        "pipeline": pipeline,
        "rate": RATE,
        "checkpoint_interval_s": CHECKPOINT_S,
        "kill_at_s": KILL_AT_S,
        "checkpoints_before_kill": checkpoints_before,
        "sent": sent,
        "expected": measured.expected,
        "delivered": measured.delivered,
        "lost": measured.missing,
        "replayed": replayed_counts(sink) if pipeline == "count" else measured.duplicates,
        "restart_gap_s": round((restart_ms - kill_ms) / 1000, 2),
        "resume_s": None if first_after is None else round((first_after - restart_ms) / 1000, 2),
        "downtime_s": None if first_after is None else round((first_after - kill_ms) / 1000, 2),
        "back_to_real_time_s": None if back is None else round((back - restart_ms) / 1000, 2),
        "max_latency_after_restart_ms": max((ms for _, ms in after), default=None),
        "digest": measured.digest,
        "wrong": measured.wrong[:5],
    }

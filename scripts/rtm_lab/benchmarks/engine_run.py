"""One run of `bench.py engines`: one engine, one pipeline, one rate, one settings profile, measured end to end.

The harness is the same for both engines: a fresh source and sink topic (2 partitions, LogAppendTime), ten priming
events before the engine starts (measurement begins once their outputs are out, so start-up is not timed), then the
generator at the asked rate for warm-up + measured seconds, in this process, never in the engine's. The engine is a
process tree of its own (rtm_lab.benchmarks.engine_spark, or the PyFlink twin in the Flink venv), sampled every half
second for CPU time and resident memory. After the last output the engine is stopped and both topics are read back
(rtm_lab.benchmarks.engine_output pairs outputs with inputs).

The events are a pure function of their sequence number, so every run at one rate and duration gets the same input
and the two engines' output digests must match.
"""

import contextlib
import json
import os
import shutil
import sys
import threading
import time
import uuid

import psutil
from kafka import KafkaConsumer, TopicPartition

from rtm_lab import loadgen, percentiles, processes, topics
from rtm_lab.benchmarks import engine_output
from rtm_lab.engines import flink, output
from rtm_lab.errors import LabError
from rtm_lab.paths import PROJECT_ROOT, make_private_dir, state_dir
from rtm_lab.waiting import WaitTimeout, wait_until
from snippets.guides.rtm_or_flink_spark import TIERS

ENGINES = ("spark", "flink")
PIPELINES = ("transform", "count", "enrich", "dedup")
PARTITIONS = 2  # the topics' partitions = Flink's parallelism = the RTM query's shuffle partitions
LOG_APPEND_TIME = {"message.timestamp.type": "LogAppendTime"}
FLINK_PROGRAM = PROJECT_ROOT / "snippets" / "guides" / "rtm_or_flink_flink.py"
# Each engine tuned for latency (the same 5 ms on both sides of the trade: how long a buffer waits to fill before it
# is sent on), and at its defaults (Flink's 100 ms buffer timeout, Spark's 50 ms streaming shuffle wait).
PROFILES: dict[str, dict[str, dict[str, str]]] = {
    "tuned": {
        "spark": {"spark.shuffle.streaming.networkBufferMaxWaitTimeMs": "5"},
        "flink": {"execution.buffer-timeout.interval": "5 ms"},
    },
    "default": {"spark": {}, "flink": {}},
}
PRIMING = 10
USERS = 4  # user0 .. user3; the enrichment table has tiers for three of them
EPOCH_MS = 1_767_225_600_000  # 2026-01-01: created_ms is a pure function of the id, not a clock
TIERED = {user for user, _ in TIERS}
SAMPLE_EVERY_S = 0.5
QUIET_S = 3.0  # the running count's sink is complete once its offsets stop moving for this long
DRAIN_S = 90.0
TAIL_S = 10.0


def _p98_with_unanswered(latencies: list[float], events: int) -> float | None:
    """The 98th percentile of the latencies of `events` events, those with no latency counted as infinitely late."""
    if events <= 0:
        return None
    ranked = sorted(latencies)[:events] + [float("inf")] * max(events - len(latencies), 0)
    return float(ranked[max(0, -(-98 * events // 100) - 1)])


def _answered_by_id(pipeline: str, seq: int, from_id: int) -> bool:
    """Whether event `seq` should have an output paired with an id at or above `from_id` (pairing goes by id)."""
    event = engine_event(seq)
    if event["id"] < from_id:
        return False
    if pipeline == "dedup":
        return event["id"] == seq
    return pipeline != "enrich" or kept(event)


def engine_event(seq: int) -> dict:
    """Event `seq`. Every tenth is a redelivery of the event five before it (same id, same content), so the
    deduplication has work to do and the other pipelines see repeated ids."""
    base = seq - 5 if seq % 10 == 9 else seq
    return {"id": base, "user": f"user{base % USERS}", "amount": base % 1000 + 0.25, "created_ms": EPOCH_MS + base}


def priming_event(i: int) -> dict:
    # Negative ids, a tiered user: every pipeline writes an output for each (count: user0's count reaches PRIMING).
    return {"id": -1 - i, "user": "user0", "amount": 0.25, "created_ms": EPOCH_MS}


def kept(value: dict) -> bool:
    return value["user"] in TIERED


def expected_outputs(pipeline: str, sent: int) -> int | None:
    """Outputs the record pipelines must write for `sent` events after priming; None for the running count, whose
    number of updates is the engine's business."""
    if pipeline == "count":
        return None
    if pipeline == "transform":
        return PRIMING + sent
    if pipeline == "enrich":
        return PRIMING + sum(1 for s in range(sent) if kept(engine_event(s)))
    return PRIMING + len({engine_event(s)["id"] for s in range(sent)})


def start_engine(
    engine: str,
    pipeline: str,
    source: str,
    sink: str,
    conf: dict,
    bootstrap: str,
    spark_args: tuple[str, ...] = (),
    checkpoint: str | None = None,
) -> processes.Started:
    """Start one engine on one pipeline. `spark_args` go to the Spark child only (e.g. `--batch-duration`); `checkpoint`
    restarts the Spark query on an earlier run's checkpoint (Flink restores through `conf`)."""
    env = {"KAFKA_BOOTSTRAP_SERVERS": bootstrap}
    conf_args = [arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")]
    if engine == "flink":
        return flink.start(FLINK_PROGRAM, ["--parallelism", str(PARTITIONS), *conf_args, pipeline, source, sink], env)
    folder = make_private_dir(state_dir() / "engines" / uuid.uuid4().hex[:12])
    checkpoint = checkpoint or str(folder / "checkpoint")
    command = [sys.executable, "-m", "rtm_lab.benchmarks.engine_spark", pipeline, source, sink, checkpoint]
    command += [*spark_args, *conf_args]
    log = folder / "engine.log"
    pid = processes.spawn(command, log, env={**os.environ, **env}, cwd=folder)
    return processes.Started(pid, processes.start_time(pid), checkpoint, folder, log)


class TreeSampler:
    """CPU seconds and resident memory of a process and all its descendants, sampled in a thread."""

    def __init__(self, pid: int):
        self.root = psutil.Process(pid)
        self.samples: list[tuple[float, float, int]] = []  # (monotonic s, cpu s, rss bytes)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="engine-sampler", daemon=True)

    def now(self) -> tuple[float, float, int]:
        cpu, rss = 0.0, 0
        for proc in [self.root, *self.root.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                times = proc.cpu_times()
                cpu += times.user + times.system + times.children_user + times.children_system
                rss += proc.memory_info().rss
        return time.monotonic(), cpu, rss

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(psutil.NoSuchProcess):
                self.samples.append(self.now())
            self._stop.wait(SAMPLE_EVERY_S)

    def start(self) -> "TreeSampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def peak_rss_mib(self, since: float = 0.0) -> float:
        return round(max((rss for t, _, rss in self.samples if t >= since), default=0) / 2**20, 1)


def end_offsets(consumer: KafkaConsumer, topic: str) -> int:
    parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
    return sum(consumer.end_offsets(parts).values()) if parts else 0


def wait_until_primed(engine: processes.Started, bootstrap: str, pipeline: str, sink: str, timeout_s: float) -> None:
    def died() -> BaseException | None:
        if engine.running():
            return None
        return LabError(
            f"the engine exited ({engine.how_it_ended()}) before its first output; the end of "
            f"{engine.log}:\n{processes.tail(engine.log)}"
        )

    def done(records) -> bool:
        if pipeline == "count":
            return any(json.loads(r.value).get("count", 0) >= PRIMING for r in records)
        return len(records) >= PRIMING

    def primed() -> bool:
        return done(output.read_until(bootstrap, sink, done, timeout_s=2.0))

    try:
        wait_until(primed, timeout_s, "the priming events' outputs", 1.0, died)
    except WaitTimeout as exc:
        raise LabError(f"{exc}; the end of {engine.log}:\n{processes.tail(engine.log)}") from exc


def run(
    engine: str,
    pipeline: str,
    rate: float,
    seconds: float,
    warmup: float,
    profile: str,
    bootstrap: str,
    say=print,
    partitions: int = PARTITIONS,
    extra_conf: dict[str, str] | None = None,
) -> dict:
    """Run one engine on one pipeline; return its figures (see the module docstring). `partitions` and `extra_conf`
    are for the per-task benchmark (one partition, one shuffle partition), Spark only: Flink's parallelism stays
    PARTITIONS."""
    conf = {**PROFILES[profile][engine], **(extra_conf or {})}
    source = topics.create_topic(bootstrap, topics.unique_name(f"eng-{pipeline}-in"), partitions, LOG_APPEND_TIME)
    sink = topics.create_topic(
        bootstrap, topics.unique_name(f"eng-{engine}-{pipeline}-out"), partitions, LOG_APPEND_TIME
    )
    proc: processes.Started | None = None
    sampler: TreeSampler | None = None
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        topics.produce_json(bootstrap, source, [priming_event(i) for i in range(PRIMING)])
        began = time.monotonic()
        proc = start_engine(engine, pipeline, source, sink, conf, bootstrap)
        sampler = TreeSampler(proc.pid).start()
        wait_until_primed(proc, bootstrap, pipeline, sink, timeout_s=300.0)
        startup_s = time.monotonic() - began
        say(f"{engine} started and primed in {startup_s:.1f}s; {rate:.0f} events/s for {warmup:.0f}+{seconds:.0f}s")
        _, cpu_start, _ = sampler.now()
        produce_from = time.monotonic()

        def progress(stats: loadgen.LoadStats) -> None:
            say(
                f"  t={time.monotonic() - produce_from:5.1f}s sent={stats.sent:>8} sink={end_offsets(consumer, sink):>8}"
            )

        stats = loadgen.produce_at_rate(
            bootstrap, source, rate, warmup + seconds, event=engine_event, progress=progress, progress_every_s=5.0
        )
        want = expected_outputs(pipeline, stats.sent)
        # The end of the run: every output out (record pipelines), or the sink quiet for QUIET_S (the running count).
        last_total, last_change, cpu_end, end_at = -1, time.monotonic(), cpu_start, time.monotonic()
        deadline = time.monotonic() + DRAIN_S
        while time.monotonic() < deadline and proc.running():
            total = end_offsets(consumer, sink)
            t, cpu, _ = sampler.now()
            if total != last_total:
                last_total, last_change, cpu_end, end_at = total, t, cpu, t
            if want is not None and total >= want:
                break
            if want is None and t - last_change >= QUIET_S:
                break
            time.sleep(0.25)
        if not proc.running():
            raise LabError(f"the {engine} engine exited mid-run; the end of {proc.log}:\n{processes.tail(proc.log)}")
        drain_s = end_at - (produce_from + warmup + seconds)
        sampler.stop()
        rss_peak = sampler.peak_rss_mib()
        proc.stop()
        say(f"  reading back {PRIMING + stats.sent} inputs and {last_total} outputs ...")
        source_records = topics.read_all(bootstrap, source, PRIMING + stats.sent, timeout_s=120)
        sink_records = topics.read_all(bootstrap, sink, last_total, timeout_s=120)
        measured = engine_output.measure(pipeline, source_records, sink_records, lambda v: v["id"], kept)
        warmup_ids = int(rate * warmup)
        steady: list[float] = [ms for seq, ms in measured.latencies if seq >= warmup_ids]
        summary = percentiles.summarize(steady)
        # The last TAIL_S seconds' events, for the capacity steps: an engine that keeps up answers them as fast as the
        # rest; one falling behind answers them later and later, or not within the drain (counted as unanswered).
        tail_from = int(rate * max(warmup + seconds - TAIL_S, 0))
        tail: list[float] = [ms for seq, ms in measured.latencies if seq >= tail_from]
        tail_sent = sum(1 for s in range(tail_from, stats.sent) if _answered_by_id(pipeline, s, tail_from))
        cpu_s = cpu_end - cpu_start
        result = {
            "engine": engine,
            "pipeline": pipeline,
            "rate": rate,
            "profile": profile,
            "conf": conf,
            **summary,
            "quantiles_ms": percentiles.quantiles(steady),
            "sent": stats.sent,
            "achieved_rate": round(stats.achieved_rate, 1),
            "producer_behind_max_s": round(stats.behind_s, 3),
            "expected": measured.expected,
            "delivered": measured.delivered,
            "missing": measured.missing,
            "duplicates": measured.duplicates,
            "wrong": measured.wrong[:5],
            "digest": measured.digest,
            "cpu_s": round(cpu_s, 2),
            "cpu_window_s": round(end_at - produce_from, 1),
            "cpu_s_per_m_events": round(cpu_s / stats.sent * 1e6, 1) if stats.sent else None,
            "rss_peak_mib": rss_peak,
            "startup_s": round(startup_s, 1),
            "drain_s": round(drain_s, 2),
            "tail_s": TAIL_S,
            "tail_p98_ms": _p98_with_unanswered(tail, tail_sent),
        }
        say(
            f"  {percentiles.format_summary(summary)}  missing={measured.missing}  cpu={cpu_s:.1f}s  rss={rss_peak} MiB"
        )
        shutil.rmtree(proc.folder, ignore_errors=True)
        return result
    finally:
        consumer.close()
        if sampler is not None:
            sampler.stop()
        if proc is not None and proc.running():
            proc.stop()
        for name in (source, sink):
            topics.delete_topic(bootstrap, name)

"""One run of `bench.py engines`: one engine, one pipeline, one rate, one settings profile, measured end to end.

The harness is the same for both engines: a fresh source and sink topic (2 partitions, LogAppendTime), ten priming
events before the engine starts (measurement begins once their outputs are out, so start-up is not timed), then the
generator at the asked rate for warm-up + measured seconds, in this process, never in the engine's. The engine is a
process tree of its own (rtm_lab.benchmarks.engine_spark, or the PyFlink twin in the Flink venv), sampled every half
second for CPU time and resident memory. After the last output the engine is stopped and both topics are read back
(rtm_lab.benchmarks.engine_output pairs outputs with inputs).

The events are a pure function of their sequence number, so every run at one rate and duration gets the same input
and the two engines' output digests must match. Users come from rtm_lab.keyspace: 10,000 keys with Zipf skew; the
enrichment table holds 1,000 of them.

Each run records what it really ran with, read back rather than configured: the state store or backend, checkpoint
mode, garbage collectors and JVM arguments (Spark: its READBACK line and its checkpoint's offset log; Flink: its REST
API), each source partition's records, each task's share of the keyed work (derived from the engine's partitioner,
and for Flink also counted by Flink), a per-second series (p50, p99, max, in and out), and each core's busy share in
the measured window. Placement "isolated" pins the engine to one core and the broker and this harness to the other.
"""

import bisect
import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import psutil
from kafka import KafkaConsumer, TopicPartition

from rtm_lab import cpu_pinning, keyspace, loadgen, percentiles, processes, topics
from rtm_lab.benchmarks import engine_output
from rtm_lab.engines import flink, flink_rest, output
from rtm_lab.errors import LabError
from rtm_lab.paths import PROJECT_ROOT, make_private_dir, state_dir
from rtm_lab.waiting import WaitTimeout, wait_until

ENGINES = ("spark", "flink")
PIPELINES = ("transform", "count", "enrich", "dedup")
DEDUP_BY_USER = engine_output.DEDUP_BY_USER
PARTITIONS = 2  # the topics' partitions = Flink's parallelism = the RTM query's shuffle partitions
LOG_APPEND_TIME = {"message.timestamp.type": "LogAppendTime"}
FLINK_PROGRAM = PROJECT_ROOT / "snippets" / "guides" / "rtm_or_flink_flink.py"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
STATE_STORE = {"spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER}
# Each engine tuned for latency (the same 5 ms on both sides of the trade: how long a buffer waits to fill before it
# is sent on; and PyFlink's Python-function bundle, 1 s by default, flushed as often), and at its defaults (Flink's
# 100 ms buffer timeout, Spark's 50 ms streaming shuffle wait). Both keep state in RocksDB (the Flink twin sets
# state.backend.type); "tuned-heap" is Flink tuned on its heap backend, a labelled variant for the stateful pipelines.
PROFILES: dict[str, dict[str, dict[str, str]]] = {
    "tuned": {
        "spark": {"spark.shuffle.streaming.networkBufferMaxWaitTimeMs": "5", **STATE_STORE},
        "flink": {"execution.buffer-timeout.interval": "5 ms", "python.fn-execution.bundle.time": "5"},
    },
    "default": {"spark": {**STATE_STORE}, "flink": {}},
    "tuned-heap": {
        "flink": {
            "execution.buffer-timeout.interval": "5 ms",
            "python.fn-execution.bundle.time": "5",
            "state.backend.type": "hashmap",
        },
    },
}
# Flink's REST API on a free port (a fixed 8081 would clash between labs), its metrics refreshed every second (the
# default 10 s would hand back counts from before the run's last records).
ALWAYS: dict[str, dict[str, str]] = {
    "spark": {},
    "flink": {"rest.port": "0", "metrics.fetcher.update-interval": "1000"},
}
PLACEMENTS = ("shared", "isolated")
ENGINE_CORES, HARNESS_CORES = {0}, {1}  # the isolated placement
# A JVM that sees one core picks the serial collector; the isolated placement keeps G1, the collector both engines run
# with on the shared cores, so the placement changes where the engine runs and nothing else.
ISOLATED_JVM_OPTIONS = "-XX:+UseG1GC"
PRIMING = 10
EPOCH_MS = 1_767_225_600_000  # 2026-01-01: created_ms is a pure function of the id, not a clock
TIERED = dict(keyspace.enrichment_table())
PRIMING_USER = keyspace.enrichment_table()[0][0]  # in the table: every pipeline answers each priming event
SAMPLE_EVERY_S = 0.5
QUIET_S = 3.0  # the running count's sink is complete once its offsets stop moving for this long
DRAIN_S = 90.0
TAIL_S = 10.0
# kafka-python read about 40,000 records a second back here on a quiet machine, and under 40,000 once busy: a fixed
# 120 s cut a 40,000 events/s run's 4.8 million records short, and the shortfall read as lost events. A quarter of
# that speed, with two minutes at least.
READ_BACK_PER_S = 10_000
READ_BACK_MIN_S = 120.0


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
    if pipeline == DEDUP_BY_USER:
        return _FIRSTS.is_first(seq)
    return pipeline != "enrich" or kept(event)


class _FirstOfEachUser:
    """The sequence numbers of each user's first event (what the user-keyed deduplication keeps; the priming
    events' users are their own, so they take none away), found once by scanning the events in order."""

    def __init__(self) -> None:
        self.scanned = 0
        self.seen: set[str] = set()
        self.firsts: list[int] = []  # in order
        self.first_set: set[int] = set()

    def _scan(self, sent: int) -> None:
        for seq in range(self.scanned, sent):
            name = keyspace.user_of(engine_event(seq)["id"])
            if name not in self.seen:
                self.seen.add(name)
                self.firsts.append(seq)
                self.first_set.add(seq)
        self.scanned = max(self.scanned, sent)

    def below(self, sent: int) -> list[int]:
        """Each user's first event among the first `sent`, in order."""
        self._scan(sent)
        return self.firsts[: bisect.bisect_left(self.firsts, sent)]

    def is_first(self, seq: int) -> bool:
        self._scan(seq + 1)
        return seq in self.first_set


_FIRSTS = _FirstOfEachUser()


def answering_seqs(pipeline: str, sent: int) -> list[int]:
    """The sequence numbers of the events among the first `sent` that the record pipeline answers with an output,
    in order: where a run's outputs should have got to (rtm_lab.benchmarks.stall_watch)."""
    if pipeline == DEDUP_BY_USER:
        return _FIRSTS.below(sent)
    return [seq for seq in range(sent) if _answered_by_id(pipeline, seq, 0)]


def engine_event(seq: int) -> dict:
    """Event `seq`. Every tenth is a redelivery of the event five before it (same id, same content), so the
    deduplication has work to do and the other pipelines see repeated ids. The user is a Zipf draw (keyspace)."""
    base = seq - 5 if seq % 10 == 9 else seq
    return {"id": base, "user": keyspace.user_of(base), "amount": base % 1000 + 0.25, "created_ms": EPOCH_MS + base}


def priming_event(i: int, pipeline: str | None = None) -> dict:
    # Negative ids, a tiered user: every pipeline writes an output for each (count: that user's count reaches PRIMING).
    # The user-keyed deduplication would keep one of ten events of one user: each gets a user outside the key space.
    name = f"priming{i}" if pipeline == DEDUP_BY_USER else PRIMING_USER
    return {"id": -1 - i, "user": name, "amount": 0.25, "created_ms": EPOCH_MS}


def kept(value: dict) -> bool:
    return value["user"] in TIERED


def matched_share(sent: int) -> float:
    """The share of `sent` events whose user is in the enrichment table."""
    return round(sum(1 for s in range(sent) if kept(engine_event(s))) / sent, 4) if sent else 0.0


def read_back_timeout_s(records: int) -> float:
    return max(READ_BACK_MIN_S, records / READ_BACK_PER_S)


def read_back(bootstrap: str, topic: str, expected: int, timeout_s: float | None = None) -> list[topics.Record]:
    """Every one of `expected` records of `topic`, or a LabError. `expected` is what the topic's offsets hold, so a
    read that stops short is the read-back's shortfall, never events the engine lost: it must not reach the results."""
    if timeout_s is None:
        timeout_s = read_back_timeout_s(expected)
    records = topics.read_all(bootstrap, topic, expected, timeout_s=timeout_s)
    if len(records) < expected:
        raise LabError(
            f"read back {len(records):,} of the {expected:,} records in {topic} within {timeout_s:.0f} s: "
            "the read-back fell short, not the engine; rerun on a quieter machine"
        )
    return records


def expected_outputs(pipeline: str, sent: int) -> int | None:
    """Outputs the record pipelines must write for `sent` events after priming; None for the running count, whose
    number of updates is the engine's business."""
    if pipeline == "count":
        return None
    if pipeline == "transform":
        return PRIMING + sent
    if pipeline == "enrich":
        return PRIMING + sum(1 for s in range(sent) if kept(engine_event(s)))
    if pipeline == DEDUP_BY_USER:
        return PRIMING + len(_FIRSTS.below(sent))
    return PRIMING + len({engine_event(s)["id"] for s in range(sent)})


def tiers_file() -> Path:
    """The enrichment table as JSON rows, for either engine's program (written afresh: the same rows every time)."""
    path = make_private_dir(state_dir() / "engines") / "tiers.json"
    path.write_text(json.dumps(keyspace.enrichment_table()))
    return path


def start_engine(
    engine: str,
    pipeline: str,
    source: str,
    sink: str,
    conf: dict,
    bootstrap: str,
    spark_args: tuple[str, ...] = (),
    checkpoint: str | None = None,
    cores: set[int] | None = None,
    jvm_options: str | None = None,
) -> processes.Started:
    """Start one engine on one pipeline. `spark_args` go to the Spark child only (e.g. `--batch-duration`); `checkpoint`
    restarts the Spark query on an earlier run's checkpoint (Flink restores through `conf`); `cores` pins the engine
    (and every process it starts) to those cores; `jvm_options` go on the engine JVM's command line (e.g. a GC log).
    The enrichment reads rtm_lab.keyspace's table on both engines."""
    env = {"KAFKA_BOOTSTRAP_SERVERS": bootstrap}
    conf_args = [arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")]
    table = ["--tiers", str(tiers_file())]
    jvm_options = " ".join(filter(None, [ISOLATED_JVM_OPTIONS if cores is not None else None, jvm_options])) or None
    if engine == "flink":
        args = ["--parallelism", str(PARTITIONS), *table, *conf_args, pipeline, source, sink]
        return flink.start(FLINK_PROGRAM, args, env, cores=cores, jvm_options=jvm_options)
    if jvm_options is not None:  # local mode: the executors are the driver JVM's threads
        conf_args += ["--conf", f"spark.driver.extraJavaOptions={jvm_options}"]
    folder = make_private_dir(state_dir() / "engines" / uuid.uuid4().hex[:12])
    checkpoint = checkpoint or str(folder / "checkpoint")
    command = [sys.executable, "-m", "rtm_lab.benchmarks.engine_spark", pipeline, source, sink, checkpoint]
    command += [*spark_args, *table, *conf_args]
    if cores is not None:
        command = cpu_pinning.pinned_argv(command, cores)
    log = folder / "engine.log"
    pid = processes.spawn(command, log, env={**os.environ, **env}, cwd=folder)
    return processes.Started(pid, processes.start_time(pid), checkpoint, folder, log)


class TreeSampler:
    """CPU seconds and resident memory of a process and all its descendants, sampled in a thread."""

    def __init__(self, pid: int):
        self.root = psutil.Process(pid)
        self.samples: list[tuple[float, float, int]] = []  # (monotonic s, cpu s, rss bytes)
        self.cores: list[tuple[float, dict[int, tuple[int, int]]]] = []  # (monotonic s, each core's ticks)
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
            self.cores.append((time.monotonic(), cpu_pinning.core_times()))
            self._stop.wait(SAMPLE_EVERY_S)

    def cpu_from(self, since: float) -> tuple[float, float]:
        """(time, CPU seconds) of the first sample at or after `since`: where a window that leaves out the warm-up
        begins."""
        for t, cpu, _ in self.samples:
            if t >= since:
                return t, cpu
        t, cpu, _ = self.now()
        return t, cpu

    def core_busy(self, since: float, until: float) -> dict[int, float]:
        """Each core's busy share between the samples nearest `since` and `until` (the whole machine, not the tree)."""
        inside = [ticks for t, ticks in self.cores if since <= t <= until]
        if len(inside) < 2:
            return {}
        start, end = inside[0], inside[-1]
        busy = {}
        for core, (b1, t1) in end.items():
            b0, t0 = start.get(core, (b1, t1))
            busy[core] = round((b1 - b0) / (t1 - t0), 3) if t1 > t0 else 0.0
        return busy

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


def spark_readback(proc: processes.Started, timeout_s: float = 120.0) -> dict:
    """The Spark child's READBACK line: its JVM's collectors and arguments, the plan's operators, and the state store
    provider of the query's own session."""
    from rtm_lab.benchmarks.engine_spark import READBACK

    def line() -> str | None:
        text = proc.log.read_text(errors="replace") if proc.log.exists() else ""
        return next((ln for ln in text.splitlines() if ln.startswith(READBACK)), None)

    wait_until(lambda: line() is not None, timeout_s, "the Spark child's READBACK line", 0.5)
    found = json.loads((line() or READBACK + "{}")[len(READBACK) :])
    # No watermark on the count or the deduplication: their state is kept for ever (Spark SQL has no state TTL).
    return {**found, "state_ttl": "none: no watermark, state kept for ever"}


def rocksdb_loaded(pids: list[int]) -> bool:
    """Whether any of these processes has RocksDB's native library mapped: a state store or backend that really runs
    on RocksDB has loaded it by its first stateful record; one on the heap never does."""
    for pid in pids:
        with contextlib.suppress(OSError):
            if "rocksdbjni" in Path(f"/proc/{pid}/maps").read_text(errors="replace"):
                return True
    return False


GC_NAMES = {"-XX:+UseG1GC": "G1", "-XX:+UseSerialGC": "Serial", "-XX:+UseParallelGC": "Parallel", "-XX:+UseZGC": "Z",
            "-XX:+UseShenandoahGC": "Shenandoah"}  # fmt: skip


def jvm_flags(pids: list[int]) -> dict:
    """The final flags of each JVM among `pids`, as the JVM itself reports them (`jcmd PID VM.flags`): what ran,
    ergonomics included, and the collector those flags select."""
    jcmd = shutil.which("jcmd")
    if jcmd is None:
        return {"jvm_flags": "jcmd not installed: no flags read back"}
    found: dict = {}
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            if psutil.Process(pid).name() != "java":
                continue
        done = subprocess.run([jcmd, str(pid), "VM.flags"], capture_output=True, text=True, timeout=60, check=False)
        flags = [word for line in done.stdout.splitlines()[1:] for word in line.split() if word.startswith("-XX:")]
        if flags:
            found = {"jvm_flags": flags, "gc_selected": [GC_NAMES[f] for f in flags if f in GC_NAMES]}
    return found or {"jvm_flags": "no JVM answered jcmd"}


def flink_rest_base(proc: processes.Started, timeout_s: float = 60.0) -> str:
    log_dir = proc.folder / "log"
    wait_until(lambda: flink_rest.address(log_dir) is not None, timeout_s, "Flink's REST address in its log", 0.5)
    base = flink_rest.address(log_dir)
    assert base is not None  # wait_until returned: it is logged
    return base


def keyed_by(pipeline: str) -> str | None:
    """The field each pipeline's keyed exchange hashes, or None when there is no exchange (tasks = source splits)."""
    return {"count": "user", "dedup": "id", DEDUP_BY_USER: "user"}.get(pipeline)


def task_shares(
    pipeline: str,
    values: list[dict],
    partition_counts: dict[int, int],
    max_parallelism: int,
    shuffle_partitions: int = PARTITIONS,
) -> dict:
    """Each engine's task shares by its own partitioner (rtm_lab.keyspace), over every input including priming.
    `shuffle_partitions`: Spark's, when a run sets other than PARTITIONS (Flink's parallelism stays PARTITIONS)."""
    field = keyed_by(pipeline)
    if field is None:
        split = keyspace.shares(partition_counts, PARTITIONS)
        return {"spark": split, "flink": split, "by": "source partition (no exchange)"}
    keys = [v[field] for v in values]
    spark = keyspace.task_counts(keys, lambda k: keyspace.spark_partition(k, shuffle_partitions))
    flink_counts = keyspace.task_counts(keys, lambda k: keyspace.flink_operator(k, PARTITIONS, max_parallelism))
    return {
        "spark": keyspace.shares(spark, shuffle_partitions),
        "flink": keyspace.shares(flink_counts, PARTITIONS),
        "spark_records": [spark.get(t, 0) for t in range(shuffle_partitions)],
        "flink_records": [flink_counts.get(t, 0) for t in range(PARTITIONS)],
        "by": f"hash of {field}: Spark pmod(murmur3, {shuffle_partitions}); Flink key group of {max_parallelism} -> operator",
    }


def flink_counted(vertices: list[dict]) -> list[int] | None:
    """Records each subtask of the first vertex fed by an exchange received, as Flink counts them (None: no such
    vertex, every operator chained to its source; a source's read-records are what it read from Kafka)."""
    for vertex in vertices:
        if not vertex["name"].startswith("Source:") and sum(vertex["read_records"]) > 0:
            return vertex["read_records"]
    return None


def flink_counts_settled(base: str, job: str, inputs: int, timeout_s: float = 20.0) -> list[dict]:
    """Flink's per-subtask counts once its source has counted every input (the REST API serves cached metrics)."""
    vertices: list[dict] = []

    def settled() -> bool:
        nonlocal vertices
        vertices = flink_rest.subtask_records(base, job)
        return any(v["name"].startswith("Source:") and sum(v["read_records"]) >= inputs for v in vertices)

    with contextlib.suppress(WaitTimeout):  # recorded as they are; the test compares them with the derived counts
        wait_until(settled, timeout_s, "Flink's source to count every input", 0.5)
    return vertices


SERIES_FIELDS = ["second", "p50_ms", "p99_ms", "max_ms", "in_per_s", "out_per_s"]


def per_second(
    latencies: Sequence[tuple[int, float]], rate: float, source: list, sink: list, start_ms: int | None
) -> list[list]:
    """One row per second from the first generated event: latency p50, p99 and max of the events scheduled in that
    second, and records in (source) and out (sink) per second on the broker's clock."""
    if start_ms is None:
        return []
    by_second: dict[int, list[float]] = defaultdict(list)
    for seq, ms in latencies:
        if seq >= 0:
            by_second[int(seq // rate)].append(ms)
    ins = Counter((r.timestamp_ms - start_ms) // 1000 for r in source if r.timestamp_ms >= start_ms)
    outs = Counter((r.timestamp_ms - start_ms) // 1000 for r in sink if r.timestamp_ms >= start_ms)
    last = max([*by_second, *ins, *outs], default=-1)
    rows = []
    for second in range(last + 1):
        values = by_second.get(second)
        figures: list[float | None] = [None, None, None]
        if values:
            p50, p99 = np.percentile(values, [50, 99])
            figures = [round(float(p50), 1), round(float(p99), 1), round(float(max(values)), 1)]
        rows.append([second, *figures, ins.get(second, 0), outs.get(second, 0)])
    return rows


@contextlib.contextmanager
def placed(placement: str, broker_pid: int | None):
    """The isolated placement: this harness (generator and reader) and the broker on HARNESS_CORES for the run, given
    every core back after it. The engine is started on ENGINE_CORES by `start_engine`."""
    if placement != "isolated":
        yield None
        return
    if broker_pid is None:
        raise LabError(
            "the isolated placement needs the lab's own broker (its pid) to pin; this lab uses an external one"
        )
    pinned = [os.getpid(), broker_pid]
    try:
        for pid in pinned:
            cpu_pinning.pin(pid, HARNESS_CORES)
        yield ENGINE_CORES
    finally:
        for pid in pinned:
            with contextlib.suppress(LabError):
                cpu_pinning.unpin(pid)


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
    placement: str = "shared",
    broker_pid: int | None = None,
    shuffle_partitions: int | None = None,
    jvm_options: str | None = None,
    watch: "Callable[[list[int], str, float], Watch] | None" = None,
) -> dict:
    """Run one engine on one pipeline; return its figures (see the module docstring). `partitions` and `extra_conf`
    are for the per-task benchmark (one partition, one shuffle partition), Spark only: Flink's parallelism stays
    PARTITIONS. For `bench.py dedup-stall`: `shuffle_partitions` (Spark only; its local slots grow to match, so every
    real-time stage still runs at once), `jvm_options` for the engine's JVM, and `watch(engine's JVM pids, sink
    topic, wall-clock start of the generator)`, started as the generator starts and stopped at the end of the run
    (its summary goes into the figures under "watch")."""
    conf = {**PROFILES[profile][engine], **(extra_conf or {})}
    spark_args: tuple[str, ...] = ()
    if shuffle_partitions is not None and engine == "spark":
        conf["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
        spark_args = ("--slots", str(partitions + shuffle_partitions))
    watching: Watch | None = None
    source = topics.create_topic(bootstrap, topics.unique_name(f"eng-{pipeline}-in"), partitions, LOG_APPEND_TIME)
    sink = topics.create_topic(
        bootstrap, topics.unique_name(f"eng-{engine}-{pipeline}-out"), partitions, LOG_APPEND_TIME
    )
    proc: processes.Started | None = None
    sampler: TreeSampler | None = None
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        with placed(placement, broker_pid) as engine_cores:
            topics.produce_json(bootstrap, source, [priming_event(i, pipeline) for i in range(PRIMING)])
            began = time.monotonic()
            proc = start_engine(
                engine,
                pipeline,
                source,
                sink,
                {**conf, **ALWAYS[engine]},
                bootstrap,
                spark_args=spark_args,
                cores=engine_cores,
                jvm_options=jvm_options,
            )
            sampler = TreeSampler(proc.pid).start()
            wait_until_primed(proc, bootstrap, pipeline, sink, timeout_s=300.0)
            startup_s = time.monotonic() - began
            if engine == "spark":
                readback = spark_readback(proc)
                rest = None
            else:
                rest = flink_rest_base(proc)
                job = flink_rest.running_job(rest)
                readback = flink_rest.readback(rest, job) if job else {"error": "no running job in the REST API"}
            engine_pids = [proc.pid, *(c.pid for c in psutil.Process(proc.pid).children(recursive=True))]
            readback["rocksdb_library_loaded"] = rocksdb_loaded(engine_pids)
            readback |= jvm_flags(engine_pids)
            if not readback.get("gc") and readback.get("gc_selected"):
                readback["gc"] = readback["gc_selected"]
            engine_cores_seen = sorted(set().union(*(_cores_or_empty(pid) for pid in engine_pids)))
            say(
                f"{engine} started and primed in {startup_s:.1f}s; {rate:.0f} events/s for {warmup:.0f}+{seconds:.0f}s"
                f" ({placement})"
            )
            produce_from = time.monotonic()

            def progress(stats: loadgen.LoadStats) -> None:
                say(
                    f"  t={time.monotonic() - produce_from:5.1f}s sent={stats.sent:>8} "
                    f"sink={end_offsets(consumer, sink):>8}"
                )

            if watch is not None:
                watching = watch(_java_pids(engine_pids), sink, time.time())
            stats = loadgen.produce_at_rate(
                bootstrap, source, rate, warmup + seconds, event=engine_event, progress=progress, progress_every_s=5.0
            )
            want = expected_outputs(pipeline, stats.sent)
            # The end of the run: every output out (record pipelines), or the sink quiet for QUIET_S (the count).
            measured_from, cpu_start = sampler.cpu_from(produce_from + warmup)  # the warm-up left out
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
                raise LabError(
                    f"the {engine} engine exited mid-run; the end of {proc.log}:\n{processes.tail(proc.log)}"
                )
            watched = watching.stop() if watching is not None else None
            vertices = flink_counts_settled(rest, job, PRIMING + stats.sent) if rest and job else []
            drain_s = end_at - (produce_from + warmup + seconds)
            sampler.stop()
            core_busy = sampler.core_busy(measured_from, end_at)
            rss_peak = sampler.peak_rss_mib()
            proc.stop()
        say(f"  reading back {PRIMING + stats.sent} inputs and {last_total} outputs ...")
        source_records = read_back(bootstrap, source, PRIMING + stats.sent)
        sink_records = read_back(bootstrap, sink, last_total)
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
        steady_events = max(stats.sent - warmup_ids, 0)
        values = [json.loads(r.value) for r in source_records]
        partition_counts = dict(sorted(Counter(r.partition for r in source_records).items()))
        max_parallelism = next(
            (v["max_parallelism"] for v in vertices if v.get("max_parallelism")), keyspace.FLINK_DEFAULT_MAX_PARALLELISM
        )
        first_generated = min((r.timestamp_ms for r, v in zip(source_records, values, strict=True) if v["id"] >= 0),
                              default=None)  # fmt: skip
        result = {
            "engine": engine,
            "pipeline": pipeline,
            "rate": rate,
            "profile": profile,
            "placement": placement,
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
            "cpu_window": "from the end of the warm-up to the last output",
            "cpu_window_s": round(end_at - measured_from, 1),
            "cpu_s_per_m_events": round(cpu_s / steady_events * 1e6, 1) if steady_events else None,
            "core_busy": core_busy,
            "engine_cores": engine_cores_seen,
            "rss_peak_mib": rss_peak,
            "startup_s": round(startup_s, 1),
            "drain_s": round(drain_s, 2),
            "tail_s": TAIL_S,
            "tail_p98_ms": _p98_with_unanswered(tail, tail_sent),
            "key_space": keyspace.describe(),
            "enrichment_match_share": matched_share(stats.sent) if pipeline == "enrich" else None,
            "source_partition_records": [partition_counts.get(p, 0) for p in range(PARTITIONS)],
            "task_shares": task_shares(
                pipeline, values, partition_counts, max_parallelism, shuffle_partitions or PARTITIONS
            ),
            "flink_counted_task_records": flink_counted(vertices) if engine == "flink" else None,
            "flink_vertices": vertices or None,
            "readback": readback,
            "series_fields": SERIES_FIELDS,
            "series": per_second(measured.latencies, rate, source_records, sink_records, first_generated),
        }
        if watched is not None:
            result["watch"] = watched
        say(
            f"  {percentiles.format_summary(summary)}  missing={measured.missing}  cpu={cpu_s:.1f}s  rss={rss_peak} MiB"
            f"  cores busy {core_busy}"
        )
        shutil.rmtree(proc.folder, ignore_errors=True)
        return result
    finally:
        consumer.close()
        if watching is not None:
            watching.stop()
        if sampler is not None:
            sampler.stop()
        if proc is not None and proc.running():
            proc.stop()
        for name in (source, sink):
            topics.delete_topic(bootstrap, name)


class Watch(Protocol):
    """What `run`'s `watch` returns: something running beside the run, stopped (more than once is harmless) with a
    summary of what it saw."""

    def stop(self) -> dict: ...


def _java_pids(pids: list[int]) -> list[int]:
    """The JVMs among `pids` (the engine's Python driver and launchers are not)."""
    found = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            if psutil.Process(pid).name() == "java":
                found.append(pid)
    return found


def _cores_or_empty(pid: int) -> set[int]:
    try:
        return cpu_pinning.cores_of(pid)
    except OSError:
        return set()

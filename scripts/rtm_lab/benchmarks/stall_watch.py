"""A stall seen live, while the run goes on, so the engine's threads can be dumped in the middle of it.

A run's latencies are known only after it, when both topics are read back (rtm_lab.benchmarks.engine_output). Live,
the watch knows two things: which events get an output, in order (the inputs are a pure function of their sequence
number), and how many outputs the sink holds (its end offsets, a cheap request every POLL_S). If the sink holds d
outputs past the priming ones, the (d+1)-th event that gets an output is the oldest not yet answered; its age (now
minus the moment the generator was due to send it) is the live lag. It is exact when outputs arrive in the order of
their inputs, and a close estimate across the two partitions otherwise. A stall is the live lag passing a threshold;
the first time it does, the watch takes thread dumps of the engine's JVMs (rtm_lab.benchmarks.thread_dumps).

A lag over the threshold means some event waited at least that long, so the second it happens in has a maximum
latency over it; the per-second p99 (known after the run) crosses it when enough events wait. The row records both,
so a reader can see how the live trigger and the series agree.
"""

import contextlib
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil
from kafka import KafkaConsumer, TopicPartition

from rtm_lab.benchmarks import thread_dumps

POLL_S = 0.5
DUMPS = 3  # a second apart: which threads used CPU in between, and whether their stacks moved
DUMP_GAP_S = 1.0


def lag_ms(answers: list[int], delivered: int, rate: float, start_wall: float, now_wall: float) -> float:
    """The age in ms of the oldest event not yet answered, when `delivered` of the outputs `answers` (sequence
    numbers, in order) are out: 0 when it is not yet due, or every output is out."""
    if delivered >= len(answers):
        return 0.0
    due = start_wall + answers[max(delivered, 0)] / rate
    return max(0.0, (now_wall - due) * 1000.0)


class StallWatch:
    """Polls the sink in a thread from `start()`; `stop()` ends it and returns what it saw (once; later calls return
    the same)."""

    def __init__(
        self,
        bootstrap: str,
        sink: str,
        answers: list[int],
        rate: float,
        priming: int,
        threshold_ms: float,
        folder: Path,
        pids: list[int],
        tool: str | None,
    ) -> None:
        self.bootstrap, self.sink, self.answers, self.rate, self.priming = bootstrap, sink, answers, rate, priming
        self.threshold_ms, self.folder, self.pids, self.tool = threshold_ms, folder, pids, tool
        self.series: list[list[float]] = []  # [seconds since the generator started, live lag ms]
        self.first_over_s: float | None = None
        self.dumps: dict[int, list[Path]] = {}
        self.start_wall = 0.0
        self.uptime_at_start: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stall-watch", daemon=True)
        self._summary: dict | None = None

    def start(self, start_wall: float) -> "StallWatch":
        self.start_wall = start_wall
        # Each JVM's uptime when the generator started: where the run's window falls in its GC log's times.
        for pid in self.pids:
            with contextlib.suppress(psutil.Error):
                self.uptime_at_start[str(pid)] = round(start_wall - psutil.Process(pid).create_time(), 2)
        self._thread.start()
        return self

    def _delivered(self, consumer: KafkaConsumer) -> int:
        parts = [TopicPartition(self.sink, p) for p in sorted(consumer.partitions_for_topic(self.sink) or ())]
        return sum(consumer.end_offsets(parts).values()) - self.priming if parts else 0

    def _run(self) -> None:
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
        try:
            while not self._stop.wait(POLL_S):
                delivered = self._delivered(consumer)
                now = time.time()
                lag = lag_ms(self.answers, delivered, self.rate, self.start_wall, now)
                self.series.append([round(now - self.start_wall, 2), round(lag)])
                if lag > self.threshold_ms and self.first_over_s is None:
                    self.first_over_s = round(now - self.start_wall, 2)
                    self._dump()
        finally:
            consumer.close()

    def _dump(self) -> None:
        if self.tool is None:
            return
        # One JVM after the other: with one engine JVM (local Spark, Flink's MiniCluster) there is one anyway.
        for pid in self.pids:
            self.dumps[pid] = thread_dumps.take(pid, self.folder, DUMPS, DUMP_GAP_S, self.tool)

    def stop(self) -> dict:
        if self._summary is not None:
            return self._summary
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=DUMPS * 40.0)
        self._summary = {
            "threshold_ms": self.threshold_ms,
            "poll_s": POLL_S,
            "lag_is": "age of the oldest unanswered event, from the sink's end offsets",
            "uptime_at_start_s": self.uptime_at_start,
            "first_over_s": self.first_over_s,
            "lag_max_ms": max((lag for _, lag in self.series), default=None),
            "polls_over": sum(1 for _, lag in self.series if lag > self.threshold_ms),
            "jcmd": self.tool or "not installed: no dumps",
            "dump_files": {str(pid): [p.name for p in paths] for pid, paths in self.dumps.items()},
            "dumps": {
                str(pid): thread_dumps.summarize([p.read_text(errors="replace") for p in paths])
                for pid, paths in self.dumps.items()
            },
            "lag_series": self.series,
        }
        return self._summary


def watcher(
    bootstrap: str, answers: list[int], rate: float, priming: int, threshold_ms: float, folder: Path, java: str | None
) -> Callable[[list[int], str, float], StallWatch]:
    """What `engine_run.run` takes as `watch`: called with the engine's JVM pids, the sink and the generator's
    wall-clock start, it starts a StallWatch."""
    tool = thread_dumps.jcmd(java)

    def start(pids: list[int], sink: str, start_wall: float) -> StallWatch:
        return StallWatch(bootstrap, sink, answers, rate, priming, threshold_ms, folder, pids, tool).start(start_wall)

    return start

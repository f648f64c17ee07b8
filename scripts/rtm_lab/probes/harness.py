"""Run a query in real-time mode and record what Spark did with it: runs, fails at the client call that builds it
(PySpark refuses an argument before `start()`), fails at `start()`, or fails at run time.

A case is a function `start(probe) -> StreamingQuery`; `Probe` hands it fresh Kafka topics and a checkpoint folder,
`probe()` starts it, feeds rows once the real-time scan is planned, and returns the `Outcome` as soon as it is known.
"""

import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from rtm_lab import plans, topics
from rtm_lab.intervals import TEST_INTERVAL
from rtm_lab.waiting import WaitTimeout, wait_until
from snippets.reference.errors import error_class, settings_restored

RUNS = "runs"
AT_CALL = "fails at the call"  # PySpark itself refuses an argument (e.g. in `trigger()`), before start()
AT_START = "fails at start()"
AT_RUN_TIME = "fails at run time"


@dataclass(frozen=True)
class Outcome:
    kind: str  # RUNS, AT_CALL, AT_START or AT_RUN_TIME
    error: str | None = None  # the error class Spark names, or the JVM exception class when it names none
    detail: str = field(default="", compare=False)  # expected: a phrase the message must contain (what it names)
    message: str = field(default="", compare=False)  # observed: the full message

    def __str__(self) -> str:
        return self.kind if self.error is None else f"{self.kind}: {self.error}"


def at_start(error: str, detail: str = "") -> Outcome:
    return Outcome(AT_START, error, detail)


def at_run_time(error: str, detail: str = "") -> Outcome:
    return Outcome(AT_RUN_TIME, error, detail)


class Probe:
    """Everything one case needs: fresh Kafka topics, a sink, and a way to tell whether rows came through."""

    def __init__(self, spark: SparkSession, bootstrap: str, workdir: Path, rows: int = 3):
        self.spark, self.bootstrap, self.workdir, self.rows = spark, bootstrap, workdir, rows
        self.source_topics: list[str] = []
        self.sink_topic: str | None = None
        self.foreach_dir: Path | None = None
        self.made_topics: list[str] = []
        self.workdir.mkdir(parents=True, exist_ok=True)

    @property
    def checkpoint(self) -> str:
        return str(self.workdir / "checkpoint")

    def _topic(self, prefix: str) -> str:
        name = topics.create_topic(self.bootstrap, topics.unique_name(prefix), 2)
        self.made_topics.append(name)
        return name

    def source(self, reuse_topic: bool = False) -> str:
        """A new source topic (fed by `feed()`), or with `reuse_topic` the previous call's topic again."""
        if not reuse_topic:
            self.source_topics.append(self._topic("probe-src"))
        return self.source_topics[-1]

    def sink(self) -> str:
        """A new sink topic: rows in it mean the query ran."""
        self.sink_topic = self._topic("probe-sink")
        return self.sink_topic

    def kafka(self, reuse_topic: bool = False) -> DataFrame:
        """A source topic read as a stream."""
        return (
            self.spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("subscribe", self.source(reuse_topic))
            .option("startingOffsets", "earliest")
            .load()
        )

    def writer(self, df: DataFrame) -> DataStreamWriter:
        return (
            df.writeStream.option("checkpointLocation", self.checkpoint)
            .outputMode("update")
            # PySpark's `trigger()` overloads omit `realTime=`, which the implementation takes (PySpark 4.2+).
            .trigger(realTime=TEST_INTERVAL)  # type: ignore[call-overload]
        )

    def to_kafka(self, df: DataFrame) -> StreamingQuery:
        """Write any frame to a new sink topic: every column goes into a JSON value."""
        out = df.select(F.to_json(F.struct(*[F.col(c) for c in df.columns])).alias("value"))
        return (
            self.writer(out)
            .format("kafka")
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("topic", self.sink())
            .start()
        )

    def feed(self) -> None:
        for topic in self.source_topics:
            topics.produce_json(self.bootstrap, topic, ({"id": i, "k": f"k{i % 2}"} for i in range(self.rows)))

    def arrived(self, query: StreamingQuery) -> bool:
        if self.sink_topic:
            return len(topics.read_all(self.bootstrap, self.sink_topic, expected=1, timeout_s=1.0)) > 0
        if self.foreach_dir:
            return any(p.stat().st_size > 0 for p in self.foreach_dir.glob("*.jsonl"))
        progress = query.lastProgress
        return bool(progress and progress["numInputRows"] > 0)

    def cleanup(self) -> None:
        for name in self.made_topics:
            topics.delete_topic(self.bootstrap, name)


def _moment(exc: BaseException) -> str:
    """AT_START when the exception went through `DataStreamWriter.start()` (or `toTable()`), else AT_CALL: a
    builder call such as `trigger()` raised it before the query was started."""
    frames = traceback.extract_tb(exc.__traceback__)
    started = any(
        f.name in ("start", "toTable") and f.filename.endswith(("streaming/readwriter.py", "streaming\\readwriter.py"))
        for f in frames
    )
    return AT_START if started else AT_CALL


def _real_time_scan_planned(query: StreamingQuery) -> bool:
    try:
        return plans.REAL_TIME_SCAN in plans.executed_plan(query)
    except Exception:
        return False  # the query failed while planning; the next awaitTermination() reports why


def probe(start: Callable[[Probe], StreamingQuery], probe_: Probe, timeout_s: float = 60.0) -> Outcome:
    """Start the query and return its outcome as soon as it is known; the query is always stopped."""
    try:
        query = start(probe_)
    except Exception as exc:
        return Outcome(_moment(exc), error_class(exc), message=str(exc))
    fed = False

    def settled() -> Outcome | None:
        nonlocal fed
        try:
            query.awaitTermination(0.5)  # type: ignore[arg-type]  # annotated int seconds, takes a float
        except Exception as exc:
            return Outcome(AT_RUN_TIME, error_class(exc), message=str(exc))
        if not query.isActive:
            failed = plans.failure(query)
            return (
                Outcome(AT_RUN_TIME, error_class(failed), message=str(failed))
                if failed
                else Outcome("stopped by itself")
            )
        # Rows go in only once the real-time scan is planned: rows present before the start are read by the
        # first batch, which a real-time query may hold back until that batch ends.
        if not fed and _real_time_scan_planned(query):
            probe_.feed()
            fed = True
        return Outcome(RUNS) if fed and probe_.arrived(query) else None

    try:
        return wait_until(settled, timeout_s, "the query's outcome", interval_s=0)
    except WaitTimeout:
        return Outcome(f"no outcome in {timeout_s:.0f}s")
    finally:
        query.stop()


@contextmanager
def session_confs(spark: SparkSession, confs: dict[str, str]) -> Iterator[None]:
    """Set session confs for one query and put the old values back, so cases cannot leak into each other."""
    with settings_restored(spark, tuple(confs)):
        for key, value in confs.items():
            spark.conf.set(key, value)
        yield

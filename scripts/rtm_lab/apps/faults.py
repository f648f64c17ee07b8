"""Faults and observations for the Postgres pipeline's tests: a sink whose task fails once, a sink that records
Spark's calls, a way to hold the driver's DAG scheduler, and a runner that retries failed tasks.

These sinks live in an installed module (not a test file) because Spark's Python workers unpickle them.
"""

import argparse
import os
import sys
import threading
import time
from pathlib import Path

from pyspark.accumulators import AccumulatorParam

from rtm_lab.intervals import TEST_INTERVAL
from snippets.guides.kafka_to_postgres import SESSION_CONF, start_pipeline
from snippets.guides.postgres_sink import PostgresSink, SinkConfig


def _append(path: str, line: str) -> None:
    with open(path, "a") as out:
        out.write(line + "\n")


class FailOnceSink(PostgresSink):
    """Raises in process() on the first row whose key is `poison_key`, once per marker file: the retried task (or
    a restarted query) then goes through. Every open() is logged to `<marker>.opens` as `partition epoch attempt`
    (Spark's TaskContext), so a test can tell a task retry (same epoch, attempt 1) from a restarted batch; every
    close() to `<marker>.closes` as `run partition epoch attempt rows_seen error_type` (run: which start of the query,
    0 first, 1 after one restart), so a test can count the rows a failure made Spark send again."""

    run = 0  # set before each start(): Spark pickles the writer then

    def __init__(self, config, poison_key: int, marker: str, wait_for_hold: bool = False):
        super().__init__(config)
        self.poison_key, self.marker, self.wait_for_hold = poison_key, marker, wait_for_hold

    def open(self, partition_id: int, epoch_id: int) -> bool:
        from pyspark import TaskContext

        context = TaskContext.get()
        self.attempt = context.attemptNumber() if context is not None else -1
        self.seen = 0
        _append(self.marker + ".opens", f"{partition_id} {epoch_id} {self.attempt}")
        return super().open(partition_id, epoch_id)

    def process(self, row) -> None:
        self.seen += 1
        if row["id"] == self.poison_key and not os.path.exists(self.marker):
            Path(self.marker).write_text(f"failed partition {self.partition_id} epoch {self.epoch_id}\n")
            if self.wait_for_hold:  # fail only once the driver's DAG scheduler is held (SchedulerHold)
                _wait_for(lambda: os.path.exists(self.marker + ".held"), HOLD_LIMIT_S)
            raise RuntimeError(f"injected failure at key {self.poison_key}")
        super().process(row)

    def close(self, error) -> None:
        _append(
            self.marker + ".closes",
            f"{self.run} {self.partition_id} {self.epoch_id} {self.attempt} {self.seen} {type(error).__name__}",
        )
        super().close(error)


# The longest the hold waits for a step of the other side; reached only when Spark no longer behaves as described.
HOLD_LIMIT_S = 120.0


def _wait_for(condition, limit_s: float) -> bool:
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


class SchedulerHold(AccumulatorParam):
    """Holds the driver's DAG scheduler until the failed task's retry has had its answer about committing.

    The DAG scheduler's event loop merges a finished task's Python accumulator updates by sending them to the
    driver's Python process and waiting for its reply (PythonAccumulatorV2.merge); the driver calls addInPlace
    there. This addInPlace, in the driver only, writes `<marker>.held` and returns once `<marker>.closes` shows the
    retry's close(): a Python writer's close() comes after the JVM task's commit request was answered. While the
    loop waits, it cannot handle the failure of the first attempt, which is what frees that attempt's permission
    to commit. So the retry always asks while the first attempt still holds it."""

    def __init__(self, marker: str, driver_pid: int):
        self.marker, self.driver_pid = marker, driver_pid

    def zero(self, value):
        return 0

    def addInPlace(self, value1, value2):
        if os.getpid() == self.driver_pid:  # not in the executor's worker that ran the task
            Path(self.marker + ".held").touch()
            _wait_for(self._retry_closed, HOLD_LIMIT_S)
        return value1 + value2

    def _retry_closed(self) -> bool:
        failed = Path(self.marker).read_text().split()  # "failed partition P epoch E"
        closes = Path(self.marker + ".closes")
        lines = closes.read_text().splitlines() if closes.exists() else []
        return any(line.split()[1:4] == [failed[2], failed[4], "1"] for line in lines)


def hold_scheduler_when_the_task_fails(spark, marker: str) -> threading.Thread:
    """Once the writer has met the poison row (the marker exists), run a one-task job whose accumulator update
    holds the DAG scheduler (SchedulerHold); the writer raises only after that."""

    def run() -> None:
        if not _wait_for(lambda: os.path.exists(marker), HOLD_LIMIT_S):
            return
        hold = spark.sparkContext.accumulator(0, SchedulerHold(marker, os.getpid()))
        spark.sparkContext.parallelize([1], 1).foreach(lambda n: hold.add(n))

    thread = threading.Thread(target=run, name="scheduler-hold", daemon=True)
    thread.start()
    return thread


class RecordingSink(PostgresSink):
    """A PostgresSink that appends one line per open() and close() call to `log_path`, so a test can check how Spark
    drives a foreach writer under a real query:

        open  partition epoch backend_pid
        close partition epoch rows_seen error_type backend_pid committed_at_close

    backend_pid is the Postgres connection's `pg_backend_pid()` (one connection per task and batch when open and
    close agree); committed_at_close says whether the checkpoint's `commits/<epoch>` file already existed when
    close() was called (given `checkpoint`)."""

    def __init__(self, config, log_path: str, checkpoint: str | None = None):
        super().__init__(config)
        self.log_path, self.checkpoint = log_path, checkpoint

    def open(self, partition_id: int, epoch_id: int) -> bool:
        self.seen = 0
        opened = super().open(partition_id, epoch_id)
        self._record(f"open {partition_id} {epoch_id} {self._backend_pid()}")
        return opened

    def process(self, row) -> None:
        self.seen += 1
        super().process(row)

    def close(self, error) -> None:
        committed = self.checkpoint is not None and os.path.exists(
            os.path.join(self.checkpoint, "commits", str(self.epoch_id))
        )
        self._record(
            f"close {self.partition_id} {self.epoch_id} {self.seen} {type(error).__name__} "
            f"{self._backend_pid()} {int(committed)}"
        )
        super().close(error)

    def _backend_pid(self) -> int:
        conn = getattr(self, "conn", None)
        if conn is None:
            return -1
        return conn.get_backend_pid()

    def _record(self, line: str) -> None:
        _append(self.log_path, line)


def main() -> None:
    """Run the pipeline with a FailOnceSink until the table holds --rows rows; exits 0 when the query had no error.

    With --restarts N a query that fails is started again from its checkpoint, up to N times (what a supervisor or
    an on-call engineer does); each failure's first line is printed as `query_error[i]=...`, and the exit code is 0
    only when the last query had no error. With --commit-log PATH the driver logs who held each partition's commit
    there (log4j2-commits.properties), and the failed task's retry is printed as `retry_outcome=...`
    (rtm_lab.task_commits). --hold-scheduler makes the retry ask before the failed attempt's permission is freed."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    for name in ("--bootstrap", "--topic", "--dsn", "--schema", "--checkpoint", "--marker"):
        parser.add_argument(name, required=True)
    parser.add_argument("--poison-key", type=int, required=True)
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--dead-letters", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=90)
    parser.add_argument("--dedup", action="store_true", help="dropDuplicates before the writer (a shuffle)")
    parser.add_argument("--restarts", type=int, default=0, help="restart a failed query from its checkpoint")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark conf; repeatable")
    parser.add_argument("--commit-log", metavar="PATH", help="the driver's log of commit permissions, to this file")
    parser.add_argument(
        "--hold-scheduler", action="store_true", help="hold the DAG scheduler until the retry was answered"
    )
    args = parser.parse_args()
    confs = dict(item.split("=", 1) for item in args.conf)

    from rtm_lab import task_commits
    from rtm_lab.spark import spark_session

    if args.commit_log:
        confs.update(commit_log_conf(args.commit_log))
    # With dedup, the page's session settings for the streaming shuffle (a 5 ms wait, a buffer that holds a dead letter).
    spark = spark_session("rtm-fault", conf={**(SESSION_CONF if args.dedup else {}), **confs})
    config = SinkConfig(dsn=args.dsn, schema=args.schema, table="events", max_rows=200, max_dwell_ms=50)
    sink = FailOnceSink(config, args.poison_key, args.marker, wait_for_hold=args.hold_scheduler)
    found, errors = run_until_written(
        spark,
        sink,
        args.bootstrap,
        args.topic,
        args.checkpoint,
        (args.rows, args.dead_letters),
        dedup=args.dedup,
        restarts=args.restarts,
        timeout_s=args.timeout,
    )
    for i, failure in enumerate(errors[: args.restarts]):
        print(f"query_error[{i}]={_first_line(failure)}", flush=True)
        # Spark's own account of the failure: which task, how many attempts it was allowed.
        print(f"stage_failure[{i}]={_stage_failure(failure)}", flush=True)
    error = errors[-1] if len(errors) > args.restarts else None
    if args.commit_log:
        retry = task_commits.trace(Path(args.commit_log).read_text())
        print(f"retry_outcome={retry.outcome if retry else None}", flush=True)
    print(
        f"rows={found.rows} dead_letters={found.dead_letters} restarts={min(len(errors), args.restarts)} "
        f"query_error={error}",
        flush=True,
    )
    raise SystemExit(0 if error is None else 3)


def command(
    bootstrap: str,
    topic: str,
    dsn: str,
    schema: str,
    folder: Path,
    poison_key: int,
    expected: tuple[int, int],
    *confs: str,
    dedup: bool = False,
    restarts: int = 0,
    hold_scheduler: bool = False,
) -> list[str]:
    """The command that runs main() in a new Python process, so with its own Spark driver: the checkpoint, the
    marker files and the driver's commit log (`spark.log`) go into `folder`, and `expected` is (rows, dead letters)."""
    return [
        *(sys.executable, "-m", "rtm_lab.apps.faults", "--bootstrap", bootstrap, "--topic", topic),
        *("--dsn", dsn, "--schema", schema, "--checkpoint", str(folder / "checkpoint")),
        *("--marker", str(folder / "failed-once"), "--poison-key", str(poison_key)),
        *("--commit-log", str(folder / "spark.log")),
        *("--rows", str(expected[0]), "--dead-letters", str(expected[1])),
        *(("--dedup",) if dedup else ()),
        *(("--hold-scheduler",) if hold_scheduler else ()),
        *("--restarts", str(restarts)),
        # A slow machine (a standalone cluster beside two busy loops) took over 90 s to reach the poison key.
        *("--timeout", "180"),
        *(arg for conf in confs for arg in ("--conf", conf)),
    ]


def commit_log_conf(path: str) -> dict[str, str]:
    """Spark settings that make a new session's driver log who holds each partition's commit to `path`."""
    from rtm_lab.spark import LOG4J_COMMITS_CONFIG

    # The driver's options only: on a cluster the executors would overwrite the same file.
    return {
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J_COMMITS_CONFIG} -Drtm.spark.log={path}"
    }


def run_until_written(
    spark,
    sink: FailOnceSink,
    bootstrap: str,
    topic: str,
    checkpoint: str,
    expected: tuple[int, int],
    *,
    dedup: bool = False,
    restarts: int = 0,
    timeout_s: float = 90,
):
    """Run the pipeline with `sink` until the table holds `expected` (rows, dead letters), the time is up, or the
    query failed; start a failed query again from its checkpoint, up to `restarts` times. Return the last counts
    and the error of each query that failed, in order."""
    from rtm_lab import sink_check

    config = sink.config
    errors: list[BaseException] = []
    while True:
        sink.run = len(errors)
        query = start_pipeline(spark, bootstrap, topic, sink, checkpoint, dedup=dedup, batch_duration=TEST_INTERVAL)
        if sink.wait_for_hold and not errors:
            hold_scheduler_when_the_task_fails(spark, sink.marker)
        found = sink_check.wait_for(
            config.dsn, config.schema, config.table, *expected, timeout_s=timeout_s, query=query
        )
        error = query.exception()
        query.stop()
        if error is not None:
            errors.append(error)
        if error is None or len(errors) > restarts:
            return found, errors


def _stage_failure(error) -> str:
    lines = [line.strip() for line in str(error).splitlines() if "Job aborted due to stage failure" in line]
    return lines[0][:300] if lines else "none"


def _first_line(error) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


if __name__ == "__main__":
    main()

"""Faults and observations for the Postgres pipeline's tests: a sink whose task fails once, a sink that records
Spark's calls, and a runner that retries failed tasks.

These sinks live in an installed module (not a test file) because Spark's Python workers unpickle them.
"""

import argparse
import os
from pathlib import Path

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

    def __init__(self, config, poison_key: int, marker: str):
        super().__init__(config)
        self.poison_key, self.marker = poison_key, marker

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
            raise RuntimeError(f"injected failure at key {self.poison_key}")
        super().process(row)

    def close(self, error) -> None:
        _append(
            self.marker + ".closes",
            f"{self.run} {self.partition_id} {self.epoch_id} {self.attempt} {self.seen} {type(error).__name__}",
        )
        super().close(error)


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
    only when the last query had no error."""
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
    args = parser.parse_args()
    confs = dict(item.split("=", 1) for item in args.conf)

    from rtm_lab import sink_check
    from rtm_lab.spark import spark_session

    # With dedup, the page's session settings for the streaming shuffle (a 5 ms wait, a buffer that holds a dead letter).
    spark = spark_session("rtm-fault", conf={**(SESSION_CONF if args.dedup else {}), **confs})
    config = SinkConfig(dsn=args.dsn, schema=args.schema, table="events", max_rows=200, max_dwell_ms=50)
    sink = FailOnceSink(config, args.poison_key, args.marker)
    failures = 0
    while True:
        sink.run = failures
        query = start_pipeline(
            spark, args.bootstrap, args.topic, sink, args.checkpoint, dedup=args.dedup, batch_duration=TEST_INTERVAL
        )
        # Returns when the rows are there, the time is up, or the query failed.
        found = sink_check.wait_for(
            args.dsn, args.schema, "events", args.rows, args.dead_letters, timeout_s=args.timeout, query=query
        )
        error = query.exception()
        query.stop()
        if error is None or failures >= args.restarts:
            break
        print(f"query_error[{failures}]={_first_line(error)}", flush=True)
        # Spark's own account of the failure: which task, how many attempts it was allowed.
        print(f"stage_failure[{failures}]={_stage_failure(error)}", flush=True)
        failures += 1
    print(f"rows={found.rows} dead_letters={found.dead_letters} restarts={failures} query_error={error}", flush=True)
    raise SystemExit(0 if error is None else 3)


def _stage_failure(error) -> str:
    lines = [line.strip() for line in str(error).splitlines() if "Job aborted due to stage failure" in line]
    return lines[0][:300] if lines else "none"


def _first_line(error) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


if __name__ == "__main__":
    main()

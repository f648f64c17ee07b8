"""Faults and observations for the Postgres pipeline's tests: a sink whose task fails once, a sink that records
Spark's calls, and a runner that retries failed tasks.

These sinks live in an installed module (not a test file) because Spark's Python workers unpickle them.
"""

import argparse
import os
from pathlib import Path

from snippets.guides.kafka_to_postgres import start_pipeline
from snippets.guides.postgres_sink import PostgresSink, SinkConfig

# The minimum real-time interval, not the recommended 5 minutes: these runs need batch ends (offset commits, a Python
# writer's rows released) within seconds.
TEST_INTERVAL = "5 seconds"


class FailOnceSink(PostgresSink):
    """Raises in process() on the first row whose key is `poison_key`, once per marker file: the retried task (or
    a restarted query) then goes through."""

    def __init__(self, config, poison_key: int, marker: str):
        super().__init__(config)
        self.poison_key, self.marker = poison_key, marker

    def process(self, row) -> None:
        if row["id"] == self.poison_key and not os.path.exists(self.marker):
            Path(self.marker).write_text(f"failed partition {self.partition_id} epoch {self.epoch_id}\n")
            raise RuntimeError(f"injected failure at key {self.poison_key}")
        super().process(row)


class RecordingSink(PostgresSink):
    """A PostgresSink that appends one line per open() and close() call to `log_path` (partition, epoch, rows seen,
    error), so a test can check how Spark drives a foreach writer under a real query."""

    def __init__(self, config, log_path: str):
        super().__init__(config)
        self.log_path = log_path

    def open(self, partition_id: int, epoch_id: int) -> bool:
        self.seen = 0
        self._record(f"open {partition_id} {epoch_id}")
        return super().open(partition_id, epoch_id)

    def process(self, row) -> None:
        self.seen += 1
        super().process(row)

    def close(self, error) -> None:
        self._record(f"close {self.partition_id} {self.epoch_id} {self.seen} {type(error).__name__}")
        super().close(error)

    def _record(self, line: str) -> None:
        with open(self.log_path, "a") as out:
            out.write(line + "\n")


def main() -> None:
    """Run the pipeline with a FailOnceSink until the table holds --rows rows; exits 0 when it did."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    for name in ("--bootstrap", "--topic", "--dsn", "--schema", "--checkpoint", "--marker"):
        parser.add_argument(name, required=True)
    parser.add_argument("--poison-key", type=int, required=True)
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--dead-letters", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=90)
    args = parser.parse_args()

    from rtm_lab import sink_check
    from rtm_lab.spark import spark_session

    spark = spark_session("rtm-fault")
    config = SinkConfig(dsn=args.dsn, schema=args.schema, table="events", max_rows=200, max_dwell_ms=50)
    query = start_pipeline(
        spark,
        args.bootstrap,
        args.topic,
        FailOnceSink(config, args.poison_key, args.marker),
        args.checkpoint,
        real_time=TEST_INTERVAL,
    )
    found = sink_check.wait_for(
        args.dsn, args.schema, "events", args.rows, args.dead_letters, timeout_s=args.timeout, query=query
    )
    error = query.exception()
    query.stop()
    print(f"rows={found.rows} dead_letters={found.dead_letters} query_error={error}", flush=True)
    raise SystemExit(0 if error is None else 3)


if __name__ == "__main__":
    main()

"""Kafka -> Kafka in real-time mode, written so that a restart's replayed rows can be
recognised downstream.

Real-time mode sends rows to the sink as they arrive but records progress (offsets, then
a commit) only when a batch ends. Stop or crash mid-batch and the
restarted query reads the uncommitted part again: the sink sees those rows twice
(at-least-once). The fix lives in the sink: give every row a key that identifies its
source record, and make the sink keep one row per key.

    python snippets/reference/delivery_semantics.py SOURCE_TOPIC SINK_TOPIC

runs the keyed copy on KAFKA_BOOTSTRAP_SERVERS until stopped, printing the committed
batches at the end of each batch.
"""

# --8<-- [start:imports]
import json
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

# How often progress (offsets, then a commit) is recorded: rows after the last commit
# are read again on restart. 5 minutes is Spark's default (5 seconds the default
# minimum): a longer batch duration means fewer stalls, more to replay.
BATCH_DURATION = "5 minutes"
# --8<-- [end:imports]


# --8<-- [start:keyed_copy]
def with_source_position(raw: DataFrame) -> DataFrame:
    """Key each output record by where its input came from: a replay produces the same
    key and the same value."""
    position = F.concat_ws(
        "/",
        F.col("topic"),
        F.col("partition").cast("string"),
        F.col("offset").cast("string"),
    )
    return raw.select(position.alias("key"), F.col("value"))


def read_source(spark: SparkSession, bootstrap: str, source: str) -> DataFrame:
    """The source topic from its first record: a restart resumes from the checkpoint's
    offsets instead."""
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
    )


def start_copy(
    spark: SparkSession,
    bootstrap: str,
    source: str,
    sink: str,
    checkpoint: str,
    batch_duration: str = BATCH_DURATION,
) -> StreamingQuery:
    raw = read_source(spark, bootstrap, source)
    return (
        with_source_position(raw)
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .outputMode("update")
        .trigger(realTime=batch_duration)
        .start()
    )


# --8<-- [end:keyed_copy]


# --8<-- [start:foreach_copy]
def start_foreach_copy(
    spark: SparkSession,
    bootstrap: str,
    source: str,
    out_dir: str,
    checkpoint: str,
    batch_duration: str = BATCH_DURATION,
) -> StreamingQuery:
    """The same copy through a Python `foreach` writer that appends each row's key to a
    file per worker process."""

    def write(row) -> None:
        import os

        with open(os.path.join(out_dir, f"{os.getpid()}.txt"), "a") as out:
            out.write(row.key + "\n")

    raw = read_source(spark, bootstrap, source)
    return (
        with_source_position(raw)
        .writeStream.foreach(write)
        .option("checkpointLocation", checkpoint)
        .outputMode("update")
        .trigger(realTime=batch_duration)
        .start()
    )


def foreach_output(out_dir: str) -> list[str]:
    return [
        line
        for path in sorted(Path(out_dir).glob("*.txt"))
        for line in path.read_text().splitlines()
    ]


# --8<-- [end:foreach_copy]


# --8<-- [start:committed_batches]
def committed_batches(checkpoint: str) -> list[int]:
    """Batch ids whose end the query has recorded in `<checkpoint>/commits`; rows after
    the last one may replay."""
    folder = Path(checkpoint) / "commits"
    return sorted(int(p.name) for p in folder.glob("[0-9]*")) if folder.exists() else []


def committed_offsets(checkpoint: str) -> dict[str, dict[str, int]]:
    """The Kafka end offsets of the last committed batch: a restart resumes from exactly
    here."""
    done = committed_batches(checkpoint)
    if not done:
        return {}
    lines = (Path(checkpoint) / "offsets" / str(done[-1])).read_text().splitlines()
    # Line 1 is the log version, line 2 the batch metadata, then one line per source.
    offsets: dict[str, dict[str, int]] = {}
    for line in lines[2:]:
        offsets.update(json.loads(line))
    return offsets


def rows_committed(checkpoint: str) -> int:
    """How many source records lie before the committed offsets (topics that start at
    offset 0)."""
    return sum(sum(parts.values()) for parts in committed_offsets(checkpoint).values())


# --8<-- [end:committed_batches]


# --8<-- [start:dedupe]
def latest_per_key(records) -> dict[bytes, bytes]:
    """What an idempotent sink keeps: one value per key, so a replayed record overwrites
    its first copy."""
    return {r.key: r.value for r in records}


# --8<-- [end:dedupe]


if __name__ == "__main__":
    import os
    import sys
    import tempfile
    import time

    if len(sys.argv) != 3:
        sys.exit(__doc__)
    # The Kafka connector comes from spark.jars.packages in spark-defaults.conf
    # (in SPARK_CONF_DIR), or from spark-submit --packages.
    spark = SparkSession.builder.appName("delivery-semantics").getOrCreate()
    # A temporary checkpoint, removed when the query ends (Ctrl-C included): a run
    # leaves nothing behind.
    with tempfile.TemporaryDirectory(prefix="rtm-checkpoint-") as checkpoint:
        query = start_copy(
            spark,
            os.environ["KAFKA_BOOTSTRAP_SERVERS"],
            sys.argv[1],
            sys.argv[2],
            checkpoint,
        )
        while query.isActive:
            time.sleep(5)
            print(
                "committed batches:",
                committed_batches(checkpoint),
                "rows before them:",
                rows_committed(checkpoint),
            )

"""Two pieces of real-time mode advice from other sources, as plain PySpark, for
docs/reference/advice-checked.md.

`stamped_rows()` stamps each row with `current_timestamp()`, as some pipelines do to
mark a row's time; the test feeds rows at two moments inside one batch and reads the
stamps. The two class names below go into `spark.shuffle.manager`;
scripts/rtm_lab/probes/shuffle_manager.py starts a session with each of them.
"""

from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from snippets.reference.errors import read_events, to_kafka

# Spark's default batch duration: longer than the test, so every row lands in batch 0.
DEFAULT_BATCH_DURATION = "5 minutes"


# --8<-- [start:stamped_rows]
def stamped_rows(
    spark, bootstrap, source, sink, checkpoint, duration=DEFAULT_BATCH_DURATION
) -> StreamingQuery:
    events = read_events(spark, bootstrap, source)  # id, k, ts (the Kafka timestamp)
    # Misleading: in real-time mode current_timestamp() is the batch's start time, one
    # value for every row the batch passes on. Keep `ts`, or a time the producer set.
    stamped = events.withColumn("stamped_at", F.current_timestamp())
    return (
        to_kafka(stamped, bootstrap, sink, checkpoint)
        .outputMode("update")
        .trigger(realTime=duration)
        .start()
    )


# --8<-- [end:stamped_rows]

# A published cluster configuration (databricks-blogposts PR #75) named the first. The
# second is Spark 4.3.0's default manager for real-time (pipelined) shuffles.
MULTI_SHUFFLE_MANAGER = "org.apache.spark.shuffle.streaming.MultiShuffleManager"
STREAMING_SHUFFLE_MANAGER = "org.apache.spark.shuffle.streaming.StreamingShuffleManager"

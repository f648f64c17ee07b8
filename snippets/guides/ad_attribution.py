"""Ad attribution (requests matched to impressions, "acks") with Python transformWithState.

Per viewing session a value state holds the ad request, a list state holds acks that arrived before their request,
and a processing-time timer closes the session after the attribution window: orphan acks and unacknowledged requests
are reported, then every state variable is cleared, so state stays bounded whatever the input.

Run it against the lab (`eval "$(python scripts/lab.py env)"` first):

    python snippets/guides/ad_attribution.py SOURCE_TOPIC SINK_TOPIC
"""

import os
import sys
import tempfile

# --8<-- [start:processor]
from collections.abc import Iterator

from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)
from pyspark.sql.types import LongType, StringType, StructField, StructType

REQUEST_STATE = StructType(
    [
        StructField("request_id", LongType()),
        StructField("ad_id", StringType()),
        StructField("source_ts_ms", LongType()),
        StructField("acks", LongType()),
    ]
)
ACK_STATE = StructType([StructField("ack_id", LongType()), StructField("source_ts_ms", LongType())])
OUTPUT = StructType(
    [
        StructField("session_id", StringType()),
        StructField("outcome", StringType()),  # matched | orphan_ack | unacked_request
        StructField("id", LongType()),  # the ack's event id, or the request's for unacked_request
        StructField("request_id", LongType()),
        StructField("ad_id", StringType()),
        # Kafka timestamp of the later of the two events: the one that completed the match.
        StructField("source_ts_ms", LongType()),
    ]
)


class AdAttribution(StatefulProcessor):
    def __init__(self, window_ms: int):
        self.window_ms = window_ms

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.request = handle.getValueState("request", REQUEST_STATE)
        self.early_acks = handle.getListState("early_acks", ACK_STATE)

    def handleInputRows(self, key, rows: Iterator[Row], timerValues: TimerValues) -> Iterator[Row]:
        (session_id,) = key
        if not list(self.handle.listTimers()):
            # One timer per session, from its first event: the attribution window.
            self.handle.registerTimer(timerValues.getCurrentProcessingTimeInMs() + self.window_ms)
        request = self.request.get()
        matched = []
        for row in rows:
            if row.kind == "request" and request is None:
                request = (row.event_id, row.ad_id, row.source_ts_ms, 0)
                # A late request: every ack that came first is attributed now.
                for ack_id, ack_ts in self.early_acks.get() if self.early_acks.exists() else []:
                    matched.append((ack_id, max(ack_ts, row.source_ts_ms)))
                self.early_acks.clear()
            elif row.kind == "ack" and request is not None:
                matched.append((row.event_id, max(row.source_ts_ms, request[2])))
            elif row.kind == "ack":
                self.early_acks.appendValue((row.event_id, row.source_ts_ms))
        if request is not None:
            request = (request[0], request[1], request[2], request[3] + len(matched))
            self.request.update(request)
        for ack_id, ts in matched:
            yield Row(
                session_id=session_id,
                outcome="matched",
                id=ack_id,
                request_id=request[0],
                ad_id=request[1],
                source_ts_ms=ts,
            )

    def handleExpiredTimer(self, key, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo) -> Iterator[Row]:
        (session_id,) = key
        request = self.request.get()
        if request is not None and request[3] == 0:
            yield Row(
                session_id=session_id,
                outcome="unacked_request",
                id=request[0],
                request_id=request[0],
                ad_id=request[1],
                source_ts_ms=request[2],
            )
        if self.early_acks.exists():
            for ack_id, ack_ts in self.early_acks.get():
                yield Row(
                    session_id=session_id,
                    outcome="orphan_ack",
                    id=ack_id,
                    request_id=None,
                    ad_id=None,
                    source_ts_ms=ack_ts,
                )
        # The window is over: nothing of this session stays in the state store.
        self.request.clear()
        self.early_acks.clear()

    def close(self) -> None:
        pass


# --8<-- [end:processor]

# --8<-- [start:pipeline]
from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql.streaming import StreamingQuery  # noqa: E402

EVENT = StructType(
    [
        StructField("session_id", StringType()),
        StructField("kind", StringType()),  # request | ack
        StructField("event_id", LongType()),
        StructField("ad_id", StringType()),
    ]
)


# Python transformWithState fails in real-time mode on OSS Spark 4.3 (see the page): the pipeline runs micro-batch.
MICRO_BATCH_INTERVAL = "1 second"
STATE_STORE_CONF = "spark.sql.streaming.stateStore.providerClass"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def attribute(raw: DataFrame, window_ms: int) -> DataFrame:
    events = raw.select(
        F.from_json(F.col("value").cast("string"), EVENT).alias("e"),
        F.unix_millis(F.col("timestamp")).alias("source_ts_ms"),
    ).select("e.*", "source_ts_ms")
    out = events.groupBy("session_id").transformWithState(
        statefulProcessor=AdAttribution(window_ms),
        outputStructType=OUTPUT,
        outputMode="Update",
        timeMode="ProcessingTime",
    )
    return out.select(F.col("session_id").alias("key"), F.to_json(F.struct("*")).alias("value"))


def start_pipeline(
    spark: SparkSession,
    bootstrap: str,
    source_topic: str,
    sink_topic: str,
    checkpoint: str,
    window_ms: int = 60_000,
    trigger: dict | None = None,
) -> StreamingQuery:
    """`trigger` is passed to `DataStreamWriter.trigger`; by default a micro-batch every MICRO_BATCH_INTERVAL."""
    # transformWithState keeps its state only in RocksDB. The query copies the session's settings when it starts,
    # so the setting is restored afterwards and other queries of the session keep theirs.
    # Only an explicit setting is put back: writing Spark's default back explicitly would make real-time queries
    # of the session fail, as RTM rejects an explicitly non-RocksDB provider (SQL_CONFIGURATION_NOT_SUPPORTED).
    previous = spark.conf.getAll.get(STATE_STORE_CONF)
    spark.conf.set(STATE_STORE_CONF, ROCKSDB_PROVIDER)
    try:
        return _start(spark, bootstrap, source_topic, sink_topic, checkpoint, window_ms, trigger)
    finally:
        if previous is None:
            spark.conf.unset(STATE_STORE_CONF)
        else:
            spark.conf.set(STATE_STORE_CONF, previous)


def _start(spark, bootstrap, source_topic, sink_topic, checkpoint, window_ms, trigger) -> StreamingQuery:
    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source_topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    return (
        attribute(raw, window_ms)
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink_topic)
        .option("checkpointLocation", checkpoint)
        .outputMode("update")
        .trigger(**(trigger or {"processingTime": MICRO_BATCH_INTERVAL}))
        .start()
    )


# --8<-- [end:pipeline]


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    # The Kafka connector comes from `spark.jars` (e.g. spark-submit --jars, or PYSPARK_SUBMIT_ARGS).
    # A temporary checkpoint, removed when the query ends (Ctrl-C included): a run leaves nothing behind.
    with tempfile.TemporaryDirectory(prefix="ad-attribution-ckpt-") as checkpoint:
        query = start_pipeline(
            SparkSession.builder.appName("ad-attribution").getOrCreate(),
            os.environ["KAFKA_BOOTSTRAP_SERVERS"],
            sys.argv[1],
            sys.argv[2],
            checkpoint,
        )
        query.awaitTermination()

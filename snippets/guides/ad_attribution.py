"""Ad attribution (requests matched to impressions, "acks") with transformWithState, in
Python and on the JVM.

Per key (viewing session, campaign) a value state holds the ad request, a list state
holds acks that arrived before their request, and a processing-time timer closes the key
after the attribution window: orphan acks and unacknowledged requests are reported, then
every state variable is cleared, so state stays bounded whatever the input. The Python
processor runs in micro-batch; its JVM twin
(snippets/jvm/rtmlab/AdAttributionProcessor.java) runs in real-time mode, which OSS
Spark 4.3 refuses for the Python operator.

Run it against the lab (`eval "$(python scripts/lab.py env)"` first):

    python snippets/guides/ad_attribution.py SOURCE_TOPIC SINK_TOPIC        # Python
    python snippets/guides/ad_attribution.py SOURCE_TOPIC SINK_TOPIC --jvm  # JVM

(the Python processor in micro-batch, the JVM one in real-time mode).
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
ACK_STATE = StructType(
    [StructField("ack_id", LongType()), StructField("source_ts_ms", LongType())]
)
OUTPUT = StructType(
    [
        StructField("session_id", StringType()),
        StructField("campaign_id", StringType()),
        StructField("outcome", StringType()),  # matched | orphan_ack | unacked_request
        StructField(
            "id", LongType()
        ),  # the ack's event id, or the request's for unacked_request
        StructField("request_id", LongType()),
        StructField("ad_id", StringType()),
        # Kafka timestamp of the later of the two events: the one that completed the
        # match.
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

    def handleInputRows(
        self, key, rows: Iterator[Row], timerValues: TimerValues
    ) -> Iterator[Row]:
        session_id, campaign_id = key
        if not list(self.handle.listTimers()):
            # One timer per key, from its first event: the attribution window.
            self.handle.registerTimer(
                timerValues.getCurrentProcessingTimeInMs() + self.window_ms
            )
        request = self.request.get()
        matched = []
        for row in rows:
            if row.kind == "request" and request is None:
                request = (row.event_id, row.ad_id, row.source_ts_ms, 0)
                # A late request: every ack that came first is attributed now.
                for ack_id, ack_ts in (
                    self.early_acks.get() if self.early_acks.exists() else []
                ):
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
                campaign_id=campaign_id,
                outcome="matched",
                id=ack_id,
                request_id=request[0],
                ad_id=request[1],
                source_ts_ms=ts,
            )

    def handleExpiredTimer(
        self, key, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[Row]:
        session_id, campaign_id = key
        request = self.request.get()
        if request is not None and request[3] == 0:
            yield Row(
                session_id=session_id,
                campaign_id=campaign_id,
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
                    campaign_id=campaign_id,
                    outcome="orphan_ack",
                    id=ack_id,
                    request_id=None,
                    ad_id=None,
                    source_ts_ms=ack_ts,
                )
        # The window is over: nothing of this key stays in the state store.
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
        StructField("campaign_id", StringType()),
        StructField("kind", StringType()),  # request | ack
        StructField("event_id", LongType()),
        StructField("ad_id", StringType()),
    ]
)


# Python transformWithState fails in real-time mode on OSS Spark 4.3 (see the page): the
# pipeline runs micro-batch.
MICRO_BATCH_INTERVAL = "1 second"
STATE_STORE_CONF = "spark.sql.streaming.stateStore.providerClass"
ROCKSDB_PROVIDER = (
    "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
)


def parse_events(raw: DataFrame) -> DataFrame:
    """Kafka rows -> the event columns, plus the record's Kafka timestamp in ms (to
    measure each match's latency)."""
    return raw.select(
        F.from_json(F.col("value").cast("string"), EVENT).alias("e"),
        F.unix_millis(F.col("timestamp")).alias("source_ts_ms"),
    ).select("e.*", "source_ts_ms")


def to_kafka(out: DataFrame) -> DataFrame:
    return out.select(
        F.col("session_id").alias("key"), F.to_json(F.struct("*")).alias("value")
    )


def attribute(raw: DataFrame, window_ms: int) -> DataFrame:
    # The composite key the article groups by: all events of one session and campaign
    # meet in one state instance.
    out = (
        parse_events(raw)
        .groupBy("session_id", "campaign_id")
        .transformWithState(
            statefulProcessor=AdAttribution(window_ms),
            outputStructType=OUTPUT,
            outputMode="Update",
            timeMode="ProcessingTime",
        )
    )
    return to_kafka(out)


def start_pipeline(
    spark: SparkSession,
    bootstrap: str,
    source_topic: str,
    sink_topic: str,
    checkpoint: str,
    window_ms: int = 60_000,
    trigger: dict | None = None,
) -> StreamingQuery:
    """`trigger` is passed to `DataStreamWriter.trigger`; by default a micro-batch every
    MICRO_BATCH_INTERVAL."""
    # transformWithState keeps its state only in RocksDB. The query copies the session's
    # settings when it starts, so the setting is restored afterwards and other queries
    # of the session keep theirs.
    # Only an explicit setting is put back: writing Spark's default back explicitly
    # would make real-time queries of the session fail, as RTM rejects an explicitly
    # non-RocksDB provider (SQL_CONFIGURATION_NOT_SUPPORTED).
    previous = spark.conf.getAll.get(STATE_STORE_CONF)
    spark.conf.set(STATE_STORE_CONF, ROCKSDB_PROVIDER)
    try:
        out = attribute(read_kafka(spark, bootstrap, source_topic), window_ms)
        return write_kafka(
            out,
            bootstrap,
            sink_topic,
            checkpoint,
            trigger or {"processingTime": MICRO_BATCH_INTERVAL},
        )
    finally:
        if previous is None:
            spark.conf.unset(STATE_STORE_CONF)
        else:
            spark.conf.set(STATE_STORE_CONF, previous)


def read_kafka(spark: SparkSession, bootstrap: str, topic: str) -> DataFrame:
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )


def write_kafka(
    out: DataFrame, bootstrap: str, topic: str, checkpoint: str, trigger: dict
) -> StreamingQuery:
    return (
        out.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("checkpointLocation", checkpoint)
        .outputMode("update")
        .trigger(**trigger)
        .start()
    )


# --8<-- [end:pipeline]

# --8<-- [start:jvm]
# The batch duration, 5 minutes (Spark's default): rows are handled as they
# arrive; a batch (its checkpoint, its progress report) ends every 5 minutes.
BATCH_DURATION = "5 minutes"
# Real-time mode's streaming shuffle holds a partly filled network buffer for up to
# spark.shuffle.streaming.networkBufferMaxWaitTimeMs (50 ms by default) before sending
# it to the stateful stage; at a moderate rate that wait is most of each attribution's
# latency. Spark reads it when the session starts.
SESSION_CONF = {"spark.shuffle.streaming.networkBufferMaxWaitTimeMs": "5"}


def attribute_jvm(raw: DataFrame, window_ms: int) -> DataFrame:
    """The same attribution by the JVM processor `rtmlab.AdAttributionProcessor`; its
    jar must be in `spark.jars`."""
    spark = raw.sparkSession
    out = spark._jvm.rtmlab.AdAttributionProcessor.attribute(
        parse_events(raw)._jdf, window_ms
    )
    return to_kafka(DataFrame(out, spark))


def start_real_time_pipeline(
    spark: SparkSession,
    bootstrap: str,
    source_topic: str,
    sink_topic: str,
    checkpoint: str,
    window_ms: int = 60_000,
    batch_duration: str = BATCH_DURATION,
) -> StreamingQuery:
    """Kafka -> JVM ad attribution -> Kafka in real-time mode. Real-time mode uses
    RocksDB for state by default.
    It needs a task slot for every source partition plus every shuffle partition
    (`spark.sql.shuffle.partitions`)."""
    out = attribute_jvm(read_kafka(spark, bootstrap, source_topic), window_ms)
    return write_kafka(
        out, bootstrap, sink_topic, checkpoint, {"realTime": batch_duration}
    )


# --8<-- [end:jvm]


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4) or sys.argv[3:] not in ([], ["--jvm"]):
        sys.exit(__doc__)
    # The Kafka connector (and, with --jvm, the processor's jar) come from `spark.jars`,
    # e.g. spark-submit --jars.
    # A temporary checkpoint, removed when the query ends (Ctrl-C included): a run
    # leaves nothing behind.
    start = start_real_time_pipeline if sys.argv[3:] else start_pipeline
    with tempfile.TemporaryDirectory(prefix="ad-attribution-ckpt-") as checkpoint:
        query = start(
            SparkSession.builder.appName("ad-attribution")
            .config(map=SESSION_CONF)
            .getOrCreate(),
            os.environ["KAFKA_BOOTSTRAP_SERVERS"],
            sys.argv[1],
            sys.argv[2],
            checkpoint,
        )
        query.awaitTermination()

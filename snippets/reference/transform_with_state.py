"""transformWithState in PySpark: a processor that reports how it was called, run in micro-batch and in real-time mode.

    python -m snippets.reference.transform_with_state

runs the processor over a few keyed Kafka rows in micro-batch mode (one call per key per batch) and prints the calls;
`--jvm` runs the JVM twin (snippets/jvm/rtmlab/CallRecorderProcessor.java) in micro-batch and in real-time mode.
"""

import os
import sys
import tempfile

# --8<-- [start:processor]
from collections.abc import Iterator

from pyspark.sql import DataFrame, Row
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import LongType, StringType, StructField, StructType

CALLS_SCHEMA = StructType(
    [
        StructField("key", StringType()),
        StructField("rows_in_call", LongType()),  # how many input rows this handleInputRows call received
        StructField("rows_so_far", LongType()),  # the key's running total, kept in state
    ]
)


class CallRecorder(StatefulProcessor):
    """Emits one row per `handleInputRows` call, so the output shows how Spark grouped the input into calls."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        # State that is not read again within an hour is dropped: without a TTL (or timers that clear it), state
        # for keys that stop arriving lives forever, and a long-running real-time query accumulates all of it.
        self.total = handle.getValueState(
            "rows_so_far", StructType([StructField("n", LongType())]), ttlDurationMs=3_600_000
        )

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        count = sum(1 for _ in rows)
        total = (self.total.get()[0] if self.total.exists() else 0) + count
        self.total.update((total,))
        yield Row(key=key[0], rows_in_call=count, rows_so_far=total)

    def close(self) -> None:
        pass


def record_calls(events: DataFrame, time_mode: str = "ProcessingTime") -> DataFrame:
    """Group Kafka rows by their key and run the processor. A TTL needs a time mode: with `timeMode="None"` Spark
    refuses it (STATEFUL_PROCESSOR_INCORRECT_TIME_MODE_TO_ASSIGN_TTL)."""
    keyed = events.selectExpr("CAST(key AS STRING) AS key")
    return keyed.groupBy("key").transformWithState(
        statefulProcessor=CallRecorder(),
        outputStructType=CALLS_SCHEMA,
        outputMode="Update",
        timeMode=time_mode,
    )


def kafka_rows(spark, bootstrap: str, topic: str) -> DataFrame:
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )


# --8<-- [end:processor]


# --8<-- [start:micro_batch]
def start_micro_batch(calls: DataFrame, checkpoint: str, table: str):
    """Run the processor's output in micro-batch mode into an in-memory table, one batch a second."""
    return (
        calls.writeStream.format("memory")
        .queryName(table)
        .option("checkpointLocation", checkpoint)
        .outputMode("update")
        .trigger(processingTime="1 second")
        .start()
    )


# --8<-- [end:micro_batch]


def wait_for_table_rows(spark, query, table: str, count: int, timeout_s: float = 90.0) -> list[Row]:
    """Poll the memory table until it holds `count` rows (or the query failed, or the timeout passed)."""
    import time

    deadline = time.monotonic() + timeout_s
    rows = spark.table(table).collect()
    while len(rows) < count and time.monotonic() < deadline:
        if query.exception() is not None:
            raise query.exception()
        time.sleep(0.5)
        rows = spark.table(table).collect()
    return rows


# --8<-- [start:real_time]
def start_real_time(spark, bootstrap: str, topic: str, sink: str, checkpoint: str):
    """The same processor in real-time mode: OSS 4.3 fails this query once it runs (see the page)."""
    return (
        record_calls(kafka_rows(spark, bootstrap, topic))
        .selectExpr("key", "to_json(struct(*)) AS value")
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .outputMode("update")
        .trigger(realTime="5 seconds")
        .start()
    )


# --8<-- [end:real_time]

STATE_STORE = {
    # transformWithState needs the RocksDB state store; real-time mode sets it by default, micro-batch does not.
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
}


# --8<-- [start:jvm]
def jvm_record_calls(spark, events: DataFrame) -> DataFrame:
    """The JVM CallRecorderProcessor (snippets/jvm) applied from PySpark; its jar must be in `spark.jars`."""
    return DataFrame(spark._jvm.rtmlab.CallRecorderProcessor.apply(events._jdf), spark)


# --8<-- [end:jvm]


def run_jvm(spark, bootstrap: str, keys: str = "aaabbc", live_keys: str = "aab", timeout_s: float = 90.0) -> dict:
    """The JVM processor over the same rows in micro-batch mode and in real-time mode; returns both call lists."""
    import json
    import time

    from rtm_lab import topics

    source = topics.create_topic(bootstrap, topics.unique_name("tws-jvm"), 2)
    sink = topics.create_topic(bootstrap, topics.unique_name("tws-jvm-out"), 1)
    topics.produce_json(bootstrap, source, [{"id": k} for k in keys])
    result: dict = {"rows": len(keys) + len(live_keys)}
    try:
        calls_df = jvm_record_calls(spark, kafka_rows(spark, bootstrap, source))
        query = start_micro_batch(calls_df, tempfile.mkdtemp(prefix="tws-jvm-mb-"), "jvm_calls")
        rows = wait_for_table_rows(spark, query, "jvm_calls", len(set(keys)))
        query.stop()
        result["micro_batch"] = [json.loads(r.value) for r in rows]

        query = (
            jvm_record_calls(spark, kafka_rows(spark, bootstrap, source))
            .writeStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", sink)
            .option("checkpointLocation", tempfile.mkdtemp(prefix="tws-jvm-rt-"))
            .outputMode("update")
            .trigger(realTime="5 seconds")
            .start()
        )
        calls: list[dict] = []
        deadline = time.monotonic() + timeout_s
        sent_live = False
        while time.monotonic() < deadline and query.exception() is None:
            calls = [json.loads(r.value) for r in topics.read_all(bootstrap, sink, expected=10**6, timeout_s=1)]
            if not sent_live and sum(c["rows_in_call"] for c in calls) >= len(keys):
                # Live rows, sent while the real-time batch runs; about 200 ms apart.
                for k in live_keys:
                    topics.produce_json(bootstrap, source, [{"id": k}])
                    time.sleep(0.2)
                sent_live = True
            if sum(c["rows_in_call"] for c in calls) >= result["rows"]:
                break
        result["real_time"] = calls
        result["real_time_error"] = str(query.exception())[:2000] if query.exception() else None
        result["real_time_plan"] = query._jsq.explainInternal(False)
        query.stop()
    finally:
        topics.delete_topic(bootstrap, source)
        topics.delete_topic(bootstrap, sink)
    return result


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jvm", action="store_true", help="run the JVM processor (snippets/jvm) in both modes")
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    args = parser.parse_args(argv)
    if not args.bootstrap:
        parser.error('no Kafka: pass --bootstrap or run `eval "$(python scripts/lab.py env)"` first')
    from rtm_lab import jvm, topics
    from rtm_lab.spark import connector_jars, spark_session

    conf = dict(STATE_STORE)
    if args.jvm:
        # spark.jars is read when the session starts: the snippets jar goes in beside the Kafka connector.
        conf["spark.jars"] = ",".join(str(p) for p in [*connector_jars(), jvm.build()])
    session = spark_session("transform-with-state", conf=conf)
    if args.jvm:
        print(json.dumps(run_jvm(session, args.bootstrap)))
        return 0
    name = topics.create_topic(args.bootstrap, topics.unique_name("tws"), 2)
    topics.produce_json(args.bootstrap, name, [{"id": k} for k in "aaabbc"])
    query = start_micro_batch(
        record_calls(kafka_rows(session, args.bootstrap, name)), tempfile.mkdtemp(prefix="tws-"), "tws_calls"
    )
    for row in wait_for_table_rows(session, query, "tws_calls", 3):
        print(row)
    query.stop()
    topics.delete_topic(args.bootstrap, name)
    return 0


if __name__ == "__main__":
    sys.exit(main())

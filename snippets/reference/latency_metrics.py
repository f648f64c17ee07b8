"""Measure real-time latencies in open-source Spark, which reports none, from Kafka timestamps and a per-row JVM clock.

    python -m snippets.reference.latency_metrics --rows 200 --rate 50

runs a Kafka -> Spark -> Kafka query in real-time mode on the lab (or KAFKA_BOOTSTRAP_SERVERS) and prints the three
latencies Databricks reports (source queuing, processing, end-to-end) plus the sink write that end-to-end leaves out.
"""

import argparse
import json
import os
import sys
import tempfile
import time

# --8<-- [start:progress]
from pyspark.sql.streaming import StreamingQuery

# What Databricks real-time mode adds to a query's progress; none of these exist in OSS Spark's progress events.
DATABRICKS_LATENCY_KEYS = ("processingLatencyMs", "sourceQueuingLatencyMs", "e2eLatencyMs")


def latency_keys_in_progress(query: StreamingQuery) -> set[str]:
    """Which of the Databricks latency keys appear anywhere in the query's progress events (OSS: none)."""
    text = "\n".join(progress.json for progress in query.recentProgress)
    return {key for key in DATABRICKS_LATENCY_KEYS if key in text}


# --8<-- [end:progress]

# --8<-- [start:stamps]
from pyspark.sql import Column, DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402


def jvm_now_ms() -> Column:
    """The executor's clock, read for every row. `current_timestamp()` cannot do this: Spark fixes it once per batch,
    and a real-time batch lasts the whole trigger interval. `reflect` is non-deterministic, so Spark calls it per row."""
    return F.expr("CAST(reflect('java.lang.System', 'currentTimeMillis') AS BIGINT)")


def stamped(raw: DataFrame, transform=lambda df: df) -> DataFrame:
    """Carry the source record's Kafka timestamp and two executor clock readings through the query:
    when the row was read (right after the scan) and when its output row was ready (just before the sink)."""
    read = raw.select(
        "key",
        "value",
        F.unix_millis("timestamp").alias("source_append_ms"),
        jvm_now_ms().alias("read_ms"),
        F.current_timestamp().alias("batch_ts"),
    )
    out = transform(read)
    return out.select(
        "key",
        F.to_json(
            F.struct(
                F.col("value").cast("string").alias("value"),
                "source_append_ms",
                "read_ms",
                jvm_now_ms().alias("output_ms"),
                F.unix_millis("batch_ts").alias("batch_ts_ms"),
            )
        ).alias("value"),
    )


def start_stamped_query(
    spark: SparkSession, bootstrap: str, source: str, sink: str, checkpoint: str, trigger: dict | None = None
) -> StreamingQuery:
    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
    )
    return (
        stamped(raw)
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .outputMode("update")
        .trigger(**(trigger or {"realTime": "5 seconds"}))
        .start()
    )


# --8<-- [end:stamps]


# --8<-- [start:latencies]
def latencies(sink_value: dict, sink_append_ms: int) -> dict[str, int]:
    """The three Databricks latencies, and the sink write they leave out, from one sink record.
    Both topics use `message.timestamp.type=LogAppendTime`, so the Kafka stamps come from the broker's clock."""
    return {
        # Waiting in Kafka: appended to the source topic -> read by a real-time task. A backlog inflates it.
        "source_queuing_ms": sink_value["read_ms"] - sink_value["source_append_ms"],
        # Inside Spark: read -> output row ready for the sink.
        "processing_ms": sink_value["output_ms"] - sink_value["read_ms"],
        # Databricks' e2e: appended to the source -> output ready. It stops before the sink write.
        "e2e_ms": sink_value["output_ms"] - sink_value["source_append_ms"],
        # What e2e leaves out: output ready -> appended to the sink topic (producer batching, network, broker).
        "sink_write_ms": sink_append_ms - sink_value["output_ms"],
        # What a consumer of the sink topic experiences.
        "kafka_to_kafka_ms": sink_append_ms - sink_value["source_append_ms"],
    }


# --8<-- [end:latencies]

LOG_APPEND_TIME = {"message.timestamp.type": "LogAppendTime"}


def read_latencies(bootstrap: str, sink: str, expected: int, timeout_s: float = 60.0) -> list[dict]:
    """Read the sink topic until `expected` rows arrived; return one dict per row (its values and latencies)."""
    from rtm_lab import topics

    rows = []
    for record in topics.read_all(bootstrap, sink, expected=expected, timeout_s=timeout_s):
        value = json.loads(record.value)
        rows.append({**value, "sink_append_ms": record.timestamp_ms, **latencies(value, record.timestamp_ms)})
    return rows


def produce_paced(bootstrap: str, topic: str, rows: int, rate: float, first_id: int = 0) -> None:
    """Send `rows` small records at about `rate` per second (paced, so they do not queue in Kafka)."""
    from rtm_lab import topics

    producer = topics.producer(bootstrap)
    start = time.monotonic()
    for i in range(rows):
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        producer.send(topic, key=str(first_id + i).encode(), value=json.dumps({"id": first_id + i}).encode())
        producer.flush()
    producer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200, help="rows to send while the query runs")
    parser.add_argument("--rate", type=float, default=50.0, help="rows per second")
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    args = parser.parse_args(argv)
    if not args.bootstrap:
        parser.error('no Kafka: pass --bootstrap or run `eval "$(python scripts/lab.py env)"` first')
    from rtm_lab import latency, topics
    from rtm_lab.spark import spark_session

    spark = spark_session("latency-metrics")
    source = topics.create_topic(args.bootstrap, topics.unique_name("lat-src"), 2, LOG_APPEND_TIME)
    sink = topics.create_topic(args.bootstrap, topics.unique_name("lat-sink"), 2, LOG_APPEND_TIME)
    query = start_stamped_query(spark, args.bootstrap, source, sink, tempfile.mkdtemp(prefix="latency-"))
    try:
        print(f"sending {args.rows} rows at {args.rate}/s ...", file=sys.stderr)
        produce_paced(args.bootstrap, source, args.rows, args.rate)
        rows = read_latencies(args.bootstrap, sink, args.rows)
        for name in ("source_queuing_ms", "processing_ms", "e2e_ms", "sink_write_ms", "kafka_to_kafka_ms"):
            print(f"{name:18} {latency.format_summary(latency.summarize([r[name] for r in rows]))}")
        print("Databricks latency keys in OSS progress:", sorted(latency_keys_in_progress(query)) or "none")
    finally:
        query.stop()
        topics.delete_topic(args.bootstrap, source)
        topics.delete_topic(args.bootstrap, sink)
    return 0


if __name__ == "__main__":
    sys.exit(main())

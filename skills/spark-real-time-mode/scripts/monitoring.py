"""A latency monitor for a real-time query writing to Kafka, exported for Prometheus.

Run it beside the query (it reads the sink topic, and the source topic's end offsets):

    python monitoring.py --bootstrap HOST:PORT --source SOURCE --sink SINK --port 9464

or, for a query writing into PostgreSQL through the Postgres sink's table:

    python monitoring.py --bootstrap HOST:PORT --source SOURCE --table SCHEMA.TABLE \
        --postgres DSN --port 9464

or import it into the driver and add `ProgressGauges` to get batch-end progress too.
"""

# --8<-- [start:monitor]
import argparse
import json
import sys
import threading
import time
import urllib.request
from datetime import timedelta

import psycopg2
from confluent_kafka import Consumer, KafkaException, TopicPartition
from prometheus_client import Counter, Gauge, Histogram, start_http_server
from psycopg2 import sql
from pyspark.sql.streaming import StreamingQueryListener

# 1 ms to 10 s in 1-2-5 steps, base unit seconds: a quantile read from this histogram
# is right to within the bucket it falls in.
LATENCY_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10)

LATENCY = Histogram(
    "rtm_output_latency_seconds",
    "Output record's broker timestamp minus its source record's, per record",
    ["query"],
    buckets=LATENCY_BUCKETS,
)
ROWS_IN = Counter(
    "rtm_input_records", "Records appended to the source topic", ["query"]
)
ROWS_OUT = Counter("rtm_output_records", "Records read from the sink topic", ["query"])
SINCE_LAST_OUT = Gauge(
    "rtm_output_seconds_since_last_record",
    "Seconds since the last output record arrived (grows during a stall)",
    ["query"],
)


def end_offsets(consumer: Consumer, topic: str) -> int:
    """The sum of the topic's end offsets: how many records were ever appended."""
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    total = 0
    for p in partitions:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        total += high
    return total


def wait_for_topic(consumer: Consumer, topic: str, stop: threading.Event) -> list[int]:
    """The topic's partitions, once it exists (a monitor may start before the query)."""
    said = False
    while not stop.is_set():
        found = consumer.list_topics(timeout=10).topics.get(topic)
        if found is not None and found.error is None and found.partitions:
            return sorted(found.partitions)
        if not said:
            print(f"waiting for topic {topic} to exist", file=sys.stderr, flush=True)
            said = True
        stop.wait(1.0)
    return []


def watch_kafka_sink(
    bootstrap: str,
    source: str,
    sink: str,
    query: str = "rtm",
    stop: threading.Event | None = None,
    ready: threading.Event | None = None,
) -> None:
    """Export latency and rates for `query` until `stop` is set. The sink's records
    carry their source record's Kafka timestamp as `source_ts_ms` (the quick start
    pipeline writes it)."""
    stop = stop or threading.Event()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"rtm-monitor-{sink}",  # never joined: partitions are assigned
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 10,
            # A broker that does not answer is reported once, by the exception below,
            # not by librdkafka's own log line for every try.
            "log_level": 2,
        }
    )
    try:
        consumer.list_topics(timeout=5)  # raises KafkaException if no broker answers
        partitions = wait_for_topic(consumer, sink, stop)
        # From the end: the monitor measures what the query writes from now on.
        consumer.assign([TopicPartition(sink, p, -1) for p in partitions])  # -1: end
        last_out = time.time()
        SINCE_LAST_OUT.labels(query).set_function(lambda: time.time() - last_out)
        appended = end_offsets(consumer, source) if partitions else 0
        next_offsets_check = time.monotonic() + 1.0
        if ready is not None:
            ready.set()
        while not stop.is_set():
            for record in consumer.consume(num_messages=1000, timeout=0.1):
                if record.error():
                    continue
                _, out_ms = record.timestamp()
                source_ms = json.loads(record.value())["source_ts_ms"]
                LATENCY.labels(query).observe((out_ms - source_ms) / 1000)
                ROWS_OUT.labels(query).inc()
                last_out = time.time()
            if time.monotonic() >= next_offsets_check:
                now_appended = end_offsets(consumer, source)
                ROWS_IN.labels(query).inc(max(0, now_appended - appended))
                appended = now_appended
                next_offsets_check = time.monotonic() + 1.0
    finally:
        consumer.close()


# --8<-- [end:monitor]

# --8<-- [start:postgres]
# How far back each poll looks again: a row stamped earlier but committed later (a
# long transaction) is still seen. Keep it above the sink's longest transaction.
LATE_COMMIT_S = 10


def watch_postgres_sink(
    dsn: str,
    table: str,
    bootstrap: str,
    source: str,
    query: str = "rtm",
    stop: threading.Event | None = None,
    ready: threading.Event | None = None,
    poll_s: float = 0.5,
) -> None:
    """Export latency for the rows a query writes to `schema.table`: the row's
    `written_at` (the database's clock_timestamp() at the write) minus the event's
    `created_ms`. An index on written_at keeps each poll cheap."""
    stop = stop or threading.Event()
    schema, name = table.split(".")
    select = sql.SQL(
        "SELECT id, written_at, "
        "extract(epoch FROM written_at) * 1000 - created_ms FROM {} "
        "WHERE written_at > %s ORDER BY written_at"
    ).format(sql.Identifier(schema, name))
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "rtm-monitor", "log_level": 2}
    )
    conn = psycopg2.connect(dsn, connect_timeout=5)
    conn.autocommit = True  # each poll sees what was committed since the last
    try:
        consumer.list_topics(timeout=5)  # raises KafkaException if no broker answers
        appended = end_offsets(consumer, source)
        with conn.cursor() as cur:
            cur.execute("SELECT clock_timestamp()")
            newest = cur.fetchone()[0]  # rows written from now on
            seen: dict[tuple, object] = {}  # (id, written_at) -> written_at, recent
            last_out = time.time()
            SINCE_LAST_OUT.labels(query).set_function(lambda: time.time() - last_out)
            if ready is not None:
                ready.set()
            while not stop.wait(poll_s):
                cur.execute(select, (newest - timedelta(seconds=LATE_COMMIT_S),))
                for row_id, written_at, latency_ms in cur.fetchall():
                    if (row_id, written_at) in seen:
                        continue
                    seen[(row_id, written_at)] = written_at
                    LATENCY.labels(query).observe(float(latency_ms) / 1000)
                    ROWS_OUT.labels(query).inc()
                    newest = max(newest, written_at)
                    last_out = time.time()
                horizon = newest - timedelta(seconds=LATE_COMMIT_S)
                seen = {k: w for k, w in seen.items() if w > horizon}
                now_appended = end_offsets(consumer, source)
                ROWS_IN.labels(query).inc(max(0, now_appended - appended))
                appended = now_appended
    finally:
        conn.close()
        consumer.close()


# --8<-- [end:postgres]

# --8<-- [start:listener]
BATCH_ID = Gauge("rtm_batch_id", "Id of the last batch that ended", ["query"])
BATCH_ROWS = Gauge("rtm_batch_input_rows", "Input rows of the last batch", ["query"])
BATCH_PHASES = Gauge(
    "rtm_batch_phase_seconds", "Phases of the last batch", ["query", "phase"]
)
STATE_ROWS = Gauge("rtm_batch_state_rows", "State rows after the last batch", ["query"])
BATCH_END = Gauge(
    "rtm_batch_last_end_timestamp_seconds",
    "When the last batch ended (the query's start until the first one does)",
    ["query"],
)
BATCH_DURATION = Gauge(
    "rtm_configured_batch_duration_seconds",
    "The query's batch duration, as passed to trigger(realTime=...)",
    ["query"],
)


class ProgressGauges(StreamingQueryListener):
    """Spark's batch-end progress as gauges. Real-time mode reports progress once per
    batch, so these move at batch boundaries only (the monitor above moves between)."""

    def __init__(self, batch_duration_s: float):
        self.batch_duration_s = batch_duration_s

    def onQueryStarted(self, event):
        name = event.name or str(event.id)
        BATCH_DURATION.labels(name).set(self.batch_duration_s)
        BATCH_END.labels(name).set(time.time())

    def onQueryProgress(self, event):
        progress = event.progress
        name = progress.name or str(progress.id)
        BATCH_ID.labels(name).set(progress.batchId)
        BATCH_ROWS.labels(name).set(progress.numInputRows)
        for phase, ms in progress.durationMs.items():
            BATCH_PHASES.labels(name, phase).set(ms / 1000)
        STATE_ROWS.labels(name).set(
            sum(s.numRowsTotal for s in progress.stateOperators)
        )
        BATCH_END.labels(name).set(time.time())

    def onQueryIdle(self, event):
        pass

    def onQueryTerminated(self, event):
        pass


# In the driver, before starting the query:
#     start_http_server(9465, addr="127.0.0.1")
#     spark.streams.addListener(ProgressGauges(batch_duration_s=300))
# --8<-- [end:listener]


# --8<-- [start:spark-metrics]
def spark_metrics_conf(ui_port: int = 4040) -> dict[str, str]:
    """Spark's own metrics for Prometheus, served by the driver's UI on `ui_port`:
    executor summaries at /metrics/executors/prometheus, and the metrics system (the
    driver's JVM, scheduler and block manager, and with the last setting the query's
    own source) at /metrics/prometheus."""
    return {
        "spark.ui.enabled": "true",
        "spark.ui.port": str(ui_port),
        "spark.ui.prometheus.enabled": "true",
        "spark.metrics.conf.*.sink.prometheusServlet.class": (
            "org.apache.spark.metrics.sink.PrometheusServlet"
        ),
        "spark.metrics.conf.*.sink.prometheusServlet.path": "/metrics/prometheus",
        "spark.sql.streaming.metricsEnabled": "true",
    }


# --8<-- [end:spark-metrics]


# --8<-- [start:main]
def prometheus_answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True, help="Kafka host:port")
    parser.add_argument("--source", required=True, help="the query's source topic")
    sink = parser.add_mutually_exclusive_group(required=True)
    sink.add_argument("--sink", help="the query's sink topic")
    sink.add_argument("--table", help="the query's Postgres table, schema.table")
    parser.add_argument("--postgres", help="the DSN of the table's database")
    parser.add_argument("--query", default="rtm", help="the `query` label")
    parser.add_argument("--port", type=int, default=9464, help="metrics port")
    parser.add_argument("--host", default="127.0.0.1", help="metrics address")
    parser.add_argument("--prometheus", help="check that this Prometheus answers")
    args = parser.parse_args(argv)
    if args.prometheus and not prometheus_answers(args.prometheus):
        print(f"error: no Prometheus answers at {args.prometheus}", file=sys.stderr)
        return 2
    try:
        start_http_server(args.port, addr=args.host)
    except OSError as error:
        print(
            f"error: cannot serve metrics on {args.host}:{args.port}: {error}",
            file=sys.stderr,
        )
        return 2
    print(f"metrics on http://{args.host}:{args.port}/metrics", flush=True)
    if args.table and not (args.postgres and "." in args.table):
        print("error: --table needs schema.table and --postgres DSN", file=sys.stderr)
        return 2
    try:
        if args.table:
            watch_postgres_sink(
                args.postgres, args.table, args.bootstrap, args.source, args.query
            )
        else:
            watch_kafka_sink(args.bootstrap, args.source, args.sink, args.query)
    except psycopg2.OperationalError as error:
        reason = str(error).strip().splitlines()[0]
        print(f"error: Postgres: {reason}", file=sys.stderr)
        return 2
    except KafkaException as error:
        print(
            f"error: Kafka at {args.bootstrap}: {error.args[0].str()}", file=sys.stderr
        )
        return 2
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
# --8<-- [end:main]

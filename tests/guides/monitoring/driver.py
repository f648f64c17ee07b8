"""The query the live monitoring tests run: the quick-start pipeline in a process of its own (so SIGSTOP stops its
whole driver, Python and JVM), with the monitoring snippet's listener exporting batch-end gauges on a port.

    python driver.py BOOTSTRAP SOURCE SINK CHECKPOINT METRICS_PORT [BATCH_DURATION_S [UI_PORT [HEARTBEAT]]]

BATCH_DURATION_S is the batch duration in seconds (default 300, Spark's default of 5 minutes). With UI_PORT, Spark's UI
listens there with its own metrics for Prometheus switched on, as the monitoring page shows: the executors'
(`spark.ui.prometheus.enabled`), the metrics system's `PrometheusServlet` sink, and the query's own source
(`spark.sql.streaming.metricsEnabled`). HEARTBEAT sets `spark.executor.heartbeatInterval` (default 10s): the
status store behind the executors' endpoint writes some task starts only at a heartbeat.
"""

import sys

from prometheus_client import start_http_server

from rtm_lab.spark import spark_session
from snippets.guides.monitoring import ProgressGauges, spark_metrics_conf
from snippets.quickstart.kafka_to_kafka import BATCH_DURATION, start_pipeline

assert BATCH_DURATION == "5 minutes"

bootstrap, source, sink, checkpoint, port = sys.argv[1:6]
batch_duration_s = int(sys.argv[6]) if len(sys.argv) > 6 else 300
conf = spark_metrics_conf(int(sys.argv[7])) if len(sys.argv) > 7 else {}
if len(sys.argv) > 8:
    conf["spark.executor.heartbeatInterval"] = sys.argv[8]
start_http_server(int(port), addr="127.0.0.1")
spark = spark_session("monitoring-driver", slots=2, conf=conf)
spark.streams.addListener(ProgressGauges(batch_duration_s=batch_duration_s))
query = start_pipeline(spark, bootstrap, source, sink, checkpoint, f"{batch_duration_s} seconds")
print("STARTED", query.id, flush=True)
query.awaitTermination()

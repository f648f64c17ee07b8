"""The query the live monitoring tests pause: the quick-start pipeline in a process of its own (so SIGSTOP stops its
whole driver, Python and JVM), with the monitoring snippet's listener exporting batch-end gauges on a port.

    python driver.py BOOTSTRAP SOURCE SINK CHECKPOINT METRICS_PORT
"""

import sys

from prometheus_client import start_http_server

from rtm_lab.spark import spark_session
from snippets.guides.monitoring import ProgressGauges
from snippets.quickstart.kafka_to_kafka import REAL_TIME_INTERVAL, start_pipeline

INTERVAL_S = 300
assert REAL_TIME_INTERVAL == "5 minutes"  # the listener's interval gauge says the same

bootstrap, source, sink, checkpoint, port = sys.argv[1:6]
start_http_server(int(port), addr="127.0.0.1")
spark = spark_session("monitoring-driver", slots=2)
spark.streams.addListener(ProgressGauges(interval_s=INTERVAL_S))
query = start_pipeline(spark, bootstrap, source, sink, checkpoint)
print("STARTED", query.id, flush=True)
query.awaitTermination()

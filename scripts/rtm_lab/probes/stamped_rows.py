"""Feed paced rows into a source topic and read the stamped query's sink topic back as latencies (ms per row).

Used by the latency-metrics tests and the Kafka tuning probe; the query and the latency arithmetic are the page's
(snippets/reference/latency_metrics.py).
"""

import json
import time

from rtm_lab import topics
from snippets.reference.latency_metrics import latencies

LOG_APPEND_TIME = {"message.timestamp.type": "LogAppendTime"}


def read_latencies(bootstrap: str, sink: str, expected: int, timeout_s: float = 60.0) -> list[dict]:
    """Read the sink topic until `expected` rows arrived; return one dict per row (its values and latencies)."""
    rows = []
    for record in topics.read_all(bootstrap, sink, expected=expected, timeout_s=timeout_s):
        value = json.loads(record.value)
        rows.append({**value, "sink_append_ms": record.timestamp_ms, **latencies(value, record.timestamp_ms)})
    return rows


def produce_paced(bootstrap: str, topic: str, rows: int, rate: float, first_id: int = 0) -> None:
    """Send `rows` small records at about `rate` per second (paced, so they do not queue in Kafka)."""
    producer = topics.producer(bootstrap)
    start = time.monotonic()
    for i in range(rows):
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        producer.send(topic, key=str(first_id + i).encode(), value=json.dumps({"id": first_id + i}).encode())
        producer.flush()
    producer.close()

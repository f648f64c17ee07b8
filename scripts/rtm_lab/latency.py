"""Latency summaries: percentiles over samples in milliseconds, with the sample count beside them."""

import numpy as np

PERCENTILES = (50, 95, 99, 99.9)


def summarize(samples_ms: list[float]) -> dict[str, float | int]:
    if not samples_ms:
        return {"n": 0}
    values = np.asarray(samples_ms, dtype=float)
    summary: dict[str, float | int] = {"n": int(values.size)}
    for p in PERCENTILES:
        summary[f"p{p}_ms"] = round(float(np.percentile(values, p)), 2)
    summary["max_ms"] = round(float(values.max()), 2)
    return summary


def format_summary(summary: dict[str, float | int]) -> str:
    if not summary.get("n"):
        return "no samples"
    return (
        f"n={summary['n']}  p50={summary['p50_ms']:.1f} ms  p95={summary['p95_ms']:.1f} ms  "
        f"p99={summary['p99_ms']:.1f} ms  max={summary['max_ms']:.1f} ms"
    )


class SinkLatencyReader:
    """Reads a sink topic in a background thread and records, per output record, its broker timestamp minus the
    source record's (carried in the payload as `source_ts_ms`). With LogAppendTime on both topics both stamps come
    from the broker's clock, so the figure is Kafka-in to Kafka-out and nothing of the producer."""

    def __init__(self, bootstrap: str, topic: str, ts_field: str = "source_ts_ms", id_field: str = "id"):
        import threading

        self.bootstrap, self.topic, self.ts_field, self.id_field = bootstrap, topic, ts_field, id_field
        self.samples: list[tuple[int, float]] = []  # (event id, latency ms)
        # The sink record's broker timestamp, one per sample in the same order: gaps between records out (the stall
        # at a batch boundary) are measured on these.
        self.out_ts_ms: list[int] = []
        self.seen_ids: set[int] = set()
        self.duplicates = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"reader-{topic}", daemon=True)

    def start(self) -> "SinkLatencyReader":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        import json

        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=10)
        parts = [TopicPartition(self.topic, p) for p in sorted(consumer.partitions_for_topic(self.topic) or [])]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        try:
            while not self._stop.is_set():
                for batch in consumer.poll(timeout_ms=100).values():
                    for message in batch:
                        body = json.loads(message.value)
                        event_id = body[self.id_field]
                        if event_id in self.seen_ids:
                            self.duplicates += 1
                            continue
                        self.seen_ids.add(event_id)
                        self.samples.append((event_id, message.timestamp - body[self.ts_field]))
                        self.out_ts_ms.append(message.timestamp)
        finally:
            consumer.close()

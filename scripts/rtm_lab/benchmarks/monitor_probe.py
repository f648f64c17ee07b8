"""The latency monitor beside one latency-benchmark run, as a user runs it: its own process, scraped by Prometheus.

`MonitorProcess.start` runs snippets/guides/monitoring.py on the run's topics (it reads from the sink's end, so it
sees the production and not the priming), points the lab's Prometheus at it and waits for the first scrape.
`figures` asks Prometheus for p50 and p99 over everything the monitor saw, beside the same percentiles of the
records the benchmark itself read (warm-up included, the same set), and the bucket each record percentile falls in:
PromQL interpolates inside a bucket, so agreement means "the same bucket".
"""

import shutil
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rtm_lab import ports, processes
from rtm_lab.monitoring import prometheus
from rtm_lab.paths import PROJECT_ROOT
from rtm_lab.waiting import wait_until

MONITOR = PROJECT_ROOT / "snippets" / "guides" / "monitoring.py"


def bucket_of(seconds: float) -> tuple[float, float]:
    """(lower, upper] of the monitor's histogram bucket holding this value, in seconds."""
    from snippets.guides.monitoring import LATENCY_BUCKETS

    lower = 0.0
    for upper in LATENCY_BUCKETS:
        if seconds <= upper:
            return lower, upper
        lower = upper
    return lower, float("inf")


@dataclass
class MonitorProcess:
    prom_port: int
    query: str
    pid: int
    started: str
    marker: str
    folder: Path
    targets: Path

    @classmethod
    def start(cls, prom_port: int, bootstrap: str, source: str, sink: str) -> "MonitorProcess":
        query = f"bench{uuid.uuid4().hex[:8]}"
        port = ports.free_port()
        folder = Path(tempfile.mkdtemp(prefix="bench-monitor-"))
        command = [sys.executable, str(MONITOR), "--bootstrap", bootstrap, "--source", source, "--sink", sink]
        command += ["--query", query, "--port", str(port), "--host", ports.HOST]
        pid = processes.spawn(command, folder / "monitor.log", cwd=folder)
        targets = prometheus.set_targets(query, [f"{ports.HOST}:{port}"])
        probe = cls(prom_port, query, pid, processes.start_time(pid), query, folder, targets)
        wait_until(
            lambda: prometheus.query(prom_port, f'up{{instance="{ports.HOST}:{port}"}} == 1'),
            30,
            "Prometheus to scrape the latency monitor",
            interval_s=0.5,
        )
        return probe

    def value(self, promql: str) -> float | None:
        result = prometheus.query(self.prom_port, promql)
        return float(result[0]["value"][1]) if result else None

    def figures(self, records_ms: list[float], timeout_s: float = 30.0) -> dict:
        """PromQL's p50 and p99 against the records', once Prometheus has counted every record."""
        selector = f'{{query="{self.query}"}}'
        wait_until(
            lambda: (self.value(f"sum(rtm_output_records_total{selector})") or 0) >= len(records_ms),
            timeout_s,
            "Prometheus to count every record the monitor read",
        )
        out: dict = {"records": len(records_ms), "counted": self.value(f"sum(rtm_output_records_total{selector})")}
        samples_s = np.asarray(records_ms, dtype=float) / 1000
        for q in (0.5, 0.99):
            name = f"p{q * 100:g}"
            promql = self.value(f"histogram_quantile({q}, sum by (le) (rtm_output_latency_seconds_bucket{selector}))")
            # The q-th record itself, as Prometheus ranks (inverted CDF): it lies in the bucket PromQL interpolates in.
            record = float(np.percentile(samples_s, q * 100, method="inverted_cdf"))
            bucket = bucket_of(record)
            out[name] = {
                "promql_ms": round(promql * 1000, 2) if promql is not None else None,
                "records_ms": round(record * 1000, 2),
                "bucket_ms": [round(b * 1000, 2) for b in bucket],
                "same_bucket": promql is not None and bucket[0] <= promql <= bucket[1],
            }
        return out

    def stop(self) -> None:
        processes.stop(self.pid, self.started, self.marker, timeout=10)
        prometheus.remove_file(self.targets)
        shutil.rmtree(self.folder, ignore_errors=True)

"""The demo's `--monitor`: the monitoring guide's latency monitor on the demo's topics, scraped by the lab's Prometheus.

The monitor (snippets/guides/monitoring.py, `watch_kafka_sink`) runs in a thread of the demo and serves its metrics on
a free loopback port; a scrape target file makes the lab's Prometheus read them every second. `p99_line()` asks
Prometheus for the p99 over the last 30 s, the figure a dashboard would show at that moment.
"""

import threading
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from wsgiref.simple_server import WSGIServer

from prometheus_client import start_http_server

from rtm_lab.errors import LabError
from rtm_lab.monitoring import prometheus
from rtm_lab.waiting import WaitTimeout, wait_until
from snippets.guides.monitoring import watch_kafka_sink

QUERY = "demo"
P99_30S = f'histogram_quantile(0.99, sum by (le) (rate(rtm_output_latency_seconds_bucket{{query="{QUERY}"}}[30s])))'
P99_ALL = f'histogram_quantile(0.99, sum by (le) (rtm_output_latency_seconds_bucket{{query="{QUERY}"}}))'


@dataclass
class LiveMonitor:
    prom_port: int
    server: WSGIServer
    targets: Path | None  # the Prometheus target file, once written
    stop_event: threading.Event = field(default_factory=threading.Event)

    def _value(self, promql: str) -> float | None:
        try:
            result = prometheus.query(self.prom_port, promql)
        except Exception:  # a slow or restarting Prometheus must not stop the demo: the line says so
            return None
        value = float(result[0]["value"][1]) if result else None
        return None if value is None or value != value else value  # NaN: no records in the window yet

    def p99_line(self) -> str:
        p99 = self._value(P99_30S)
        return "PromQL p99 (30 s): " + ("no data yet" if p99 is None else f"{p99 * 1000:.0f} ms")

    def summary_line(self, steady: dict) -> str:
        """PromQL's p99 over everything the monitor saw, beside the records' own (warm-up included in PromQL's)."""
        p99 = self._value(P99_ALL)
        shown = "no data" if p99 is None else f"{p99 * 1000:.0f} ms"
        ours = f"{steady['p99_ms']:.0f} ms" if steady.get("n") else "no records"
        return (
            f"prometheus      p99 {shown} by PromQL over the whole run (bucket-interpolated, warm-up included); "
            f"the records' measured p99 {ours}"
        )

    def stop(self) -> None:
        self.stop_event.set()
        if self.targets is not None:
            prometheus.remove_file(self.targets)
        self.server.shutdown()


def start(state, bootstrap: str, source: str, sink: str, say) -> LiveMonitor:
    """Start the monitor on the demo's topics and wait until Prometheus scrapes it; print where to look."""
    port = state.prometheus.port
    server, _ = start_http_server(0, addr="127.0.0.1")
    ready = threading.Event()
    live = LiveMonitor(port, server, None)
    threading.Thread(
        target=watch_kafka_sink, args=(bootstrap, source, sink, QUERY, live.stop_event, ready), daemon=True
    ).start()
    if not ready.wait(30):
        live.stop_event.set()
        server.shutdown()
        raise LabError("The latency monitor did not start reading the sink topic within 30 s.")
    live.targets = prometheus.set_targets(QUERY, [f"127.0.0.1:{server.server_port}"])
    try:
        wait_until(
            lambda: prometheus.query(port, f'up{{instance="127.0.0.1:{server.server_port}"}} == 1'),
            30,
            "Prometheus to scrape the monitor",
            interval_s=0.5,
        )
    except WaitTimeout as exc:
        live.stop()
        raise LabError(f"{exc}; see {prometheus.log_path()}") from exc
    graph = f"{prometheus.url(port)}/graph?" + urllib.parse.urlencode({"g0.expr": P99_30S, "g0.tab": "0"})
    say(f"monitor   metrics on 127.0.0.1:{server.server_port}, scraped every second; p99 graph: {graph}")
    return live

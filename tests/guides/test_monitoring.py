"""The latency monitor, its alert rules and the lab's Prometheus, against a real query, broker and server.

The rules file the page shows passes `promtool check rules` and its own `promtool test rules` cases. Live: the
quick-start query runs in a child process (its driver, Python and JVM, is what SIGSTOP pauses), the monitor runs in
this process, the lab's Prometheus scrapes both every second and evaluates a copy of the rules whose `for:` is 1 s.
"""

import bisect
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import prometheus_client
import pytest
import yaml
from prometheus_client import start_http_server

from rtm_lab import lab as lab_module
from rtm_lab import ports, processes
from rtm_lab.benchmarks.monitor_probe import bucket_of
from rtm_lab.loadgen import make_event, produce_at_rate
from rtm_lab.monitoring import prometheus
from rtm_lab.paths import PROJECT_ROOT
from rtm_lab.topics import SinkLatencyReader
from rtm_lab.waiting import wait_until
from snippets.guides import monitoring

HERE = Path(__file__).parent / "monitoring"
RULES = PROJECT_ROOT / "snippets" / "guides" / "rtm-alerts.yml"
RECORDING = PROJECT_ROOT / "snippets" / "guides" / "rtm-recording.yml"
DASHBOARD = PROJECT_ROOT / "snippets" / "guides" / "rtm-dashboard.json"
MONITOR = PROJECT_ROOT / "snippets" / "guides" / "monitoring.py"
SCRAPE = PROJECT_ROOT / "snippets" / "guides" / "rtm-prometheus.yml"
# Spark's two Prometheus endpoints on the driver's UI port (spark_metrics_conf switches both on).
SPARK_ENDPOINTS = {"servlet": "/metrics/prometheus", "executors": "/metrics/executors/prometheus"}

WARMUP_EVENTS = 200  # sent and read back before the monitor starts: a new JVM's first records are slow
RATE = 200  # events/s while measured
MEASURED_S = 15


def test_the_alert_rules_pass_promtool_check():
    result = subprocess.run([prometheus.promtool(), "check", "rules", RULES], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 3 rules found" in result.stdout
    rules = {r["alert"]: r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    assert rules["RtmLatencyP99High"]["expr"].strip().endswith(f"> {RULE_P99_THRESHOLD_S}")  # the live test's figure


def test_the_alert_rules_pass_their_promtool_unit_tests():
    # Each alert fires on the series that should fire it, only after its `for:`, and not on a healthy one.
    result = subprocess.run(
        [prometheus.promtool(), "test", "rules", "rtm_alerts_test.yml"], cwd=HERE, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_scrape_config_and_the_rule_files_it_loads_pass_promtool_check():
    result = subprocess.run([prometheus.promtool(), "check", "config", SCRAPE], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 2 rule files found" in result.stdout + result.stderr, result.stdout + result.stderr
    # Its Spark jobs read the paths the live test scrapes, and the servlet's path is the one spark_metrics_conf sets.
    paths = {job.get("metrics_path") for job in yaml.safe_load(SCRAPE.read_text())["scrape_configs"]}
    assert set(SPARK_ENDPOINTS.values()) <= paths
    assert monitoring.spark_metrics_conf()["spark.metrics.conf.*.sink.prometheusServlet.path"] in paths


def test_the_recording_rules_pass_promtool_check():
    result = subprocess.run([prometheus.promtool(), "check", "rules", RECORDING], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 5 rules found" in result.stdout


def dashboard_queries() -> dict[str, list[str]]:
    """Each panel's title and its PromQL expressions, as the dashboard file holds them."""
    dashboard = json.loads(DASHBOARD.read_text())
    return {panel["title"]: [t["expr"] for t in panel["targets"]] for panel in dashboard["panels"]}


def test_the_dashboard_reads_only_series_the_monitor_the_rules_and_prometheus_make():
    """Every name a panel reads is a metric the monitor or its listener exports, a series the recording rules
    record, or Prometheus's own ALERTS; every panel is filtered by the dashboard's `query` variable."""
    recorded = {rule["record"] for group in yaml.safe_load(RECORDING.read_text())["groups"] for rule in group["rules"]}
    exported = {m.name for m in prometheus_client.REGISTRY.collect() if m.name.startswith("rtm_")}
    # Counters are exposed with _total, histograms as _bucket/_count/_sum: the names a query writes.
    exported |= {f"{name}_total" for name in exported} | {f"{name}_bucket" for name in exported}
    for title, exprs in dashboard_queries().items():
        for expr in exprs:
            names = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*(?=\{)", expr))
            assert names and names <= recorded | exported | {"ALERTS"}, (title, expr)
            assert '{query="$query"}' in expr, (title, expr)


def run_monitor(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, MONITOR, *args], capture_output=True, text=True, timeout=60, cwd=PROJECT_ROOT
    )


@pytest.mark.slow
def test_an_unreachable_kafka_is_one_line_and_exit_2():
    result = run_monitor(
        "--bootstrap", f"127.0.0.1:{ports.free_port()}", "--source", "a", "--sink", "b",
        "--port", str(ports.free_port()),
    )  # fmt: skip
    assert result.returncode == 2, result
    assert result.stderr.startswith("error: Kafka at 127.0.0.1:"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_an_unreachable_prometheus_is_one_line_and_exit_2():
    url = f"http://127.0.0.1:{ports.free_port()}"
    result = run_monitor("--bootstrap", "x:1", "--source", "a", "--sink", "b", "--prometheus", url)
    assert result.returncode == 2, result
    assert result.stderr.strip() == f"error: no Prometheus answers at {url}"


def test_a_taken_metrics_port_is_one_line_and_exit_2():
    with __import__("socket").socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        result = run_monitor(
            "--bootstrap", "x:1", "--source", "a", "--sink", "b", "--port", str(taken.getsockname()[1])
        )
    assert result.returncode == 2, result
    assert result.stderr.startswith("error: cannot serve metrics on 127.0.0.1:"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


# --- live: a real query, the monitor, the lab's Prometheus ---------------------------------------------------------


@pytest.fixture(scope="module")
def prom(lab):
    """The lab's Prometheus (started for this module if it is not running), with the page's rules at `for: 1s`."""
    state, started = lab_module.up(log=print, with_services={"prometheus"})
    port = state.prometheus.port
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule["for"] = "1s"
    rules_file = prometheus.root() / "rules" / f"test-{uuid.uuid4().hex[:8]}.yml"
    rules_file.write_text(yaml.safe_dump(rules))
    # The dashboard's recording rules, as the page gives them.
    recording_file = prometheus.root() / "rules" / f"test-recording-{uuid.uuid4().hex[:8]}.yml"
    recording_file.write_text(RECORDING.read_text())
    prometheus.reload(port)
    yield port
    prometheus.remove_file(rules_file)
    prometheus.remove_file(recording_file)
    if started:
        lab_module.down(only=started, log=print)
    else:
        prometheus.reload(port)


class Run:
    """The query in a child process, the monitor in a thread here, both scraped by Prometheus."""

    def __init__(self, lab, prom_port, kafka_topic, checkpoint, driver_args=()):
        self.prom_port = prom_port
        self.bootstrap = lab.kafka_bootstrap
        self.source, self.sink = kafka_topic(partitions=2), kafka_topic(partitions=2)
        self.query = f"q{uuid.uuid4().hex[:8]}"
        self.driver_port = ports.free_port()
        self.checkpoint = Path(checkpoint)
        self.child = subprocess.Popen(
            [sys.executable, HERE / "driver.py", self.bootstrap, self.source, self.sink, checkpoint,
             str(self.driver_port), *driver_args],
            cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            start_new_session=True,  # its own process group: SIGSTOP pauses its Python and its JVM
        )  # fmt: skip
        self.stop_monitor = threading.Event()
        self.targets: Path | None = None
        self.more_targets: list[Path] = []
        self.metrics_server = None
        self.reader = SinkLatencyReader(self.bootstrap, self.sink).start()

    def wait_for_output(self, n: int, timeout_s: float) -> None:
        def check():
            if self.child.poll() is not None:
                raise AssertionError(f"the driver exited with {self.child.returncode}")
            return len(self.reader.samples) >= n

        wait_until(check, timeout_s, f"{n} records in the sink", interval_s=0.5)

    def start_monitor(self) -> None:
        self.metrics_server, _ = start_http_server(0, addr="127.0.0.1")
        monitor_port = self.metrics_server.server_port
        ready = threading.Event()
        self.monitor = threading.Thread(
            target=monitoring.watch_kafka_sink,
            args=(self.bootstrap, self.source, self.sink, self.query, self.stop_monitor, ready),
            daemon=True,
        )
        self.monitor.start()
        assert ready.wait(30), "the monitor did not start reading"
        self.targets = prometheus.set_targets(
            self.query, [f"127.0.0.1:{monitor_port}", f"127.0.0.1:{self.driver_port}"]
        )
        wait_until(
            lambda: (
                len(self.value(f'up{{instance=~"127.0.0.1:({monitor_port}|{self.driver_port})"}} == 1', all_=True)) == 2
            ),
            30,
            "Prometheus to scrape the monitor and the driver",
            interval_s=0.5,
        )

    def value(self, promql: str, all_: bool = False):
        result = prometheus.query(self.prom_port, promql)
        if all_:
            return result
        return float(result[0]["value"][1]) if result else None

    def alerts(self) -> list[dict]:
        return [a for a in prometheus.api(self.prom_port, "alerts")["alerts"] if a["labels"].get("query") == self.query]

    def close(self) -> None:
        self.stop_monitor.set()
        self.reader.stop()
        if self.child.poll() is None:
            os.killpg(self.child.pid, signal.SIGCONT)
            processes.stop(self.child.pid, timeout=30)
        for path in [self.targets, *self.more_targets]:
            if path:
                prometheus.remove_file(path)
        if self.metrics_server is not None:
            self.metrics_server.shutdown()


@contextlib.contextmanager
def live_run(lab, prom, folder: Path, driver_args=()):
    # kafka_topic is function-scoped; a module's topics are made and deleted here.
    from rtm_lab import topics

    made = []

    def make_topic(partitions=2):
        made.append(topics.create_topic(lab.kafka_bootstrap, topics.unique_name("mon"), partitions))
        return made[-1]

    live = Run(lab, prom, make_topic, str(folder / "checkpoint"), driver_args)
    try:
        yield live
    finally:
        live.close()
        for name in made:
            topics.delete_topic(lab.kafka_bootstrap, name)


@pytest.fixture(scope="module")
def run(lab, prom, tmp_path_factory):
    """The quick-start query at its default 5-minute batch duration: no batch ends while the module runs."""
    with live_run(lab, prom, tmp_path_factory.mktemp("mon")) as live:
        yield live


RULE_P99_THRESHOLD_S = 0.5  # RtmLatencyP99High's threshold in rtm-alerts.yml


def worst_prefix_p99_bucket_top(reader: SinkLatencyReader, first_id: int) -> float:
    """The upper bound of the highest bucket any prefix of the measured records (in output order) had its p99 in:
    the most a histogram_quantile(0.99, ...) over a window holding that prefix can read."""
    ordered = sorted(
        (out, ms / 1000)
        for out, (event_id, ms) in zip(reader.out_ts_ms, reader.samples, strict=False)
        if event_id >= first_id
    )
    worst, sorted_so_far = 0.0, []
    for _, seconds in ordered:
        bisect.insort(sorted_so_far, seconds)
        rank = max(0, -(-99 * len(sorted_so_far) // 100) - 1)  # inverted CDF: the ceil(0.99 n)-th record
        worst = max(worst, bucket_of(sorted_so_far[rank])[1])
    return worst


@pytest.mark.slow
def test_promql_quantiles_agree_with_the_records_and_a_clean_run_fires_nothing(run):
    produce_at_rate(run.bootstrap, run.source, rate=100, count=WARMUP_EVENTS)
    run.wait_for_output(WARMUP_EVENTS, timeout_s=180)
    run.start_monitor()
    began = time.time()

    def event(seq: int) -> dict:
        return make_event(WARMUP_EVENTS + seq)

    produce_at_rate(run.bootstrap, run.source, rate=RATE, seconds=MEASURED_S, event=event)
    measured = RATE * MEASURED_S
    run.wait_for_output(WARMUP_EVENTS + measured, timeout_s=60)
    selector = f'{{query="{run.query}"}}'
    wait_until(
        lambda: run.value(f"sum(rtm_output_records_total{selector})") == measured,
        30,
        "Prometheus to count every measured record",
    )
    samples_s = np.array([ms / 1000 for event_id, ms in run.reader.samples if event_id >= WARMUP_EVENTS])
    assert samples_s.size == measured
    for q in (0.5, 0.99):
        from_promql = run.value(f"histogram_quantile({q}, sum by (le) (rtm_output_latency_seconds_bucket{selector}))")
        # The q-th record itself (inverted CDF), as Prometheus ranks: it lies in the bucket PromQL interpolates in.
        from_records = float(np.percentile(samples_s, q * 100, method="inverted_cdf"))
        lower, upper = bucket_of(from_records)
        assert lower <= from_promql <= upper, (q, from_promql, from_records)
        print(f"p{q * 100:g}: PromQL {from_promql * 1000:.1f} ms, records {from_records * 1000:.1f} ms")

    # Input counted from the source topic's end offsets (read once a second): every measured event, none of the
    # warm-up.
    wait_until(
        lambda: run.value(f"sum(rtm_input_records_total{selector})") == measured,
        10,
        "Prometheus to count every input record",
    )
    # With every input record counted out, the 1:1 pipeline's backlog reads zero.
    assert run.value(f"sum(rtm_input_records_total{selector}) - sum(rtm_output_records_total{selector})") == 0
    # Each dashboard panel about the monitor's figures shows this query's series (its variable set to the query).
    for title, exprs in dashboard_queries().items():
        if title.startswith(("End-to-end", "Records per second", "Seconds since", "Backlog")):
            for expr in exprs:
                shown = expr.replace("$query", run.query)
                assert run.value(shown, all_=True), (title, shown)
    # The driver's listener gauges are scraped beside the monitor's (the query's start set them), but no batch has
    # ended: thousands of records went through and Spark reported no progress, so batch gauges have no series yet.
    # (This driver's series only: the same Prometheus may hold an earlier run's for five minutes.)
    driver = f'{{instance="127.0.0.1:{run.driver_port}"}}'
    assert run.value(f"max(rtm_configured_batch_duration_seconds{driver})") == 300
    # It still holds the query's start, set before the warm-up: no batch end has moved it.
    assert 0 < run.value(f"max(rtm_batch_last_end_timestamp_seconds{driver})") < began
    assert run.value(f"count(rtm_batch_id{driver})", all_=True) == []
    # Nothing fired, nor was pending, at any evaluation during the run, if the run was clean by the p99 rule's own
    # measure: no prefix of the records (a minute's window holds the whole run) had its p99 in a bucket above the
    # 500 ms threshold. On a machine too loaded for that, only the p99 alert may show, and the stall and batch
    # overrun alerts must still be quiet.
    window = int(time.time() - began) + 2
    seen = run.value(f"count by (alertname) (max_over_time(ALERTS{selector}[{window}s]))", all_=True)
    names = {r["metric"]["alertname"] for r in seen}
    if worst_prefix_p99_bucket_top(run.reader, WARMUP_EVENTS) <= RULE_P99_THRESHOLD_S:
        assert names == set(), seen
        assert run.alerts() == []
    else:
        print(f"the records' p99 crossed {RULE_P99_THRESHOLD_S} s (a loaded machine): only the p99 alert may show")
        assert names <= {"RtmLatencyP99High"}, seen


@pytest.mark.slow
def test_pausing_the_driver_fires_the_stall_alert_and_resuming_resolves_it(run):
    stop_load = threading.Event()
    load = threading.Thread(
        target=produce_at_rate,
        kwargs={"bootstrap": run.bootstrap, "topic": run.source, "rate": 50, "seconds": 600, "stop": stop_load,
                "event": lambda seq: make_event(1_000_000 + seq)},
        daemon=True,
    )  # fmt: skip
    load.start()
    try:
        run.wait_for_output(len(run.reader.samples) + 50, timeout_s=60)
        os.killpg(run.child.pid, signal.SIGSTOP)
        paused = time.monotonic()

        def firing():
            return [
                a for a in run.alerts() if a["labels"]["alertname"] == "RtmOutputStalled" and a["state"] == "firing"
            ]

        wait_until(firing, 30, "RtmOutputStalled to fire", interval_s=0.5)
        fired_after = time.monotonic() - paused
        # Fired within the wait's 30 s, and still firing while the driver stays paused.
        assert firing(), run.alerts()
        os.killpg(run.child.pid, signal.SIGCONT)
        wait_until(lambda: not firing(), 60, "RtmOutputStalled to resolve", interval_s=0.5)
        assert not firing(), run.alerts()  # resolved once the driver resumed
        # The records held up by the pause may lift the minute's p99 over its threshold (they were late), but a
        # paused driver's batch gauges go stale rather than raising a batch overrun.
        names = {a["labels"]["alertname"] for a in run.alerts()}
        assert names <= {"RtmOutputStalled", "RtmLatencyP99High"}, names
        print(f"stall alert fired {fired_after:.1f} s after SIGSTOP")
    finally:
        stop_load.set()
        load.join(timeout=30)


# --- the Postgres variant: rows as the sink writes them, read back by the monitor -----------------------------------


def histogram_count(query: str) -> float:
    for metric in monitoring.LATENCY.collect():
        for sample in metric.samples:
            if sample.name.endswith("_count") and sample.labels.get("query") == query:
                return sample.value
    return 0.0


def test_the_postgres_monitor_counts_every_written_row_once_including_a_late_commit(lab, pg_schema, kafka_topic):
    import psycopg2
    from psycopg2 import sql

    from snippets.guides.postgres_sink import SinkConfig, create_tables

    create_tables(SinkConfig(dsn=lab.postgres_dsn, table="events", schema=pg_schema, dead_letter_table=None))
    source, query = kafka_topic(partitions=1), f"pg{uuid.uuid4().hex[:8]}"
    stop, ready = threading.Event(), threading.Event()
    watcher = threading.Thread(
        target=monitoring.watch_postgres_sink,
        args=(lab.postgres_dsn, f"{pg_schema}.events", lab.kafka_bootstrap, source, query, stop, ready),
        kwargs={"poll_s": 0.1},
        daemon=True,
    )
    watcher.start()
    assert ready.wait(30)
    insert = sql.SQL("INSERT INTO {} (id, created_ms) VALUES (%s, %s)").format(sql.Identifier(pg_schema, "events"))
    now_ms = int(time.time() * 1000)
    late = psycopg2.connect(lab.postgres_dsn)  # a transaction that writes first and commits last
    quick = psycopg2.connect(lab.postgres_dsn)
    quick.autocommit = True
    try:
        with late.cursor() as cur:
            cur.execute(insert, (0, now_ms - 3000))  # stamped now, visible only at commit
        with quick.cursor() as cur:
            for i in range(1, 51):
                cur.execute(insert, (i, now_ms - 20))
        wait_until(lambda: histogram_count(query) == 50, 15, "the monitor to see the 50 committed rows")
        late.commit()
        wait_until(lambda: histogram_count(query) == 51, 15, "the monitor to see the late-committed row")
        time.sleep(0.5)  # more polls: nothing is counted twice
        assert histogram_count(query) == 51
        # The late row's latency (written_at - created_ms, about 3 s) lands in the (2 s, 5 s] bucket.
        buckets = {
            s.labels["le"]: s.value
            for m in monitoring.LATENCY.collect()
            for s in m.samples
            if s.name.endswith("_bucket") and s.labels.get("query") == query
        }
        assert buckets["5.0"] - buckets["2.0"] == 1, buckets
    finally:
        stop.set()
        watcher.join(timeout=10)
        late.close()
        quick.close()


def test_an_unreachable_postgres_is_one_line_and_exit_2():
    dsn = f"postgresql://rtm:secret-pw@127.0.0.1:{ports.free_port()}/rtm"
    result = run_monitor(
        "--bootstrap", "x:1", "--source", "a", "--table", "public.t", "--postgres", dsn,
        "--port", str(ports.free_port()),
    )  # fmt: skip
    assert result.returncode == 2, result
    assert result.stderr.startswith("error: Postgres: "), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "secret-pw" not in result.stderr + result.stdout


@pytest.mark.slow
def test_a_monitor_started_before_the_sink_topic_exists_waits_for_it(lab, kafka_topic):
    from rtm_lab import topics

    source, sink, query = kafka_topic(partitions=1), topics.unique_name("later"), f"w{uuid.uuid4().hex[:8]}"
    stop, ready = threading.Event(), threading.Event()
    watcher = threading.Thread(
        target=monitoring.watch_kafka_sink,
        args=(lab.kafka_bootstrap, source, sink, query, stop, ready),
        daemon=True,
    )
    watcher.start()
    try:
        assert not ready.wait(3)  # no topic: still waiting, not failed
        assert watcher.is_alive()
        topics.create_topic(lab.kafka_bootstrap, sink, 1)
        assert ready.wait(30), "the monitor did not start reading once the topic existed"
    finally:
        stop.set()
        watcher.join(timeout=15)
        topics.delete_topic(lab.kafka_bootstrap, sink)


# --- a short batch duration: batch boundaries in the listener's gauges and in Spark's own metrics -------------------------

SHORT_INTERVAL_S = 10
SCRAPE_S = 1.0  # the lab Prometheus's scrape interval (rtm_lab.monitoring.prometheus.SCRAPE_INTERVAL)
HEARTBEAT = "1s"  # spark.executor.heartbeatInterval: flushes the status store behind the executors' endpoint


@pytest.fixture(scope="module")
def batches(lab, prom, tmp_path_factory):
    """The quick-start query at a 10-second interval with Spark's metrics on and a 1 s executor heartbeat, under a
    steady 100 events/s, scraped every second (the listener's port and both of Spark's endpoints), until two batches
    have committed."""
    assert f"{SCRAPE_S:.0f}s" == prometheus.SCRAPE_INTERVAL
    ui_port = ports.free_port()
    args = (str(SHORT_INTERVAL_S), str(ui_port), HEARTBEAT)
    with live_run(lab, prom, tmp_path_factory.mktemp("short"), args) as live:
        live.ui_port = ui_port
        live.more_targets.append(prometheus.set_targets(f"{live.query}-driver", [f"127.0.0.1:{live.driver_port}"]))
        for job, path in SPARK_ENDPOINTS.items():
            live.more_targets.append(
                prometheus.set_targets(
                    f"{live.query}-{job}", [f"127.0.0.1:{ui_port}"], {"__metrics_path__": path, "endpoint": job}
                )
            )
        stop = threading.Event()
        load = threading.Thread(
            target=produce_at_rate,
            kwargs={"bootstrap": live.bootstrap, "topic": live.source, "rate": 100, "seconds": 300, "stop": stop},
            daemon=True,
        )
        load.start()
        try:
            commits = live.checkpoint / "commits"
            wait_until(lambda: (commits / "1").exists(), 150, "two committed batches", interval_s=0.2)
            live.commit_at = {n: (commits / str(n)).stat().st_mtime for n in range(2)}
            time.sleep(3 * SCRAPE_S)  # the scrapes after the second commit
            yield live
        finally:
            stop.set()
            load.join(timeout=30)


def samples(live, selector: str, seconds: int = 120) -> dict[str, list[tuple[float, float]]]:
    """Every scraped sample of the matching series over the last `seconds`: series name -> [(scrape time, value)]."""
    result = prometheus.query(live.prom_port, f"{selector}[{seconds}s]")
    return {r["metric"]["__name__"]: [(float(t), float(v)) for t, v in r["values"]] for r in result}


@pytest.mark.timing
@pytest.mark.slow
def test_a_batch_end_shows_in_the_listeners_gauges_within_two_scrapes_of_its_commit(batches):
    (series,) = samples(batches, f'rtm_batch_id{{instance="127.0.0.1:{batches.driver_port}"}}').values()
    for batch in (0, 1):
        committed = batches.commit_at[batch]
        # A sample is stamped when its scrape starts, and a scrape can take up to its timeout (the interval) to read
        # the gauge: so none a whole scrape before the commit file exists (before the first, the gauge has no
        # series), and one by the second scrape after it.
        shown = min(t for t, v in series if v >= batch)
        early = [(round(t - committed, 2), v) for t, v in series if t < committed - SCRAPE_S and v >= batch]
        assert early == [], (batch, early)
        assert shown - committed <= 2 * SCRAPE_S, (batch, shown - committed)
        print(f"batch {batch}: in the gauge {shown - committed:.2f} s after its commit file")


def mid_batch(series: list[tuple[float, float]], live, batch: int) -> list[float]:
    """The values scraped strictly inside batch `batch`: after the previous commit settled, and in scrapes that began
    over one scrape interval before its own commit file appeared. A sample is stamped when its scrape begins, and the
    batch's progress is recorded as it ends, just before the commit file is written: a scrape that began in that last
    interval may already read the new value (a clean-clone run's did)."""
    start, end = live.commit_at[batch - 1] + 2 * SCRAPE_S, live.commit_at[batch] - SCRAPE_S
    return [v for t, v in series if start <= t < end]


def after_commit(series: list[tuple[float, float]], live, batch: int) -> float:
    return next(v for t, v in series if t >= live.commit_at[batch] + 2 * SCRAPE_S)


@pytest.mark.timing
@pytest.mark.slow
def test_sparks_own_metrics_count_a_real_time_batch_only_when_it_ends(batches):
    def one(pattern: str) -> list[tuple[float, float]]:
        found = samples(batches, f'{{__name__=~"{pattern}", instance="127.0.0.1:{batches.ui_port}"}}')
        assert len(found) == 1, (pattern, sorted(found), {k: v[-1] for k, v in found.items()})
        return next(iter(found.values()))

    # Both endpoints are scraped (a scrape may time out now and then at a 1 s interval on a busy machine).
    for job in SPARK_ENDPOINTS:
        selector = f'up{{endpoint="{job}", instance="127.0.0.1:{batches.ui_port}"}}'
        ups = [v for _, v in samples(batches, selector, 30)["up"]]
        assert sum(ups) >= 0.8 * len(ups) > 0, (job, ups)
    query_source = "metrics_.*_driver_spark_streaming_.*_"  # spark.sql.streaming.metricsEnabled's source
    rate_in, rate_done = one(query_source + "inputRate_total_Value"), one(query_source + "processingRate_total_Value")
    batch_ms = one(query_source + "latency_Value")
    records_read = one("metrics_.*_driver_executor_recordsRead_Count")  # the executor source, through the servlet
    active = one("metrics_executor_activeTasks")  # /metrics/executors/prometheus
    for name, series in {"inputRate": rate_in, "processingRate": rate_done, "latency": batch_ms,
                         "recordsRead": records_read}.items():  # fmt: skip
        inside = mid_batch(series, batches, 1)
        # Events arrive all through batch 1 and none of these moves inside it; each has moved once batch 1 ends.
        assert len(inside) >= SHORT_INTERVAL_S / 2 and len(set(inside)) == 1, (name, inside)
        assert after_commit(series, batches, 1) != inside[0], name
    # The query source's "latency" is how long the batch took (about the batch duration), not how late a record is.
    assert after_commit(batch_ms, batches, 1) >= 0.9 * SHORT_INTERVAL_S * 1000
    # The batch's long-running tasks (one per source partition) show as active, never more. The status store writes
    # a task start at once only if the executor's entry was not written in the last spark.ui.liveUpdatePeriod
    # (100 ms), else at the next executor heartbeat's flush: at the default 10 s heartbeat the gauge read 0 through a
    # whole loaded run (a clean-clone CI run's); the 1 s heartbeat here flushes inside every batch.
    running = [v for _, v in active]
    assert set(running) <= {0, 1, 2}, running
    assert 2 in mid_batch(active, batches, 1), [(round(t - batches.commit_at[0], 1), v) for t, v in active]

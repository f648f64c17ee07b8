"""One (rate, mode) run of the latency benchmark in its own process, and the parent's call that starts it.

Spark allows one session per process and each mode needs its own settings, so `run_child()` starts
`python -m rtm_lab.benchmarks.latency_child --mode ...`, which prints progress lines and writes its result as JSON;
the parent relays the lines and reads the result. Here too: the pipelines the benchmark measures (passthrough, ad
attribution) and their settings. The `scripts/bench.py latency` command is `rtm_lab.benchmarks.latency`; the batch
duration sweep and the boundary-settings benchmark start the same child.

Latency of a record = the sink record's Kafka timestamp minus the source record's, both LogAppendTime (the broker's
clock), so neither the Python producer nor the Python reader is timed. Events produced in the first `warmup` seconds
are left out of the percentiles but still counted for delivery.
"""

import argparse
import contextlib
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rtm_lab import cli, plans
from rtm_lab.benchmarks import checkpoint_shapes
from rtm_lab.waiting import WaitTimeout, wait_until
from snippets.guides.ad_attribution import BATCH_DURATION as AD_GUIDE_INTERVAL
from snippets.quickstart.kafka_to_kafka import BATCH_DURATION as QUICKSTART_INTERVAL
from snippets.reference.errors import error_class

MODES = ("microbatch_500ms", "microbatch_0", "microbatch_async", "realtime")
# The ad-attribution pipeline runs the JVM processor in every mode above; this mode runs the guide's Python processor
# (which OSS Spark 4.3 refuses in real-time mode) with the 500 ms trigger, for the comparison the guide makes.
PYTHON_MICROBATCH = "microbatch_500ms_python"
ALL_MODES = (*MODES, PYTHON_MICROBATCH)
AD_MODES = (PYTHON_MICROBATCH, "microbatch_500ms", "realtime")
LOG_APPEND_TIME = {"message.timestamp.type": "LogAppendTime"}
PARTITIONS = 2
# Consumer fetch wait, the same in every mode. With fetch.min.bytes=1 the broker answers a fetch as soon as a record
# arrives, so this bounds how long an empty fetch is parked on the broker; Spark's real-time docs suggest lowering
# Kafka's 500 ms default, and the benchmark takes the low side so no mode waits on it.
FETCH_MAX_WAIT_MS = 10
# Both pipelines run at the batch duration the shown code uses (5 minutes, Spark's default); the 5-second minimum,
# the worst case for the tail, is a row of the batch duration sweep.
RTM_INTERVAL = QUICKSTART_INTERVAL
AD_RTM_INTERVAL = AD_GUIDE_INTERVAL
CHILD_TIMEOUT_S = 600
PRIMING = 10
# A settled warm-up (--settle MODE=SECONDS): production goes on until the backlog stayed under SECONDS of output for
# SETTLE_HOLD_S straight (at most SETTLE_MAX_S), and the measured `seconds` start there. A freshly started JVM runs a
# new real-time query slowly until it has compiled its hot code: on this machine the ad-attribution query was up to a
# second behind for its first 6 s when quiet and over 8 s under a test run's load, so a fixed few seconds of warm-up
# measured the catch-up, not the query.
SETTLE_HOLD_S = 2.0
SETTLE_MAX_S = 30.0
# The bound the quick runs give real-time mode: a quarter second of events, as the demo's warm-up.
REAL_TIME_SETTLE_S = 0.25


def settings(
    rtm_interval: str = RTM_INTERVAL, fetch_wait_ms: int = FETCH_MAX_WAIT_MS, pipeline: str = "passthrough"
) -> dict:
    return {
        "pipeline": pipeline,
        "partitions": PARTITIONS,
        "spark_master": f"local[{PARTITIONS if pipeline == 'passthrough' else 2 * PARTITIONS}]",
        "rtm_interval": rtm_interval,
        "kafka_fetch_max_wait_ms": fetch_wait_ms,
        "producer_linger_ms": 0,
        "topic_timestamps": "LogAppendTime",
        "session_conf": _pipeline_session_conf(pipeline),
    }


def _pipeline_session_conf(pipeline: str) -> dict:
    """The session settings a pipeline's guide gives, recorded with the results (the ad guide's shuffle wait)."""
    if pipeline != "ad_attribution":
        return {}
    from snippets.guides.ad_attribution import SESSION_CONF

    return dict(SESSION_CONF)


# ---------------------------------------------------------------- child: one mode in its own Spark session

PIPELINES = ("passthrough", "ad_attribution", *checkpoint_shapes.SHAPES)
# Each ack follows its request at once, so every ack finds its request well within the window, and each key's timer
# clears it 30 s after its first event: the state levels off at about rate/2 x 30 s keys in a 60 s run.
AD_WINDOW_MS = 30_000


def ad_event(seq: int) -> dict:
    """Even numbers are a session's ad request, the next odd number its ack; output ids are the acks' ids."""
    kind = "request" if seq % 2 == 0 else "ack"
    return {"session_id": f"s{seq // 2}", "campaign_id": "c-1", "kind": kind, "event_id": seq, "ad_id": "ad-1"}


class Pipeline:
    """What differs between the benchmarked queries: the transformation, the events, what comes out per event."""

    def __init__(self, name: str):
        from rtm_lab import loadgen

        self.name = name
        if name == "passthrough":
            self.event, self.key_field = loadgen.make_event, "id"
            self.priming = [{**loadgen.make_event(0), "id": -1 - i} for i in range(PRIMING)]
            self.slots = PARTITIONS  # one task per source partition
            self.conf: dict[str, str] = {}
        elif name == "ad_attribution":
            self.event, self.key_field = ad_event, "session_id"
            # Negative ids, so that priming never counts: request -2k-2 then its ack -2k-1, one session each.
            self.priming = [
                {**ad_event(j), "session_id": f"prime{j // 2}", "event_id": -PRIMING + j} for j in range(PRIMING)
            ]
            self.slots = 2 * PARTITIONS  # real-time mode schedules the source and the shuffle stage at once
            from rtm_lab.snippet_jar import session_jars

            # The JVM processor's jar (snippets/jvm, built with the page's recipe) must be in spark.jars at start.
            # The guide's session settings (the streaming shuffle's buffer wait), unless --spark-conf overrides them.
            self.conf = {
                "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
                "spark.jars": session_jars(),
                **_pipeline_session_conf(name),
            }
        elif name in checkpoint_shapes.SHAPES:
            self.event, self.key_field = loadgen.make_event, "id"
            self.priming = [{**loadgen.make_event(0), "id": -1 - i} for i in range(PRIMING)]
            self.slots = 2 * PARTITIONS  # the source's tasks and the state's shuffle partitions run at once
            self.conf = {"spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER}
        else:
            raise ValueError(f"unknown pipeline {name!r}; expected one of {', '.join(PIPELINES)}")

    def transform(self, raw, mode: str):
        if self.name == "passthrough":
            from snippets.quickstart.kafka_to_kafka import transform

            return transform(raw)
        if self.name in checkpoint_shapes.SHAPES:
            return checkpoint_shapes.transform(self.name, raw)
        from snippets.guides.ad_attribution import attribute, attribute_jvm

        return (attribute if mode == PYTHON_MICROBATCH else attribute_jvm)(raw, AD_WINDOW_MS)

    def outputs(self, sent: int) -> int:
        """How many sink records `sent` events must produce (the ad pipeline emits one match per ack)."""
        return sent // 2 if self.name == "ad_attribution" else sent

    @property
    def priming_outputs(self) -> int:
        return self.outputs(len(self.priming))


ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def start_query(spark, mode: str, bootstrap: str, source: str, sink: str, checkpoint: str, cfg: dict, pipeline):
    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("kafka.fetch.max.wait.ms", str(cfg["kafka_fetch_max_wait_ms"]))
        .load()
    )
    writer = (
        pipeline.transform(raw, mode)
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .outputMode("update")
    )
    if mode in ("microbatch_500ms", PYTHON_MICROBATCH):
        writer = writer.trigger(processingTime="500 milliseconds")
    elif mode == "microbatch_0":
        writer = writer.trigger(processingTime="0 seconds")
    elif mode == "microbatch_async":
        writer = writer.trigger(processingTime="0 seconds").option("asyncProgressTrackingEnabled", "true")
    elif mode == "realtime":
        writer = writer.trigger(realTime=cfg["rtm_interval"])
    else:
        raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(ALL_MODES)}")
    return writer.start()


def wait_for_priming(query, reader, expected: int, timeout_s: float = 180.0) -> float:
    """Block until every priming output reached the sink (in real-time mode, up to one batch duration)."""
    began = time.monotonic()
    wait_until(
        lambda: sum(1 for i in list(reader.seen_ids) if i < 0) >= expected,
        timeout_s,
        "the priming events in the sink topic (is the Kafka broker up?)",
        interval_s=0.05,
        abort=lambda: plans.failure(query),
    )
    return time.monotonic() - began


def engine_and_gc(spark, query) -> dict:
    """What really ran: the query's engine class (AsyncProgressTrackingMicroBatchExecution when offsets and commits
    are written off the query's thread) and the JVM's garbage collectors, so a setting's row shows it took effect."""
    beans = spark._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    return {
        "engine": query._jsq.streamingQuery().getClass().getSimpleName(),
        "gc": sorted({beans.get(i).getName() for i in range(beans.size())}),
    }


def batch_stats(query) -> dict:
    progress = query.recentProgress
    durations = sorted(p["durationMs"].get("triggerExecution", 0) for p in progress if p.get("durationMs"))
    return {
        "batches": [
            [p["batchId"], p["timestamp"], p.get("numInputRows", 0), p["durationMs"].get("triggerExecution", 0)]
            for p in progress[-20:]
        ],
        "batches_seen": len(progress),
        "last_batch_id": progress[-1]["batchId"] if progress else None,
        "batch_ms_median": durations[len(durations) // 2] if durations else None,
    }


def record_state(query, wall_t0: float, track: list) -> None:
    """Append [seconds since production began, batch id, state rows] for every batch end not yet in `track`.

    The driver learns the state's size only from progress, which a query reports at each batch end: every trigger in
    micro-batch, every batch duration in real-time mode."""
    seen = {batch for _, batch, _ in track}
    for p in query.recentProgress:
        if p["batchId"] in seen or not p.get("stateOperators"):
            continue
        start = dt.datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
        end = start + p["durationMs"].get("triggerExecution", 0) / 1000
        track.append([round(end - wall_t0, 1), p["batchId"], sum(op["numRowsTotal"] for op in p["stateOperators"])])
    track.sort(key=lambda row: row[1])


def slot_need(query) -> dict | None:
    """Task slots the running query needs, from its physical plan, by the slot calculator of the slot-sizing page."""
    from snippets.reference.slot_sizing import slots_needed

    try:
        need = slots_needed(query, PARTITIONS)
    except ValueError:  # no batch planned yet
        return None
    return {"source": need.source_tasks, "shuffle": list(need.shuffle_tasks), "total": need.total}


CHECKPOINT_PREFIX = "bench"


def object_store_conf(endpoint: str, spark_conf: dict) -> dict:
    """The S3A settings and jars for checkpoints on the lab's store at `endpoint`. The keys are read here from the
    lab's credentials file, never passed on a command line; the stream-based checkpoint file manager's jar is added
    when `spark_conf` names that manager."""
    from rtm_lab import s3a, s3store
    from rtm_lab.spark import session_jars

    stream = spark_conf.get("spark.sql.streaming.checkpointFileManagerClass") == s3a.STREAM_FILE_MANAGER
    store = s3a.Store(endpoint, s3store.BUCKET, s3store.credentials())
    jars = [spark_conf.get("spark.jars") or session_jars(), *(str(p) for p in s3a.s3a_jars(stream))]
    return {**s3a.spark_conf(store, stream), "spark.jars": ",".join(jars)}


def open_session(name: str, pipeline: "Pipeline", spark_conf: dict | None, gc_log: str | None, observe: bool):
    """The session a pipeline's runs need: its settings, then `spark_conf`, a GC log and the UI if asked."""
    from rtm_lab.benchmarks import tail_sources
    from rtm_lab.spark import spark_session

    conf = {**pipeline.conf, **(spark_conf or {})}
    if gc_log:  # local mode: the executors run in the driver's JVM, so its GC log covers every task
        driver_opts = "spark.driver.extraJavaOptions"
        conf[driver_opts] = " ".join(filter(None, [conf.get(driver_opts), tail_sources.gc_log_option(gc_log)]))
    if observe:  # the batch duration sweep reads task launch times from the Spark UI's REST API
        from rtm_lab.benchmarks import spark_ui

        conf.update(spark_ui.ui_conf())
    return spark_session(name, slots=pipeline.slots, conf=conf)


def run_modes(
    modes: Sequence[str],
    bootstrap: str,
    rate: float,
    seconds: float,
    warmup: float,
    cfg: dict,
    settle: dict[str, float],
    gc_log: str | None = None,
) -> dict[str, dict]:
    """Several modes one after another in one session (the quick run): one JVM start instead of one per mode. The
    later modes find the JIT warmed by the earlier ones, which the separate processes of a full run never do."""
    began = time.monotonic()
    spark = open_session("bench-latency-quick", Pipeline(cfg["pipeline"]), None, gc_log, False)
    print(f"[{', '.join(modes)} @ {rate:.0f}/s] one spark session up in {time.monotonic() - began:.1f}s", flush=True)
    try:
        return {
            mode: run_mode(
                mode, bootstrap, rate, seconds, warmup, cfg, gc_log=gc_log, settle_s=settle.get(mode), spark=spark
            )
            for mode in modes
        }
    finally:
        spark.stop()


def run_mode(
    mode: str,
    bootstrap: str,
    rate: float,
    seconds: float,
    warmup: float,
    cfg: dict,
    trace: str | None = None,
    observe: bool = False,
    spark_conf: dict | None = None,
    gc_log: str | None = None,
    monitor_prom_port: int | None = None,
    settle_s: float | None = None,
    spark: Any = None,
    checkpoint_store: str | None = None,
    store_delay_ms: float | None = None,
) -> dict:
    """One mode's run: in a session of its own (stopped at the end), or in `spark`, a session `open_session` made for
    this pipeline (left running, for the next mode)."""
    from rtm_lab import loadgen, percentiles, topics
    from rtm_lab import warmup as warm
    from rtm_lab.benchmarks import tail_sources

    say = lambda line: print(f"[{mode} @ {rate:.0f}/s] {line}", flush=True)  # noqa: E731
    pipeline = Pipeline(cfg["pipeline"])
    source = topics.create_topic(bootstrap, topics.unique_name(f"lat-{mode}-in"), PARTITIONS, LOG_APPEND_TIME)
    sink = topics.create_topic(bootstrap, topics.unique_name(f"lat-{mode}-out"), PARTITIONS, LOG_APPEND_TIME)
    own_session = spark is None
    if own_session:
        began = time.monotonic()
        store_conf = object_store_conf(checkpoint_store, spark_conf or {}) if checkpoint_store else {}
        spark = open_session(f"bench-latency-{mode}", pipeline, {**(spark_conf or {}), **store_conf}, gc_log, observe)
        say(f"spark session up in {time.monotonic() - began:.1f}s; starting the query")
    query = reader = monitor = None
    # On the object store the checkpoint gets a folder of its own, left in place: the storage accounting tells this
    # run's requests from others' by the folder's name.
    if checkpoint_store:
        from rtm_lab import s3store

        folder = topics.unique_name(f"ckpt-{mode}")
        checkpoint = f"s3a://{s3store.BUCKET}/{CHECKPOINT_PREFIX}/{folder}"
    else:
        checkpoint = tempfile.mkdtemp(prefix="bench-lat-ckpt-")
        folder = Path(checkpoint).name
    try:
        # Priming events (negative ids) go in before the query starts: in trial runs the first rows a new real-time
        # query handled took seconds (the whole first batch with data), so measurement starts once they are out.
        topics.produce_json(bootstrap, source, pipeline.priming, key_field=pipeline.key_field)
        reader = topics.SinkLatencyReader(bootstrap, sink).start()
        query_started_ms = time.time() * 1000
        try:
            query = start_query(spark, mode, bootstrap, source, sink, checkpoint, cfg, pipeline)
            first = wait_for_priming(query, reader, pipeline.priming_outputs)
        except Exception as exc:  # a mode this Spark version refuses is a result, not a crash of the benchmark
            say(f"the query failed: {error_class(exc)}")
            return {"n": 0, "missing": None, "error": error_class(exc)}
        if store_delay_ms is not None:
            # Only now: the query's start-up (its metadata, the first batch's logs) makes a hundred requests or more,
            # minutes at the delays measured, and is not what a run measures.
            from rtm_lab import s3_proxy

            s3_proxy.set_delay(s3_proxy.control_path(), store_delay_ms)
            say(f"store requests now held {store_delay_ms:g} ms each by the delay proxy")
        say(f"priming events delivered after {first:.1f}s; producing {rate:.0f} events/s for {seconds:.0f}s")
        slots = slot_need(query)
        if monitor_prom_port is not None:  # the latency monitor beside the query, as a user runs it
            from rtm_lab.benchmarks.monitor_probe import MonitorProcess

            monitor = MonitorProcess.start(monitor_prom_port, bootstrap, source, sink)
            say(f"latency monitor running (query label {monitor.query}), scraped by Prometheus")
        state_track: list = []
        lag_timeline: list = []  # [ms since production began, ms the generator was behind its schedule]
        wall_t0 = time.time()
        holder: dict = {}
        sample_lag = tail_sources.lag_sampler(rate, wall_t0 * 1000, lag_timeline)
        stop = threading.Event()  # a settled warm-up ends production `seconds` after it settled

        def progress(stats: Any) -> None:
            holder["live"] = stats  # the generator's own counter, read below while it runs
            sample_lag(stats)

        producer = threading.Thread(
            target=lambda: holder.update(
                stats=loadgen.produce_at_rate(
                    bootstrap,
                    source,
                    rate,
                    seconds + (SETTLE_MAX_S if settle_s is not None else 0.0),
                    event=pipeline.event,
                    key_field=pipeline.key_field,
                    stop=stop,
                    progress=progress,
                    progress_every_s=0.25,
                )
            ),
            daemon=True,
        )
        producer.start()
        t0 = time.monotonic()
        delivered = lambda: len(reader.seen_ids) - pipeline.priming_outputs  # noqa: E731
        settling, warmup_ids, end_ids = None, int(rate * warmup), None
        if settle_s is not None:
            behind_rows = max(1, pipeline.outputs(int(rate * settle_s)))
            settling = warm.Settling(warm.SettleRule(behind_rows, SETTLE_HOLD_S, SETTLE_MAX_S), t0)
        next_line = t0 + 2
        while producer.is_alive():
            producer.join(timeout=0.25)
            now = time.monotonic()
            sent = holder["live"].sent if "live" in holder else 0
            if settling is not None and end_ids is None and settling.observe(now, pipeline.outputs(sent) - delivered()):
                warmup_ids, end_ids = sent, sent + int(rate * seconds)
                say(f"warm-up over: {settling.summary()}; measuring {seconds:.0f}s")
            if end_ids is not None and sent >= end_ids:
                stop.set()
            if now >= next_line:
                next_line += 2
                record_state(query, wall_t0, state_track)
                recent = [ms for event_id, ms in reader.samples[-int(rate * 2) :] if event_id >= 0]
                say(
                    f"t={now - t0:4.1f}s delivered={delivered():>7} "
                    f"last 2 s: {percentiles.format_summary(percentiles.summarize(recent))}"
                )
        stats = holder["stats"]
        expected = pipeline.outputs(stats.sent)
        # What has not arrived after the drain time is reported as missing, not raised: it is a result.
        with contextlib.suppress(WaitTimeout):
            wait_until(lambda: delivered() >= expected or query.exception(), max(30.0, seconds), "the last records")
        reader.stop()
        record_state(query, wall_t0, state_track)
        if query.exception() is not None:
            raise RuntimeError(f"the query failed: {query.exception()}")
        measured = [(event_id, ms) for event_id, ms in reader.samples if event_id >= 0]
        steady_samples = [(event_id, ms) for event_id, ms in measured if event_id >= warmup_ids]
        steady = [ms for _, ms in steady_samples]
        result: dict[str, Any] = percentiles.summarize(steady)
        result.update(
            missing=expected - delivered(),
            sent=stats.sent,
            expected=expected,
            delivered=delivered(),
            duplicates=reader.duplicates,
            warmup_excluded=len(measured) - len(steady),
            achieved_rate=round(stats.achieved_rate, 1),
            producer_behind_max_s=round(stats.behind_s, 3),
            priming_s=round(first, 2),
            warmup_rule=f"settled: {settling.rule.describe()} (rows out)" if settling else f"fixed: {warmup:g} s",
            warmup_s=round(settling.seconds if settling else warmup, 2),
            warmup_settled=None if settling is None else settling.settled_at is not None,
            async_log_purge=spark.conf.get("spark.sql.streaming.asyncLogPurge.enabled"),
            **engine_and_gc(spark, query),
            quantiles_ms=percentiles.quantiles(steady),
            **batch_stats(query),
            slots=pipeline.slots,
            slots_needed=slots,
            checkpoint_folder=folder,
            run_span_ms=[round(query_started_ms), round(time.time() * 1000)],
            store_delay_ms=store_delay_ms,
        )
        # What the tail is made of, as far as the machine can tell: GC pauses (with --gc-log) and generator lag.
        wall_start_ms = wall_t0 * 1000
        wall_end_ms = wall_start_ms + (stats.finished_at - stats.started_at) * 1000
        pauses = []
        if gc_log:
            jvm_start_ms = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getStartTime()
            # This run's pauses only: a session shared by several modes logs theirs in the same file.
            pauses = [
                p for p in tail_sources.read_gc_pauses(gc_log, jvm_start_ms) if wall_start_ms <= p[0] <= wall_end_ms
            ]
            summary = tail_sources.gc_summary(pauses, wall_start_ms, wall_end_ms)
            result.update(gc_log=Path(gc_log).name, gc_pauses=pauses, **summary)
        result["generator_lag_ms"] = lag_timeline
        if result.get("p99_ms") is not None:
            result["tail"] = tail_sources.attribute_tail(
                steady_samples, rate, wall_start_ms, result["p99_ms"], pauses, lag_timeline
            )
            result["tail"]["gc_logged"] = bool(gc_log)
        if pipeline.name == "ad_attribution":
            result.update(
                window_ms=AD_WINDOW_MS,
                state_rows=state_track,
                state_rows_max=max((rows for *_, rows in state_track), default=None),
                state_rows_last=state_track[-1][2] if state_track else None,
            )
        if observe:
            from rtm_lab.benchmarks import boundary_observer

            result.update(boundary_observer.observe(spark, query, reader, cfg["rtm_interval"], warmup_ids))
        if monitor is not None:
            # Everything the monitor saw: the production, warm-up included (it started reading after the priming).
            result["monitor"] = monitor.figures([ms for _, ms in measured])
        if trace:
            Path(trace).write_text("".join(f"{event_id},{ms}\n" for event_id, ms in measured))
        say(f"done: {percentiles.format_summary(result)}  missing={result['missing']}")
        return result
    finally:
        if store_delay_ms is not None:
            from rtm_lab import s3_proxy

            s3_proxy.set_delay(s3_proxy.control_path(), 0)
        if monitor is not None:
            monitor.stop()
        if reader is not None:
            reader.stop()
        if query is not None and query.isActive:
            query.stop()
        if own_session:
            spark.stop()
        if not checkpoint_store:
            shutil.rmtree(checkpoint, ignore_errors=True)  # a run leaves nothing in /tmp
        for name in (source, sink):
            topics.delete_topic(bootstrap, name)


def child_main(argv: list[str] | None = None) -> int:
    # One run per process: --partitions (the per-task benchmark's one partition) is the module's count for the run.
    global PARTITIONS
    parser = argparse.ArgumentParser(
        prog="python -m rtm_lab.benchmarks.latency_child",
        description="Run one mode of the latency benchmark in this process and write its result as JSON "
        "(normally started by `scripts/bench.py latency`).",
    )
    parser.add_argument(
        "--mode",
        choices=ALL_MODES,
        action="append",
        required=True,
        help="the mode to run; repeated, the modes run in turn in one session and the result maps mode to result",
    )
    parser.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers")
    parser.add_argument("--rate", type=float, required=True, help="events per second")
    parser.add_argument("--seconds", type=cli.positive_float, required=True, help="how long to produce")
    parser.add_argument(
        "--warmup", type=cli.non_negative_float, required=True, help="seconds of events left out of percentiles"
    )
    parser.add_argument(
        "--batch-duration",
        "--interval",
        dest="interval",
        default=RTM_INTERVAL,
        help=f"real-time batch duration ({RTM_INTERVAL})",
    )
    parser.add_argument("--fetch-wait-ms", type=int, default=FETCH_MAX_WAIT_MS, help="kafka.fetch.max.wait.ms")
    parser.add_argument("--pipeline", choices=PIPELINES, default="passthrough")
    parser.add_argument("--out", required=True, help="where to write the result JSON")
    parser.add_argument("--trace", help="also write every delivered record as 'event id,latency ms' lines here")
    parser.add_argument(
        "--observe-boundaries", action="store_true", help="record batch boundaries, stalls and their breakdown"
    )
    parser.add_argument(
        "--spark-conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting for the session"
    )
    parser.add_argument(
        "--checkpoint-store",
        metavar="ENDPOINT",
        help="checkpoint on the lab's object store reached at this endpoint (the store or its delay proxy), a folder "
        "per run; default: /tmp",
    )
    parser.add_argument(
        "--store-delay-ms",
        type=cli.non_negative_float,
        help="with --checkpoint-store through the lab's delay proxy: hold each request this long, from the moment the "
        "first batch delivered the priming events (0 before and after the run)",
    )
    parser.add_argument("--gc-log", help="write the Spark JVM's GC log here and record its pauses in the result")
    parser.add_argument(
        "--monitor-prom-port", type=int, help="run the latency monitor beside the query, scraped by this Prometheus"
    )
    parser.add_argument(
        "--settle",
        action="append",
        default=[],
        metavar="MODE=SECONDS",
        help="MODE warms up until its backlog stayed under SECONDS of output for "
        f"{SETTLE_HOLD_S:g} s (at most {SETTLE_MAX_S:g} s), then measures --seconds; replaces --warmup for MODE",
    )
    parser.add_argument(
        "--partitions",
        type=cli.positive_int,
        default=PARTITIONS,
        help=f"source and sink partitions, and shuffle partitions of the ad pipeline ({PARTITIONS})",
    )
    args = parser.parse_args(argv)
    PARTITIONS = args.partitions
    cfg = settings(args.interval, args.fetch_wait_ms, args.pipeline)
    spark_conf = dict(item.split("=", 1) for item in args.spark_conf)
    settle = {mode: float(bound) for mode, bound in (item.split("=", 1) for item in args.settle)}
    if len(args.mode) > 1:
        if args.trace or args.observe_boundaries or spark_conf or args.monitor_prom_port:
            parser.error("several --mode values take only --gc-log and --settle of the optional settings")
        by_mode = run_modes(args.mode, args.bootstrap, args.rate, args.seconds, args.warmup, cfg, settle, args.gc_log)
        Path(args.out).write_text(json.dumps(by_mode))
        return 0
    (mode,) = args.mode
    result = run_mode(
        mode,
        args.bootstrap,
        args.rate,
        args.seconds,
        args.warmup,
        cfg,
        args.trace,
        args.observe_boundaries,
        spark_conf,
        args.gc_log,
        args.monitor_prom_port,
        settle.get(mode),
        checkpoint_store=args.checkpoint_store,
        store_delay_ms=args.store_delay_ms,
    )
    Path(args.out).write_text(json.dumps(result))
    return 0


def run_child(
    mode: str | Sequence[str],
    bootstrap: str,
    rate: float,
    seconds: float,
    warmup: float,
    cfg: dict,
    trace_dir,
    extra: Sequence[str] = (),
    gc_log: str | None = None,
    settle: dict[str, float] | None = None,
) -> dict:
    """One mode's result; with several modes (run in turn in one session), mode -> result."""
    modes = [mode] if isinstance(mode, str) else list(mode)
    with tempfile.TemporaryDirectory(prefix="bench-lat-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [
            sys.executable,
            "-m",
            "rtm_lab.benchmarks.latency_child",
            *(arg for m in modes for arg in ("--mode", m)),
            *("--bootstrap", bootstrap, "--rate", str(rate), "--seconds", str(seconds)),
            *("--warmup", str(warmup), "--interval", cfg["rtm_interval"]),
            *("--fetch-wait-ms", str(cfg["kafka_fetch_max_wait_ms"]), "--out", str(out)),
            *("--pipeline", cfg["pipeline"]),
            *extra,
        ]
        if trace_dir:  # one mode's run (several in one session take no trace)
            cmd += ["--trace", str(Path(trace_dir) / f"{modes[0]}-{rate:.0f}.csv")]
        if gc_log:
            cmd += ["--gc-log", gc_log]
        cmd += [arg for m, bound in (settle or {}).items() if m in modes for arg in ("--settle", f"{m}={bound}")]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        tail: list[str] = []
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip()
            if line.startswith("["):
                print(f"  {line}", flush=True)
            else:
                tail = [*tail[-30:], line]  # Spark/py4j noise: shown only if the child fails
        code = proc.wait(timeout=CHILD_TIMEOUT_S)
        if code != 0 or not out.exists():
            detail = "\n".join(tail[-15:])
            raise RuntimeError(f"mode {', '.join(modes)} at {rate:.0f}/s failed (exit {code}):\n{detail}")
        return json.loads(out.read_text())


if __name__ == "__main__":
    sys.exit(child_main())

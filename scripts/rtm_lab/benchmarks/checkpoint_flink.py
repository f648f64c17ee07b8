"""Flink beside real-time mode at equal checkpoint intervals: what each Flink checkpoint costs the records passing
through, with the checkpoint on local disk and on the lab's S3 store through the delay proxy.

The harness is the Spark runs' (rtm_lab.benchmarks.checkpoint_storage): the same generator (rtm_lab.loadgen's
events, keyed by id, 1,000 events/s), the same broker, the same latency reader (the sink record's broker timestamp
minus its source record's), and a checkpoint every 5 s, the Spark runs' batch duration. The three shapes
(rtm_lab.benchmarks.checkpoint_flink_job) mirror Spark's stateless, dropDuplicates and groupBy count, on RocksDB with
incremental checkpoints, AT_LEAST_ONCE (the sinks are at-least-once), a stated state TTL, and the engine
comparison's latency settings (a 5 ms buffer timeout). What Flink ran with is read back over its REST API.

On the store, Flink writes through its S3 filesystem (`flink-s3-fs-hadoop` or `-presto`, an on-demand jar group),
through the delay proxy, which holds each request for the cell's delay from the moment the priming events are out.
Per run: p50, p99, max; each completed checkpoint's duration, sync and async parts and sizes; the latency of records
that came in during a checkpoint and between checkpoints; the longest gap in records out during and between; the
requests per checkpoint by kind (rtm_lab.benchmarks.checkpoint_flink_figures).

A new subcommand rather than an `--engine` option of `checkpoint-storage`: that module's cells (async progress
tracking, held-out batch durations, Spark-only variants, the stall model) have no Flink meaning, and it is large.
The results file is written after every run, a rerun with the same file skips the runs it holds, and `--until HH:MM`
(UTC) starts no run that could not end by then.

    python scripts/bench.py checkpoint-storage-flink --json docs/results/checkpoint-storage-flink.json
    python scripts/bench.py checkpoint-storage-flink --shapes dedup --storage disk,100 --runs 1 --seconds 15 \\
        --json /tmp/smoke.json
"""

import argparse
import contextlib
import datetime as dt
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from rtm_lab import cli
from rtm_lab.benchmarks import checkpoint_flink_report as report
from rtm_lab.benchmarks import checkpoint_storage as spark_side

SHAPES = {
    "stateless": "parse, reshape, write (no state)",
    "dedup": "deduplication on the event id (ROW_NUMBER, first row kept)",
    "count": "a count keyed by the event id",
}
STORAGES = (report.DISK, "0", "30", "100")
PLUGINS = {"hadoop": "flink-s3-fs-hadoop", "presto": "flink-s3-fs-presto"}
CHECKPOINT_INTERVAL = spark_side.BATCH_DURATION  # "5 seconds", Spark's batch duration in the runs it stands beside
RATE = spark_side.RATE
WARMUP_S = spark_side.WARMUP_S
SECONDS = spark_side.SECONDS[spark_side.BATCH_DURATION]
OVERHEAD_S = 40.0  # a Flink start (venv, gateway, MiniCluster), the priming, the drain: for --until
PARTITIONS = 2
PRIMING = 10
# Kept longer than any run: nothing expires while one is measured, as Spark's state (no watermark) never does.
STATE_TTL = "1 h"
CHECKPOINT_PREFIX = "bench-flink"
# The PyFlink program, run in the Flink venv (never imported here: it needs pyflink).
JOB = Path(__file__).with_name("checkpoint_flink_job.py")


def flink_conf(shape: str) -> dict[str, str]:
    """The Flink settings of a run, beyond the guide's (RocksDB, AT_LEAST_ONCE)."""
    from rtm_lab.benchmarks.engine_run import ALWAYS, PROFILES

    conf = {
        **PROFILES["tuned"]["flink"],
        **ALWAYS["flink"],
        "execution.checkpointing.interval": CHECKPOINT_INTERVAL.replace("seconds", "s"),
        # Each checkpoint uploads only the RocksDB files made since the last: the like-for-like of real-time mode's
        # changelog checkpointing (its 4.3 default), which uploads only the changes.
        "execution.checkpointing.incremental": "true",
        # Every checkpoint of a run stays in the REST API's history (10 by default).
        "web.checkpoints.history": "100",
    }
    if shape != "stateless":
        conf["table.exec.state.ttl"] = STATE_TTL
    return conf


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--shapes",
        type=cli.comma_choices(list(SHAPES)),
        default=list(SHAPES),
        help="comma-separated shapes (default all): " + "; ".join(f"{k}: {v}" for k, v in SHAPES.items()),
    )
    parser.add_argument(
        "--storage",
        type=lambda text: [spark_side._delay(d.strip()) for d in text.split(",")],
        default=list(STORAGES),
        help="comma-separated storage cells: 'disk', or a delay per request in ms on the store "
        f"(default {','.join(STORAGES)})",
    )
    parser.add_argument(
        "--s3-plugin",
        choices=sorted(PLUGINS),
        default="hadoop",
        help="Flink's S3 filesystem for the store's cells (default hadoop: flink-s3-fs-hadoop)",
    )
    parser.add_argument("--runs", type=cli.positive_int, default=3, help="runs per cell (default 3)")
    parser.add_argument("--rate", type=cli.positive_float, default=RATE, help=f"events per second (default {RATE:g})")
    parser.add_argument(
        "--seconds", type=cli.positive_float, default=SECONDS, help=f"production seconds per run (default {SECONDS:g})"
    )
    parser.add_argument("--until", type=cli.clock_time, help="start no run that could not end by this UTC time (HH:MM)")
    parser.add_argument(
        "--json", required=True, type=cli.json_output, help="results file (resumed when it exists; a .md goes beside)"
    )


# ---------------------------------------------------------------- one run


def run_cell(shape: str, storage: str, state: Any, rate: float, seconds: float, plugin: str) -> dict:
    """One run: a fresh pair of topics, the Flink job started on them, primed, fed `rate` events/s, read back."""
    from rtm_lab import jars, loadgen, processes, s3_proxy, s3store, topics
    from rtm_lab.benchmarks import checkpoint_flink_figures, checkpoint_requests
    from rtm_lab.benchmarks.engine_run import flink_rest_base
    from rtm_lab.engines import flink, flink_rest
    from rtm_lab.errors import LabError
    from rtm_lab.waiting import WaitTimeout, wait_until

    bootstrap = state.kafka_bootstrap
    on_store = storage != report.DISK
    log_append = {"message.timestamp.type": "LogAppendTime"}
    source = topics.create_topic(bootstrap, topics.unique_name(f"ckf-{shape}-in"), PARTITIONS, log_append)
    sink = topics.create_topic(bootstrap, topics.unique_name(f"ckf-{shape}-out"), PARTITIONS, log_append)
    folder = topics.unique_name(f"ckpt-flink-{shape}")
    args = ["--parallelism", str(PARTITIONS)]
    args += [arg for key, value in flink_conf(shape).items() for arg in ("--conf", f"{key}={value}")]
    env = {"KAFKA_BOOTSTRAP_SERVERS": bootstrap}
    if on_store:
        args += ["--checkpoint-uri", f"s3://{s3store.BUCKET}/{CHECKPOINT_PREFIX}/{folder}"]
        args += ["--s3-endpoint", state.s3_proxy.address, "--s3-credentials", str(s3store.credentials_path())]
        # A local MiniCluster loads filesystems from the classpath, not the plugins folder: the gateway's launcher
        # (pyflink_gateway_server.py) appends HADOOP_CLASSPATH to it.
        env["HADOOP_CLASSPATH"] = str(jars.ensure(PLUGINS[plugin], quiet=True)[0])
        s3_proxy.set_delay(s3_proxy.control_path(), 0)
    args += [shape, source, sink]
    priming = [{**loadgen.make_event(0), "id": -1 - i} for i in range(PRIMING)]
    topics.produce_json(bootstrap, source, priming, key_field="id")
    reader = topics.SinkLatencyReader(bootstrap, sink).start()
    began_ms = time.time() * 1000
    proc = flink.start(JOB, args, env)
    say = lambda line: print(f"  [flink {shape} / {storage}] {line}", flush=True)  # noqa: E731
    try:

        def died() -> BaseException | None:
            return (
                None
                if proc.running()
                else LabError(f"the Flink job exited; the end of {proc.log}:\n{processes.tail(proc.log)}")
            )

        try:
            wait_until(lambda: sum(1 for i in list(reader.seen_ids) if i < 0) >= PRIMING, 300.0, "priming", 0.2, died)
        except WaitTimeout as exc:
            raise LabError(f"{exc}; the end of {proc.log}:\n{processes.tail(proc.log)}") from exc
        base = flink_rest_base(proc)
        job = flink_rest.running_job(base)
        if job is None:
            raise LabError("no running job in Flink's REST API")
        readback = flink_rest.readback(base, job)
        config = flink_rest.job_config(base, job)
        readback["incremental"] = config.get("execution.checkpointing.incremental", "not set")
        readback["checkpoint_dir"] = config.get("execution.checkpointing.dir")
        if on_store:
            s3_proxy.set_delay(s3_proxy.control_path(), float(storage))
        say(
            f"primed; {readback['state_backend']}, {readback['checkpoint_mode']}, every {readback['checkpoint_interval_ms']} ms"
        )
        produce_from_ms = time.time() * 1000
        stats = loadgen.produce_at_rate(bootstrap, source, rate, WARMUP_S + seconds, key_field="id")
        produced_until_ms = time.time() * 1000
        expected = stats.sent
        delivered = lambda: sum(1 for i in list(reader.seen_ids) if i >= 0)  # noqa: E731
        # What has not arrived by then is reported as missing: a result.
        with contextlib.suppress(WaitTimeout):
            wait_until(lambda: delivered() >= expected, max(30.0, seconds), "the last records", 0.25, died)
        checkpoints = flink_rest.checkpoint_history(base, job)
    finally:
        if on_store:
            s3_proxy.set_delay(s3_proxy.control_path(), 0)
        proc.stop()
        reader.stop()
        for name in (source, sink):
            topics.delete_topic(bootstrap, name)
    ended_ms = time.time() * 1000
    requests = None
    if on_store:
        logged = s3_proxy.read_log(s3_proxy.log_path(), began_ms, ended_ms + 1)
        requests = checkpoint_requests.of_run(logged, folder)
    measured = [(i, ms) for i, ms in reader.samples]
    out = list(reader.out_ts_ms)
    warmup_ids = int(rate * WARMUP_S)
    window = (produce_from_ms + WARMUP_S * 1000, produced_until_ms)
    figures = checkpoint_flink_figures.run_figures(measured, out, checkpoints, requests, warmup_ids, window)
    say(
        f"p50 {figures.get('p50_ms')} ms, p99 {figures.get('p99_ms')} ms; {figures['checkpoints_counted']} checkpoints, "
        f"{figures['end_to_end_ms']} ms each; requests per checkpoint {figures['requests_per_checkpoint']}"
    )
    secret_logged = on_store and _logs_hold(proc.folder, s3store.credentials().secret_key)
    shutil.rmtree(proc.folder, ignore_errors=True)  # its logs are kept only when the run raised
    if secret_logged:
        raise LabError("the store's secret key appeared in Flink's logs (now deleted): the run is not kept")
    return {
        **figures,
        "sent": stats.sent,
        "delivered": delivered(),
        "missing": max(expected - delivered(), 0),
        "duplicates": reader.duplicates,
        "readback": readback,
        "conf": flink_conf(shape),
        "s3_plugin": PLUGINS[plugin] if on_store else None,
        "secret_in_logs": secret_logged,
        "checkpoint_folder": folder,
        "run_span_ms": [round(began_ms), round(ended_ms)],
        "measured_window_ms": [round(w) for w in window],
    }


def _logs_hold(folder: Path, secret: str) -> bool:
    """Whether any of a Flink run's logs holds `secret` (its own log and Flink's)."""
    return any(secret in path.read_text(errors="replace") for path in folder.rglob("*.log") if path.is_file())


# ---------------------------------------------------------------- the command


def storages(done: list[dict]) -> list[str]:
    """The storage cells of `done` in table order: the default ones, then any other delay, smallest first."""
    others = {d["cell"]["storage"] for d in done} - set(STORAGES)
    return [*STORAGES, *sorted(others, key=float)]


def build(done: list[dict], args: argparse.Namespace, record: dict, previous: dict, ran: bool) -> dict:
    """The results file: every run, a row per cell, the record of the session that ran the last runs, and one entry
    per session that ran any (a resumed file spans several)."""
    from rtm_lab.versions import FLINK_VERSION

    return {
        "benchmark": "checkpoint-storage-flink",
        "flink_version": FLINK_VERSION,
        "rate": args.rate,
        "seconds": args.seconds,
        "warmup_s": WARMUP_S,
        "checkpoint_interval": CHECKPOINT_INTERVAL,
        "rows": report.assemble(done, list(SHAPES), storages(done)),
        "done": done,
        **record,
        # the Spark record's versions are the wrong engine's; these are the ones the runs used
        "versions": report.flink_versions({"flink_version": FLINK_VERSION, "versions": record.get("versions", {})}),
        "sessions": [
            *previous.get("sessions", []),
            *([{k: record[k] for k in ("command", "started", "timestamp", "load_average")}] if ran else []),
        ],
    }


def write(result: dict, path: Path) -> Path:
    path.write_text(json.dumps(result, indent=1) + "\n")
    md = path.with_suffix(".md")
    md.write_text(report.markdown(result))
    return md


def main(args: argparse.Namespace, command: str) -> int:
    from rtm_lab.benchmarks import run_record

    path = Path(args.json)
    previous = json.loads(path.read_text()) if path.is_file() else {}
    if previous.get("done") and previous.get("rate") != args.rate:
        print(f"error: {path} holds runs at {previous.get('rate')} events/s, not {args.rate:g}", file=sys.stderr)
        return 2
    done: list[dict] = list(previous.get("done", []))
    cells = [(shape, storage) for shape in args.shapes for storage in args.storage]
    todo = [
        (i, shape, storage)
        for i in range(args.runs)
        for shape, storage in cells
        if not any(d["cell"] == {"shape": shape, "storage": storage} and d["run"] == i for d in done)
    ]
    print(f"{len(cells)} cells x {args.runs} runs: {len(todo)} to run, {len(cells) * args.runs - len(todo)} in {path}")
    needs_store = any(storage != report.DISK for _, _, storage in todo)
    with run_record.on_the_lab(command, {"s3"} if needs_store else set()) as (record, state):
        for n, (i, shape, storage) in enumerate(todo, 1):
            if args.until and dt.datetime.now(dt.UTC) + dt.timedelta(seconds=args.seconds + OVERHEAD_S) > args.until:
                print(f"stopping: the next run could not end by {args.until:%H:%M} UTC; rerun to resume", flush=True)
                break
            print(f"({n}/{len(todo)}) run {i + 1}: {report.cell_key(shape, storage)} ...", flush=True)
            began = time.monotonic()
            result = run_cell(shape, storage, state, args.rate, args.seconds, args.s3_plugin)
            done.append({"cell": {"shape": shape, "storage": storage}, "run": i, "result": result})
            print(f"  {time.monotonic() - began:.0f} s", flush=True)
            write(build(done, args, record.record(), previous, ran=True), path)
    result = build(done, args, record.record(), previous, ran=len(done) > len(previous.get("done", [])))
    md = write(result, path)
    print(report.markdown(result))
    print(f"wrote {path}, {md}")
    return 0

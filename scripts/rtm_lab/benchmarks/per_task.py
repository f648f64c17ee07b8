"""The highest rate one task holds, for each query shape the project teaches: the per-task capacity the capacity
planner (snippets/guides/capacity_plan.py) reads.

Each shape runs on one source partition (and one shuffle partition when it has a shuffle), so each stage has one
task. The engine's JVM is pinned to one core; the generator, the reader, the Python driver, the Kafka broker and
PostgreSQL to the others. A run produces at the step's rate for a warm-up and then the measured seconds (60 by
default) at the 5-minute batch duration, so no batch ends inside it. A step's rate is held at a bound when its runs
(3 by default) all held by the project's rule (rtm_lab.benchmarks.held_rate) at that bound: p99 under it, nothing
lost, the generator at the rate. One run not held settles a step as not held, so a failed step costs one run. The
search doubles the rate from a start until a step is not held at 100 ms, then narrows the bracket geometrically until
it is within 10 %; then the same for the 1 s bound, from the steps already run. A step the generator cannot offer ends
the shape's search: the machine, not the task, is then the limit. On synthetic limits a shape takes 14 to 34 runs
(tests/benchmarks/test_per_task.py); at about 3 minutes a run (a fresh engine, 60 s of warm-up, 60 s measured, the
read-back), plan on one to two hours a shape.

The results file is written after every run and read back on start: a stopped search resumes where it was. Its
`capacity` part is derived from the runs on every write (never typed in), and is what the planner reads.

Shapes and their harnesses:
- stateless, groupby-count, dedup: the engine comparison's pipelines (rtm_lab.benchmarks.engine_run: transform,
  count, dedup), the engine in a process of its own, Spark's default settings;
- postgres-jvm: Kafka -> the JVM Postgres writer (rtm_lab.benchmarks.sink, writer "jvm"), in this process's session;
- ad-attribution: the JVM ad-attribution processor (rtm_lab.benchmarks.latency_child, pipeline ad_attribution).
"""

import argparse
import contextlib
import datetime as dt
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from rtm_lab import cli, cpu_pinning, machine
from rtm_lab.benchmarks import engine_run, load_average, per_task_report, run_record
from rtm_lab.benchmarks.per_task_search import (
    BOUNDS_MS,
    BRACKET,
    RUNS_PER_STEP,
    SHAPES,
    capacity,
    next_rate,
    run_verdict,
)
from rtm_lab.errors import LabError
from rtm_lab.paths import PROJECT_ROOT

DEFAULT_SECONDS = 60.0
# A 60 s warm-up, as for bench.py engine-capacity: every run starts behind (JIT compilation, the first fetches), and
# near a task's limit that start-up backlog drains slowly, at capacity minus rate (at 90 % of capacity, 5 s of
# backlog takes 45 s). A short warm-up carries it into the measured minute and reads the capacity low.
DEFAULT_WARMUP_S = 60.0
RESULTS = PROJECT_ROOT / "docs" / "results" / "per-task-throughput.json"
# Where each shape's search starts (events/s), in SHAPES' order.
START_RATES = {
    "stateless": 5000.0,
    "groupby-count": 5000.0,
    "dedup": 5000.0,
    "postgres-jvm": 2000.0,
    "ad-attribution": 2000.0,
}


# Pinning: the engine's JVM on one core, everything else on the others (rtm_lab.cpu_pinning).


class Pinning:
    """For the harnesses whose engine JVM is not started on its core (the sink's session in this process, the ad
    pipeline's child, which also runs the generator): each JVM under this process goes to ENGINE_CORES as it
    appears, this process and the lab's broker and PostgreSQL to HARNESS_CORES. Threads and processes started later
    inherit their starter's cores, so each process is pinned once. The engine-comparison pipelines instead start their
    engine on its core (engine_run's isolated placement)."""

    def __init__(self, lab_pids: list[int | None], is_engine: Callable[[psutil.Process], bool] | None = None) -> None:
        self.lab_pids = [pid for pid in lab_pids if pid is not None]
        # Which JVMs are the engine: every JVM by default; on a standalone cluster, the executors only.
        self.is_engine = is_engine or (lambda proc: True)
        self.pinned: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="pinning", daemon=True)

    def _new_jvms(self) -> list[int]:
        lab = set(self.lab_pids)
        try:
            children = psutil.Process(os.getpid()).children(recursive=True)
        except psutil.Error:
            return []
        found = []
        for proc in children:
            with contextlib.suppress(psutil.Error):
                if (
                    proc.pid not in self.pinned
                    and proc.pid not in lab
                    and proc.name() == "java"
                    and self.is_engine(proc)
                ):
                    found.append(proc.pid)
        return found

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            for pid in self._new_jvms():
                with contextlib.suppress(LabError):  # a JVM that ended since it was listed
                    cpu_pinning.pin(pid, engine_run.ENGINE_CORES)
                    self.pinned.add(pid)

    def __enter__(self) -> "Pinning":
        for pid in [os.getpid(), *self.lab_pids]:
            cpu_pinning.pin(pid, engine_run.HARNESS_CORES)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        for pid in [os.getpid(), *self.lab_pids]:  # every core back
            with contextlib.suppress(LabError):
                cpu_pinning.unpin(pid)


# The harnesses: one run of a shape at a rate, as the same few figures.


def postgres_checkpoints(dsn: str) -> int:
    """How many checkpoints the PostgreSQL server has started, timed and requested (its statistics view moved in
    PostgreSQL 17)."""
    import psycopg2

    with contextlib.closing(psycopg2.connect(dsn)) as conn, conn.cursor() as cur:
        cur.execute("SELECT current_setting('server_version_num')::int")
        (version,) = cur.fetchone()
        if version >= 170000:
            cur.execute("SELECT num_timed + num_requested FROM pg_stat_checkpointer")
        else:
            cur.execute("SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter")
        (count,) = cur.fetchone()
        return int(count)


@dataclass
class Harness:
    state: object  # rtm_lab.lab.LabState
    seconds: float
    warmup: float
    say: Callable[[str], None]
    pin: bool = True
    _sink_spark: object = None

    @property
    def production_s(self) -> float:
        """The sink's and the ad-attribution child's `seconds`: the whole production, warm-up included (the engine
        harness takes the two apart)."""
        return self.warmup + self.seconds

    def run(self, shape: str, rate: float) -> dict:
        if shape in ("stateless", "groupby-count", "dedup"):
            return self._engine(shape, rate)
        lab = [self.state.kafka.pid, self.state.postgres.pid]  # type: ignore[attr-defined]
        with Pinning(lab) if self.pin else contextlib.nullcontext():
            return self._postgres(rate) if shape == "postgres-jvm" else self._ad(rate)

    def _engine(self, shape: str, rate: float) -> dict:
        pipeline = {"stateless": "transform", "groupby-count": "count", "dedup": "dedup"}[shape]
        conf = {"spark.sql.shuffle.partitions": "1"}
        bootstrap = self.state.kafka_bootstrap  # type: ignore[attr-defined]
        placement = "isolated" if self.pin else "shared"
        broker = self.state.kafka.pid  # type: ignore[attr-defined]
        figures = engine_run.run(
            "spark",
            pipeline,
            rate,
            self.seconds,
            self.warmup,
            "default",
            bootstrap,
            self.say,
            partitions=1,
            extra_conf=conf,
            placement=placement,
            broker_pid=broker,
        )
        return {
            "p99_ms": figures.get("p99_ms"),
            "p50_ms": figures.get("p50_ms"),
            "max_ms": figures.get("max_ms"),
            "samples": figures.get("n"),  # the measured events the percentiles come from
            "lost": figures.get("missing"),
            "reached_rate": figures.get("achieved_rate"),
            "rss_peak_mib": figures.get("rss_peak_mib"),
            # Each core's busy share over the measured minute only. The whole run's share (core_busy) also covers
            # the start and the read-back, which dilute it: a harness core full while measuring read 75 % over the
            # whole run at 5,000 events/s.
            "core_busy_measured": figures.get("core_busy"),
            "harness": f"rtm_lab.benchmarks.engine_run, pipeline {pipeline}, Spark defaults, shuffle partitions 1",
        }

    def _postgres(self, rate: float) -> dict:
        from rtm_lab import snippet_jar
        from rtm_lab.benchmarks import sink
        from rtm_lab.spark import spark_session
        from snippets.guides.kafka_to_postgres import SESSION_CONF

        if self._sink_spark is None:  # one session for the shape's runs; each run has its own warm-up
            conf = {**SESSION_CONF, "spark.sql.shuffle.partitions": "1", "spark.jars": snippet_jar.session_jars()}
            self._sink_spark = spark_session("rtm-bench-per-task", slots=1, conf=conf)
        scenario = sink.Scenario(rate=rate, seconds=self.production_s, partitions=1, writer="jvm", warmup_s=self.warmup)
        dsn = self.state.postgres_dsn  # type: ignore[attr-defined]
        checkpoints_before = postgres_checkpoints(dsn)
        run = sink.run_scenario(self._sink_spark, self.state, scenario, self.say, prefix="pertask")
        return {
            "p99_ms": run["e2e_p99_ms"],
            "p50_ms": run["e2e_p50_ms"],
            "max_ms": run["e2e_max_ms"],
            "samples": run["e2e_samples"],
            "lost": run["lost"],
            "reached_rate": run["produced_rate"],
            "harness": "rtm_lab.benchmarks.sink, JVM writer, one partition, PostgreSQL on the harness cores",
            # PostgreSQL's own checkpoints started during the run (every 5 minutes by default): a run they overlap can
            # show a tail no core was busy for.
            "postgres_checkpoints": postgres_checkpoints(dsn) - checkpoints_before,
        }

    def _ad(self, rate: float) -> dict:
        from rtm_lab.benchmarks import latency_child

        cfg = latency_child.settings(latency_child.AD_RTM_INTERVAL, pipeline="ad_attribution")
        extra = ["--partitions", "1", "--spark-conf", "spark.sql.shuffle.partitions=1"]
        bootstrap = self.state.kafka_bootstrap  # type: ignore[attr-defined]
        figures = latency_child.run_child("realtime", bootstrap, rate, self.production_s, self.warmup, cfg, None, extra)
        return {
            "p99_ms": figures.get("p99_ms"),
            "p50_ms": figures.get("p50_ms"),
            "max_ms": figures.get("max_ms"),
            "samples": figures.get("n"),
            "lost": figures.get("missing"),
            "reached_rate": figures.get("achieved_rate"),
            "harness": "rtm_lab.benchmarks.latency_child, pipeline ad_attribution (JVM processor), one partition",
            # The tasks Spark planned (1 source + 1 shuffle), read from the running query's plan.
            "slots_needed": figures.get("slots_needed"),
        }

    def close(self) -> None:
        if self._sink_spark is not None:
            self._sink_spark.stop()  # type: ignore[attr-defined]


# The command.


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--shapes",
        type=_shapes,
        default=list(SHAPES),
        metavar="S[,S...]",
        help=f"which shapes, in order (default all: {','.join(SHAPES)})",
    )
    parser.add_argument("--runs", type=cli.positive_int, default=RUNS_PER_STEP, help="runs per step (default 3)")
    parser.add_argument(
        "--seconds", type=cli.positive_float, default=DEFAULT_SECONDS, help="measured seconds per run (default 60)"
    )
    parser.add_argument(
        "--warmup", type=cli.non_negative_float, default=DEFAULT_WARMUP_S, help="warm-up seconds per run (default 60)"
    )
    parser.add_argument(
        "--start-rate",
        action="append",
        type=_start_rate,
        default=[],
        metavar="SHAPE=RATE",
        help="where a shape's search starts (defaults: "
        + ", ".join(f"{k} {v:g}" for k, v in START_RATES.items())
        + ")",
    )
    parser.add_argument(
        "--max-runs", type=cli.positive_int, help="stop after this many runs in all (a smoke: --max-runs 1)"
    )
    parser.add_argument(
        "--until",
        type=cli.clock_time,
        metavar="HH:MM",
        help="start no run that would end after HH:MM UTC (the next one: past midnight works)",
    )
    parser.add_argument("--no-pin", action="store_true", help="leave every process on every core (not for the table)")
    parser.add_argument(
        "--json",
        type=cli.json_output,
        default=RESULTS,
        help="results file, read back to resume and rewritten after every run (default %(default)s)",
    )


def _shapes(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in SHAPES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown shape {', '.join(unknown) or text!r}; choose from {', '.join(SHAPES)}"
        )
    return names


def _start_rate(text: str) -> tuple[str, float]:
    shape, _, rate = text.partition("=")
    if shape not in SHAPES:
        raise argparse.ArgumentTypeError(f"{text!r}: expected SHAPE=RATE with SHAPE one of {', '.join(SHAPES)}")
    return shape, cli.positive_float(rate)


def load(path: Path) -> dict:
    if not path.is_file():
        return {"benchmark": "per-task", "runs": []}
    try:
        result = json.loads(path.read_text())
    except ValueError as exc:
        raise LabError(f"{path} is not JSON ({exc}); choose another --json") from None
    if result.get("benchmark") != "per-task":
        raise LabError(f"{path} is not a per-task results file; choose another --json")
    if result.get("machine") and result["machine"] != machine.describe():
        raise LabError(f"{path} was measured on another machine; every step of the table is measured on one")
    return result


def write(result: dict, path: Path) -> None:
    result["capacity"] = capacity(result["runs"], result["settings"]["runs_per_step"], result["settings"].get("pinned"))
    path.write_text(json.dumps(result, indent=2) + "\n")
    path.with_suffix(".md").write_text(per_task_report.markdown(result))
    # Named after its results file: a second search (another warm-up) never draws over the table's plot.
    per_task_report.plot(result, path.with_suffix(".png"))


def main(args: argparse.Namespace, command: str) -> int:
    result = load(args.json)
    settings = {
        "runs_per_step": args.runs,
        "seconds": args.seconds,
        "warmup_s": args.warmup,
        "bounds_ms": list(BOUNDS_MS),
        "bracket": BRACKET,
        "source_partitions": 1,
        "shuffle_partitions": 1,
        "pinned": None
        if args.no_pin
        else {"engine_cores": sorted(engine_run.ENGINE_CORES), "harness_cores": sorted(engine_run.HARNESS_CORES)},
    }
    old = result.get("settings")
    if old and {k: old.get(k) for k in ("runs_per_step", "seconds", "warmup_s", "pinned")} != {
        k: settings[k] for k in ("runs_per_step", "seconds", "warmup_s", "pinned")
    }:
        print(f"error: {args.json} was measured with other settings ({old}); use another --json", file=sys.stderr)
        return 2
    result["settings"] = settings
    starts = {**START_RATES, **dict(args.start_rate)}
    lengths: list[float] = []
    say = lambda line: print(line, flush=True)  # noqa: E731
    count = 0
    with run_record.on_the_lab(command) as (record, state):
        harness = Harness(state, args.seconds, args.warmup, say, pin=not args.no_pin)
        try:
            for shape in args.shapes:
                while True:
                    shape_runs = [r for r in result["runs"] if r["shape"] == shape]
                    rate, why = next_rate(shape_runs, starts[shape], args.runs)
                    if rate is None:
                        say(f"per-task {shape}: search over ({why})")
                        break
                    expected = statistics.median(lengths) if lengths else args.seconds + args.warmup + 60
                    if args.until and dt.datetime.now(dt.UTC) + dt.timedelta(seconds=expected) > args.until:
                        say(f"stopped: the next run would end after {args.until:%H:%M} UTC; rerun to resume")
                        return 0
                    if args.max_runs is not None and count >= args.max_runs:
                        say(f"stopped after {count} run(s) (--max-runs); rerun to resume")
                        return 0
                    n = sum(1 for r in shape_runs if float(r["rate"]) == rate) + 1
                    say(f"per-task {shape} at {rate:,.0f} events/s, run {n}/{args.runs} ({why})")
                    began, window, load_before = time.monotonic(), cpu_pinning.CoreWindow(), load_average.snapshot()
                    started = machine.utc_now()
                    figures = harness.run(shape, rate)
                    run = {
                        "shape": shape,
                        "rate": rate,
                        **figures,
                        # Each core's busy share over the whole run: the engine's core near 100 % at the limit, and
                        # the pinning visibly held.
                        "core_busy": window.busy(),
                        "seconds": round(time.monotonic() - began, 1),
                        "started": started,
                        "timestamp": machine.utc_now(),
                        "load_average": {"start": load_before, "end": load_average.snapshot()},
                    }
                    lengths.append(run["seconds"])
                    result["runs"].append(run)
                    result.update(record.record())
                    write(result, args.json)
                    count += 1
                    verdicts = ", ".join(f"{b} ms: {run_verdict(run, b)}" for b in BOUNDS_MS)
                    say(f"  p99 {run['p99_ms']} ms, lost {run['lost']}, cores busy {run['core_busy']}; {verdicts}")
        finally:
            harness.close()
    say(f"wrote {args.json} and {args.json.with_suffix('.md')}")
    return 0

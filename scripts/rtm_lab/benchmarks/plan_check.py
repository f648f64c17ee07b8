"""The planner checked against runs (`bench.py plan-check`): a plan's configuration run on a local standalone cluster
at about 0.5x, 0.9x and 1.3x the measured per-task capacity, the boundary it predicts beside the one observed.

For each factor the planner (snippets/guides/capacity_plan.py) plans one source partition (and one shuffle partition
for a stateful shape) at factor x capacity: it predicts "held" when the busiest task's rate is within the capacity,
"not held" above it. The run is that plan on a standalone cluster of one worker with the plan's task slots: the
executor's JVM on the engine core, the master, the worker, the driver, the generator and the broker on the other. A
factor's verdict is the per-task benchmark's step rule at the same bound (rtm_lab.benchmarks.per_task_search): its
runs all held, or one did not.

What a 2-core machine cannot show: more than one executor, a shuffle between machines, more tasks than cores, a
driver on a node of its own. The check covers the arithmetic on one task, not a cluster's network.
"""

import argparse
import datetime as dt
import json
import statistics
import time
from pathlib import Path

from rtm_lab import cli, cpu_pinning, machine, standalone
from rtm_lab.benchmarks import engine_run, held_rate, load_average, run_record
from rtm_lab.benchmarks.per_task import DEFAULT_WARMUP_S, Pinning
from rtm_lab.benchmarks.per_task_search import BOUNDS_MS, RUNS_PER_STEP, run_verdict, step_verdict, steps
from rtm_lab.errors import LabError
from rtm_lab.generated import generated_note, markdown_table
from rtm_lab.paths import PROJECT_ROOT
from snippets.guides import capacity_plan

FACTORS = (0.5, 0.9, 1.3)
SHAPES = {"stateless": "transform", "groupby-count": "count", "dedup": "dedup"}  # those engine_run runs
RESULTS = PROJECT_ROOT / "docs" / "results" / "plan-check.json"
PER_TASK = PROJECT_ROOT / "docs" / "results" / "per-task-throughput.json"
EXECUTOR_CLASS = "CoarseGrainedExecutorBackend"


def prediction(shape: str, rate: float, capacity: float, bound_ms: int) -> dict:
    """What the planner predicts for one partition (and one shuffle partition) at `rate`: its busiest task's rate
    against the capacity, and so held or not held."""
    request = capacity_plan.Request(
        rate=rate, source_partitions=1, shape=shape, shuffle_partitions=1, latency_bound_ms=bound_ms
    )
    slots = capacity_plan.slots_for_shape(request)
    busiest, _ = capacity_plan.busiest_task_rate(request, slots)
    return {"slots": slots.total, "busiest_rate": busiest, "predicted": "held" if busiest <= capacity else "not held"}


def measured_capacity(path: Path, shape: str, bound_ms: int) -> float:
    if not path.is_file():
        raise LabError(f"{path} does not exist: run `bench.py per-task` first, or pass --capacity")
    found = capacity_plan.read_capacity(json.loads(path.read_text()), shape, bound_ms, path.name)
    if isinstance(found, str):
        raise LabError(f"{found}: measure the shape with `bench.py per-task`, or pass --capacity")
    return found.rate


def rows(result: dict) -> list[list[str]]:
    bound, per_step = result["settings"]["bound_ms"], result["settings"]["runs_per_step"]
    out = []
    for shape in SHAPES:
        mine = [r for r in result["runs"] if r["shape"] == shape]
        for rate, runs in steps(mine, 1).items():
            p99s = [r["p99_ms"] for r in runs if r.get("p99_ms") is not None]
            median = f"{statistics.median(p99s):,.0f} ({min(p99s):,.0f}–{max(p99s):,.0f})" if p99s else "—"
            observed = step_verdict(runs, bound, per_step) or "open"
            first = runs[0]
            out.append(
                [shape, f"{first['factor']:g}×", f"{rate:,.0f}", first["predicted"], observed, median, str(len(runs))]
            )
    return out


def markdown(result: dict) -> str:
    settings = result["settings"]
    header = ["shape", "factor", "events/s", "planner predicts", "observed", "p99 ms, median (range)", "runs"]
    return "\n".join(
        [
            generated_note("python scripts/tables.py plan-check"),
            "",
            markdown_table(header, rows(result)),
            "",
            held_rate.caption(
                f"{settings['seconds']:g} s after {settings['warmup_s']:g} s of warm-up",
                [],
                f"{settings['bound_ms']:,} ms",
            ),
            "",
            f"Bound: p99 ≤ {settings['bound_ms']} ms, nothing lost, over {settings['seconds']:g} s after "
            f"{settings['warmup_s']:g} s of warm-up. Capacity {settings['capacity']:,.0f} events/s "
            f"({settings['capacity_source']}). One worker, the executor's JVM on core "
            f"{', '.join(map(str, engine_run.ENGINE_CORES))}, everything else on the other core. A 2-core machine "
            "shows one executor and one or two tasks: no shuffle between machines, no driver on a node of its own.",
            "",
            *run_record.record_lines(result, runs=len(result["runs"]), records=result["runs"]),
            "",
        ]
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shape", choices=SHAPES, default="stateless", help="the shape to check (stateless)")
    parser.add_argument("--bound-ms", type=int, choices=BOUNDS_MS, default=BOUNDS_MS[0], help="the p99 bound (100)")
    parser.add_argument(
        "--capacity",
        type=cli.positive_float,
        help="per-task capacity in events/s (default: the shape's, from per-task-throughput.json)",
    )
    parser.add_argument(
        "--factors",
        type=lambda text: [cli.positive_float(f) for f in text.split(",")],
        default=list(FACTORS),
        metavar="F[,F...]",
        help="multiples of the capacity to run at (0.5,0.9,1.3)",
    )
    parser.add_argument("--runs", type=cli.positive_int, default=RUNS_PER_STEP, help="runs per factor (3)")
    parser.add_argument("--seconds", type=cli.positive_float, default=60.0, help="measured seconds per run (60)")
    parser.add_argument(
        "--warmup", type=cli.non_negative_float, default=DEFAULT_WARMUP_S, help="warm-up seconds per run (%(default)g)"
    )
    parser.add_argument(
        "--until",
        type=cli.clock_time,
        metavar="HH:MM",
        help="start no run that would end after HH:MM UTC (the next one: past midnight works)",
    )
    parser.add_argument("--max-runs", type=cli.positive_int, help="stop after this many runs (a smoke: 1)")
    parser.add_argument("--json", type=cli.json_output, default=RESULTS, help="results file (%(default)s)")


def _is_executor(proc) -> bool:
    return any(EXECUTOR_CLASS in part for part in proc.cmdline())


def main(args: argparse.Namespace, command: str) -> int:
    capacity = args.capacity or measured_capacity(PER_TASK, args.shape, args.bound_ms)
    source = "--capacity" if args.capacity else f"{PER_TASK.name}: capacity.{args.shape}.{args.bound_ms}"
    result: dict = {"benchmark": "plan-check", "runs": []}
    if args.json.is_file():
        result = json.loads(args.json.read_text())
    runs: list[dict] = result["runs"]
    settings = {
        "bound_ms": args.bound_ms,
        "runs_per_step": args.runs,
        "seconds": args.seconds,
        "warmup_s": args.warmup,
        "capacity": capacity,
        "capacity_source": source,
    }
    if result["runs"] and result.get("settings") != settings:
        raise LabError(f"{args.json} was measured with other settings ({result.get('settings')}); use another --json")
    result["settings"] = settings
    say = lambda line: print(line, flush=True)  # noqa: E731
    lengths: list[float] = []
    count = 0
    with run_record.on_the_lab(command) as (record, state):
        lab = [state.kafka.pid, state.postgres.pid]
        with Pinning(lab, is_engine=_is_executor):
            slots = prediction(args.shape, capacity, capacity, args.bound_ms)["slots"]
            with standalone.cluster(workers=1, cores_per_worker=slots) as cluster:
                conf = {
                    "spark.master": cluster.master_url,
                    "spark.executor.cores": str(slots),
                    "spark.cores.max": str(slots),
                    "spark.dynamicAllocation.enabled": "false",
                    "spark.scheduler.minRegisteredResourcesRatio": "1.0",
                    "spark.sql.shuffle.partitions": "1",
                }
                for factor in args.factors:
                    rate = round(factor * capacity)
                    while len([r for r in runs if r["shape"] == args.shape and r["rate"] == rate]) < args.runs:
                        expected = statistics.median(lengths) if lengths else args.seconds + args.warmup + 60
                        if args.until and dt.datetime.now(dt.UTC) + dt.timedelta(seconds=expected) > args.until:
                            say(f"stopped: the next run would end after {args.until:%H:%M} UTC; rerun to resume")
                            return 0
                        if args.max_runs is not None and count >= args.max_runs:
                            say(f"stopped after {count} run(s) (--max-runs); rerun to resume")
                            return 0
                        predicted = prediction(args.shape, rate, capacity, args.bound_ms)
                        say(f"plan-check {args.shape} {factor:g}x = {rate:,} events/s: the planner predicts "
                            f"{predicted['predicted']}")  # fmt: skip
                        began, window, load_before = time.monotonic(), cpu_pinning.CoreWindow(), load_average.snapshot()
                        started = machine.utc_now()
                        figures = engine_run.run(
                            "spark",
                            SHAPES[args.shape],
                            rate,
                            args.seconds,
                            args.warmup,
                            "default",
                            state.kafka_bootstrap,
                            say,
                            partitions=1,
                            extra_conf=conf,
                        )
                        run = {
                            "shape": args.shape,
                            "factor": factor,
                            "rate": rate,
                            **predicted,
                            "p99_ms": figures.get("p99_ms"),
                            "p50_ms": figures.get("p50_ms"),
                            "lost": figures.get("missing"),
                            "reached_rate": figures.get("achieved_rate"),
                            "core_busy": window.busy(),
                            "seconds": round(time.monotonic() - began, 1),
                            "started": started,
                            "timestamp": machine.utc_now(),
                            "load_average": {"start": load_before, "end": load_average.snapshot()},
                        }
                        lengths.append(run["seconds"])
                        runs.append(run)
                        result.update(record.record())
                        args.json.write_text(json.dumps(result, indent=2) + "\n")
                        args.json.with_suffix(".md").write_text(markdown(result))
                        count += 1
                        say(f"  p99 {run['p99_ms']} ms, lost {run['lost']}: {run_verdict(run, args.bound_ms)}")
    say(f"wrote {args.json} and {args.json.with_suffix('.md')}")
    return 0

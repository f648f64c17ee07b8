"""Turn an input rate into a cluster for a real-time query: task slots, the rate the
busiest task must carry against the measured per-task capacity, cores, executors,
memory, headroom and catch-up time after a restart. Each figure is followed by where it
comes from: a key of the per-task results file, or a formula.

    python scripts/rtm_plan.py --rate 100000 --source-partitions 64 \\
        --shape groupby-count --shuffle-partitions 32
    python scripts/rtm_plan.py --rate 100000 --source-partitions 64 \\
        --shape groupby-count --shuffle-partitions 32 --query my_query.py [ARGS ...]

With --query the slot count is the readiness check's (rtm_check.py, beside this file
in the skill): it runs the file for a moment and counts the tasks of every stage from
Spark's plan. Without it the slots come from the shape: source partitions plus the
shuffle partitions of each shuffle the shape has.

The per-task capacity is the highest rate one source task (plus one shuffle task for a
stateful shape) held on one core, read from the results file
(docs/results/per-task-throughput.json; the skill ships its capacity part beside this
file). When the file is missing or lacks the shape, the plan says so and gives the slots
and the formulas, never a figure it did not read. Exit 0: a plan; 2: bad input, one
line.
"""

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

# The shapes the per-task benchmark measures, with the shuffles each adds to the plan.
SHAPES = {
    "stateless": (0, "Kafka -> Kafka, a projection and a filter"),
    "groupby-count": (1, "a running count per key (groupBy + count)"),
    "dedup": (1, "dropDuplicates on a key"),
    "postgres-jvm": (0, "Kafka -> the JVM Postgres writer (upserts)"),
    "ad-attribution": (1, "the JVM ad-attribution processor (transformWithState)"),
}
# Shapes whose database ran on the harness core while they were measured.
DATABASE_SHAPES = ("postgres-jvm",)
LATENCY_BOUNDS_MS = (100, 1000)  # the two held-rate bounds the table is measured at
SPARK_DEFAULT_SHUFFLE_PARTITIONS = 200  # spark.sql.shuffle.partitions
DEFAULT_BATCH_DURATION_S = 300  # trigger(realTime=...) default: 5 minutes
DEFAULT_UTILISATION_PCT = 50.0
DEFAULT_CORES_PER_EXECUTOR = 4
RESULTS_NAME = "per-task-throughput.json"
STALL_NAME = "checkpoint-storage.json"
SLOT_PAGE = "docs/reference/slot-sizing.md"
CLUSTERS = ("standalone", "kubernetes")


class PlanInputError(ValueError):
    """Input the planner cannot plan for; the message is the one line the user sees."""


@dataclass(frozen=True)
class Request:
    rate: float  # events/s into the query, all partitions together
    source_partitions: int
    shape: str | None
    shuffle_partitions: int | None  # None: Spark's default (200) for a shuffling shape
    busiest_share: float | None = None  # busiest partition's share 0..1; None: even
    cores_per_executor: int = DEFAULT_CORES_PER_EXECUTOR
    utilisation: float = DEFAULT_UTILISATION_PCT / 100
    batch_duration_s: float = DEFAULT_BATCH_DURATION_S
    downtime_s: float = 0.0
    latency_bound_ms: int = 100


@dataclass(frozen=True)
class Figure:
    name: str
    value: str
    source: str  # a results key, a formula, or "not measured: ..."


@dataclass(frozen=True)
class Slots:
    source_tasks: int
    shuffle_tasks: tuple[int, ...]
    how: str

    @property
    def total(self) -> int:
        return self.source_tasks + sum(self.shuffle_tasks)


@dataclass(frozen=True)
class Capacity:
    """One shape's measured per-task capacity at one latency bound."""

    rate: float  # the highest step every run held
    not_held: float | None  # the lowest step above it that a run did not hold
    key: str  # where it was read, e.g. per-task-throughput.json: capacity.dedup.100
    # The cores that ran full at the not-held step: ("harness core",) alone means the
    # measuring machine's generator and broker set the limit, not the task.
    full_cores: tuple[str, ...] = ()

    @property
    def set_by_harness(self) -> bool:
        return self.full_cores == ("harness core",)


def slots_for_shape(request: Request) -> Slots:
    shuffles, _ = SHAPES[request.shape] if request.shape else (0, "")
    partitions = shuffle_partitions(request)
    tasks = (partitions,) * shuffles
    how = (
        f"{request.source_partitions} source partitions"
        + "".join(f" + {n} shuffle partitions" for n in tasks)
        + f" (every stage runs at once: {SLOT_PAGE})"
    )
    return Slots(request.source_partitions, tasks, how)


def shuffle_partitions(request: Request) -> int:
    if request.shuffle_partitions is not None:
        return request.shuffle_partitions
    return SPARK_DEFAULT_SHUFFLE_PARTITIONS


def read_capacity(results: dict, shape: str, bound_ms: int, label: str):
    """The shape's capacity at `bound_ms` from a results file's `capacity` part, or a
    sentence saying why there is none."""
    entry = (results.get("capacity") or {}).get(shape, {}).get(str(bound_ms))
    key = f"{label}: capacity.{shape}.{bound_ms}"
    if not entry or entry.get("held_rate") is None:
        return f"not measured: {key} is missing"
    return Capacity(
        float(entry["held_rate"]),
        entry.get("not_held_rate"),
        key,
        tuple(entry.get("full_cores") or ()),
    )


def busiest_task_rate(request: Request, slots: Slots) -> tuple[float, str]:
    """The rate of the busiest task of any stage, and the formula it came from. Keys
    are taken as spread evenly over the shuffle partitions (a hot key is not)."""
    share = request.busiest_share
    if share is None:
        source = request.rate / request.source_partitions
        said = f"rate / source partitions = {request.rate:,.0f} / "
        said += f"{request.source_partitions}"
    else:
        source = request.rate * share
        said = f"rate x busiest partition's share = {request.rate:,.0f} x {share:.1%}"
    if slots.shuffle_tasks:
        shuffled = request.rate / min(slots.shuffle_tasks)
        if shuffled > source:
            return shuffled, (
                f"rate / shuffle partitions = {request.rate:,.0f} / "
                f"{min(slots.shuffle_tasks)} (the shuffle tasks are busier than "
                "the source tasks; keys taken as spread evenly)"
            )
    return source, said


def plan(
    request: Request,
    results: dict | None,
    results_label: str,
    stalls: dict | None = None,
    slots: Slots | None = None,
    cluster: str | None = None,
) -> list[Figure]:
    """The plan, figure by figure. `results` is the per-task results file (None when
    there is none), `stalls` the checkpoint-storage results, `slots` the readiness
    check's count when a query file was given, `cluster` "standalone" or "kubernetes"
    for the spark-submit settings."""
    validate(request)
    slots = slots or slots_for_shape(request)
    out = [Figure("task slots", f"{slots.total:,}", slots.how)]
    busiest, how = busiest_task_rate(request, slots)
    out.append(Figure("busiest task's rate", f"{busiest:,.0f} events/s", how))
    capacity = None
    if request.shape is None:
        said = "not measured: give --shape for a per-task capacity"
        out.append(Figure("per-task capacity", "unknown", said))
    elif results is None:
        said = f"not measured: {results_label} does not exist"
        out.append(Figure("per-task capacity", "unknown", said))
    else:
        found = read_capacity(
            results, request.shape, request.latency_bound_ms, results_label
        )
        if isinstance(found, str):
            out.append(Figure("per-task capacity", "unknown", found))
        else:
            capacity = found
            by_harness = found.not_held and found.set_by_harness
            if by_harness and request.shape in DATABASE_SHAPES:
                # PostgreSQL shares the harness core: the database may be the limit.
                bracket = (
                    f", not held at {found.not_held:,.0f}, where the harness core ran"
                    " full with PostgreSQL on it: your database may set the limit"
                )
            elif by_harness:
                # The engine's core had room: the generator and broker's core ran full.
                bracket = (
                    f", not held at {found.not_held:,.0f}, where the harness core ran"
                    " full, not the task's: a floor"
                )
            elif found.not_held:
                bracket = f", not held at {found.not_held:,.0f}"
            else:
                # The search has not failed a step above it yet (still running, or the
                # generator could not offer more): the task may carry more.
                bracket = "; a floor: no higher step has failed yet"
            out.append(
                Figure(
                    "per-task capacity",
                    f"{found.rate:,.0f} events/s at p99 <= "
                    f"{request.latency_bound_ms} ms",
                    f"{found.key} (one task on one core{bracket})",
                )
            )
    out += _cores(request, slots, busiest, capacity)
    out += _memory(request, results, results_label)
    out.append(
        Figure(
            "driver",
            "1 core, on a node of its own or beside an executor",
            "spark.driver.cores (default 1): the driver plans each batch and "
            "commits it; it runs none of the query's tasks",
        )
    )
    out += _catch_up(request, busiest, capacity)
    out.append(_stall(request, stalls))
    if cluster is not None:
        cores, executors = cores_and_executors(request, slots, capacity)
        lines = submit_settings(request, slots, cores, executors, cluster)
        out.append(
            Figure(
                f"spark-submit ({cluster})",
                "\n  " + " \\\n  ".join(lines),
                "the cores and executors above; the checkpoint location is the "
                "query's own option: give it a durable folder (HDFS, S3, a shared "
                "mount)",
            )
        )
    return out


def validate(request: Request) -> None:
    if not (math.isfinite(request.rate) and request.rate > 0):
        raise PlanInputError(f"--rate must be above 0 events/s, got {request.rate}")
    if request.source_partitions < 1:
        raise PlanInputError("--source-partitions must be at least 1")
    if request.shape is not None and request.shape not in SHAPES:
        names = ", ".join(SHAPES)
        raise PlanInputError(f"--shape {request.shape!r} is not one of: {names}")
    if request.shuffle_partitions is not None and request.shuffle_partitions < 1:
        raise PlanInputError("--shuffle-partitions must be at least 1")
    share = request.busiest_share
    if share is not None:
        if not (0 < share <= 1):
            raise PlanInputError("--busiest-share must be above 0 and at most 100 %")
        if share < 1 / request.source_partitions:
            raise PlanInputError(
                f"--busiest-share {share:.1%} is below an even share "
                f"({1 / request.source_partitions:.1%} of "
                f"{request.source_partitions} partitions): the busiest partition "
                "carries at least that"
            )
    if request.cores_per_executor < 1:
        raise PlanInputError("--cores-per-executor must be at least 1")
    if not (0 < request.utilisation <= 1):
        raise PlanInputError("--target-utilisation must be above 0 and at most 100 %")
    if request.latency_bound_ms not in LATENCY_BOUNDS_MS:
        bounds = " or ".join(str(b) for b in LATENCY_BOUNDS_MS)
        raise PlanInputError(f"--p99-bound-ms must be {bounds}")
    if request.batch_duration_s < 5:
        raise PlanInputError("--batch-duration-s must be at least 5 (Spark's minimum)")
    if request.downtime_s < 0:
        raise PlanInputError("--downtime-s must be at least 0")


def _cores(
    request: Request, slots: Slots, busiest: float, capacity: Capacity | None
) -> list[Figure]:
    per_exec = request.cores_per_executor
    cores, executors = cores_and_executors(request, slots, capacity)
    if capacity is None:
        why = "= task slots (no per-task capacity to check)"
    else:
        for_load = math.ceil(request.rate / (capacity.rate * request.utilisation))
        why = (
            f"max(task slots {slots.total:,}, ceil(rate / (capacity x target "
            f"utilisation)) = {for_load:,})"
        )
    out = [
        Figure("cores", f"{cores:,}", why),
        Figure(
            "executors",
            f"{executors:,} of {per_exec} cores (spark.executor.cores={per_exec})",
            f"ceil(cores / cores per executor) = ceil({cores:,} / {per_exec}); "
            "fixed: dynamic allocation off",
        ),
    ]
    if capacity is None:
        return out
    load = busiest / capacity.rate
    headroom = 1 - load
    verdict = (
        "over capacity"
        if load > 1
        else "over the target utilisation"
        if load > request.utilisation
        else "within the target utilisation"
    )
    out.append(
        Figure(
            "headroom",
            f"{headroom:.0%} ({verdict}: the busiest task runs at {load:.0%} of "
            f"capacity, target {request.utilisation:.0%})",
            "1 - busiest task's rate / per-task capacity",
        )
    )
    if load > request.utilisation:
        out.append(_what_to_change(request, slots, busiest, capacity))
    return out


def cores_and_executors(
    request: Request, slots: Slots, capacity: Capacity | None
) -> tuple[int, int]:
    """Cores: every task slot, or more when the load needs more at the target
    utilisation. Executors: the cores in executors of the requested size."""
    cores = slots.total
    if capacity is not None:
        for_load = math.ceil(request.rate / (capacity.rate * request.utilisation))
        cores = max(cores, for_load)
    return cores, math.ceil(cores / request.cores_per_executor)


# --8<-- [start:submit]
def submit_settings(
    request: Request, slots: Slots, cores: int, executors: int, cluster: str
) -> list[str]:
    """The spark-submit options that give the query its plan: fixed executors with
    every slot, dynamic allocation off, the first batch held until all executors
    have registered, the shuffle partitions the slots were counted with."""
    per_exec = request.cores_per_executor
    common = [
        "--conf spark.dynamicAllocation.enabled=false",
        "--conf spark.scheduler.minRegisteredResourcesRatio=1.0",
        "--conf spark.task.cpus=1",
        "--conf spark.driver.cores=1",
    ]
    if slots.shuffle_tasks:
        common.append(f"--conf spark.sql.shuffle.partitions={slots.shuffle_tasks[0]}")
    if cluster == "standalone":
        return [
            "--master spark://MASTER_HOST:7077",
            f"--total-executor-cores {executors * per_exec}",
            f"--executor-cores {per_exec}",
            *common,
        ]
    return [
        "--master k8s://https://API_SERVER:6443 --deploy-mode cluster",
        f"--conf spark.executor.instances={executors}",
        f"--conf spark.executor.cores={per_exec}",
        f"--conf spark.kubernetes.executor.request.cores={per_exec}",
        "--conf spark.kubernetes.driver.request.cores=1",
        "--conf spark.kubernetes.namespace=NAMESPACE",
        "--conf spark.kubernetes.container.image=IMAGE_WITH_YOUR_VENV",
        "--conf spark.kubernetes.authenticate.driver.serviceAccountName=SPARK_SA",
        "--conf spark.kubernetes.file.upload.path=s3a://BUCKET/spark-uploads",
        *common,
    ]


# --8<-- [end:submit]


def _what_to_change(
    request: Request, slots: Slots, busiest: float, capacity: Capacity
) -> Figure:
    """Where to split the busiest task's work so it runs at the target utilisation:
    more source partitions, more shuffle partitions, or an even key spread."""
    target = capacity.rate * request.utilisation
    need = math.ceil(request.rate / target)
    steps = []
    share = request.busiest_share
    if share is not None and request.rate * share > target:
        steps.append(
            f"spread the busiest partition's keys: at {share:.1%} of the rate it "
            f"carries {request.rate * share:,.0f} events/s, over {target:,.0f}, "
            "whatever the partition count"
        )
    if request.rate / slots.source_tasks > target:
        steps.append(f"at least {need:,} source partitions (Kafka topic partitions)")
    if slots.shuffle_tasks and request.rate / min(slots.shuffle_tasks) > target:
        steps.append(f"spark.sql.shuffle.partitions of at least {need:,}")
    steps.append("each added partition is one more task slot to ask for")
    return Figure(
        "what to change",
        "; ".join(steps),
        f"ceil(rate / (capacity x target utilisation)) = ceil({request.rate:,.0f} / "
        f"{target:,.0f})",
    )


def _memory(request: Request, results: dict | None, label: str) -> list[Figure]:
    measured = None
    if results is not None and request.shape is not None:
        entry = (results.get("capacity") or {}).get(request.shape, {})
        measured = entry.get("rss_peak_mib")
    if measured is None:
        where = (
            f"{label} does not exist"
            if results is None
            else f"{label}: capacity.{request.shape}.rss_peak_mib is missing"
        )
        executor = Figure(
            "executor memory",
            "not measured",
            f"{where}; Spark's default spark.executor.memory is 1g",
        )
    else:
        executor = Figure(
            "executor memory",
            f"the one-task engine peaked at {measured:,.0f} MiB resident",
            f"{label}: capacity.{request.shape}.rss_peak_mib (the whole local JVM "
            "and its Python driver, one task: a reference point, not a per-task "
            "figure)",
        )
    shuffles, _ = SHAPES[request.shape] if request.shape else (0, "")
    state = Figure(
        "state store memory",
        "none: no state" if shuffles == 0 else "not measured",
        "stateless shape"
        if shuffles == 0
        else "state keys x bytes per state row; read bytes per row from your own "
        "run's progress: stateOperators[].memoryUsedBytes / numRowsTotal",
    )
    return [executor, state]


def _catch_up(
    request: Request, busiest: float, capacity: Capacity | None
) -> list[Figure]:
    # A restart replays from the last commit: at most one batch duration of input,
    # plus what arrived while the query was down.
    backlog_s = request.batch_duration_s + request.downtime_s
    backlog = backlog_s * busiest
    formula = (
        f"backlog = (batch duration {request.batch_duration_s:g} s + downtime "
        f"{request.downtime_s:g} s) x busiest task's rate"
    )
    out = [Figure("backlog after a restart", f"up to {backlog:,.0f} events", formula)]
    if capacity is None:
        said = "not measured: catch-up = backlog / (per-task capacity - rate)"
        out.append(Figure("catch-up time", "unknown", said))
    elif capacity.rate <= busiest:
        out.append(
            Figure(
                "catch-up time",
                "never: the busiest task gets more than it can carry",
                "per-task capacity <= busiest task's rate",
            )
        )
    else:
        seconds = backlog / (capacity.rate - busiest)
        out.append(
            Figure(
                "catch-up time",
                f"up to {seconds:,.0f} s",
                f"backlog / (capacity - rate) = {backlog:,.0f} / "
                f"({capacity.rate:,.0f} - {busiest:,.0f})",
            )
        )
    return out


def _stall(request: Request, stalls: dict | None) -> Figure:
    """The pause at each batch end, from the checkpoint-storage results: their
    `planner` part maps a shape to the measured stall at each batch duration."""
    name = "boundary stall"
    if stalls is None:
        return Figure(name, "not measured", f"{STALL_NAME} does not exist yet")
    by_shape = (stalls.get("planner") or {}).get(request.shape or "", {})
    value = by_shape.get(f"{request.batch_duration_s:g}")
    key = f"{STALL_NAME}: planner.{request.shape}.{request.batch_duration_s:g}"
    if value is None:
        return Figure(name, "not measured", f"{key} is missing")
    return Figure(name, f"{float(value):,.0f} ms at each batch end", key)


def text(figures: list[Figure], columns: int = 88) -> str:
    """Each figure on its line, its source wrapped under it to `columns`."""
    import textwrap

    lines = []
    for f in figures:
        lines.append(f"{f.name}: {f.value}")
        lines += textwrap.wrap(
            f"from: {f.source}",
            columns,
            initial_indent="    ",
            subsequent_indent="          ",
            break_on_hyphens=False,
        )
    return "\n".join(line.rstrip() for line in "\n".join(lines).splitlines())


def load_json(path: Path) -> dict | None:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise PlanInputError(f"{path} is not a readable JSON file ({exc})") from None


def default_results(name: str) -> Path:
    """Beside this file in the skill; under docs/results in the repository."""
    here = Path(__file__).resolve().parent
    beside = here / name
    if beside.is_file():
        return beside
    return here.parent.parent / "docs" / "results" / name


def count_slots(
    ns: argparse.Namespace, jars=None, launcher_conf=None, check=None
) -> Slots:
    """The readiness check's slot count for `ns.query`: it runs the file for a moment
    in real-time mode and reads every stage's tasks from Spark's plan. `check` is the
    readiness check's module; by default rtm_check.py beside this file, as the skill
    ships them."""
    import importlib
    import os
    import shlex

    check = check or importlib.import_module("rtm_check")

    argv = ["--slots", "1", "--source-partitions", str(ns.source_partitions)]
    argv += ["--master", ns.master] + [a for c in ns.conf for a in ("--conf", c)]
    for flag, value in (("--jars", ns.jars), ("--packages", ns.packages)):
        argv += [flag, value] if value else []
    checked = check.parse_args([*argv, ns.query, *ns.query_args])
    if isinstance(checked, int):
        raise PlanInputError("the readiness check refused the arguments above")
    submit = shlex.join(check.submit_args(checked, jars, launcher_conf))
    os.environ["PYSPARK_SUBMIT_ARGS"] = f"{submit} pyspark-shell"
    try:
        report = check.check_file(
            ns.query, ns.query_args, 1, ns.source_partitions, quiet=True
        )
    except check.ReadinessInputError as exc:
        raise PlanInputError(str(exc)) from None
    if report.slots_needed is None:
        raise PlanInputError(
            f"Spark refuses {ns.query} before planning it: run rtm_check.py on it"
        )
    how = (
        f"{report.source_tasks} source tasks"
        + "".join(f" + {n} shuffle tasks" for n in report.shuffle_tasks)
        + f", read from Spark {report.spark_version}'s plan by the readiness check"
    )
    return Slots(report.source_tasks, tuple(report.shuffle_tasks), how)


def _share(text_value: str) -> float:
    value = float(text_value.rstrip("%"))
    return value / 100


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        self.exit(2, f"rtm_plan: {message} (see --help)\n")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = _Parser(
        prog="rtm_plan.py",
        description=__doc__.split("\n\n")[0],
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("--rate", type=float, required=True, help="events/s into the query")
    add("--source-partitions", type=int, help="Kafka partitions the query reads")
    add("--shape", choices=SHAPES, help="which measured query shape yours is like")
    add("--shuffle-partitions", type=int, help="spark.sql.shuffle.partitions (200)")
    add("--busiest-share", type=_share, help="busiest partition's %% of the rate")
    add("--cores-per-executor", type=int, default=DEFAULT_CORES_PER_EXECUTOR)
    add("--target-utilisation", type=_share, default=DEFAULT_UTILISATION_PCT / 100)
    add("--p99-bound-ms", type=int, default=100, help="100 or 1000 (%(default)s)")
    add("--batch-duration-s", type=float, default=DEFAULT_BATCH_DURATION_S)
    add("--downtime-s", type=float, default=0.0, help="how long a restart takes")
    add("--results", type=Path, help=f"the per-task results ({RESULTS_NAME})")
    add("--stalls", type=Path, help=f"the checkpoint-storage results ({STALL_NAME})")
    add("--submit", choices=CLUSTERS, help="also print spark-submit settings for it")
    add("--query", help="a query file: slots from the readiness check")
    add("--master", default="local[2]", help="where the check runs (%(default)s)")
    add("--conf", action="append", default=[], metavar="K=V", help="for the check")
    add("--jars", help="jars for the check (the Kafka connector), comma-separated")
    add("--packages", help="Maven coordinates for the check, e.g. the connector")
    add("query_args", nargs=argparse.REMAINDER, help="the query file's arguments")
    return parser.parse_args(argv)


def request_from(ns: argparse.Namespace) -> Request:
    if ns.source_partitions is None:
        raise PlanInputError("pass --source-partitions N (the topic's partitions)")
    if ns.shape is None and ns.query is None:
        raise PlanInputError("pass --shape NAME, or --query FILE for its slots")
    return Request(
        rate=ns.rate,
        source_partitions=ns.source_partitions,
        shape=ns.shape,
        shuffle_partitions=ns.shuffle_partitions,
        busiest_share=ns.busiest_share,
        cores_per_executor=ns.cores_per_executor,
        utilisation=ns.target_utilisation,
        batch_duration_s=ns.batch_duration_s,
        downtime_s=ns.downtime_s,
        latency_bound_ms=ns.p99_bound_ms,
    )


def main(
    argv: list[str] | None = None, jars=None, launcher_conf=None, check=None
) -> int:
    """`jars`, `launcher_conf` and the `check` module are the readiness check's, for
    --query (see count_slots)."""
    try:
        ns = parse_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as exc:  # argparse printed its one line
        return 0 if exc.code == 0 else 2
    try:
        request = request_from(ns)
        validate(request)
        results_path = ns.results or default_results(RESULTS_NAME)
        stalls_path = ns.stalls or default_results(STALL_NAME)
        slots = None
        if ns.query:
            slots = count_slots(ns, jars, launcher_conf, check)
        figures = plan(
            request,
            load_json(results_path),
            results_path.name,
            load_json(stalls_path),
            slots,
            ns.submit,
        )
    except (PlanInputError, ValueError) as exc:
        print(f"rtm_plan: {exc}", file=sys.stderr)
        return 2
    print(text(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())

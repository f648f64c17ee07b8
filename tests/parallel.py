"""Several test workers, one lab: what `make test` needs to run the suite under pytest-xdist (`-n 3`).

Most of a streaming test's time is waiting (a batch to end and commit, a process to start): several
workers share the machine's two cores better than one, and a third fills the waits two leave. They share one lab, so
these rules:

- The lab is started by whichever worker asks first (`rtm_lab.lab.up` holds a lock; the second finds it running) and
  stopped once, by the controller, after every worker has finished: each worker writes down what it started.
- A test marked `alone` (it would kill or restart a lab service; the suite's fault tests start a service of their
  own instead, tests/guides/conftest.py) runs while no other test does: every test
  holds a shared lock from its setup to its teardown, an `alone` test holds it exclusively. A gate taken before either
  keeps a waiting `alone` test from being overtaken again and again by the other workers' next tests.
- A test marked `timing` (it asserts a ratio of timings another test's load could upset) runs while the other workers'
  processes yield the CPU to it (tests/cpu_priority.py: each worker in a cgroup of its own, the others' weight at the
  minimum): their tests go on with what CPU it leaves, and two timing tests never overlap. Where that is not possible
  (not root, no cgroup v1 `cpu` controller), a timing test runs alone.
- Such a test that takes the `quiet_machine` fixture shares until it enters `with quiet_machine():`, and is alone (or
  first in line for the CPU) from there on to the block's end: a JVM it starts first runs beside the other workers'
  tests instead of leaving them idle.
- Tests of one module run on one worker, in order (a module's fixtures are set up once), and `GROUPS` puts several
  modules together (all that start and stop the lab's Prometheus, all that use the standalone cluster).

Without `-n` (a bare `pytest`) none of this is active and the `lab` fixture starts and stops the lab itself.
"""

import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import cpu_priority
import pytest

from rtm_lab import lab as lab_module

RUN_DIR = "RTM_TEST_RUN_DIR"  # set by the controller before the workers start; they inherit it


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def is_controller(config: pytest.Config) -> bool:
    """The process that hands tests to workers and runs none itself (`-n N`, N >= 1)."""
    return not is_worker(config) and bool(getattr(config.option, "numprocesses", None))


_priority = {"joined": False}


def configure(config: pytest.Config) -> None:
    if is_controller(config):
        os.environ[RUN_DIR] = tempfile.mkdtemp(prefix="rtm-test-run-")
    folder = run_dir()
    if is_worker(config) and folder is not None and cpu_priority.available():
        cpu_priority.join(folder, config.workerinput["workerid"])
        _priority["joined"] = True


def run_dir() -> Path | None:
    folder = os.environ.get(RUN_DIR)
    return Path(folder) if folder else None


def record_started(config: pytest.Config, started: set[str]) -> None:
    """A worker's note of the lab services it started, for the controller to stop at the end."""
    folder = run_dir()
    if folder is not None and started:
        # The lab fixture and the object store's fixture each note theirs: the file keeps both.
        note = folder / f"started-{config.workerinput['workerid']}.json"
        before = set(json.loads(note.read_text())) if note.exists() else set()
        note.write_text(json.dumps(sorted(before | started)))


def started_by_workers() -> set[str]:
    folder = run_dir()
    if folder is None:
        return set()
    return {name for path in folder.glob("started-*.json") for name in json.loads(path.read_text())}


def finish(config: pytest.Config) -> None:
    folder = run_dir()
    if is_controller(config) and folder is not None:
        if cpu_priority.available():
            cpu_priority.remove(folder)
        shutil.rmtree(folder, ignore_errors=True)


# Modules that must share a worker, one after another: each starts and stops a shared thing of its own.
GROUPS = {
    # The lab's Prometheus: each of these starts it if it is down and stops it when done.
    "prometheus": (
        "tests/guides/test_monitoring.py",
        "tests/lab/test_lab_prometheus.py",
        "tests/lab/test_loopback.py",
        "tests/test_demo.py",
    ),
    # PyFlink programs, one at a time: a run beside another once exited before its first output, with nothing logged.
    "flink": (
        "tests/benchmarks/test_engines.py",
        "tests/guides/test_rtm_or_flink.py",
        "tests/lab/test_flink_engine.py",
    ),
    # The built site (a strict mkdocs build, a session fixture): built once for all that read it, not once per worker.
    "site": (
        "tests/docs/test_site_build.py",
        "tests/docs/test_front_page.py",
        "tests/docs/test_browser.py",
        "tests/docs/test_diagrams.py",
    ),
    # The session's standalone cluster (three JVMs): started once, on one worker.
    "cluster": (
        "tests/guides/test_cluster.py",
        "tests/guides/test_kafka_to_postgres.py",
        "tests/reference/test_slot_sizing.py",
    ),
}
# Handed out first, longest first (each unit's wall time in a fresh-clone run of the suite on the 2-core machine,
# waits for `alone` tests included), so the run does not end with one worker on a long unit while the other is idle:
# the short units left at the end fill the gaps. The rest follow in collection order.
LONGEST_FIRST = (
    "cluster",
    "prometheus",
    "tests/benchmarks/test_latency.py",
    "tests/docs/test_copy.py",
    "tests/reference/test_support_matrix.py",
    "flink",
    "tests/guides/test_checkpoint_storage.py",
    "tests/guides/test_kills.py",
    "tests/reference/test_allowlist_off.py",
    "tests/reference/test_readiness_check.py",
    "tests/lab/test_lab_cli.py",
    "site",
    "tests/benchmarks/test_interval_sweep.py",
    "tests/guides/test_ad_attribution_rtm.py",
    "tests/benchmarks/test_boundary_settings.py",
    "tests/guides/test_sink_hardening.py",
    "tests/reference/test_setup.py",
    "tests/guides/test_ad_attribution.py",
    "tests/reference/test_delivery_semantics.py",
    "tests/guides/test_postgres_jvm_writer.py",
    "tests/test_concepts.py",
    "tests/reference/test_errors.py",
    "tests/lab/test_bad_input.py",
    "tests/benchmarks/test_recovery.py",
    "tests/test_parallel.py",
)


def unit_of(nodeid: str) -> str:
    """The unit a test is scheduled in: its module, or the group its module belongs to."""
    module = nodeid.split("::")[0]
    return next((group for group, modules in GROUPS.items() if module in modules), module)


def order(items: list[pytest.Item]) -> None:
    """Longest units first, each unit's tests together and in collection order (every worker sorts alike, as xdist
    requires), and refuse a module that uses the standalone cluster without being in its group."""
    for item in items:
        if "standalone_cluster" in item.fixturenames and unit_of(item.nodeid) != "cluster":
            raise pytest.UsageError(f"{item.nodeid} uses standalone_cluster: add its module to GROUPS['cluster']")
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        first.setdefault(unit_of(item.nodeid), index)

    def rank(item: pytest.Item) -> tuple[int, int]:
        unit = unit_of(item.nodeid)
        return (LONGEST_FIRST.index(unit) if unit in LONGEST_FIRST else len(LONGEST_FIRST), first[unit])

    items.sort(key=rank)


def make_scheduler(config: pytest.Config, log):
    """xdist's load-by-scope scheduling, with our units as the scopes and their order kept (not re-sorted by size)."""
    from xdist.scheduler import LoadScopeScheduling

    class ModuleGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    config.option.loadscopereorder = False
    return ModuleGroups(config, log)


ALONE, TIMING, SHARED = "alone", "timing", "shared"
# A test marked `alone` runs while no other test does: it kills or restarts a lab service. A test marked
# `timing` asserts a ratio of timings (or a timing against a configured batch duration) that another test's Spark, sharing
# two cores, could upset: under two workers with no precedence such tests failed (shuffle-wait ratio, quick
# recovery). It runs first in line for the CPU, or alone where that cannot be arranged.
ALONE_MARKERS = (ALONE, TIMING)

_locks: dict[str, int] = {}


def _fd(folder: Path, name: str) -> int:
    if name not in _locks:
        _locks[name] = os.open(folder / name, os.O_RDWR | os.O_CREAT, 0o600)
    return _locks[name]


# A test with either marker that takes this fixture starts beside other tests and is alone (or first for the CPU)
# from the moment it asks (`with quiet_machine():`): what it starts first (a JVM, a query, a pipeline) is not what it
# measures or disturbs.
QUIET_LATER = "quiet_machine"


def mode(item: pytest.Item) -> str:
    """How the test shares the machine: ALONE, TIMING (the others yield the CPU) or SHARED."""
    if item.get_closest_marker(ALONE) is not None:
        return ALONE
    if item.get_closest_marker(TIMING) is not None:
        return TIMING if _priority["joined"] else ALONE
    return SHARED


def _take(folder: Path, how: int) -> int:
    """Take the run's test lock (shared or exclusive) through the gate; return its file descriptor."""
    gate, lock = _fd(folder, "gate"), _fd(folder, "tests")
    fcntl.flock(gate, fcntl.LOCK_EX)
    try:
        fcntl.flock(lock, how)
    finally:
        fcntl.flock(gate, fcntl.LOCK_UN)
    return lock


def _shared_services() -> list[int]:
    """The lab's own services (whichever worker started them): every test uses them, a timing test too."""
    state = lab_module.recorded()
    return [s.pid for s in (state.kafka, state.postgres, state.prometheus) if s.pid and not s.external]


@contextmanager
def _first_for_cpu(folder: Path, config: pytest.Config) -> Iterator[None]:
    """One timing test at a time, with the other workers' processes at the lowest CPU weight."""
    lock = _fd(folder, "timing")
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        with cpu_priority.others_yield(folder, config.workerinput["workerid"], _shared_services()):
            yield
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)


@contextmanager
def turn(item: pytest.Item) -> Iterator[None]:
    """Hold the run's test lock for one test's setup, call and teardown: shared, or exclusive for an `alone` test; a
    `timing` test also holds the CPU first (both unless it takes `quiet_machine`, which asks later)."""
    folder = run_dir()
    if folder is None or not is_worker(item.config):
        yield
        return
    how, later = mode(item), QUIET_LATER in getattr(item, "fixturenames", ())
    lock = _take(folder, fcntl.LOCK_EX if how == ALONE and not later else fcntl.LOCK_SH)
    try:
        if how == TIMING and not later:
            with _first_for_cpu(folder, item.config):
                yield
        else:
            yield
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)


@contextmanager
def quiet_from_here(item: pytest.Item) -> Iterator[None]:
    """Within a test's shared turn: a timing test takes the CPU first until the block ends. Otherwise let go of the
    turn, wait for the machine through the gate (as an `alone` test does), hold it alone until the block ends, then
    share again for the rest of the turn. Letting go before waiting means two workers asking at once cannot each hold
    what the other waits for."""
    folder = run_dir()
    if folder is None or not is_worker(item.config):
        yield
        return
    if mode(item) == TIMING:
        with _first_for_cpu(folder, item.config):
            yield
        return
    lock = _fd(folder, "tests")
    fcntl.flock(lock, fcntl.LOCK_UN)
    _take(folder, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        _take(folder, fcntl.LOCK_SH)

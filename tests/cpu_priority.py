"""CPU priority for a `timing` test under several workers: the other workers' processes yield the CPU to it.

A `timing` test asserts a ratio of timings that another test's Spark, sharing two cores, could upset. Stopping every
other test while it runs (as an `alone` test does) leaves a worker idle for its whole length; instead, each worker runs
in a cgroup of its own (the cgroup v1 `cpu` controller), and while a timing test runs the other workers' groups get
the smallest CPU weight the kernel allows: their tests go on, on whatever CPU the timing test leaves. Every process a
worker starts stays in its group, daemons included (a cgroup is inherited, not tied to the parent).

The lab's services are shared: a worker that started Kafka, PostgreSQL or Prometheus has them in its group, so they are
moved to the root group before the weights drop (PostgreSQL with its backends: a backend forked later inherits the
postmaster's group). Where the controller is not writable (not root, or no cgroup v1 `cpu` mount), `available()` says
so and a timing test runs alone instead (tests/parallel.py).
"""

import contextlib
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from rtm_lab import processes

ROOT = Path("/sys/fs/cgroup/cpu")
LOW_SHARES = 2  # the kernel's minimum: against 1024, about 0.2 % of a contended CPU
NORMAL_SHARES = 1024


def available() -> bool:
    return os.geteuid() == 0 and (ROOT / "cgroup.procs").is_file() and os.access(ROOT, os.W_OK)


def base(run_folder: Path) -> Path:
    return ROOT / f"rtm-tests-{run_folder.name}"


def join(run_folder: Path, worker: str) -> None:
    """Move this process into its worker's group; what it starts from now on is in it too."""
    group = base(run_folder) / worker
    group.mkdir(parents=True, exist_ok=True)
    (group / "cpu.shares").write_text(str(NORMAL_SHARES))
    (group / "cgroup.procs").write_text(str(os.getpid()))


def group_of(pid: int) -> str:
    """The process's path in the `cpu` hierarchy ("/" for the root group)."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return path
    return "/"


def to_root(pids: Iterable[int]) -> None:
    """Move each process and its descendants to the root group (a process that has exited is skipped)."""
    stack = list(pids)
    while stack:
        pid = stack.pop()
        try:
            (ROOT / "cgroup.procs").write_text(str(pid))
        except (ProcessLookupError, FileNotFoundError):
            continue
        stack.extend(processes.children(pid))


@contextmanager
def others_yield(run_folder: Path, me: str, shared: Iterable[int]) -> Iterator[None]:
    """The `shared` processes to the root group, and every worker group but `me`'s at the lowest weight, until the
    block ends."""
    to_root(shared)
    others = [group for group in base(run_folder).iterdir() if group.is_dir() and group.name != me]
    for group in others:
        (group / "cpu.shares").write_text(str(LOW_SHARES))
    try:
        yield
    finally:
        for group in others:
            (group / "cpu.shares").write_text(str(NORMAL_SHARES))


def remove(run_folder: Path) -> None:
    """At the end of the run: whatever is left in the workers' groups goes to the root group, and the groups go."""
    folder = base(run_folder)
    if not folder.is_dir():
        return
    for group in [g for g in folder.iterdir() if g.is_dir()]:
        to_root(int(pid) for pid in (group / "cgroup.procs").read_text().split())
        with contextlib.suppress(OSError):  # a process forked in between keeps it: an empty group costs nothing
            group.rmdir()
    with contextlib.suppress(OSError):
        folder.rmdir()

"""Processes pinned to cores (`taskset`), and each core's busy share read from /proc/stat over a window.

Two calls cover a measurement that keeps an engine off its harness's core:

    argv = pinned_argv(["java", ...], {0})      # a new process (and all it starts) on core 0
    pin(broker_pid, {1})                        # a running process, every thread of it, on core 1
    window = CoreWindow()                       # ... the measured seconds ...
    window.busy()                               # {0: 0.97, 1: 0.31}: each core's busy share since CoreWindow()

A child inherits its parent's cores, so pinning the argv of a launcher pins the JVM it launches. A running process is
pinned thread by thread (`taskset -a`): threads it started earlier keep their old cores otherwise.
"""

import os
import shutil
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from rtm_lab.errors import LabError


def _taskset() -> str:
    found = shutil.which("taskset")
    if found is None:
        raise LabError("taskset is not installed (Debian: apt-get install util-linux)")
    return found


def _cores(cores: Iterable[int]) -> str:
    chosen = sorted(set(cores))
    online = os.sched_getaffinity(0) | set(range(os.cpu_count() or 1))
    unknown = [c for c in chosen if c not in online]
    if not chosen or unknown:
        raise LabError(f"cores {chosen} are not all on this machine (it has {sorted(online)})")
    return ",".join(str(c) for c in chosen)


def pinned_argv(argv: list[str], cores: Iterable[int]) -> list[str]:
    """`argv` run on `cores` only (it and every process it starts)."""
    return [_taskset(), "--cpu-list", _cores(cores), *argv]


def pin(pid: int, cores: Iterable[int]) -> None:
    """Move a running process, all its threads, onto `cores`."""
    done = subprocess.run(
        [_taskset(), "--all-tasks", "--cpu-list", "--pid", _cores(cores), str(pid)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise LabError(f"taskset could not pin pid {pid}: {(done.stderr.strip() or 'no output').splitlines()[-1]}")


def unpin(pid: int) -> None:
    """Give a pinned process every core back."""
    pin(pid, range(os.cpu_count() or 1))


def cores_of(pid: int) -> set[int]:
    return set(os.sched_getaffinity(pid))


def core_times() -> dict[int, tuple[int, int]]:
    """Each core's (busy, total) clock ticks since boot, from /proc/stat's cpuN lines."""
    result = {}
    with open("/proc/stat") as stat:
        for line in stat:
            name, *ticks = line.split()
            if not (name.startswith("cpu") and name[3:].isdigit()):
                continue
            values = [int(t) for t in ticks]
            idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
            # guest time is already inside user time: the first eight fields are the total
            total = sum(values[:8])
            result[int(name[3:])] = (total - idle, total)
    return result


@dataclass
class CoreWindow:
    """Per-core busy share between its creation (or `restart`) and `busy()`."""

    start: dict[int, tuple[int, int]] = field(default_factory=core_times)
    started_at: float = field(default_factory=time.monotonic)

    def restart(self) -> None:
        self.start, self.started_at = core_times(), time.monotonic()

    def busy(self) -> dict[int, float]:
        end = core_times()
        shares = {}
        for core, (busy1, total1) in end.items():
            busy0, total0 = self.start.get(core, (busy1, total1))
            shares[core] = round((busy1 - busy0) / (total1 - total0), 3) if total1 > total0 else 0.0
        return shares

    def seconds(self) -> float:
        return round(time.monotonic() - self.started_at, 1)

"""What every benchmark records beside its figures, and the lab it runs on.

A results file must say where and under what load its numbers were measured: the machine, the pinned versions, the
load average at the start and at the end, the command, when, and how long it took. `Run` keeps those from the moment a
benchmark begins; `lab_up`/`lab_down` start the lab's services for the run and stop only those the run started.
"""

import datetime as dt
import sys
import time

from rtm_lab import lab, machine
from rtm_lab.benchmarks import load_average
from rtm_lab.errors import LabError
from rtm_lab.lab import LabState


def _say(line: str) -> None:
    print(line, flush=True)


class Run:
    """Begun when a benchmark starts: the load average then (with a warning when the machine is busy) and the clock."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.load_start = load_average.snapshot()
        load_average.warn_if_busy(self.load_start)
        self.began = time.monotonic()

    def record(self) -> dict:
        """The fields every results file carries, taken when the benchmark's runs are over."""
        return {
            "versions": machine.pinned_versions(),
            "machine": machine.describe(),
            "load_average": {"start": self.load_start, "end": load_average.snapshot()},
            "command": self.command,
            "timestamp": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "elapsed_s": round(time.monotonic() - self.began, 1),
        }


def lab_up() -> tuple[LabState, set[str]] | None:
    """The lab's services and the names of those this call started; None (the reason printed) when they can't run."""
    try:
        return lab.up(log=_say)
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None


def lab_down(started: set[str]) -> None:
    if started:
        lab.down(only=started, log=_say)

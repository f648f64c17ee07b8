"""What every benchmark records beside its figures, and the lab it runs on.

A results file must say where and under what load its numbers were measured: the machine, the pinned versions, the
load average at the start and at the end, the command, when it started and ended, and how long it took. `on_the_lab` is the frame of a
run: `Run` keeps those from the moment a benchmark begins, the lab's services are started for the run and only those it
started are stopped; `record_lines` writes them under the results table.
"""

import contextlib
import time
from collections.abc import Iterator

from rtm_lab import lab, machine
from rtm_lab.benchmarks import load_average
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
        self.started = machine.utc_now()

    def record(self) -> dict:
        """The fields every results file carries, taken when the benchmark's runs are over."""
        return {
            "versions": machine.pinned_versions(),
            "machine": machine.describe(),
            "load_average": {"start": self.load_start, "end": load_average.snapshot()},
            "command": self.command,
            "started": self.started,
            "timestamp": machine.utc_now(),
            "elapsed_s": round(time.monotonic() - self.began, 1),
        }


@contextlib.contextmanager
def on_the_lab(command: str, with_services: frozenset[str] | set[str] = frozenset()) -> Iterator[tuple[Run, LabState]]:
    """The frame of one benchmark run: its record begun (load average, clock), the lab's services up, started if they
    were not running (a lab that cannot start raises LabError, which the entry script reports on one line, exit 2),
    and on the way out, failures and Ctrl-C included, the services this run started stopped again."""
    record = Run(command)
    state, started = lab.up(log=_say, with_services=with_services)
    try:
        yield record, state
    finally:
        if started:
            lab.down(only=started, log=_say)


def record_lines(
    result: dict, settings: str | None = None, *, runs: int, records: list[dict] | None = None
) -> list[str]:
    """The lines under every results table that say where and how its numbers were measured: machine, load average,
    versions, the benchmark's own `settings` line, the command, and how many `runs` the table holds with the first
    start and last end over `records` (the run records, default the file's own one record)."""
    m, load = result["machine"], result.get("load_average")
    lines = [f"- Machine: {m['cores']} cores, {m['memory_gib']} GiB, {m['cpu_model']}, {m['os']}"]
    if load:  # results from before the load average was recorded have none
        lines.append(
            f"- Load average (1/5/15 min): {' / '.join(f'{v:.2f}' for v in load['start'])} at the start, "
            f"{' / '.join(f'{v:.2f}' for v in load['end'])} at the end"
        )
    lines.append("- Versions: " + ", ".join(f"{k} {v}" for k, v in result["versions"].items()))
    if settings:
        lines.append(f"- Settings: {settings}")
    lines += [
        f"- Command: `{result['command']}`",
        f"- {machine.run_span(runs, records or [result])}",
    ]
    return lines

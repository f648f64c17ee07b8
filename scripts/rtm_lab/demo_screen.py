"""`make demo`'s final screen, recorded: the summary a run ends with, written under a header that says when, how long
and on what machine it ran, and compared by shape so a test notices when the demo's lines change and the record did not.

A line's shape is the line with what changes from run to run abstracted: numbers, absolute paths, the run's schema
name, plural endings, and the counts of Spark's log records that a run may or may not have (a busy machine adds one).
Labels and wording stay, so a renamed label or a reworded line is drift.
"""

import difflib
import os
import re
import time
from collections.abc import Sequence
from pathlib import Path

from rtm_lab import machine

LOG_LABEL = "Spark's log"  # the summary's last line: what Spark logged, printed after the query stopped
HEADER_MARK = "# "

_SHAPES = (
    (re.compile(r"\s+"), " "),
    (re.compile(r"(?<![\w.])/[^\s:)]+"), "<path>"),  # the lab folder differs per machine and per run
    (re.compile(r"\b(demo)_[0-9a-f]{8}\b"), r"\1_<schema>"),  # each run writes into a schema of its own
    (re.compile(r"(?<![\w.])\d(?:[\d,]*\d)?(?:\.\d+)?"), "#"),
    (re.compile(r"\b(warning|error)s\b"), r"\1"),  # "1 warning", "3 warnings"
    (re.compile(r" \(# of them [^()]*\)"), ""),  # which records Spark logged: the demo test asserts each
)


def summary(lines: Sequence[str]) -> list[str]:
    """The summary the demo ends with: from the blank line after the progress lines to Spark's log line."""
    ends = [i for i, line in enumerate(lines) if line.startswith(LOG_LABEL)]
    if not ends:
        raise ValueError(f"no {LOG_LABEL!r} line: the demo did not reach its summary")
    end = ends[-1]
    blanks = [i for i in range(end) if not lines[i].strip()]
    if not blanks:
        raise ValueError("no blank line before the summary")
    return list(lines[blanks[-1] + 1 : end + 1])


def header(command: str, seconds: float, load_at_start: float) -> list[str]:
    """When, how long and on what the recorded run ran: the lines above the screen in the recorded file."""
    spec = machine.describe()
    memory = f", {spec['memory_gib']} GiB" if spec["memory_gib"] else ""
    minutes, rest = divmod(round(seconds), 60)
    return [
        f"{HEADER_MARK}Recorded by `{command}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        f"{HEADER_MARK}The whole run took {minutes} min {rest:02d} s (starting and stopping the lab included).",
        f"{HEADER_MARK}Machine: {spec['cores']} cores ({spec['cpu_model']}){memory}, {spec['os']}; load average "
        f"{load_at_start:.1f} at the start and {os.getloadavg()[0]:.1f} at the end.",
    ]


def write(path: Path, head: Sequence[str], screen: Sequence[str]) -> None:
    path.write_text("\n".join([*head, "", *screen]) + "\n")


def read(path: Path) -> tuple[list[str], list[str]]:
    """A recorded file's header lines and screen lines."""
    lines = path.read_text().splitlines()
    head = [line for line in lines if line.startswith(HEADER_MARK)]
    if not head or lines[len(head)] != "":
        raise ValueError(f"{path} does not start with a header and a blank line; record it again")
    return head, lines[len(head) + 1 :]


def shape(line: str) -> str:
    for pattern, replacement in _SHAPES:
        line = pattern.sub(replacement, line)
    return line.strip()


def drift(current: Sequence[str], recorded: Sequence[str]) -> list[str]:
    """The shape differences between a run's summary and the recorded one, as a diff (empty when none)."""
    return list(
        difflib.unified_diff(
            [shape(line) for line in recorded], [shape(line) for line in current], "recorded", "this run", lineterm=""
        )
    )

"""Thread dumps of an engine's JVM (`jcmd PID Thread.print`), taken while it stalls, and what they show in brief.

A dump lists every thread with the CPU time it has used so far (`cpu=...ms`) and its stack. One dump shows where the
threads are; several a second apart show which threads were busy between them (their CPU time grew) and whether a
stack stayed put. The summary ranks the threads by CPU used between the first and the last dump (by CPU so far, when
there is one dump) and keeps each one's state and top frames: enough for a results row, with the dumps themselves
kept beside the results for reading in full.
"""

import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

TOP_THREADS = 5
TOP_FRAMES = 4

_HEADER = re.compile(r'^"(?P<name>.*)" (?:#\d+ )?.*?cpu=(?P<cpu>[\d.]+)ms.*?nid=(?P<nid>0x[0-9a-f]+|\d+)')
_STATE = re.compile(r"^\s+java\.lang\.Thread\.State: (?P<state>\S+)")
_FRAME = re.compile(r"^\s+at (?P<frame>.+?)\s*$")


@dataclass
class Thread:
    name: str
    nid: str
    cpu_ms: float
    state: str = ""
    frames: list[str] = field(default_factory=list)


def parse(text: str) -> dict[str, Thread]:
    """The threads of one dump by native id (stable across dumps of one JVM), each with its CPU so far, state and
    frames top first. JVM-internal threads (GC, compiler) have no Java state or frames."""
    threads: dict[str, Thread] = {}
    current: Thread | None = None
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            current = Thread(header["name"], header["nid"], float(header["cpu"]))
            threads[current.nid] = current
            continue
        if current is None:
            continue
        state = _STATE.match(line)
        if state:
            current.state = state["state"]
            continue
        frame = _FRAME.match(line)
        if frame:
            current.frames.append(frame["frame"])
        elif not line.strip():
            current = None
    return threads


def summarize(dumps: list[str]) -> dict:
    """The busiest threads over `dumps` (texts, oldest first): name, state in the last dump, CPU ms used between the
    first and last dump (or so far, with one dump), and top frames; plus how many threads were RUNNABLE."""
    if not dumps:
        return {"dumps": 0, "busiest": []}
    first, last = parse(dumps[0]), parse(dumps[-1])
    span = len(dumps) > 1

    def used(thread: Thread) -> float:
        before = first.get(thread.nid)
        return thread.cpu_ms - before.cpu_ms if span and before is not None else thread.cpu_ms

    ranked = sorted(last.values(), key=used, reverse=True)[:TOP_THREADS]
    return {
        "dumps": len(dumps),
        "cpu_ms_is": "used between the first and last dump" if span else "used since the thread started",
        "runnable_threads": sum(1 for t in last.values() if t.state == "RUNNABLE"),
        "busiest": [
            {
                "thread": t.name,
                "state": t.state or "(JVM internal)",
                "cpu_ms": round(used(t), 1),
                "top_frames": t.frames[:TOP_FRAMES],
            }
            for t in ranked
        ],
    }


def jcmd(java: str | None = None) -> str | None:
    """The jcmd beside `java` (the same JDK as the engine), else the one on PATH; None when there is none."""
    if java:
        beside = Path(java).parent / "jcmd"
        if beside.is_file():
            return str(beside)
    return shutil.which("jcmd")


def take(pid: int, folder: Path, count: int, gap_s: float, tool: str, label: str = "stall") -> list[Path]:
    """`count` dumps of JVM `pid`, `gap_s` apart, written to FOLDER/LABEL-PID-N.txt; a dump jcmd could not take (the
    JVM gone, or too busy to answer in 30 s) is left out."""
    written = []
    for n in range(count):
        if n:
            time.sleep(gap_s)
        try:
            done = subprocess.run(
                [tool, str(pid), "Thread.print"], capture_output=True, text=True, timeout=30, check=False
            )
        except subprocess.TimeoutExpired:
            continue
        if done.returncode != 0 or "Full thread dump" not in done.stdout:
            continue
        path = folder / f"{label}-{pid}-{n + 1}.txt"
        path.write_text(done.stdout)
        written.append(path)
    return written

"""An engine JVM's garbage-collection log: the option that writes it, and the pauses it records, summed.

The JVM writes the log itself (unified logging, `-Xlog:gc*`), one file per JVM (`%p` is its pid), so a Spark driver
and a Flink gateway are logged alike. Each collection ends with one line under the bare `gc` tag, such as

    [12.345s][info][gc          ] GC(7) Pause Young (Normal) (G1 Evacuation Pause) 180M->40M(512M) 6.812ms

Only lines naming a `Pause` stop the application; concurrent phases ("Concurrent Mark Cycle") run beside it and are
left out. The times are the JVM's uptime, so a window of the run is given in uptime seconds too.
"""

import re
import statistics
from pathlib import Path

FILE_PATTERN = "gc-%p.log"  # %p: the JVM's pid, so two JVMs of one run never share a file
LONG_PAUSE_MS = 100.0  # a pause this long is counted apart: it alone would show in a per-second p99

_PAUSE = re.compile(
    r"^\[(?P<uptime>[\d.]+)s\]\[[a-z]+\s*\]\[gc\s*\] GC\(\d+\) (?P<kind>Pause \w+)\b.*?(?P<ms>[\d.]+)ms\s*$"
)


def option(folder: Path) -> str:
    """The JVM option that logs every collection into `folder` (which must exist), with uptime, level and tags."""
    return f"-Xlog:gc*:file={folder / FILE_PATTERN}:uptime,level,tags"


def pauses(text: str) -> list[tuple[float, str, float]]:
    """(uptime s, kind, ms) of each stop-the-world pause in a log's text, in order."""
    found = []
    for line in text.splitlines():
        match = _PAUSE.match(line)
        if match:
            found.append((float(match["uptime"]), match["kind"], float(match["ms"])))
    return found


def summarize(text: str, since_s: float | None = None, until_s: float | None = None) -> dict:
    """The pauses' count, total, longest and median, those of LONG_PAUSE_MS or more, and each kind's count; only
    pauses that began in [since_s, until_s] of uptime when a window is given."""
    chosen = [
        (t, kind, ms)
        for t, kind, ms in pauses(text)
        if (since_s is None or t >= since_s) and (until_s is None or t <= until_s)
    ]
    kinds: dict[str, int] = {}
    for _, kind, _ in chosen:
        kinds[kind] = kinds.get(kind, 0) + 1
    longest = max(chosen, key=lambda p: p[2], default=None)
    return {
        "pauses": len(chosen),
        "pause_total_ms": round(sum(ms for _, _, ms in chosen), 1),
        "pause_max_ms": round(longest[2], 1) if longest else None,
        "pause_max_at_uptime_s": longest[0] if longest else None,
        "pause_median_ms": round(statistics.median(ms for _, _, ms in chosen), 2) if chosen else None,
        f"pauses_over_{LONG_PAUSE_MS:.0f}ms": sum(1 for _, _, ms in chosen if ms >= LONG_PAUSE_MS),
        "by_kind": kinds,
    }


def logs(folder: Path) -> list[Path]:
    """The GC logs the run's JVMs wrote into `folder` (rotated parts, `.0` and on, are not made: one file each)."""
    return sorted(folder.glob(FILE_PATTERN.replace("%p", "*")))

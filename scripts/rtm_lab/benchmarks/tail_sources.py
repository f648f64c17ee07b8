"""What a latency run's tail is made of: the JVM's GC pauses (from its GC log) and the generator falling behind.

A run's slowest records (above its p99) are set against two things the machine, not Spark's design, can cause: a
garbage-collection pause of the Spark JVM while the record was in flight, and the load generator running late when
it produced the record (it then sends a burst to catch up). A record can match both or neither; those matching neither
are reported as not attributed, not guessed at.

Clocks: the GC log stamps JVM uptime (`-Xlog:gc:file=...:uptime`), turned into wall time with the JVM's start time;
a record's production time is taken from its sequence number at the generator's pace (record n is due n / rate
seconds after production began), since the generator sends in 10 ms ticks on that schedule.
"""

import re
from pathlib import Path

# `[12.345s] GC(7) Pause Young (Normal) (G1 Evacuation Pause) 24M->8M(256M) 3.456ms`, and the like for other
# collectors' pauses.
PAUSE = re.compile(r"^\[(?P<uptime>[\d.]+)s\].*\bGC\(\d+\) (?P<what>Pause.*?) (?P<ms>[\d.]+)ms\s*$")
# A generator this far behind its schedule at a sample counts as lagging (its tick is 10 ms).
LAG_THRESHOLD_MS = 20.0


def gc_log_option(path: str) -> str:
    """The JVM option that writes GC events, with the JVM's uptime on each line, to `path`."""
    return f"-Xlog:gc:file={path}:uptime"


def gc_pauses(log: str, jvm_start_ms: float) -> list[list[float]]:
    """[[wall-clock start ms, duration ms], ...] of every stop-the-world pause in a GC log's text."""
    pauses = []
    for line in log.splitlines():
        match = PAUSE.match(line.strip())
        if match:
            duration = float(match["ms"])
            end = jvm_start_ms + float(match["uptime"]) * 1000  # a line is written when its pause ends
            pauses.append([round(end - duration, 1), round(duration, 3)])
    return pauses


def read_gc_pauses(path: str | Path, jvm_start_ms: float) -> list[list[float]]:
    path = Path(path)
    return gc_pauses(path.read_text(), jvm_start_ms) if path.is_file() else []


def lag_sampler(rate: float, wall_start_ms: float, timeline: list):
    """A `progress` callback for loadgen.produce_at_rate: appends [ms since production began, ms behind schedule]."""
    import time

    def sample(stats) -> None:
        elapsed_s = time.monotonic() - stats.started_at
        behind_ms = max(0.0, (elapsed_s * rate - stats.sent) / rate * 1000)
        timeline.append([round(time.time() * 1000 - wall_start_ms), round(behind_ms, 1)])

    return sample


def attribute_tail(
    samples: list[tuple[int, float]],
    rate: float,
    wall_start_ms: float,
    threshold_ms: float,
    pauses: list[list[float]],
    lag_timeline: list[list[float]],
    lag_window_ms: float = 1000.0,
) -> dict:
    """Of the records slower than `threshold_ms` (event id, latency ms), how many were in flight during a GC pause,
    how many were produced while the generator lagged (a lag sample over LAG_THRESHOLD_MS within `lag_window_ms`),
    and how many match neither (not attributed)."""
    tail = [(event_id, ms) for event_id, ms in samples if ms > threshold_ms]
    lagging = [t for t, behind in lag_timeline if behind > LAG_THRESHOLD_MS]
    gc = lag = neither = 0
    for event_id, ms in tail:
        produced = event_id / rate * 1000  # ms since production began
        start, end = wall_start_ms + produced, wall_start_ms + produced + ms
        in_pause = any(p_start < end and p_start + p_ms > start for p_start, p_ms in pauses)
        in_lag = any(abs(t - produced) <= lag_window_ms for t in lagging)
        gc += in_pause
        lag += in_lag
        neither += not (in_pause or in_lag)
    return {
        "threshold_ms": threshold_ms,
        "records": len(tail),
        "in_flight_during_gc_pause": gc,
        "produced_while_generator_lagged": lag,
        "not_attributed": neither,
    }


def gc_summary(pauses: list[list[float]], wall_start_ms: float, wall_end_ms: float) -> dict:
    """Pauses during the measured production window: how many, their total and the longest."""
    inside = [ms for start, ms in pauses if wall_start_ms <= start <= wall_end_ms]
    return {
        "gc_pause_count": len(inside),
        "gc_pause_total_ms": round(sum(inside), 1),
        "gc_pause_max_ms": round(max(inside), 1) if inside else 0.0,
    }

"""What a measurement ran on and when: cores, memory, CPU model, OS, the pinned versions, and the span of its runs,
for results files."""

import datetime as dt
import os
import platform
from pathlib import Path

from rtm_lab import versions


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def describe() -> dict:
    return {
        "cores": os.cpu_count(),
        "memory_gib": memory_gib(),
        "cpu_model": cpu_model(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }


def pinned_versions() -> dict:
    return {
        "spark": versions.SPARK_VERSION,
        "spark_kafka_connector": versions.SPARK_KAFKA_CONNECTOR_VERSION,
        "kafka_clients": versions.KAFKA_CLIENTS_VERSION,
        "kafka_broker": versions.KAFKA_BROKER_VERSION,
    }


def utc_now() -> str:
    """The time a results file records, to the second, in UTC."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(stamp: str) -> dt.datetime:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone(dt.UTC)


def _text(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def start_and_end(record: dict) -> tuple[str | None, str]:
    """When the run a record describes began and ended. `timestamp` is its end; the start is `started` where the
    record has it, else the end less `elapsed_s`, else None (older files recorded neither)."""
    end = _parse(record["timestamp"])
    if record.get("started"):
        return _text(_parse(record["started"])), _text(end)
    if record.get("elapsed_s") is not None:
        return _text(end - dt.timedelta(seconds=float(record["elapsed_s"]))), _text(end)
    return None, _text(end)


def run_span(count: int, records: list[dict]) -> str:
    """ "N runs, first start A, last end B" over run records (one record may hold all N runs): a footer that gives
    one run's time as the whole set's cannot be written with it."""
    spans = [start_and_end(r) for r in records]
    starts = [s for s, _ in spans]
    first = min(s for s in starts if s is not None) if all(s is not None for s in starts) else "not recorded"
    return f"{count} run{'' if count == 1 else 's'}, first start {first}, last end {max(e for _, e in spans)}"

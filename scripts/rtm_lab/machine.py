"""What a measurement ran on: cores, memory, CPU model, OS, and the pinned versions, for results files."""

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

"""The machine's load while a benchmark runs: recorded in every results file, and a warning when it is busy.

Latency on a shared machine says as much about the neighbours as about Spark, so each result carries the load average
(1, 5 and 15 minutes, `os.getloadavg()`) at its start and end, and a run that starts busy says so on stderr.
"""

import os
import sys


def snapshot() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def warn_if_busy(load: list[float], stream=sys.stderr) -> bool:
    """Print one line and return True when the 1-minute load average exceeds the core count."""
    cores = os.cpu_count() or 1
    if load[0] <= cores:
        return False
    print(
        f"warning: the 1-minute load average is {load[0]:.1f} on {cores} cores: other work is competing for the CPU, "
        "so latencies will read worse than on a quiet machine; rerun when the load is below the core count",
        file=stream,
        flush=True,
    )
    return True

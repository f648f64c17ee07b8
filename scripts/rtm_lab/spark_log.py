"""Spark's log in one line for the demo: how many warnings and errors, and which of them Spark 4.3 always logs for a
real-time query (named, with why), so a reader can tell the expected ones from a real problem."""

import contextlib
import re
import time
from pathlib import Path

from rtm_lab.waiting import WaitTimeout, wait_until

# What Spark 4.3 logs when a real-time query with a shuffle is stopped mid-batch: stop() kills the batch's tasks, and
# each shuffle reader whose writer ended without the batch's end marker reports it through ErrorNotifier. The query
# itself ends without an error (read in Spark 4.3.0's StreamingShuffleClientHandler; tests/test_demo.py checks on a
# real run that every error logged is this one).
STOP_MID_BATCH = re.compile(r"Connection to streaming shuffle writer \d+ closed before termination")


# What Spark 4.3 logs once for every real-time query: MicroBatchExecution.disableAQESupportInStatelessIfUnappropriated
# checks only that the trigger is real-time, warns, and sets spark.sql.adaptive.enabled=false in the query's own
# session; it never reads the setting first, so turning AQE off up front does not avoid the warning (read in Spark
# 4.3.0's MicroBatchExecution and in the bytecode of the pinned spark-sql jar; tests/test_demo.py checks it on a real
# run with AQE off from the start).
AQE_OFF = re.compile(r"Disabling AQE since AQE is not supported for Real-time Mode")
# What Spark 4.3 logs when opening a state store (dropDuplicates keeps one per shuffle partition) took over 2 s
# (StateStore.getStateStoreProvider, SPARK-42567): a busy machine, seen when other work shares the cores.
SLOW_STATE_STORE = re.compile(r"Loaded state store provider in loadTimeMs=\d+")
EXPECTED_WARNINGS = (
    (
        AQE_OFF,
        "Spark's notice that real-time mode runs without AQE, which Spark 4.3 logs for every real-time query even "
        "with AQE off from the start as here: nothing to fix",
    ),
    (SLOW_STATE_STORE, "a state store that took over 2 s to open, which Spark warns about: a busy machine"),
)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def wait_for_quiet_log(log_file: Path, quiet_s: float = 2.0, limit_s: float = 10.0) -> None:
    """Until the log has not grown for `quiet_s` (at most `limit_s`, then go on). After stop() returns, each shuffle
    reader logs its stop-time record from a network thread: a fresh-clone run read the log between two of them."""
    last = {"size": -1, "since": time.monotonic()}

    def quiet() -> bool:
        size = log_file.stat().st_size if log_file.is_file() else 0
        if size != last["size"]:
            last.update(size=size, since=time.monotonic())
        return time.monotonic() - last["since"] >= quiet_s

    with contextlib.suppress(WaitTimeout):  # a log still growing after limit_s is summarised as it is
        wait_until(quiet, limit_s, "Spark's log to go quiet", interval_s=0.1)


def log_line(log_file: Path, query_ended_cleanly: bool) -> str:
    """Spark's log in one line: warnings, errors, and which of them are expected (named, with why)."""
    wait_for_quiet_log(log_file)
    text = log_file.read_text(errors="replace") if log_file.is_file() else ""
    # A record starts with "HH:MM:SS LEVEL logger: message"; the lines after it, up to the next record, are its trace.
    records = [record for record in re.split(r"\n(?=\d\d:\d\d:\d\d )", text) if record[:2].isdigit()]
    warnings = [record for record in records if record.split(" ", 2)[1:2] == ["WARN"]]
    errors = [record for record in records if record.split(" ", 2)[1:2] == ["ERROR"]]
    named = [
        f"{found} of them {why}"
        for pattern, why in EXPECTED_WARNINGS
        if (found := sum(bool(pattern.search(record)) for record in warnings))
    ]
    at_stop = sum(bool(STOP_MID_BATCH.search(record)) for record in errors) if query_ended_cleanly else 0
    line = f"Spark's log     {log_file}: {_count(len(warnings), 'warning')}"
    if named:
        line += f" ({'; '.join(named)})"
    line += f", {_count(len(errors), 'error')}"
    if at_stop:
        line += (
            f" ({at_stop} of them from stopping the query mid-batch: the shuffle's readers saw their writers end "
            "before the batch did; expected at stop)"
        )
    return line

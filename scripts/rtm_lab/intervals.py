"""Spark interval strings ("5 seconds", "1 minute") as milliseconds, and the shortest batch duration Spark takes."""

import re

UNITS_MS = {"millisecond": 1, "second": 1000, "minute": 60_000, "hour": 3_600_000, "day": 86_400_000}
# spark.sql.streaming.realTimeMode.minBatchDuration's default: a shorter realTime= is refused at start().
MIN_REAL_TIME_INTERVAL_MS = 5000
# The batch duration of tests, probes and quick runs: Spark's minimum, not the default 5 minutes, because they need
# batch ends (offset commits, a Python writer's rows released, progress) within seconds, and whether Spark accepts a
# query does not depend on the batch duration.
TEST_INTERVAL = "5 seconds"
_INTERVAL = re.compile(r"^\s*(?:interval\s+)?(\d+(?:\.\d+)?)\s*([a-z]+?)s?\s*$", re.IGNORECASE)


def interval_ms(text: str) -> float:
    """Milliseconds in a Spark interval string such as "5 seconds" or "1 minute"; ValueError if unreadable."""
    match = _INTERVAL.match(text or "")
    unit = match and match.group(2).lower()
    if not match or unit not in UNITS_MS:
        raise ValueError(f"cannot read the duration {text!r}; write it as Spark does, e.g. '30 seconds' or '5 minutes'")
    return float(match.group(1)) * UNITS_MS[unit]

"""Read what Spark actually ran (the physical plan of a running streaming query), and wait for it to get that far."""

from pyspark.sql.streaming import StreamingQuery

from rtm_lab.waiting import wait_until

# The scan node Spark plans for a source read in real-time mode; micro-batch plans a MicroBatchScan instead.
REAL_TIME_SCAN = "RealTimeStreamScan"


def executed_plan(query: StreamingQuery) -> str:
    """The extended plan text of the query's last execution ('No physical plan' until a batch has started)."""
    return query._jsq.explainInternal(True)


def failure(query: StreamingQuery) -> BaseException | None:
    """The query's failure as `awaitTermination()` raises it, or None while it runs or after a clean stop.

    Use this rather than `q.exception()`: PySpark builds that one from the message only, so the JVM cause that holds
    the real error class is not reachable from it.
    """
    try:
        # PySpark annotates the timeout as int seconds but takes a float; 0 is refused by Spark ("Timeout has to be
        # positive"), so 1 ms is the shortest wait that only asks.
        query.awaitTermination(0.001)  # type: ignore[arg-type]
    except Exception as exc:
        return exc
    return None


def wait_for_real_time_scan(query: StreamingQuery, timeout_s: float = 60.0) -> str:
    """The plan once it shows a real-time scan; raises the query's own error if it fails first."""

    def planned() -> str | None:
        plan = executed_plan(query)
        return plan if REAL_TIME_SCAN in plan else None

    return wait_until(planned, timeout_s, f"{REAL_TIME_SCAN} in the plan", interval_s=0.3, abort=lambda: failure(query))


def wait_for_first_batch(query: StreamingQuery, timeout_s: float = 120.0) -> None:
    """Block until the first batch has finished (in real-time mode that is one whole batch duration)."""
    wait_until(lambda: query.lastProgress is not None, timeout_s, "the first batch", abort=lambda: failure(query))

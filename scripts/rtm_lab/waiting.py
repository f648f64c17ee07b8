"""One way to wait for a condition with a deadline, used by the lab, probes, benchmarks and tests.

Built on tenacity so retries, back-off and the final error are not hand-written in each caller.
"""

from collections.abc import Callable
from typing import TypeVar

from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_fixed

T = TypeVar("T")


class WaitTimeout(TimeoutError):
    """The condition did not hold before the deadline; the message says what was awaited."""


def wait_until(
    check: Callable[[], T | None],
    timeout_s: float,
    what: str,
    interval_s: float = 0.2,
    abort: Callable[[], BaseException | None] | None = None,
) -> T:
    """Call `check` until it returns a truthy value and return that value.

    `abort` is asked before each try; an exception it returns is raised at once (e.g. a streaming query that died, so
    a test fails with Spark's error rather than a time-out). Raises WaitTimeout naming `what` after `timeout_s`.
    """

    def attempt() -> T | None:
        if abort is not None:
            error = abort()
            if error is not None:
                raise error
        return check()

    try:
        result = Retrying(
            retry=retry_if_result(lambda value: not value),
            stop=stop_after_delay(timeout_s),
            wait=wait_fixed(interval_s),
            reraise=True,
        )(attempt)
    except RetryError:
        raise WaitTimeout(f"timed out after {timeout_s:g}s waiting for {what}") from None
    # Every falsy value is retried until the deadline (then RetryError): what comes back is the check's truthy value.
    assert result is not None
    return result

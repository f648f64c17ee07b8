"""Let a long-running CLI clean up when it is asked to stop by SIGTERM or SIGHUP, as it does on Ctrl-C.

Python's default for those signals ends the process at once, skipping `finally` blocks: a demo or benchmark killed
by `timeout`, `kill` or a closed terminal would leave its lab services, queries, topics and temp folders behind.

A library can swallow the exception a handler raises: kafka-python's network loop catches BaseException, so a signal
that lands inside a Kafka call is lost there. The request is therefore also recorded, and code that waits on Kafka
calls `raise_if_received()` to raise it again.
"""

import signal

_received: int | None = None


def _exception(signum: int) -> BaseException:
    return KeyboardInterrupt() if signum == signal.SIGINT else SystemExit(128 + signum)


def _handler(signum: int, _frame) -> None:
    global _received
    _received = signum
    # A second signal while cleaning up gets the default action, for a user who insists.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    raise _exception(signum)


def exit_cleanly_on_termination() -> None:
    """Turn SIGTERM and SIGHUP into SystemExit(128 + signal) in the main thread (Ctrl-C stays KeyboardInterrupt),
    so clean-up code runs."""
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, _handler)


def raise_if_received() -> None:
    """Raise, once, a stop request whose exception a library may have swallowed."""
    global _received
    if _received is not None:
        signum, _received = _received, None
        raise _exception(signum)

"""Let a long-running CLI clean up when it is asked to stop by SIGTERM or SIGHUP, as it does on Ctrl-C.

Python's default for those signals ends the process at once, skipping `finally` blocks: a demo or benchmark killed
by `timeout`, `kill` or a closed terminal would leave its lab services, queries, topics and temp folders behind.
"""

import signal


def exit_cleanly_on_termination() -> None:
    """Turn SIGTERM and SIGHUP into SystemExit(128 + signal) in the main thread, so clean-up code runs.

    A second signal while cleaning up gets the default action (the process ends), for a user who insists.
    """

    def handler(signum: int, _frame) -> None:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)

"""A `spark-submit` application in its own process group, for the tests and benchmarks that kill a real driver.

`SubmittedApp` holds what every such driver shares: the launch (spark-submit beside the installed PySpark, this
Python for the driver and its workers, a log per start), and the life around it: alive, died, a SIGKILL of the whole
group (no shutdown hook, no final commit), a stop. A subclass says what to launch (`command`) and what the
application reads from its environment (`environment`).
"""

import os
import signal
import sys
import time
from pathlib import Path

import pyspark

from rtm_lab import processes
from rtm_lab.waiting import wait_until


class SubmittedApp:
    """One application, started again by each `start()`; its logs go to `log_dir` as LOG_NAME-<start>.log."""

    LOG_NAME = "driver"

    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.pid: int | None = None
        self.runs = 0

    @staticmethod
    def spark_submit() -> Path:
        return Path(pyspark.__file__).parent / "bin" / "spark-submit"

    def command(self) -> list[str]:
        """The spark-submit command line (never a secret: it is visible to every user of the machine)."""
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        """What the application reads from its environment, beyond the Python it runs on."""
        return {}

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"{self.LOG_NAME}-{self.runs}.log"

    def start(self) -> float:
        """Launch the application; return the epoch second it was launched."""
        self.runs += 1
        cmd = self.command()
        # PYTHONPATH stays out: the application imports only what spark-submit and its --py-files give it, as a
        # reader's would.
        env = {
            **{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
            **self.environment(),
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
        }
        started = time.time()
        self.pid = processes.spawn(cmd, self.log_path, env=env)
        return started

    def alive(self) -> bool:
        return processes.is_alive(self.pid)

    def died(self) -> BaseException | None:
        if self.alive():
            return None
        return RuntimeError(f"the driver exited; log: {self.log_path}\n{processes.tail(self.log_path, 40)}")

    def kill(self) -> float:
        """SIGKILL the driver's whole process group: no shutdown hook, no final commit. Returns when it happened."""
        assert self.pid is not None, "kill() before start()"
        killed_at = time.time()
        os.killpg(self.pid, signal.SIGKILL)
        wait_until(lambda: not self.alive(), 15, "the killed driver to exit", 0.1)
        return killed_at

    def stop(self) -> None:
        processes.stop(self.pid, timeout=20.0)

"""Flink in the lab: the pinned PyFlink venv, its Kafka connector, and PyFlink programs started and stopped safely.

The venv (`.venv-flink` at the project root, or RTM_FLINK_VENV) is built on first use from flink-requirements.txt and
reused while that file is unchanged: the sha256 of the pin list is written into the venv last, so a half-built venv or
a changed pin list means a rebuild. Two builders at once take turns through a lock file beside the venv.

A PyFlink program runs as its own process (its own session, so a stop reaches the Java gateway it launches, whose
local MiniCluster runs the jobs) with the Spark driver's heap (-Xmx). Its `--tmp-dir` is a fresh folder inside the
lab folder; that path, one whole argument of its command line, is the process's identity: it is signalled only while
its pid still has the recorded start time and that argument (rtm_lab.processes).
"""

import contextlib
import fcntl
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from rtm_lab import cpu_pinning, jars, processes
from rtm_lab.errors import LabError
from rtm_lab.java import check_java
from rtm_lab.paths import PROJECT_ROOT, make_private_dir, state_dir
from rtm_lab.spark import driver_memory
from rtm_lab.waiting import WaitTimeout, wait_until

REQUIREMENTS = Path(__file__).with_name("flink-requirements.txt")
PINS_MARKER = "rtm-pins.sha256"
CONNECTOR_GROUP = "flink-kafka-connector"


def venv_dir() -> Path:
    return Path(os.environ.get("RTM_FLINK_VENV", PROJECT_ROOT / ".venv-flink")).resolve()


def pins() -> list[str]:
    lines = (line.strip() for line in REQUIREMENTS.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def pins_hash() -> str:
    return hashlib.sha256("\n".join(pins()).encode()).hexdigest()


def _is_current(venv: Path) -> bool:
    marker = venv / PINS_MARKER
    return (venv / "bin" / "python").is_file() and marker.is_file() and marker.read_text().strip() == pins_hash()


@contextlib.contextmanager
def _build_lock(venv: Path) -> Iterator[None]:
    venv.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(venv.parent / f"{venv.name}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def ensure_venv(log=lambda line: print(line, file=sys.stderr, flush=True)) -> Path:
    """The Flink venv's python, built first if missing or made from other pins (about two minutes from nothing)."""
    venv = venv_dir()
    if _is_current(venv):
        return venv / "bin" / "python"
    with _build_lock(venv):
        if _is_current(venv):  # another process built it while we waited
            return venv / "bin" / "python"
        log(f"flink     building {venv} (apache-flink and {len(pins()) - 1} pinned packages; a few minutes) ...")
        started = time.monotonic()
        # The interpreter behind this venv (not the venv itself) makes the new one, as scripts/version_matrix.py does.
        python = venv / "bin" / "python"
        steps = [
            [sys.executable, "-m", "venv", "--clear", str(venv)],
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r", str(REQUIREMENTS)],
        ]
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["no output"])[-1]
                raise LabError(f"Building the Flink venv failed at `{shlex.join(step[:4])}`: {last}")
        (venv / PINS_MARKER).write_text(pins_hash() + "\n")  # last: only a complete venv is reused
        log(f"flink     {venv} ready in {time.monotonic() - started:.0f}s")
    return python


def connector_jar() -> Path:
    """Flink's SQL Kafka connector, fetched and checked against jars.lock.json on first use."""
    return jars.ensure(CONNECTOR_GROUP, quiet=True)[0]


class FlinkRun(processes.Started):
    """A running PyFlink program (see `processes.Started`), with its output to wait on."""

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_for(self, text: str, count: int = 1, timeout_s: float = 180.0) -> None:
        """Wait until the program's output holds `text` `count` times; fail at once with its log if it exits."""

        def died() -> BaseException | None:
            if self.running():
                return None
            return LabError(
                f"The Flink program exited ({self.how_it_ended()}); the end of its log ({self.log}):\n"
                f"{processes.tail(self.log)}"
            )

        try:
            wait_until(lambda: self.output().count(text) >= count, timeout_s, f"{text!r} x{count}", 0.5, died)
        except WaitTimeout as exc:
            raise LabError(f"{exc}; the end of the Flink log ({self.log}):\n{processes.tail(self.log)}") from exc


def start(
    program: Path,
    args: list[str],
    env: dict[str, str] | None = None,
    cores: set[int] | None = None,
    jvm_options: str | None = None,
) -> FlinkRun:
    """Start `program` (a PyFlink script) in the Flink venv with the connector jar and the Spark driver's heap.

    The program is given `--jar CONNECTOR --tmp-dir FOLDER/tmp --checkpoint-dir FOLDER/checkpoints` before `args`; it
    must accept them (as snippets/guides/rtm_or_flink_flink.py does). Flink's own log goes to FOLDER/log, the
    program's output to FOLDER/program.log. `cores`: run it pinned to those cores (rtm_lab.cpu_pinning); `jvm_options` go on the gateway JVM's command line
    before the heap.
    """
    check_java()
    python = ensure_venv()
    folder = make_private_dir(state_dir() / "flink" / uuid.uuid4().hex[:12])
    (folder / "log").mkdir()
    tmp = folder / "tmp"
    tmp.mkdir()
    child_env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME")
    }
    # The gateway JVM (which runs the MiniCluster) takes JVM_ARGS first on its command line: the caller's, then the heap.
    jvm_args = " ".join(filter(None, [os.environ.get("JVM_ARGS"), jvm_options, f"-Xmx{driver_memory()}"]))
    child_env |= {"JVM_ARGS": jvm_args, "FLINK_LOG_DIR": str(folder / "log")}
    child_env |= env or {}
    command = [str(python), str(program), "--jar", str(connector_jar()), "--tmp-dir", str(tmp)]
    command += ["--checkpoint-dir", str(folder / "checkpoints"), *args]
    if cores is not None:  # the program and the gateway JVM it launches, on these cores only
        command = cpu_pinning.pinned_argv(command, cores)
    log = folder / "program.log"
    pid = processes.spawn(command, log, env=child_env, cwd=folder)
    return FlinkRun(pid, processes.start_time(pid), str(tmp), folder, log)


@contextlib.contextmanager
def running(program: Path, args: list[str], env: dict[str, str] | None = None) -> Iterator[FlinkRun]:
    """`start`, and stop the program (and its JVM) when the block ends, whatever happens.

    Its folder is removed after a clean end and kept, logs included, when the block raised.
    """
    run = start(program, args, env)
    try:
        yield run
    except BaseException:
        run.stop()
        raise
    if not run.stop():
        raise LabError(f"The Flink program (pid {run.pid}) did not stop; its log: {run.log}")
    shutil.rmtree(run.folder, ignore_errors=True)


def stop_leftovers(log=print) -> None:
    """Stop PyFlink programs this lab started and nobody stopped (a killed test run): `lab.py down` calls this.

    Found by their `--tmp-dir` argument, a folder under the lab's flink/ folder; anything else is left alone.
    """
    root = state_dir() / "flink"
    folders = sorted(root.iterdir()) if root.is_dir() else []
    for marker in (str(folder / "tmp") for folder in folders):
        for pid in processes.find(marker):
            log(f"flink     stopping a PyFlink program left running (pid {pid})")
            processes.stop(pid, marker=marker)

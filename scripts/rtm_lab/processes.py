"""Start, find and stop the lab's background processes so that `down` leaves nothing behind."""

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path


def is_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); read its state where /proc exists.
    stat = Path(f"/proc/{pid}/stat")
    if stat.exists():
        try:
            return stat.read_text().split(") ", 1)[1][0] != "Z"
        except (OSError, IndexError):
            return True
    return True


def spawn(cmd: list[str], log_path: Path, env: dict[str, str] | None = None, cwd: Path | None = None) -> int:
    """Start a detached process (own session, so it outlives the CLI) writing to log_path; return its pid."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
            cwd=cwd,
        )
    return proc.pid


def stop(pid: int | None, timeout: float = 30.0) -> None:
    """SIGTERM the process group, wait, then SIGKILL whatever is left."""
    if not is_alive(pid):
        return
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        except PermissionError:
            os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            if not is_alive(pid):
                return
            time.sleep(0.1)


def tail(path: Path, lines: int = 30) -> str:
    if not path.exists():
        return f"(no log at {path})"
    text = path.read_text(errors="replace").splitlines()
    return "\n".join(text[-lines:])

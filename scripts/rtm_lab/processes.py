"""Start, find and stop the lab's background processes so that `down` leaves nothing behind.

A pid saved in the lab's state can outlive its process (a reboot, a crash) and later name anything. Before any signal
the lab checks that the pid is still the process it started: same start time and a command line that holds the
lab's marker (a path inside the lab folder). A process that fails the check is left alone.
"""

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
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


def start_time(pid: int | None) -> str:
    """An opaque token that changes when the pid is reused: boot id + start time (Linux), `ps` lstart elsewhere."""
    if not pid:
        return ""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}:{_stat_after_name(pid)[19]}"  # field 22: start time in clock ticks since boot
    except (OSError, IndexError):
        pass
    if Path("/proc/self/stat").exists():
        return ""  # Linux, and the process is gone
    result = subprocess.run(["ps", "-o", "lstart=", "-p", str(pid)], capture_output=True, text=True)
    return result.stdout.strip()


def _stat_after_name(pid: int) -> list[str]:
    """/proc/PID/stat's fields from the third on (state, parent, ...): they count from after the command name, which
    may hold spaces and parentheses."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()


def children(pid: int) -> list[int]:
    """The live processes whose parent is pid (Linux; elsewhere none are found this way)."""
    found = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        try:
            if entry.name.isdigit() and int(_stat_after_name(int(entry.name))[1]) == pid:
                found.append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue  # gone while we looked
    return found


def arguments(pid: int | None) -> list[str]:
    """The process's command line, one item per argument (from `ps`, split on spaces, where there is no /proc)."""
    if not pid:
        return []
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        pass
    if Path("/proc/self/stat").exists():
        return []
    result = subprocess.run(["ps", "-ww", "-o", "command=", "-p", str(pid)], capture_output=True, text=True)
    return result.stdout.split()


def is_ours(pid: int | None, started: str, marker: str) -> bool:
    """True only when pid is alive, started when we recorded it (if we did), and one of its arguments is marker.

    A whole argument, not a substring: the lab at /x/lab must not claim the broker of the lab at /y/x/lab.
    """
    if not is_alive(pid):
        return False
    if started and start_time(pid) != started:
        return False
    return bool(marker) and marker in arguments(pid)


def find(marker: str) -> list[int]:
    """Pids of live processes with marker as one of their arguments (Linux; elsewhere none are found this way)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    pids = (int(entry.name) for entry in proc.iterdir() if entry.name.isdigit())
    return [pid for pid in pids if pid != os.getpid() and marker in arguments(pid) and is_alive(pid)]


def child_state(pid: int) -> str | None:
    """For a child of this process not yet waited for: "still running", or how it ended in words (it is reaped then,
    so ask once). None for any other process: only the parent can ask."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return None
    if done == 0:
        return "still running"
    if os.WIFSIGNALED(status):
        return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit code {os.waitstatus_to_exitcode(status)}"


def spawn(
    cmd: list[str],
    log_path: Path,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    user: str | None = None,
) -> int:
    """Start a detached process (own session, so it outlives the CLI) writing to log_path; return its pid.

    `user` runs it as that user (the lab is root): Popen switches user in the child before exec, so the pid is the
    program itself, not a wrapper such as runuser.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "ab") as log:
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
            cwd=cwd,
            # None (the default) for each when no user is given: the child runs as the caller.
            user=user or None,
            group=_group_of(user) if user else None,
            extra_groups=[] if user else None,
        )
    return proc.pid


def _group_of(user: str) -> int:
    import pwd

    return pwd.getpwnam(user).pw_gid


def stop(pid: int | None, started: str = "", marker: str = "", timeout: float = 30.0) -> bool:
    """SIGTERM the process group, wait, then SIGKILL whatever is left; return whether it is gone.

    With a marker, nothing is signalled unless `is_ours(pid, started, marker)`: a stale pid is not ours to kill.
    """
    if not is_alive(pid):
        return True
    if marker and not is_ours(pid, started, marker):
        return True
    assert pid is not None
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            # Not a group leader, or a group with someone else's processes in it: signal the process alone.
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                return not is_alive(pid)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            if not is_alive(pid):
                return True
            time.sleep(0.1)
    return not is_alive(pid)


def tail(path: Path, lines: int = 30) -> str:
    if not path.exists():
        return f"(no log at {path})"
    text = path.read_text(errors="replace").splitlines()
    return "\n".join(text[-lines:])


@dataclass
class Started:
    """A program the lab started: its pid and start time, the argument that identifies it (`marker`), its folder and
    log. It is signalled only while it is ours: this process's child, or else `is_ours`."""

    pid: int
    started: str
    marker: str
    folder: Path
    log: Path
    ended: str | None = field(default=None, init=False)

    def _child_state(self) -> str | None:
        # The parent's waitpid has the last word on its own child. /proc alone once said a Flink program had gone
        # (is_ours False) while waitpid still called it running, in clean-clone runs under load 7-10: the test
        # failed at once with nothing in the log, and stop() left the program for `lab.py down` to find.
        if self.ended is None:
            state = child_state(self.pid)
            if state is None or state == "still running":
                return state
            self.ended = state
        return self.ended

    def running(self) -> bool:
        state = self._child_state()
        return state == "still running" if state is not None else is_ours(self.pid, self.started, self.marker)

    def how_it_ended(self) -> str:
        return self._child_state() or "exit status unknown: not a child of this process"

    def stop(self) -> bool:
        if self._child_state() == "still running":
            # Our unreaped child: the pid cannot belong to anyone else. stop() reaps it, so its status is ours to say.
            gone = stop(self.pid, timeout=20.0)
            if gone:
                self.ended = "stopped by the lab"
            return gone
        return stop(self.pid, self.started, self.marker, timeout=20.0)

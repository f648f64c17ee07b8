"""An S3-compatible object store for the lab: versitygw's POSIX backend on 127.0.0.1, files under `<lab>/s3/`.

Checkpoints on object storage need a server that speaks S3. versitygw (Apache-2.0) is one Go program, served by the Go
module proxy, so the lab builds it with `go install` on first use (2 min 14 s of CPU, 3 min 25 s on a busy 2-core
machine) and caches it by version under `<lab>/bin/`. Go's own module and build caches, in the user's home, make the
build for a second lab folder a relink (8 s on the same busy machine). `RTM_VERSITYGW_BIN` names a binary to use
instead.

Each lab folder gets its own access key and secret, random, in `<lab>/s3/credentials.json` (mode 0600). The server
reads them from its environment, never from its command line, so `ps` does not show them; nothing the lab prints
shows them either. Objects are plain files: bucket `b`, key `k/x` is `<lab>/s3/data/b/k/x`.
"""

import fcntl
import json
import os
import re
import secrets
import shutil
import string
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from rtm_lab import ports, processes
from rtm_lab.errors import LabError
from rtm_lab.paths import make_private_dir, state_dir, write_private
from rtm_lab.s3_requests import Credentials, create_bucket
from rtm_lab.versions import VERSITYGW_MIN_GO, VERSITYGW_MODULE, VERSITYGW_VERSION
from rtm_lab.waiting import WaitTimeout, wait_until

BIN_ENV = "RTM_VERSITYGW_BIN"
# The bucket the lab creates on start; tests and benchmarks write under their own prefixes in it.
BUCKET = "rtm-lab"
# Where Go lives when it is not on PATH (the official tarball's place).
GO_FALLBACK = Path("/usr/local/go/bin/go")
BUILD_PROGRESS_EVERY_S = 15.0


def root() -> Path:
    return state_dir() / "s3"


def data_dir() -> Path:
    return root() / "data"


def log_path() -> Path:
    return root() / "versitygw.log"


def credentials_path() -> Path:
    return root() / "credentials.json"


def marker() -> str:
    """The argument that marks this lab's server: its data folder, a path inside the lab folder."""
    return str(data_dir())


def endpoint(port: int) -> str:
    return f"http://{ports.HOST}:{port}"


def _built_binary() -> Path:
    return state_dir() / "bin" / f"versitygw-{VERSITYGW_VERSION}" / "versitygw"


def _go() -> Path:
    found = shutil.which("go")
    go = Path(found) if found else GO_FALLBACK
    if not go.is_file():
        raise LabError(
            f"The lab's object store is versitygw {VERSITYGW_VERSION}, built from source with Go "
            f">= {'.'.join(map(str, VERSITYGW_MIN_GO))}, and no `go` was found on PATH or at {GO_FALLBACK}. Install Go, "
            f"or set {BIN_ENV} to a versitygw binary."
        )
    version = subprocess.run([str(go), "env", "GOVERSION"], capture_output=True, text=True).stdout.strip()
    match = re.match(r"go(\d+)\.(\d+)", version)
    if not match or tuple(map(int, match.groups())) < VERSITYGW_MIN_GO:
        raise LabError(
            f"{go} is {version or 'of unknown version'}; versitygw {VERSITYGW_VERSION} needs Go "
            f">= {'.'.join(map(str, VERSITYGW_MIN_GO))}. Install a newer Go, or set {BIN_ENV} to a versitygw binary."
        )
    return go


def binary(log=print) -> Path:
    """The versitygw program: RTM_VERSITYGW_BIN, else the lab's cached build, else built now (once)."""
    explicit = os.environ.get(BIN_ENV)
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise LabError(
                f"{BIN_ENV}={explicit} is not an executable file. Fix it, or unset it to let the lab build one."
            )
        return Path(explicit)
    target = _built_binary()
    if target.is_file():
        return target
    make_private_dir(target.parent)
    # Two test workers may ask at once: one builds, the other waits and then finds the binary.
    with (target.parent / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.is_file():
            _build(target, log)
    return target


def _build(target: Path, log) -> None:
    go = _go()
    staging = target.parent / "staging"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    build_log = target.parent / "build.log"
    env = {
        **os.environ,
        "GOBIN": str(staging),
        # Build with the Go that is here: never fetch another toolchain.
        "GOTOOLCHAIN": "local",
        # A static binary: no C compiler needed, and it runs on any Linux of the same architecture.
        "CGO_ENABLED": "0",
    }
    command = [str(go), "install", "-trimpath", "-ldflags=-s -w", f"{VERSITYGW_MODULE}@{VERSITYGW_VERSION}"]
    log(f"s3        building versitygw {VERSITYGW_VERSION} with `go install` (once; a few minutes of CPU) ...")
    began = time.monotonic()
    with build_log.open("w") as out:
        build = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=target.parent)
        next_note = BUILD_PROGRESS_EVERY_S
        while build.poll() is None:
            time.sleep(1.0)
            if time.monotonic() - began >= next_note:
                log(f"s3        still building ({time.monotonic() - began:.0f} s)")
                next_note += BUILD_PROGRESS_EVERY_S
    built = staging / "versitygw"
    if build.returncode != 0 or not built.is_file():
        raise LabError(
            f"`go install {VERSITYGW_MODULE}@{VERSITYGW_VERSION}` failed (exit {build.returncode}):\n"
            f"{processes.tail(build_log, 15)}\nThe Go module proxy must be reachable, or set {BIN_ENV} to a binary."
        )
    built.replace(target)
    staging.rmdir()
    log(f"s3        versitygw built in {time.monotonic() - began:.0f} s: {target}")


def credentials() -> Credentials:
    """This lab folder's access key and secret, generated (random) the first time and kept 0600."""
    path = credentials_path()
    try:
        saved = json.loads(path.read_text())
        return Credentials(saved["access_key"], saved["secret_key"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    alphabet = string.ascii_uppercase + string.digits
    made = Credentials(
        access_key="RTM" + "".join(secrets.choice(alphabet) for _ in range(17)),
        secret_key="".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(40)),
    )
    make_private_dir(root())
    write_private(path, json.dumps({"access_key": made.access_key, "secret_key": made.secret_key}))
    return made


def start(port: int, on_spawn, log=print) -> int:
    """Start the server on 127.0.0.1:port, wait until it answers, create the lab's bucket; `on_spawn(pid)` records
    the process the moment it exists."""
    program = binary(log)
    keys = credentials()
    make_private_dir(root())
    make_private_dir(data_dir())
    command = [str(program), "--port", f"{ports.HOST}:{port}", "--quiet", "posix", marker()]
    # The root account's keys by environment (versitygw reads ROOT_ACCESS_KEY_ID / ROOT_SECRET_ACCESS_KEY), so they
    # are in no process listing; /proc/PID/environ is readable by the same user (and root) only.
    env = {**os.environ, "ROOT_ACCESS_KEY_ID": keys.access_key, "ROOT_SECRET_ACCESS_KEY": keys.secret_key}
    pid = processes.spawn(command, log_path(), env=env, cwd=root())
    on_spawn(pid)
    try:
        wait_until(lambda: answers(port) or not processes.is_alive(pid), 60, "the object store to answer", 0.2)
    except WaitTimeout:
        raise LabError(f"versitygw (pid {pid}) did not answer within 60 s; see {log_path()}") from None
    if not processes.is_alive(pid):
        raise LabError(f"versitygw exited at start-up:\n{processes.tail(log_path(), 15)}")
    create_bucket(endpoint(port), keys, BUCKET)
    return pid


def answers(port: int | None) -> bool:
    """The server answers HTTP (an unsigned request gets 403 AccessDenied: that is an answer)."""
    if not port:
        return False
    try:
        with urllib.request.urlopen(f"{endpoint(port)}/", timeout=2):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


def configured_port() -> int | None:
    """The port the running server was started with, read from its own command line."""
    for pid in processes.find(marker()):
        arguments = processes.arguments(pid)
        if "--port" in arguments[:-1]:
            return int(arguments[arguments.index("--port") + 1].rsplit(":", 1)[1])
    return None

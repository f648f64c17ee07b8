"""A real PostgreSQL server from Debian's `postgresql` package: a private cluster (initdb) on a loopback port.

PostgreSQL refuses to run as root. When the lab runs as root (CI does), the server runs as the `postgres` user
that Debian's package creates, and its data folder moves somewhere that user can reach, linked from the lab folder.
"""

import getpass
import glob
import hashlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from rtm_lab import ports
from rtm_lab.errors import LabError
from rtm_lab.versions import POSTGRES_DEBIAN_PACKAGE

DATABASE = "rtm"
ROLE = "rtm"
# A loopback-only lab server; the password is not a secret, but it makes the DSN exercise real authentication.
PASSWORD = "rtm"
SERVER_USER_WHEN_ROOT = "postgres"
READY_TIMEOUT_S = 60.0


def _has_server(candidate: Path) -> bool:
    return all((candidate / tool).exists() for tool in ("initdb", "pg_ctl", "postgres"))


def find_bin_dir() -> Path | None:
    explicit = os.environ.get("RTM_PG_BIN")
    if explicit:
        # The user chose a folder: use it or fail, never silently pick another installation.
        return Path(explicit) if _has_server(Path(explicit)) else None
    candidates = []
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    versioned = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name), reverse=True)
    candidates += [Path(p) for p in versioned]
    candidates += [Path(p) for p in sorted(glob.glob("/opt/homebrew/opt/postgresql*/bin"), reverse=True)]
    candidates += [Path("/usr/local/pgsql/bin")]
    return next((c for c in candidates if _has_server(c)), None)


def install_if_root() -> None:
    """Install Debian's postgresql package when missing and we may; otherwise say exactly what to install."""
    if find_bin_dir():
        return
    explicit = os.environ.get("RTM_PG_BIN")
    if explicit:
        raise LabError(
            f"RTM_PG_BIN={explicit} does not hold the PostgreSQL server binaries (initdb, pg_ctl, postgres). "
            f"Point it at the right folder (e.g. /usr/lib/postgresql/15/bin), or unset it to use Debian's "
            f"`{POSTGRES_DEBIAN_PACKAGE}` package (`sudo apt-get install {POSTGRES_DEBIAN_PACKAGE}`)."
        )
    if os.geteuid() == 0 and shutil.which("apt-get"):
        print(f"Installing Debian's {POSTGRES_DEBIAN_PACKAGE} package (PostgreSQL server binaries)...", flush=True)
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", POSTGRES_DEBIAN_PACKAGE]):
            result = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if result.returncode != 0:
                raise LabError(f"`{' '.join(cmd)}` failed:\n{result.stderr[-2000:]}")
        if find_bin_dir():
            return
    raise LabError(
        "PostgreSQL server binaries (initdb, pg_ctl, postgres) were not found. Install Debian's "
        f"`{POSTGRES_DEBIAN_PACKAGE}` package (`sudo apt-get install {POSTGRES_DEBIAN_PACKAGE}`; macOS: "
        "`brew install postgresql@16`), or set RTM_PG_BIN to the folder that holds initdb, "
        "or set POSTGRES_DSN to use a server you already run."
    )


def _server_user() -> str | None:
    """The user the server must run as, or None to run as ourselves."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SERVER_USER_WHEN_ROOT)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", SERVER_USER_WHEN_ROOT], check=True)
    return SERVER_USER_WHEN_ROOT


def _as_server_user(cmd: list[str]) -> list[str]:
    user = _server_user()
    if user is None:
        return cmd
    return ["runuser", "-u", user, "--", *cmd]


def _reachable_by(user: str, path: Path) -> bool:
    probe = subprocess.run(["runuser", "-u", user, "--", "test", "-w", str(path)], capture_output=True)
    return probe.returncode == 0


def cluster_dir(lab_root: Path) -> Path:
    """The data folder, created if needed and owned by whoever runs the server."""
    home = lab_root / "postgres"
    user = _server_user()
    if user is None:
        home.mkdir(parents=True, exist_ok=True)
        return home
    if home.is_symlink():
        target = home.resolve()
        target.mkdir(parents=True, exist_ok=True)
        shutil.chown(target, user=user)
        return target
    home.mkdir(parents=True, exist_ok=True)
    shutil.chown(home, user=user)
    if _reachable_by(user, home):
        return home
    # The project lives somewhere the postgres user cannot enter (e.g. under /root): keep the cluster in /tmp.
    home.rmdir()
    digest = hashlib.sha1(str(lab_root).encode()).hexdigest()[:10]
    target = Path(tempfile.gettempdir()) / f"rtm-lab-postgres-{digest}"
    target.mkdir(mode=0o700, exist_ok=True)
    shutil.chown(target, user=user)
    home.symlink_to(target)
    return target


def dsn(port: int) -> str:
    return f"postgresql://{ROLE}:{PASSWORD}@{ports.HOST}:{port}/{DATABASE}"


def answers(dsn_value: str, timeout_s: int = 3) -> bool:
    """True when the server answers SELECT 1 on this DSN."""
    import psycopg2

    try:
        conn = psycopg2.connect(dsn_value, connect_timeout=timeout_s)
    except psycopg2.Error:
        return False
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1")
            return cur.fetchone() == (1,)
    except psycopg2.Error:
        return False
    finally:
        conn.close()


def _run(cmd: list[str], what: str, log: Path | None = None) -> None:
    result = subprocess.run(_as_server_user(cmd), capture_output=True, text=True, timeout=180)
    if result.returncode != 0:
        detail = result.stdout[-1500:] + result.stderr[-1500:]
        if log is not None and log.exists():
            from rtm_lab.processes import tail

            detail += f"\nLast lines of {log}:\n{tail(log)}"
        raise LabError(f"{what} failed:\n{detail}")


def start(lab_root: Path, port: int) -> None:
    """initdb on first use, start the server, create the project's role and database, wait for SELECT 1."""
    install_if_root()
    bin_dir = find_bin_dir()
    assert bin_dir is not None
    data = cluster_dir(lab_root) / "data"
    log = lab_root / "postgres.log"
    socket_dir = data.parent
    if not (data / "PG_VERSION").exists():
        shutil.rmtree(data, ignore_errors=True)
        _run(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
            "initdb",
        )
        conf = data / "postgresql.conf"
        # The lab's own settings; host connections use passwords so the DSN path is the real one.
        with conf.open("a") as handle:
            handle.write("\nlisten_addresses = '127.0.0.1'\nmax_connections = 200\nshared_buffers = 256MB\n")
        (data / "pg_hba.conf").write_text(
            "local all all trust\nhost all postgres 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 scram-sha-256\n"
        )
    if log.exists() and _server_user():
        shutil.chown(log, user=_server_user())
    elif _server_user():
        log.touch()
        shutil.chown(log, user=_server_user())
    _run(
        [
            str(bin_dir / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(log),
            "-w",
            "-t",
            str(int(READY_TIMEOUT_S)),
            "-o",
            f"-p {port} -k {socket_dir}",
            "start",
        ],
        f"Starting PostgreSQL on port {port}",
        log,
    )
    _ensure_role_and_database(bin_dir, port, socket_dir)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if answers(dsn(port)):
            return
        time.sleep(0.2)
    raise LabError(f"PostgreSQL started but does not answer SELECT 1 on port {port}. See {log}.")


def _ensure_role_and_database(bin_dir: Path, port: int, socket_dir: Path) -> None:
    psql = [
        str(bin_dir / "psql") if (bin_dir / "psql").exists() else "psql",
        "-X",
        "-q",
        "-v",
        "ON_ERROR_STOP=1",
        "-h",
        str(socket_dir),
        "-p",
        str(port),
        "-U",
        "postgres",
        "-d",
        "postgres",
    ]
    sql = (
        f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{ROLE}') THEN "
        f"CREATE ROLE {ROLE} LOGIN CREATEDB PASSWORD '{PASSWORD}'; END IF; END $$;"
    )
    _run([*psql, "-c", sql], "Creating the lab role")
    exists = subprocess.run(
        _as_server_user([*psql, "-tAc", f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'"]),
        capture_output=True,
        text=True,
    )
    if exists.stdout.strip() != "1":
        _run([*psql, "-c", f"CREATE DATABASE {DATABASE} OWNER {ROLE}"], "Creating the lab database")


def stop(lab_root: Path) -> None:
    bin_dir = find_bin_dir()
    home = lab_root / "postgres"
    data = (home.resolve() if home.exists() else home) / "data"
    if bin_dir is None or not (data / "postmaster.pid").exists():
        return
    subprocess.run(
        _as_server_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "-t", "60", "stop"]),
        capture_output=True,
        text=True,
    )


def server_pid(lab_root: Path) -> int | None:
    home = lab_root / "postgres"
    pid_file = (home.resolve() if home.exists() else home) / "data" / "postmaster.pid"
    try:
        return int(pid_file.read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return None


def whoami() -> str:
    return _server_user() or getpass.getuser()

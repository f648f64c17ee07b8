"""A real PostgreSQL server from Debian's `postgresql` package: a private cluster (initdb) on a loopback port.

Everything the server writes (its data, its socket, its log) lives in one folder it owns, mode 0700: the "server
home", `<lab>/postgres`. PostgreSQL refuses to run as root, so as root the server runs as the `postgres` user that
Debian's package creates. When that user cannot enter the lab folder (a clone under /root, a `mktemp -d` folder), or
the lab path is too long for a Unix socket, the home is a fresh private folder made with `mkdtemp` in the temp folder
instead; its name is recorded in `<lab>/postgres-home`, and it is used again only if it is still a real folder (not a
symlink) owned by the server's user with mode 0700.

Access: the lab role `rtm` logs in with a password over TCP (so the DSN path is the real one); the superuser is
reachable only over the socket, by the OS user that runs the server (peer), and is refused over TCP.
"""

import getpass
import glob
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from rtm_lab import ports, processes
from rtm_lab.errors import LabError
from rtm_lab.paths import write_private
from rtm_lab.versions import POSTGRES_DEBIAN_PACKAGE
from rtm_lab.waiting import WaitTimeout, wait_until

DATABASE = "rtm"
ROLE = "rtm"
# A loopback-only lab server; the password is not a secret, but it makes the DSN exercise real authentication.
PASSWORD = "rtm"
SERVER_USER_WHEN_ROOT = "postgres"
READY_TIMEOUT_S = 60.0
HOME_POINTER = "postgres-home"
FALLBACK_PREFIX = "rtm-lab-postgres-"
LAB_CONF = "rtm_lab.conf"
# A Unix socket path must fit in sun_path (108 bytes on Linux, 104 on macOS); the server adds "/.s.PGSQL.NNNNN".
SOCKET_DIR_MAX = 90


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


def whoami() -> str:
    """The OS user that runs the server; it is also the superuser's name (initdb's default) and its peer identity."""
    return _server_user() or getpass.getuser()


def _owner() -> tuple[int, int]:
    entry = pwd.getpwnam(whoami())
    return entry.pw_uid, entry.pw_gid


def _run_as_server(cmd: list[str], cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    """Run a PostgreSQL tool as the server's user, in a folder it can enter, without the caller's PG* settings."""
    user = _server_user()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    return subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env,
        user=user,
        group=_owner()[1] if user else None,
        extra_groups=[] if user else None,
    )


def _can_enter(user: str, path: Path) -> bool:
    uid, gid = _owner()
    probe = subprocess.run(
        ["test", "-w", str(path)], user=uid, group=gid, extra_groups=[], cwd="/", capture_output=True
    )
    return probe.returncode == 0


def _check_private(path: Path) -> Path:
    """path, if it is a real folder owned by the server's user with mode 0700; else a LabError saying what it is."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise LabError(
            f"{path} disappeared while the lab was using it. Run `python scripts/lab.py up` again."
        ) from None
    uid = _owner()[0]
    if stat.S_ISLNK(info.st_mode):
        what = f"a symlink (to {os.readlink(path)})"
    elif not stat.S_ISDIR(info.st_mode):
        what = "not a folder"
    elif info.st_uid != uid:
        what = f"owned by uid {info.st_uid}, not by {whoami()} (uid {uid})"
    elif stat.S_IMODE(info.st_mode) != 0o700:
        what = f"mode {stat.S_IMODE(info.st_mode):04o}, not 0700"
    else:
        return path
    raise LabError(
        f"Refusing to use {path} as PostgreSQL's folder: it is {what}, so the lab did not make it or someone changed "
        f"it. Check who did; remove it (or {path.parent}/{path.name} from the lab's record) and rerun "
        "`python scripts/lab.py up`, which then makes a fresh private folder."
    )


def server_home(lab_root: Path, create: bool = True) -> Path | None:
    """The folder that holds the server's data, socket and log (None if there is none and create is False)."""
    pointer = lab_root / HOME_POINTER
    if pointer.is_file() and not pointer.is_symlink():
        recorded = Path(pointer.read_text().strip())
        if os.path.lexists(recorded):
            return _check_private(recorded)
        # Gone (the temp folder is cleared at boot): the cluster went with it; make a fresh one below.
        pointer.unlink()
    local = lab_root / "postgres"
    if local.is_symlink():
        # The layout before the recorded home: a link to a predictable /tmp folder. Drop the link, never follow it.
        local.unlink()
    if local.is_dir():
        # Inside the lab folder, which is ours: repair what an older lab version left (a 0755 folder).
        fd = os.open(local, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            os.fchmod(fd, 0o700)
            if _server_user():
                os.fchown(fd, *_owner())
        finally:
            os.close(fd)
        return _check_private(local)
    if not create:
        return None
    user = _server_user()
    if len(str(local)) <= SOCKET_DIR_MAX:
        local.parent.mkdir(parents=True, exist_ok=True)
        local.mkdir(mode=0o700)
        if user is None:
            return local
        os.chown(local, *_owner(), follow_symlinks=False)
        if _can_enter(user, local):
            return local
        local.rmdir()
    # The server's user cannot reach the lab folder, or the path is too long for a socket: a fresh private folder.
    home = Path(tempfile.mkdtemp(prefix=FALLBACK_PREFIX))
    if user is not None:
        os.chown(home, *_owner(), follow_symlinks=False)
    write_private(pointer, f"{home}\n")
    return home


def log_path(lab_root: Path) -> Path:
    """Where the server's log is (or will be): in its home, which may be outside the lab folder."""
    home = server_home(lab_root, create=False)
    return (home or lab_root / "postgres") / "postgres.log"


def dsn(port: int) -> str:
    return f"postgresql://{ROLE}:{PASSWORD}@{ports.HOST}:{port}/{DATABASE}"


def problem(dsn_value: str, timeout_s: int = 3) -> str | None:
    """None when the server answers SELECT 1 on this DSN, else the driver's reason in one line (no password)."""
    import psycopg2

    try:
        conn = psycopg2.connect(dsn_value, connect_timeout=timeout_s)
    except psycopg2.Error as exc:
        return " ".join(str(exc).split())
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1")
            return None if cur.fetchone() == (1,) else "SELECT 1 did not return 1"
    except psycopg2.Error as exc:
        return " ".join(str(exc).split())
    finally:
        conn.close()


def answers(dsn_value: str, timeout_s: int = 3) -> bool:
    """True when the server answers SELECT 1 on this DSN."""
    return problem(dsn_value, timeout_s) is None


def _conf_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def _lab_settings(port: int, home: Path) -> str:
    # Port and socket folder live here, not on a command line, so no shell ever sees the lab's path. The socket
    # folder list takes double-quoted items (a path with a comma or a space stays one item).
    socket_item = '"' + str(home).replace('"', '""') + '"'
    return (
        "# Written by rtm_lab.postgres at each start.\n"
        f"listen_addresses = '{ports.HOST}'\n"
        f"port = {port}\n"
        f"unix_socket_directories = {_conf_string(socket_item)}\n"
        "unix_socket_permissions = 0700\n"
        "max_connections = 200\n"
        "shared_buffers = 256MB\n"
    )


def _hba(superuser: str) -> str:
    return (
        "# Written by rtm_lab.postgres. The superuser: only over the socket, only as the OS user running the server.\n"
        "local all all peer\n"
        f'host all "{superuser}" {ports.HOST}/32 reject\n'
        f"host all all {ports.HOST}/32 scram-sha-256\n"
    )


def _check(result: subprocess.CompletedProcess, what: str, log: Path | None = None) -> None:
    if result.returncode != 0:
        detail = result.stdout[-1500:] + result.stderr[-1500:]
        if log is not None:
            detail += f"\nLast lines of {log}:\n{processes.tail(log)}"
        raise LabError(f"{what} failed:\n{detail}")


def _postmaster(data: Path) -> tuple[int | None, str]:
    """The pid and status line of postmaster.pid (status is "ready" once the server accepts connections)."""
    try:
        lines = (data / "postmaster.pid").read_text().splitlines()
        return int(lines[0]), (lines[7].strip() if len(lines) > 7 else "")
    except (OSError, ValueError, IndexError):
        return None, ""


def _own_pid(data: Path) -> int | None:
    """The postmaster's pid, only if that process is really this cluster's server (a stale file can name anything)."""
    pid, _ = _postmaster(data)
    return pid if processes.is_ours(pid, "", str(data)) else None


def start(lab_root: Path, port: int, on_spawn=None) -> int:
    """initdb on first use, start the server, create the project's role and database; return the server's pid.

    `on_spawn(pid)` is called as soon as the server process exists, so a caller can record it before waiting.
    """
    install_if_root()
    bin_dir = find_bin_dir()
    assert bin_dir is not None
    home = server_home(lab_root)
    assert home is not None  # server_home creates the folder unless told not to
    data = home / "data"
    log = home / "postgres.log"
    superuser = whoami()
    owner = _owner() if _server_user() else None
    if not (data / "PG_VERSION").exists():
        shutil.rmtree(data, ignore_errors=True)
        initdb = [str(bin_dir / "initdb"), "-D", str(data), "--auth-local=peer", "--auth-host=scram-sha-256"]
        initdb += ["-E", "UTF8", "--locale=C", "--no-sync"]
        _check(_run_as_server(initdb, cwd=home), "initdb")
    # Written at every start, so a cluster made by an older lab (trust auth, port on the command line) is fixed too.
    conf = data / "postgresql.conf"
    include = f"include '{LAB_CONF}'"
    if include not in conf.read_text():
        write_private(conf, f"{conf.read_text()}\n{include}\n", owner)
    write_private(data / "pg_hba.conf", _hba(superuser), owner)
    write_private(data / LAB_CONF, _lab_settings(port, home), owner)
    pid, _ = _postmaster(data)
    if pid is not None and _own_pid(data) is None:
        # Left by a server that is gone (a crash, a reboot); its pid may now be someone else's process.
        (data / "postmaster.pid").unlink()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    pid = processes.spawn([str(bin_dir / "postgres"), "-D", str(data)], log, env=env, cwd=home, user=_server_user())
    if on_spawn is not None:
        on_spawn(pid)

    def exited() -> BaseException | None:
        if processes.is_alive(pid):
            return None
        return LabError(
            f"PostgreSQL exited during start-up on port {port}. Last lines of {log}:\n{processes.tail(log)}"
        )

    try:
        wait_until(lambda: _postmaster(data) == (pid, "ready"), READY_TIMEOUT_S, "PostgreSQL", abort=exited)
        _ensure_role_and_database(bin_dir, port, home, superuser)
        wait_until(lambda: answers(dsn(port)), READY_TIMEOUT_S, "SELECT 1", abort=exited)
    except WaitTimeout:
        raise LabError(
            f"PostgreSQL (pid {pid}) did not answer on port {port} within {READY_TIMEOUT_S:.0f}s. "
            f"Last lines of {log}:\n{processes.tail(log)}"
        ) from None
    return pid


def _ensure_role_and_database(bin_dir: Path, port: int, home: Path, superuser: str) -> None:
    psql = [
        str(bin_dir / "psql") if (bin_dir / "psql").exists() else "psql",
        *("-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", str(home), "-p", str(port), "-U", superuser, "-d", "postgres"),
    ]
    sql = (
        f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{ROLE}') THEN "
        f"CREATE ROLE {ROLE} LOGIN CREATEDB PASSWORD '{PASSWORD}'; END IF; END $$;"
    )
    _check(_run_as_server([*psql, "-c", sql], cwd=home), "Creating the lab role")
    exists = _run_as_server([*psql, "-tAc", f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'"], cwd=home)
    if exists.stdout.strip() != "1":
        _check(
            _run_as_server([*psql, "-c", f"CREATE DATABASE {DATABASE} OWNER {ROLE}"], cwd=home), "Creating the database"
        )


def stop(lab_root: Path, pid: int | None = None, started: str = "") -> None:
    """Stop this lab's server (fast shutdown); a pid file naming another process is left alone.

    `pid`/`started`, as recorded at spawn, also stop a server interrupted before it wrote its pid file.
    """
    home = server_home(lab_root, create=False)
    bin_dir = find_bin_dir()
    if home is None or bin_dir is None:
        return
    if _own_pid(home / "data") is not None:
        cmd = [str(bin_dir / "pg_ctl"), "-D", str(home / "data"), "-m", "fast", "-w", "-t", "60", "stop"]
        _run_as_server(cmd, cwd=home)
    if pid is not None and started:
        processes.stop(pid, started, marker=str(home / "data"))


def remove(lab_root: Path) -> None:
    """Stop the server and delete its home (data, socket, log), wherever it is."""
    stop(lab_root)
    home = server_home(lab_root, create=False)
    if home is not None:
        shutil.rmtree(home)
    (lab_root / HOME_POINTER).unlink(missing_ok=True)


def server_pid(lab_root: Path) -> int | None:
    try:
        home = server_home(lab_root, create=False)
    except LabError:
        return None
    return _own_pid(home / "data") if home else None


def server_port(lab_root: Path) -> int | None:
    """The port this lab's running server listens on (from its postmaster.pid), or None."""
    home = server_home(lab_root, create=False) if server_pid(lab_root) else None
    try:
        return int((home / "data" / "postmaster.pid").read_text().splitlines()[3]) if home else None
    except (OSError, ValueError, IndexError):
        return None

"""`scripts/lab.py`: idempotent up, truthful status, clean down, and errors that say what to do.

Each test runs the CLI in a subprocess against its own lab folder (RTM_LAB_DIR), so the shared lab the other
tests use is never touched, and ends with `down --purge`, which stops what it started and deletes its data wherever
it lives. Jars come from the shared cache (RTM_JARS_DIR) so nothing is downloaded twice. These tests run as root
(as CI does); one runs the lab as a non-root user it creates.
"""

import json
import os
import pwd
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg2
import pytest

from rtm_lab import kafka, postgres, processes
from rtm_lab.paths import PROJECT_ROOT, jars_dir
from rtm_lab.waiting import wait_until

# Minutes of Spark or a browser: kept out of the fast loop (`pytest -m "not slow"`).
pytestmark = pytest.mark.slow

LAB_CLI = PROJECT_ROOT / "scripts" / "lab.py"
TEST_USER = "rtm-lab-test"


def run_lab(*args: str, env: dict[str, str], timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(LAB_CLI), *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def clean_env(lab_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KAFKA_BOOTSTRAP_SERVERS", "POSTGRES_DSN")}
    env.update(RTM_LAB_DIR=str(lab_dir), RTM_JARS_DIR=str(jars_dir()))
    return env


@pytest.fixture
def lab_env(tmp_path) -> dict[str, str]:
    # tmp_path sits in pytest's 0700 root-owned folder: as root this is the "clone under /root" case.
    env = clean_env(tmp_path / "lab")
    yield env
    run_lab("down", "--purge", env=env)


def state_of(lab_dir: Path) -> dict:
    return json.loads((lab_dir / "state.json").read_text())


def pids_of(lab_dir: Path) -> list[int]:
    state = state_of(lab_dir)
    return [state["kafka"]["pid"], state["postgres"]["pid"]]


def brokers(lab_dir: Path) -> list[int]:
    return processes.find(kafka.marker(lab_dir / "kafka"))


def postmasters(home: Path) -> list[int]:
    return processes.find(str(home / "data"))


def owner_of(pid: int) -> int:
    return os.stat(f"/proc/{pid}").st_uid


def test_two_ups_at_once_in_a_0700_root_folder_start_one_of_each_and_down_leaves_nothing(tmp_path):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)  # like /root or `mktemp -d`: the postgres user cannot enter it
    lab_dir = private / "a clone $(id)" / ".lab"  # a space and shell syntax in the path must do nothing special
    env = clean_env(lab_dir)
    try:
        ups = [
            subprocess.Popen(
                [sys.executable, str(LAB_CLI), "up"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            for _ in range(2)
        ]
        results = [up.communicate(timeout=300) for up in ups]
        assert [up.returncode for up in ups] == [0, 0], results
        said = "".join(err for _, err in results)
        assert said.count("kafka     starting") == 1 and said.count("postgres  starting") == 1, said
        assert said.count("already running") == 2, said

        kafka_pid, postgres_pid = pids_of(lab_dir)
        assert brokers(lab_dir) == [kafka_pid]
        # Everything the server writes lives in a fresh private folder outside the lab, and the messages say where.
        home = Path((lab_dir / postgres.HOME_POINTER).read_text().strip())
        assert home.parent == Path(tempfile.gettempdir()) and home.name.startswith(postgres.FALLBACK_PREFIX)
        info = os.lstat(home)
        assert stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o700
        assert info.st_uid == pwd.getpwnam("postgres").pw_uid
        assert postmasters(home) == [postgres_pid] and owner_of(postgres_pid) == info.st_uid
        assert f"log {home / 'postgres.log'}" in said
        assert "postgres.log" in (home / "postgres.log").name and (home / "postgres.log").stat().st_size > 0
        assert stat.S_IMODE((lab_dir / "state.json").stat().st_mode) == 0o600

        # The superuser is refused over TCP without a password; the lab role needs its password.
        port = state_of(lab_dir)["postgres"]["port"]
        with pytest.raises(psycopg2.OperationalError, match=r"pg_hba\.conf rejects connection"):
            psycopg2.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres", connect_timeout=5)
        with pytest.raises(psycopg2.OperationalError, match="no password supplied"):
            psycopg2.connect(host="127.0.0.1", port=port, user="rtm", dbname="rtm", connect_timeout=5)

        status = run_lab("status", env=env)
        assert status.returncode == 0 and status.stdout.count(" up ") == 2, status.stdout
        words = shlex.split(run_lab("env", env=env).stdout)
        exports = dict(word.split("=", 1) for word in words if word != "export")
        assert exports["KAFKA_BOOTSTRAP_SERVERS"] == f"127.0.0.1:{state_of(lab_dir)['kafka']['port']}"
        assert postgres.answers(exports["POSTGRES_DSN"])

        # A lost state file hides nothing: both services are found by their command lines and reported up.
        (lab_dir / "state.json").unlink()
        status = run_lab("status", env=env)
        assert status.returncode == 0 and f"pid {kafka_pid}" in status.stdout and f"pid {postgres_pid}" in status.stdout
        down = run_lab("down", env=env)
        assert down.returncode == 0, down.stderr
        assert not any(processes.is_alive(pid) for pid in (kafka_pid, postgres_pid))
        after = run_lab("status", env=env)
        assert after.returncode == 3 and after.stdout.count(" down") == 2
    finally:
        assert run_lab("down", "--purge", env=env).returncode == 0
    assert not home.exists()


def test_a_folder_the_postgres_user_can_enter_keeps_the_server_in_the_lab(lab):
    # Our own folder in /tmp, open to other users like a home folder is (no parent's mode is changed).
    base = Path(tempfile.mkdtemp(prefix="rtm-lab-open-"))
    base.chmod(0o755)
    env = clean_env(base / "lab")
    env["KAFKA_BOOTSTRAP_SERVERS"] = lab.kafka_bootstrap
    try:
        result = run_lab("up", env=env)
        assert result.returncode == 0, result.stderr
        home = base / "lab" / "postgres"
        assert not (base / "lab" / postgres.HOME_POINTER).exists()
        assert (
            stat.S_IMODE(os.lstat(home).st_mode) == 0o700 and os.lstat(home).st_uid == pwd.getpwnam("postgres").pw_uid
        )
        assert f"log {home / 'postgres.log'}" in result.stderr
        assert postmasters(home) == [pids_of(base / "lab")[1]]
    finally:
        assert run_lab("down", "--purge", env=env).returncode == 0
        shutil.rmtree(base)


@pytest.mark.parametrize("planted", ["symlink", "foreign-folder"])
def test_a_planted_fallback_folder_is_refused(lab_env, lab, planted):
    victim = Path(tempfile.mkdtemp(prefix="rtm-lab-victim-"))
    target = Path(tempfile.gettempdir()) / f"{postgres.FALLBACK_PREFIX}planted-{uuid.uuid4().hex[:8]}"
    if planted == "symlink":
        target.symlink_to(victim)
    else:
        target.mkdir(mode=0o755)  # root's, not the postgres user's, and open to all
    lab_dir = Path(lab_env["RTM_LAB_DIR"])
    lab_dir.mkdir(mode=0o700)
    (lab_dir / postgres.HOME_POINTER).write_text(f"{target}\n")
    lab_env["KAFKA_BOOTSTRAP_SERVERS"] = lab.kafka_bootstrap
    try:
        result = run_lab("up", env=lab_env)
        assert result.returncode == 2, result.stderr
        assert f"Refusing to use {target} as PostgreSQL's folder" in result.stderr
        assert ("a symlink" if planted == "symlink" else "owned by uid 0, not by postgres") in result.stderr
        assert "Traceback" not in result.stderr
        # Nothing was followed, chowned or written through the planted path.
        assert os.lstat(victim).st_uid == 0 and stat.S_IMODE(os.lstat(victim).st_mode) == 0o700
        assert list(victim.iterdir()) == []
        assert target.is_symlink() if planted == "symlink" else list(target.iterdir()) == []
    finally:
        target.unlink() if target.is_symlink() else target.rmdir()
        victim.rmdir()


def test_a_stale_pid_naming_another_process_survives_down(lab_env):
    unrelated = subprocess.Popen(["sleep", "300"])
    try:
        lab_dir = Path(lab_env["RTM_LAB_DIR"])
        lab_dir.mkdir(mode=0o700)
        # As after a reboot: the recorded pids now belong to something else.
        stale = {"pid": unrelated.pid, "port": 1, "address": "127.0.0.1:1", "started": "before-the-reboot"}
        (lab_dir / "state.json").write_text(
            json.dumps({"kafka": {"name": "kafka", **stale}, "postgres": {"name": "postgres", **stale}})
        )
        result = run_lab("down", env=lab_env)
        assert result.returncode == 0, result.stderr
        assert f"pid {unrelated.pid} in the state file is no longer this lab's broker; left alone" in result.stderr
        assert unrelated.poll() is None
        assert "down" in run_lab("status", env=lab_env).stdout
        assert unrelated.poll() is None
    finally:
        unrelated.kill()
        unrelated.wait()


def test_sigterm_during_up_stops_the_broker_it_had_started(lab_env, lab):
    lab_env["POSTGRES_DSN"] = lab.postgres_dsn
    lab_dir = Path(lab_env["RTM_LAB_DIR"])
    up = subprocess.Popen([sys.executable, str(LAB_CLI), "up"], env=lab_env, stderr=subprocess.PIPE, text=True)
    # The broker's pid is recorded as soon as it exists, before it answers.
    pid = wait_until(lambda: (lab_dir / "state.json").exists() and state_of(lab_dir)["kafka"]["pid"], 120, "the spawn")
    assert processes.is_alive(pid)
    time.sleep(1.0)  # into the readiness probe, where kafka-python's network loop used to swallow the signal
    up.send_signal(signal.SIGTERM)
    _, err = up.communicate(timeout=120)
    assert up.returncode == 128 + signal.SIGTERM, err
    assert "stopping what this run started: kafka" in err
    assert brokers(lab_dir) == [] and not processes.is_alive(pid)


def test_a_running_but_silent_broker_is_reported_and_never_stopped(lab_env, lab):
    lab_env["POSTGRES_DSN"] = lab.postgres_dsn
    lab_dir = Path(lab_env["RTM_LAB_DIR"])
    assert run_lab("up", env=lab_env).returncode == 0
    pid = pids_of(lab_dir)[0]
    os.kill(pid, signal.SIGSTOP)  # alive, but answers nothing: as a broker on a machine under heavy load
    try:
        lab_env["RTM_LAB_WAIT_S"] = "3"
        result = run_lab("up", env=lab_env)
        assert result.returncode == 2, result.stderr
        assert f"kafka (pid {pid}, started by this lab) runs but has not answered for 3s" in result.stderr
        assert "It was left running" in result.stderr
        assert processes.is_alive(pid) and state_of(lab_dir)["kafka"]["pid"] == pid
        status = run_lab("status", env=lab_env)
        assert status.returncode == 3 and f"pid {pid} (running but not answering)" in status.stdout
    finally:
        os.kill(pid, signal.SIGCONT)
    assert "already running" in run_lab("up", env=lab_env).stderr


AS_USER = """
import os, pwd, sys
# Everything the CLI imports is loaded now, as root: the user may not be able to read this checkout (a 0700 clone).
import base64, encodings.idna, re, stringprep, unicodedata, uuid
import kafka, kafka.admin, kafka.errors, psycopg2, psycopg2.extensions, tenacity
from rtm_lab import cli, errors, jars, java, kafka as _, lab, paths, ports, postgres, processes, signals, waiting
import rtm_lab.engines.flink, rtm_lab.monitoring.prometheus  # scripts/lab.py and lab.down's
import rtm_lab.snippet_jar, rtm_lab.spark_class_archive, rtm_lab.spark_conf  # scripts/lab.py's setup and env
jars.locked(_.GROUP)  # the jar lock file too
script, user, *args = sys.argv[1:]
code = compile(open(script).read(), script, "exec")
entry = pwd.getpwnam(user)
os.setgroups([])
os.setgid(entry.pw_gid)
os.setuid(entry.pw_uid)
os.environ.update(USER=user, LOGNAME=user)
sys.argv = [script, *args]
exec(code, {"__name__": "__main__", "__file__": script})
"""


def run_lab_as(user: str, *args: str, env: dict[str, str], timeout: float = 240) -> subprocess.CompletedProcess:
    """Run scripts/lab.py as `user`: started as root, it drops to the user before doing any work."""
    command = [sys.executable, "-c", AS_USER, str(LAB_CLI), user, *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, cwd="/")


def test_the_lab_runs_as_a_non_root_user_and_leaves_others_processes_alone(tmp_path):
    try:
        entry = pwd.getpwnam(TEST_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", TEST_USER], check=True
        )
        entry = pwd.getpwnam(TEST_USER)
    base = Path(tempfile.mkdtemp(prefix="rtm-lab-user-"))  # the user's own folder, 0700
    shutil.copytree(jars_dir() / kafka.GROUP, base / "jars" / kafka.GROUP)
    for path in [base, *base.rglob("*")]:
        os.chown(path, entry.pw_uid, entry.pw_gid, follow_symlinks=False)
    env = clean_env(base / "lab")
    env.update(RTM_JARS_DIR=str(base / "jars"), HOME=str(base))
    unrelated = subprocess.Popen(["sleep", "300"])  # root's: the user's lab must not try to signal it
    try:
        result = run_lab_as(TEST_USER, "up", env=env)
        assert result.returncode == 0, result.stderr
        kafka_pid, postgres_pid = pids_of(base / "lab")
        home = base / "lab" / "postgres"
        assert owner_of(kafka_pid) == owner_of(postgres_pid) == entry.pw_uid
        assert os.lstat(home).st_uid == entry.pw_uid and stat.S_IMODE(os.lstat(home).st_mode) == 0o700
        assert postmasters(home) == [postgres_pid]
        # The superuser is the user themselves (peer, over the socket only) and is refused over TCP.
        port = state_of(base / "lab")["postgres"]["port"]
        with pytest.raises(psycopg2.OperationalError, match=r"pg_hba\.conf rejects connection"):
            psycopg2.connect(host="127.0.0.1", port=port, user=TEST_USER, dbname="postgres", connect_timeout=5)

        state = state_of(base / "lab")
        state["kafka"].update(pid=unrelated.pid, started="stale")
        (base / "lab" / "state.json").write_text(json.dumps(state))
        down = run_lab_as(TEST_USER, "down", "--purge", env=env)
        assert down.returncode == 0, down.stderr
        assert "Traceback" not in down.stderr and "left alone" in down.stderr
        assert unrelated.poll() is None
        assert not processes.is_alive(kafka_pid) and not processes.is_alive(postgres_pid)
    finally:
        run_lab("down", "--purge", env=env)  # as root, in case the user's `down` failed
        unrelated.kill()
        unrelated.wait()
        shutil.rmtree(base)
        shutil.rmtree(Path(tempfile.gettempdir()) / f"hsperfdata_{TEST_USER}", ignore_errors=True)  # `java -version`'s


def test_status_reports_a_dead_broker_as_down(lab_env, lab):
    # Kafka from this lab, Postgres from the shared one: only the broker is started here.
    lab_env["POSTGRES_DSN"] = lab.postgres_dsn
    assert run_lab("up", env=lab_env).returncode == 0
    kafka_pid = pids_of(Path(lab_env["RTM_LAB_DIR"]))[0]
    try:
        processes.stop(kafka_pid, timeout=20)
        status = run_lab("status", env=lab_env)
        assert status.returncode == 3
        assert "kafka     down" in status.stdout
        assert "postgres  up    postgresql://rtm:***@" in status.stdout  # external, password hidden
    finally:
        run_lab("down", env=lab_env)


def test_external_services_are_used_and_never_started(lab_env, lab):
    lab_env.update(KAFKA_BOOTSTRAP_SERVERS=lab.kafka_bootstrap, POSTGRES_DSN=lab.postgres_dsn)
    result = run_lab("up", env=lab_env)
    assert result.returncode == 0, result.stderr
    assert "starting" not in result.stderr
    assert result.stdout.count("external") == 2
    # An external DSN may carry a password: it is never written to disk or printed.
    assert lab.postgres_dsn not in (Path(lab_env["RTM_LAB_DIR"]) / "state.json").read_text()
    assert lab.postgres_dsn not in result.stdout + result.stderr


def test_status_hides_the_password_of_a_key_value_dsn(lab_env, lab):
    port = lab.postgres.port
    lab_env.update(
        KAFKA_BOOTSTRAP_SERVERS=lab.kafka_bootstrap,
        POSTGRES_DSN=f"host=127.0.0.1 port={port} user=rtm password={postgres.PASSWORD} dbname=rtm",
    )
    status = run_lab("status", env=lab_env)
    assert status.returncode == 0, status.stdout
    assert f"host=127.0.0.1 port={port} user=rtm password=*** dbname=rtm" in status.stdout
    assert f"password={postgres.PASSWORD}" not in status.stdout + status.stderr


def test_external_kafka_that_does_not_answer_is_reported(lab_env):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    lab_env["KAFKA_BOOTSTRAP_SERVERS"] = f"127.0.0.1:{port}"
    result = run_lab("up", env=lab_env)
    assert result.returncode == 2
    assert f"KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:{port} does not answer" in result.stderr


def test_taken_port_is_refused_with_advice(lab_env):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        lab_env["RTM_LAB_KAFKA_PORT"] = str(port)
        result = run_lab("up", env=lab_env)
    assert result.returncode == 2
    assert f"Port {port} on 127.0.0.1 (from RTM_LAB_KAFKA_PORT) is already in use" in result.stderr
    assert "unset RTM_LAB_KAFKA_PORT" in result.stderr


def test_broker_dying_during_start_shows_its_log(lab_env, lab):
    lab_env.update(POSTGRES_DSN=lab.postgres_dsn, RTM_KAFKA_HEAP="not-a-size")
    result = run_lab("up", env=lab_env)
    assert result.returncode == 2
    assert "The Kafka broker exited during start-up" in result.stderr
    assert "Invalid maximum heap size" in result.stderr
    assert "kafka     down" in run_lab("status", env=lab_env).stdout


def test_missing_postgres_binaries_name_the_package(lab_env, lab, tmp_path):
    lab_env.update(KAFKA_BOOTSTRAP_SERVERS=lab.kafka_bootstrap, RTM_PG_BIN=str(tmp_path / "no-postgres-here"))
    result = run_lab("up", env=lab_env)
    assert result.returncode == 2
    assert "does not hold the PostgreSQL server binaries" in result.stderr
    assert "apt-get install postgresql" in result.stderr


def test_unreachable_maven_lists_coordinates_and_offline_route(lab_env, tmp_path):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    lab_env.update(
        RTM_JARS_DIR=str(tmp_path / "empty-jars"),
        RTM_MAVEN_URL=f"http://127.0.0.1:{port}/maven2",
        HOME=str(tmp_path),  # no ~/.m2 to fall back on
        POSTGRES_DSN="postgresql://unused@127.0.0.1:1/x",
    )
    result = run_lab("setup", env=lab_env, timeout=120)
    assert result.returncode == 2
    assert "Could not fetch" in result.stderr
    assert "org.apache.kafka:kafka_2.13:" in result.stderr
    assert "To supply them offline, copy these files into" in result.stderr


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        (None, "JAVA_HOME="),
        ("echo 'openjdk version \"11.0.22\" 2024-01-16' >&2", "is Java 11; Spark 4 and Kafka 4 need Java 17+"),
    ],
    ids=["java-missing", "java-too-old"],
)
def test_java_problems_say_what_to_install(lab_env, tmp_path, script, expected):
    java_home = tmp_path / "jdk"
    if script is not None:
        (java_home / "bin").mkdir(parents=True)
        fake = java_home / "bin" / "java"
        fake.write_text(f"#!/bin/sh\n{script}\n")
        fake.chmod(0o755)
    lab_env["JAVA_HOME"] = str(java_home)
    result = run_lab("setup", env=lab_env)
    assert result.returncode == 2
    assert expected in result.stderr
    assert "Install Java 17 or newer" in result.stderr


def test_env_exports_a_spark_conf_dir_whose_defaults_put_the_pinned_connector_on_spark_jars(lab_env):
    """What lets a plain `SparkSession.builder` (the quick start's command line) find Kafka: the end-to-end run is
    tests/get_started/test_tutorial.py."""
    from rtm_lab import jars

    result = run_lab("env", env=lab_env)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    words = shlex.split(result.stdout)
    exports = dict(word.split("=", 1) for word in words if word != "export")
    conf = Path(exports["SPARK_CONF_DIR"])
    assert conf == Path(lab_env["RTM_LAB_DIR"]) / "spark-conf"
    settings = [line.split(None, 1) for line in (conf / "spark-defaults.conf").read_text().splitlines()]
    settings = [pair for pair in settings if not pair[0].startswith("#")]
    assert [key for key, _ in settings] == ["spark.jars"]
    listed = [Path(path) for path in settings[0][1].split(",")]
    locked = jars.locked("spark-kafka-connector")
    assert [path.name for path in listed] == [jar.file_name for jar in locked]
    assert all(path.is_file() and path.parent == jars_dir() / "spark-kafka-connector" for path in listed)


def test_env_without_the_connector_jars_says_to_run_setup_and_still_exports_the_rest(lab_env, tmp_path):
    lab_env["RTM_JARS_DIR"] = str(tmp_path / "no-jars")
    lab_env["KAFKA_BOOTSTRAP_SERVERS"] = "127.0.0.1:1"  # `env` only prints it: nothing is started or contacted
    result = run_lab("env", env=lab_env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "export KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:1"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("SPARK_CONF_DIR not exported:"), result.stderr
    assert "run `python scripts/lab.py setup` first" in lines[0]

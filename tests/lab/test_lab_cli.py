"""`scripts/lab.py`: idempotent up, truthful status, clean down, and errors that say what to do.

Each test runs the CLI in a subprocess against its own lab folder (RTM_LAB_DIR), so the shared lab the other
tests use is never touched. Jars come from the shared cache (RTM_JARS_DIR) so nothing is downloaded twice.
"""

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from rtm_lab import processes
from rtm_lab.paths import PROJECT_ROOT, jars_dir

LAB_CLI = PROJECT_ROOT / "scripts" / "lab.py"


def run_lab(*args: str, env: dict[str, str], timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(LAB_CLI), *args], env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def lab_env(tmp_path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KAFKA_BOOTSTRAP_SERVERS", "POSTGRES_DSN")}
    env.update(RTM_LAB_DIR=str(tmp_path / "lab"), RTM_JARS_DIR=str(jars_dir()))
    # Postgres, started as root, runs as the postgres user: that user must be able to enter the lab folder.
    for parent in [tmp_path, *tmp_path.parents]:
        if parent == Path("/"):
            break
        parent.chmod(parent.stat().st_mode | stat.S_IXOTH)
    return env


def pids_of(lab_dir: Path) -> list[int]:
    import json

    state = json.loads((lab_dir / "state.json").read_text())
    return [state["kafka"]["pid"], state["postgres"]["pid"]]


def test_up_twice_status_down_leaves_no_process(lab_env):
    first = run_lab("up", env=lab_env)
    assert first.returncode == 0, first.stderr
    assert "kafka     ready" in first.stderr and "postgres  ready" in first.stderr
    pids = pids_of(Path(lab_env["RTM_LAB_DIR"]))
    try:
        second = run_lab("up", env=lab_env)
        assert second.returncode == 0, second.stderr
        assert "already running" in second.stderr
        assert pids_of(Path(lab_env["RTM_LAB_DIR"])) == pids

        status = run_lab("status", env=lab_env)
        assert status.returncode == 0
        assert status.stdout.count(" up ") == 2, status.stdout

        exports = run_lab("env", env=lab_env).stdout
        assert "export KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:" in exports
        assert "export POSTGRES_DSN='postgresql://" in exports
    finally:
        down = run_lab("down", env=lab_env)
    assert down.returncode == 0, down.stderr
    assert not any(processes.is_alive(pid) for pid in pids)
    after = run_lab("status", env=lab_env)
    assert after.returncode == 3
    assert after.stdout.count(" down") == 2


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

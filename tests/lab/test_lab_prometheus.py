"""`lab.py up --with prometheus`: a Prometheus server on loopback, a free port, state in the lab folder, found again
by `up`, exported by `env`, stopped by `down` after the same identity check as Kafka's and PostgreSQL's.

Each test runs the CLI against a lab folder of its own, with the session lab's Kafka and PostgreSQL given as external
services (so only Prometheus starts), and the binaries the session lab already unpacked (RTM_PROMETHEUS_BIN).
"""

import json
import os
import subprocess

import pytest
from own_lab import lab_cli, own_lab_folder
from test_loopback import listening, on_loopback

from rtm_lab import processes
from rtm_lab.monitoring import prometheus

pytestmark = pytest.mark.slow  # a Prometheus start and stop, a few seconds


@pytest.fixture
def own_lab(lab, tmp_path):
    with own_lab_folder(lab, tmp_path, RTM_PROMETHEUS_BIN=str(prometheus.ensure_binaries())) as found:
        yield found


def test_up_with_prometheus_runs_it_on_loopback_and_down_stops_it(own_lab):
    env, lab_dir = own_lab
    result = lab_cli("up", "--with", "prometheus", env=env)
    assert result.returncode == 0, result.stderr
    state = json.loads((lab_dir / "state.json").read_text())["prometheus"]
    pid, port = state["pid"], state["port"]
    assert f"prometheus up    http://127.0.0.1:{port} pid {pid}" in result.stdout
    marker = f"--config.file={lab_dir / 'prometheus' / 'prometheus.yml'}"
    assert processes.is_ours(pid, state["started"], marker)
    sockets = listening([pid])
    assert port in {p for *_, p in sockets}, sockets
    assert [s for s in sockets if not on_loopback(s[2])] == [], sockets
    assert f"export PROMETHEUS_URL=http://127.0.0.1:{port}" in lab_cli("env", env=env).stdout

    again = lab_cli("up", "--with", "prometheus", env=env)
    assert (
        again.returncode == 0 and f"prometheus already running at http://127.0.0.1:{port} (pid {pid})" in again.stderr
    )

    down = lab_cli("down", env=env)
    assert down.returncode == 0, down.stderr
    assert not processes.is_alive(pid)
    assert processes.find(marker) == []


def test_down_leaves_a_stale_recorded_pid_alone(own_lab):
    env, lab_dir = own_lab
    assert lab_cli("up", "--with", "prometheus", env=env).returncode == 0
    state_file = lab_dir / "state.json"
    state = json.loads(state_file.read_text())
    real = state["prometheus"]["pid"]
    # The state file now names another live process (as a reused pid would): not the lab's, never signalled.
    other = subprocess.Popen(["sleep", "60"])
    try:
        state["prometheus"].update(pid=other.pid, started=processes.start_time(other.pid))
        state_file.write_text(json.dumps(state))
        down = lab_cli("down", env=env)
        assert down.returncode == 0, down.stderr
        assert f"prometheus pid {other.pid} in the state file is no longer this lab's server; left alone" in down.stderr
        assert other.poll() is None  # still running
        assert not processes.is_alive(real)  # the lab's own server, found by its command line, is stopped
    finally:
        other.kill()
        other.wait()


def test_an_unknown_optional_service_is_refused():
    result = lab_cli("up", "--with", "grafana", env=dict(os.environ))
    assert result.returncode == 2
    assert "invalid choice: 'grafana'" in result.stderr

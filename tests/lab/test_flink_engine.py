"""The Flink venv is reused only while its pins are unchanged, and `lab.py down` stops a left-over PyFlink program
by its identity (its --tmp-dir under the lab's flink/ folder), never a process that merely looks like one."""

import os
import subprocess
import sys

import pytest

from rtm_lab import processes
from rtm_lab.engines import flink
from rtm_lab.paths import PROJECT_ROOT


def test_the_flink_venv_is_reused_only_with_the_same_pins(tmp_path, monkeypatch):
    venv = tmp_path / "venv"
    monkeypatch.setenv("RTM_FLINK_VENV", str(venv))
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    assert not flink._is_current(venv)  # no pins marker: a half-built venv
    (venv / flink.PINS_MARKER).write_text(flink.pins_hash() + "\n")
    assert flink._is_current(venv)

    def no_build(*args, **kwargs):
        raise AssertionError(f"rebuilt a current venv: {args}")

    monkeypatch.setattr(subprocess, "run", no_build)
    assert flink.ensure_venv() == venv / "bin" / "python"

    changed = tmp_path / "flink-requirements.txt"
    changed.write_text(flink.REQUIREMENTS.read_text().replace("apache-flink==", "apache-flink==9"))
    monkeypatch.setattr(flink, "REQUIREMENTS", changed)
    assert not flink._is_current(venv)  # a pin changed: the next ensure_venv() rebuilds


def test_stop_leftovers_stops_the_labs_flink_program_and_leaves_a_lookalike(tmp_path, monkeypatch):
    monkeypatch.setenv("RTM_LAB_DIR", str(tmp_path / "lab"))
    marker = tmp_path / "lab" / "flink" / "run1" / "tmp"
    marker.mkdir(parents=True)
    sleeper = [sys.executable, "-c", "import time; time.sleep(120)", "--tmp-dir"]
    ours = processes.spawn([*sleeper, str(marker)], tmp_path / "ours.log")
    lookalike = processes.spawn([*sleeper, f"{marker}-not-the-lab"], tmp_path / "other.log")
    try:
        said: list[str] = []
        flink.stop_leftovers(log=said.append)
        assert not processes.is_alive(ours)
        assert processes.is_alive(lookalike)
        assert said == [f"flink     stopping a PyFlink program left running (pid {ours})"]
    finally:
        for pid in (ours, lookalike):
            processes.stop(pid)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["run", "count", "only-a-source"], "three words per pipeline"),
        (["run", "bogus", "in", "out"], "unknown pipeline 'bogus'"),
        (["run", "--parallelism", "0", "count", "in", "out"], "at least 1"),
    ],
)
def test_flink_cli_refuses_bad_input_on_one_line(args, expected, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"} | {"RTM_LAB_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "scripts" / "flink.py"), *args],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and expected in lines[0], done.stderr
    assert not (tmp_path / "flink").exists()  # nothing started

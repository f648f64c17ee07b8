"""rtm_lab.cpu_pinning on real processes: taskset pins what it starts and what runs, /proc/stat gives each core."""

import os
import subprocess
import sys
import time

import pytest

from rtm_lab import cpu_pinning
from rtm_lab.errors import LabError

pytestmark = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="pinning apart needs two cores")


def test_a_started_process_runs_on_the_cores_given_and_can_be_moved_and_freed():
    child = subprocess.Popen(cpu_pinning.pinned_argv([sys.executable, "-c", "import time; time.sleep(5)"], {1}))
    try:
        time.sleep(0.3)
        assert cpu_pinning.cores_of(child.pid) == {1}
        cpu_pinning.pin(child.pid, {0})
        assert cpu_pinning.cores_of(child.pid) == {0}
        cpu_pinning.unpin(child.pid)
        assert cpu_pinning.cores_of(child.pid) == set(range(os.cpu_count() or 1))
    finally:
        child.kill()
        child.wait()


def test_a_core_the_machine_lacks_is_refused():
    with pytest.raises(LabError, match="not all on this machine"):
        cpu_pinning.pinned_argv(["true"], {4096})


def test_a_busy_core_reads_busier_than_its_own_idle_baseline():
    window = cpu_pinning.CoreWindow()
    spinner = subprocess.Popen(cpu_pinning.pinned_argv([sys.executable, "-c", "while True: pass"], {0}))
    try:
        time.sleep(1.5)
        busy = window.busy()
    finally:
        spinner.kill()
        spinner.wait()
    assert set(busy) == set(range(os.cpu_count() or 1))
    assert all(0.0 <= share <= 1.0 for share in busy.values())
    assert busy[0] >= 0.5  # one process spinning on core 0 for the whole window, whatever else runs

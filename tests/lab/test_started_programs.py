"""`processes.Started` asks waitpid first about the lab's own child: /proc's checks (`is_ours`) once called a running
Flink program gone under load, which failed a test at once and left the program running past its `stop()`."""

import sys
import time

from rtm_lab import processes


def test_a_child_is_running_stopped_and_reported_by_waitpid_even_when_proc_does_not_match(tmp_path):
    log = tmp_path / "child.log"
    pid = processes.spawn([sys.executable, "-c", "import time; time.sleep(60)"], log)
    # A marker the child does not carry and a wrong start time: is_ours says no, as it did for the Flink program.
    child = processes.Started(pid, "not-its-start-time", "--no-such-argument", tmp_path, log)
    try:
        assert not processes.is_ours(pid, child.started, child.marker)
        assert child.running()
        assert child.stop() and not processes.is_alive(pid)
        assert not child.running() and child.how_it_ended() == "stopped by the lab"
    finally:
        processes.stop(pid, timeout=5.0)  # a failed assertion must not leave the sleeper behind


def test_an_exit_code_is_kept_once_reaped(tmp_path):
    log = tmp_path / "child.log"
    pid = processes.spawn([sys.executable, "-c", "raise SystemExit(3)"], log)
    child = processes.Started(pid, processes.start_time(pid), sys.executable, tmp_path, log)
    deadline = time.monotonic() + 30
    while child.running() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child.how_it_ended() == "exit code 3"
    assert child.how_it_ended() == "exit code 3"  # asked twice: the reaped status is kept, not lost


def test_a_process_that_is_not_our_child_falls_back_to_proc(tmp_path):
    # pid 1 is never our child: waitpid cannot answer, so is_ours decides (its marker is not ours: not running).
    other = processes.Started(1, processes.start_time(1), "--no-such-argument", tmp_path, tmp_path / "none.log")
    assert not other.running()
    assert other.how_it_ended() == "exit status unknown: not a child of this process"

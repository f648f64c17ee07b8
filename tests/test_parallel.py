"""tests/parallel.py, the rules the workers share one lab by: units kept whole, longest first, an `alone` test run
while no other test runs, and a `timing` test first in line for the CPU (tests/cpu_priority.py), or alone where a
worker cannot have a cgroup of its own."""

import fcntl
import os
import signal
import subprocess
import sys
import textwrap

import cpu_priority
import parallel
import pytest

from rtm_lab.paths import PROJECT_ROOT
from rtm_lab.waiting import wait_until


def test_every_grouped_or_ranked_module_exists():
    modules = [module for group in parallel.GROUPS.values() for module in group]
    ranked = [unit for unit in parallel.LONGEST_FIRST if unit not in parallel.GROUPS]
    assert [m for m in modules + ranked if not (PROJECT_ROOT / m).is_file()] == []


class Item:
    def __init__(self, nodeid: str):
        self.nodeid, self.fixturenames = nodeid, ["lab"]


def test_units_stay_whole_and_the_longest_go_first():
    ids = [
        "tests/a/test_x.py::test_1",
        "tests/guides/test_monitoring.py::test_1",
        "tests/a/test_x.py::test_2",
        "tests/benchmarks/test_latency.py::test_1",
        "tests/lab/test_loopback.py::test_1",
        "tests/guides/test_cluster.py::test_1",
    ]
    items = [Item(nodeid) for nodeid in ids]
    parallel.order(items)  # type: ignore[arg-type]
    assert [item.nodeid for item in items] == [
        "tests/guides/test_cluster.py::test_1",
        "tests/guides/test_monitoring.py::test_1",
        "tests/lab/test_loopback.py::test_1",
        "tests/benchmarks/test_latency.py::test_1",
        "tests/a/test_x.py::test_1",
        "tests/a/test_x.py::test_2",
    ]


def test_a_module_using_the_cluster_outside_its_group_is_refused():
    item = Item("tests/a/test_x.py::test_1")
    item.fixturenames.append("standalone_cluster")
    with pytest.raises(pytest.UsageError, match=r"add its module to GROUPS\['cluster'\]"):
        parallel.order([item])  # type: ignore[list-item]


# One test's turn in a process of its own (as a worker is): prints when it holds the lock and when it lets go.
TURN = textwrap.dedent("""
    import sys, time
    import parallel

    class Config:
        workerinput = {"workerid": sys.argv[1]}

    kind, hold = sys.argv[2], float(sys.argv[3])
    if kind.endswith("+cpu"):  # a worker in its own cgroup, as parallel.configure puts it where it can
        kind = kind.removesuffix("+cpu")
        parallel.cpu_priority.join(parallel.run_dir(), sys.argv[1])
        parallel._priority["joined"] = True

    class Item:
        config = Config()
        fixturenames = [parallel.QUIET_LATER] if kind == "quiet" else []
        def get_closest_marker(self, name):
            return object() if name == kind or (kind == "quiet" and name == "timing") else None

    with parallel.turn(Item()):
        print("in", time.monotonic(), flush=True)
        if kind == "timing" and parallel._priority["joined"]:  # the other worker's weight while it is first for the CPU
            for group in parallel.cpu_priority.base(parallel.run_dir()).iterdir():
                if group.is_dir() and group.name != sys.argv[1]:
                    print("others", (group / "cpu.shares").read_text().strip(), flush=True)
        if kind == "quiet":  # shares for the first half, then asks for the machine
            time.sleep(hold / 2)
            with parallel.quiet_from_here(Item()):
                print("quiet_in", time.monotonic(), flush=True)
                time.sleep(hold / 2)
                print("quiet_out", time.monotonic(), flush=True)
        else:
            time.sleep(hold)
        print("out", time.monotonic(), flush=True)
""")


def _turn(run_dir, worker: str, kind: str, hold_s: float) -> subprocess.Popen:
    env = {"PYTHONPATH": str(PROJECT_ROOT / "tests"), parallel.RUN_DIR: str(run_dir), "PATH": "/usr/bin:/bin"}
    args = [sys.executable, "-c", TURN, worker, kind, str(hold_s)]
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, text=True)


def _marks(proc: subprocess.Popen) -> dict[str, float]:
    out, _ = proc.communicate(timeout=30)
    return {name: float(at) for name, at in (line.split() for line in out.splitlines())}


def _first_mark(proc: subprocess.Popen, name: str) -> float:
    """Wait for the turn's first line, which must be `name`; _marks reads the rest."""
    assert proc.stdout is not None
    mark, at = proc.stdout.readline().split()
    assert mark == name, mark
    return float(at)


def _gate_held(run_dir) -> bool:
    """Whether a turn holds the gate: one waiting for the test lock (an alone turn while others run) does."""
    fd = os.open(run_dir / "gate", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing lets go of the lock if it was taken
    return False


def _span(proc: subprocess.Popen) -> tuple[float, float]:
    marks = _marks(proc)
    return marks["in"], marks["out"]


# The turns' processes have no cgroup of their own here (they do not pass "+cpu"): a timing turn runs alone, as it
# does where the cgroup controller is not writable.
@pytest.mark.parametrize("marker", parallel.ALONE_MARKERS)
def test_shared_turns_overlap_and_an_alone_turn_overlaps_none(tmp_path, marker):
    # Held 3 s each: two Python starts on a busy machine stay well inside that.
    first, second = _turn(tmp_path, "gw0", "shared", 3.0), _turn(tmp_path, "gw1", "shared", 3.0)
    (a_in, a_out), (b_in, b_out) = _span(first), _span(second)
    assert max(a_in, b_in) < min(a_out, b_out)  # two ordinary tests run side by side

    # Each next turn starts once the one before has got as far as it should (a Python start on a busy machine can
    # take longer than any fixed sleep): the running turn is in, then the alone turn waits at the gate.
    running = _turn(tmp_path, "gw0", "shared", 2.0)
    r_in = _first_mark(running, "in")
    alone = _turn(tmp_path, "gw1", marker, 1.0)
    wait_until(lambda: _gate_held(tmp_path), 30, "the alone turn to wait at the gate", interval_s=0.02)
    later = _turn(tmp_path, "gw0", "shared", 0.1)  # asks after the alone test: it waits for it, not overtakes it
    r_out, (x_in, x_out), (l_in, _) = _marks(running)["out"], _span(alone), _span(later)
    assert r_in <= r_out <= x_in and x_out <= l_in


def test_a_quiet_machine_test_shares_until_it_asks_and_then_overlaps_no_turn(tmp_path):
    quiet = _turn(tmp_path, "gw0", "quiet", 8.0)  # shares for 4 s, then alone for 4 s
    assert quiet.stdout is not None
    marks = {}

    def next_mark(name: str) -> None:  # read the quiet turn's output up to its line `name`
        while name not in marks:
            mark, at = quiet.stdout.readline().split()
            marks[mark] = float(at)

    next_mark("in")
    b_in, b_out = _span(_turn(tmp_path, "gw1", "shared", 0.5))  # asks while the quiet test still shares
    next_mark("quiet_in")
    later = _turn(tmp_path, "gw1", "shared", 0.1)  # asks while the quiet test is alone
    l_in, l_out = _span(later)
    next_mark("out")
    quiet.wait(timeout=30)
    assert marks["in"] < b_in and b_out < marks["quiet_in"]  # ran beside it before it asked
    assert l_in >= marks["quiet_out"], (marks, l_in, l_out)  # asked during the quiet block, so waited for its end


def test_a_timing_turn_runs_beside_shared_turns_first_for_the_cpu_and_never_beside_another(tmp_path):
    if not cpu_priority.available():  # not root, or no cgroup v1 `cpu` controller: it runs alone instead

        class Timing:
            def get_closest_marker(self, name):
                return object() if name == "timing" else None

        assert parallel.mode(Timing()) == parallel.ALONE  # type: ignore[arg-type]
        return
    try:
        running = _turn(tmp_path, "gw0", "shared+cpu", 3.0)
        _first_mark(running, "in")
        timing = _turn(tmp_path, "gw1", "timing+cpu", 1.0)
        run, marks = _marks(running), _marks(timing)
        assert marks["in"] < run["out"]  # it did not wait for the shared turn to end
        assert marks["others"] == float(cpu_priority.LOW_SHARES)  # the other worker's group yielded meanwhile
        shares = cpu_priority.base(tmp_path) / "gw0" / "cpu.shares"
        assert shares.read_text().strip() == str(cpu_priority.NORMAL_SHARES)  # and has its weight back

        first = _turn(tmp_path, "gw0", "timing+cpu", 2.0)
        _first_mark(first, "in")
        second = _turn(tmp_path, "gw1", "timing+cpu", 0.5)
        a_out, (b_in, _) = _marks(first)["out"], _span(second)
        assert a_out <= b_in  # one timing turn at a time
    finally:
        cpu_priority.remove(tmp_path)


# A worker's stand-in: joins its group, starts a child (as a worker starts the lab's broker), prints both pids, waits.
MEMBER = textwrap.dedent("""
    import subprocess, sys, time
    from pathlib import Path
    import cpu_priority

    cpu_priority.join(Path(sys.argv[1]), sys.argv[2])
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    print(child.pid, flush=True)
    time.sleep(60)
""")


def test_the_shared_services_leave_the_yielding_group_and_the_weight_comes_back(tmp_path):
    if not cpu_priority.available():
        return  # what replaces it (the timing test runs alone) is the test above's first branch
    env = {"PYTHONPATH": str(PROJECT_ROOT / "tests"), "PATH": "/usr/bin:/bin"}
    member = subprocess.Popen([sys.executable, "-c", MEMBER, str(tmp_path), "gw9"], env=env, stdout=subprocess.PIPE)
    service = None
    try:
        assert member.stdout is not None
        service = int(member.stdout.readline())
        group = f"/{cpu_priority.base(tmp_path).name}/gw9"
        assert cpu_priority.group_of(member.pid) == cpu_priority.group_of(service) == group
        with cpu_priority.others_yield(tmp_path, "gw0", shared=[service]):
            assert (cpu_priority.base(tmp_path) / "gw9" / "cpu.shares").read_text().strip() == "2"
            assert cpu_priority.group_of(service) == "/" and cpu_priority.group_of(member.pid) == group
        assert (cpu_priority.base(tmp_path) / "gw9" / "cpu.shares").read_text().strip() == "1024"
    finally:
        member.kill()
        member.wait()
        if service is not None:
            os.kill(service, signal.SIGKILL)
        cpu_priority.remove(tmp_path)
        assert not cpu_priority.base(tmp_path).exists()

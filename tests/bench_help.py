"""`scripts/bench.py SUBCOMMAND --help` in the test's own process: the entry script's wiring, without starting an
interpreter (a benchmark's tests stay within a second or two)."""

import runpy

import pytest

from rtm_lab.paths import PROJECT_ROOT


def bench_help(command: str, capsys) -> str:
    """The help `bench.py COMMAND --help` prints (it exits 0)."""
    namespace = runpy.run_path(str(PROJECT_ROOT / "scripts" / "bench.py"))
    with pytest.raises(SystemExit) as done:
        namespace["parse_args"]([command, "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out

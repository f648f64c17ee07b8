"""`scripts/bench.py --help` lists every benchmark: argparse formats each summary with `%`, so one stray percent sign
breaks the whole list (a subcommand's own --help does not show it)."""

import runpy

import pytest

from rtm_lab.paths import PROJECT_ROOT


def test_the_top_level_help_lists_every_benchmark(capsys):
    namespace = runpy.run_path(str(PROJECT_ROOT / "scripts" / "bench.py"))
    with pytest.raises(SystemExit) as done:
        namespace["parse_args"](["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    names = [name for name, _, _ in namespace["BENCHMARKS"]]
    assert len(names) >= 10
    assert all(name in out for name in names), [name for name in names if name not in out]

"""scripts/prose.py as a user meets it: --help, and a bad page named on one line with exit 2."""

import subprocess
import sys

from rtm_lab.paths import PROJECT_ROOT


def run(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(PROJECT_ROOT / "scripts" / "prose.py"), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=PROJECT_ROOT)


def test_help_lists_every_command():
    result = run("--help")
    assert result.returncode == 0
    for command in ("check", "figures", "terms", "report", "ratchet", "sentences"):
        assert f"prose.py {command}" in result.stdout


def test_an_unknown_page_is_one_line_and_exit_2():
    result = run("report", "no-such-page.md")
    assert result.returncode == 2
    assert result.stderr.startswith("error: no page 'no-such-page.md' under docs/")
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_report_shows_a_page_with_its_figures():
    result = run("report", "glossary.md")
    assert result.returncode == 0
    assert result.stdout.splitlines()[1].startswith("glossary.md")

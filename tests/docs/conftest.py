"""The built site (one strict build per test run) and the code-block tallies the docs tests report at the end."""

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from rtm_lab.paths import PROJECT_ROOT

EXAMPLE_COUNTS = pytest.StashKey[Counter]()


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> Path:
    """`mkdocs build --strict` into a temp folder; the build log is in the failure message when it breaks."""
    site = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=PROJECT_ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=180,
    )
    if result.returncode != 0:
        pytest.fail(f"mkdocs build --strict failed:\n{result.stderr[-6000:]}", pytrace=False)
    return site


@pytest.fixture(scope="session")
def example_counts(request) -> Counter:
    """Tallies of the Python blocks seen (checked / run / marked / included), printed at the end of the run."""
    return request.config.stash.setdefault(EXAMPLE_COUNTS, Counter())


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    counts = config.stash.get(EXAMPLE_COUNTS, None)
    if not counts:
        return
    terminalreporter.write_sep("-", "Python blocks in docs/ and skills/")
    terminalreporter.write_line(
        f"{counts['checked']} checked with ruff, {counts['run']} run, {counts['marked']} marked not-run with a reason, "
        f"{counts['included']} included from snippet files (run by their tests), "
        f"{counts['skill']} in skills/ (rendered from snippets, linted)"
    )

"""The pages' proof lines, checked against the run: every test a page names must exist, and in a full run it must
have run and passed, not been skipped.

A page names tests as backticked pytest node ids, `tests/path.py::test_name` (optionally `[case]`) or a whole file
`tests/path.py`, on its "Verified by" lines, in its tables and in generated tables it includes. conftest.py feeds this
module the outcome of every test of the run and, at the end of a full run, fails the run with one line per broken
reference. A run that selects tests (paths, `-k`, `-m`, such as the fast loop `-m "not slow"`) skips the check:
what it did not select did not run by design.
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from rtm_lab.paths import PROJECT_ROOT

DOCS = PROJECT_ROOT / "docs"
REFERENCE = re.compile(r"`(tests/[\w./-]+\.py(?:::[\w]+(?:\[[^\]`]*\])?)?)`")

PASSED, SKIPPED, FAILED = "passed", "skipped", "failed"


@dataclass(frozen=True)
class Reference:
    page: str  # relative to the repository root
    target: str  # tests/path.py or tests/path.py::name or tests/path.py::name[case]


def references(docs: Path = DOCS) -> list[Reference]:
    """Every test reference in the docs pages (generated tables included), once per page."""
    found = []
    for page in sorted(docs.rglob("*.md")):
        rel = page.relative_to(docs.parent).as_posix()
        for target in dict.fromkeys(REFERENCE.findall(page.read_text())):
            found.append(Reference(rel, target))
    return found


def _matches(target: str, nodeid: str) -> bool:
    if "::" not in target:
        return nodeid.startswith(target + "::")
    return nodeid == target or (nodeid.startswith(target + "[") and "[" not in target)


def problems(refs: Iterable[Reference], outcomes: dict[str, str], collected: Iterable[str]) -> list[str]:
    """One line per reference that names no collected test, or whose tests were skipped or did not run or pass.

    `outcomes` maps a node id to PASSED, SKIPPED or FAILED (a failed test already fails the run; it is named here
    too); `collected` is every node id the run collected."""
    collected = list(collected)
    lines = []
    for ref in refs:
        named = [n for n in collected if _matches(ref.target, n)]
        if not named:
            lines.append(f"{ref.page}: `{ref.target}` names no test that exists (renamed or removed?)")
            continue
        skipped = [n for n in named if outcomes.get(n) == SKIPPED]
        missing = [n for n in named if n not in outcomes]
        failed = [n for n in named if outcomes.get(n) == FAILED]
        if skipped:
            lines.append(f"{ref.page}: `{ref.target}` was skipped ({len(skipped)} of {len(named)})")
        elif missing:
            lines.append(f"{ref.page}: `{ref.target}` did not run ({len(missing)} of {len(named)})")
        elif failed:
            lines.append(f"{ref.page}: `{ref.target}` failed ({len(failed)} of {len(named)})")
    return lines


def is_full_run(args: list[str], rootdir: Path, markexpr: str, keyword: str) -> bool:
    """True when the run selects nothing: no -m, no -k, and no path other than the configured test folder."""
    if markexpr or keyword:
        return False
    tests = (rootdir / "tests").resolve()
    return all(Path(a).resolve() in (tests, rootdir.resolve()) for a in args)

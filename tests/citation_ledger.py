"""The citation ledger: for each page, every test it cites and the assert lines that back each claim.

A page cites a test as a backticked node id (`tests/path.py::name`, optionally `[case]`), a whole file
(`tests/path.py`) or, in a table, a bare backticked `test_name` defined somewhere under tests/. Each file under docs/
is read on its own, so a generated table (docs/results/*.md) is its own page with its own ledger, whichever page
includes it. The ledger of docs/reference/setup.md is tests/ledger/reference__setup.yml; tests/ledger/README.md says
how to read and extend one. tests/test_ledger.py runs `problems()` in the fast loop: no lab, no Spark.

The rules, each reported as one line by `problems()`:
- every page that cites a test has a ledger file, and every ledger file has a page that cites a test;
- every citation on a page is covered by an entry, and every entry's test is still cited on its page;
- an entry's `asserts` are substrings of assert statements (or `pytest.raises(...)` calls) inside the named test
  function or inside its `via` function, which the test must reach by name; both are found with `ast`, so an assert
  elsewhere in the file does not count;
- the YAML has exactly the fields of the format, `section` is a heading of the page (or of a page including it), and
  `rows` (one entry for a parametrized test cited once per case) equals the number of cases the page cites.
"""

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml
from verified_by import REFERENCE

from rtm_lab.paths import PROJECT_ROOT

DOCS = PROJECT_ROOT / "docs"
LEDGER = PROJECT_ROOT / "tests" / "ledger"

BARE_NAME = re.compile(r"`(test_\w+)`")
INCLUDE = re.compile(r"""^\s*--8<--\s+["']([^"':]+\.md)(?::[\w-]+)?["']""", re.MULTILINE)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*(?:\{[^}]*\})?\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
NODE_ID = re.compile(r"^[\w./-]+\.py::[\w.]+(?:::[\w]+)?(?:\[[^\]]+\])?$")

TOP_FIELDS = {"page", "citations"}
REQUIRED_FIELDS = {"claim", "section", "test", "asserts"}
OPTIONAL_FIELDS = {"via", "rows"}


@dataclass(frozen=True)
class Entry:
    ledger: str  # tests/ledger/x.yml, for messages
    claim: str
    section: str
    test: str  # node id, as the page names it (a case only when the page names one)
    asserts: tuple[str, ...]
    via: str | None
    rows: int | None

    @property
    def where(self) -> str:
        return f"{self.ledger}: {self.test}"


def ledger_path(page: str, ledger: Path = LEDGER) -> Path:
    """docs/reference/setup.md -> tests/ledger/reference__setup.yml"""
    inside = Path(page).relative_to("docs").with_suffix("").as_posix()
    return ledger / (inside.replace("/", "__") + ".yml")


def page_of(ledger: Path) -> str:
    return "docs/" + ledger.stem.replace("__", "/") + ".md"


@cache
def test_function_names() -> frozenset[str]:
    """Every `def test_*` under tests/: a bare backticked name counts as a citation only when it names one."""
    names = set()
    for path in (PROJECT_ROOT / "tests").rglob("*.py"):
        names.update(re.findall(r"^\s*(?:async )?def (test_\w+)\(", path.read_text(), re.MULTILINE))
    return frozenset(names)


def citations(text: str) -> list[str]:
    """The tests a page's text cites, in order, once each: node ids, files and bare test names."""
    found = list(REFERENCE.findall(text))
    known = test_function_names()
    found += [name for name in BARE_NAME.findall(text) if name in known]
    return list(dict.fromkeys(found))


def _function(target: str) -> str:
    """tests/a.py::test_x[case] -> test_x; tests/a.py -> ''"""
    return target.partition("::")[2].split("[")[0].split("::")[-1]


def covers(entry_test: str, cited: str) -> bool:
    """Whether a ledger entry for `entry_test` accounts for a page's citation `cited`."""
    if entry_test == cited:
        return True
    if "::" not in cited and not cited.endswith(".py"):  # a bare name
        return _function(entry_test) == cited
    if "::" not in cited:  # a whole file: any entry naming one of its tests
        return entry_test.startswith(cited + "::")
    # a parametrized test cited case by case, one entry for them all
    return "[" not in entry_test and cited.startswith(entry_test + "[")


def headings(text: str) -> list[str]:
    """The Markdown headings of a page, fenced code left out (a `# comment` in a block is no heading)."""
    found, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and (match := HEADING.match(line)):
            found.append(match.group(1).replace("`", ""))
    return found


def pages(docs: Path = DOCS) -> dict[str, str]:
    """Every Markdown file under docs/, by its repository-relative path, with its text."""
    return {p.relative_to(docs.parent).as_posix(): p.read_text() for p in sorted(docs.rglob("*.md"))}


def section_names(page: str, texts: dict[str, str]) -> set[str]:
    """The headings an entry of `page` may name: its own, and those of every page that includes it."""
    names = set(headings(texts[page]))
    for text in texts.values():
        if page in INCLUDE.findall(text):
            names.update(headings(text))
    return names


# --- reading a ledger file


def _rel(path: Path) -> str:
    return path.relative_to(PROJECT_ROOT).as_posix() if path.is_relative_to(PROJECT_ROOT) else str(path)


def read_ledger(path: Path, page: str) -> tuple[list[Entry], list[str]]:
    """The entries of one ledger file and a line per way it breaks the format."""
    rel = _rel(path)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        return [], [f"{rel}: not YAML ({str(err).splitlines()[0]})"]
    if not isinstance(data, dict) or set(data) != TOP_FIELDS:
        return [], [f"{rel}: the top level must be exactly `page:` and `citations:`"]
    bad = []
    if data["page"] != page:
        bad.append(f"{rel}: `page: {data['page']}` should be `page: {page}` (the file's name says which page)")
    if not isinstance(data["citations"], list) or not data["citations"]:
        return [], [*bad, f"{rel}: `citations:` must be a non-empty list"]
    entries = []
    for i, item in enumerate(data["citations"], 1):
        where = f"{rel}: citation {i}"
        if not isinstance(item, dict):
            bad.append(f"{where}: not a mapping")
            continue
        keys = set(item)
        if missing := REQUIRED_FIELDS - keys:
            bad.append(f"{where}: missing {', '.join(sorted(missing))}")
        if extra := keys - REQUIRED_FIELDS - OPTIONAL_FIELDS:
            bad.append(f"{where}: unknown field(s) {', '.join(sorted(extra))}")
        if missing or extra:
            continue
        claim, section, test, asserts = item["claim"], item["section"], item["test"], item["asserts"]
        via, rows = item.get("via"), item.get("rows")
        problems_here = []
        if not isinstance(claim, str) or not claim.strip():
            problems_here.append("`claim` must be a non-empty string")
        if not isinstance(section, str) or not section.strip():
            problems_here.append("`section` must be a non-empty string")
        if not isinstance(test, str) or not NODE_ID.match(test):
            problems_here.append(f"`test` must be a node id tests/path.py::name, got {test!r}")
        if not isinstance(asserts, list) or not asserts or not all(isinstance(a, str) and a.strip() for a in asserts):
            problems_here.append("`asserts` must be a non-empty list of non-empty strings")
        if via is not None and (not isinstance(via, str) or not NODE_ID.match(via) or "[" in via):
            problems_here.append(f"`via` must be a function's node id path.py::name, got {via!r}")
        if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 1):
            problems_here.append(f"`rows` must be a positive integer, got {rows!r}")
        if problems_here:
            bad += [f"{where} ({item.get('test')}): {p}" for p in problems_here]
            continue
        entries.append(Entry(rel, claim, section, test, tuple(asserts), via, rows))
    return entries, bad


# --- finding the asserts


@cache
def _module(path: str) -> ast.Module | None:
    source = PROJECT_ROOT / path
    return ast.parse(source.read_text()) if source.is_file() else None


@cache
def _source(path: str) -> str:
    return (PROJECT_ROOT / path).read_text()


def find_function(node_id: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The function a node id names (tests/a.py::test_x, tests/a.py::TestA::test_x, a.py::Class.method)."""
    path, _, name = node_id.partition("::")
    module = _module(path)
    if module is None:
        return None
    scope: list[ast.stmt] = module.body
    parts = [p for chunk in name.split("[")[0].split("::") for p in chunk.split(".")]
    found: ast.AST | None = None
    for part in parts:
        found = next(
            (
                n
                for n in scope
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and n.name == part
            ),
            None,
        )
        if found is None:
            return None
        scope = found.body  # type: ignore[attr-defined]
    return found if isinstance(found, ast.FunctionDef | ast.AsyncFunctionDef) else None


def _is_raises(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "raises"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "pytest"
    )


def assert_sources(node_id: str) -> list[str] | None:
    """The source of every assert statement and `pytest.raises(...)` call in a function; None if it is not found."""
    function = find_function(node_id)
    if function is None:
        return None
    source = _source(node_id.partition("::")[0])
    return [
        ast.get_source_segment(source, node) or ""
        for node in ast.walk(function)
        if isinstance(node, ast.Assert) or _is_raises(node)
    ]


def _names_used(function: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(function) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(function) if isinstance(n, ast.Attribute)
    }


def reaches(test: str, helper: str) -> bool:
    """Whether the test names the helper, itself or through functions of its own module that it names."""
    function = find_function(test)
    module = _module(test.partition("::")[0])
    if function is None or module is None:
        return False
    local = {n.name: n for n in module.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    target = re.split(r"::|\.", helper.partition("::")[2])[-1]
    seen: set[str] = set()
    todo: list[ast.AST] = [function]
    while todo:
        used = _names_used(todo.pop())
        if target in used:
            return True
        for name in used & local.keys() - seen:
            seen.add(name)
            todo.append(local[name])
    return False


def assert_problems(entry: Entry) -> list[str]:
    """Each `asserts` line must be in an assert of the test function itself or of its `via` helper."""
    holders = [entry.test] + ([entry.via] if entry.via else [])
    sources, lines = [], []
    for holder in holders:
        found = assert_sources(holder)
        if found is None:
            lines.append(f"{entry.where}: no function `{holder}` (renamed or moved?)")
        sources += found or []
    if lines:
        return lines
    if entry.via and not reaches(entry.test, entry.via):
        lines.append(f"{entry.where}: the test does not call its `via` helper {entry.via}")
    for wanted in entry.asserts:
        if not any(wanted in s for s in sources):
            lines.append(f"{entry.where}: no assert in {' or '.join(holders)} contains {wanted!r}")
    return lines


# --- the whole check


def page_problems(page: str, texts: dict[str, str], ledger: Path = LEDGER) -> list[str]:
    """The broken rules of one page that has a ledger file."""
    cited = citations(texts[page])
    path = ledger_path(page, ledger)
    entries, lines = read_ledger(path, page)
    sections = section_names(page, texts)
    for c in cited:
        if not any(covers(e.test, c) for e in entries):
            lines.append(f"{page}: `{c}` is cited but has no entry in {_rel(path)}")
    for e in entries:
        if not any(covers(e.test, c) for c in cited):
            lines.append(f"{e.where}: no longer cited on {page}")
        if e.section.replace("`", "") not in sections:
            lines.append(f"{e.where}: section {e.section!r} is not a heading of {page} (or a page including it)")
        if e.rows is not None:
            cases = [c for c in cited if c.startswith(e.test + "[")]
            if "[" in e.test or e.rows != len(cases):
                lines.append(f"{e.where}: `rows: {e.rows}` but the page cites {len(cases)} case(s) of it")
        lines += assert_problems(e)
    return lines


def citing_pages(texts: dict[str, str]) -> list[str]:
    return [page for page, text in texts.items() if citations(text)]


def missing_ledgers(docs: Path = DOCS, ledger: Path = LEDGER) -> list[str]:
    """The pages that cite tests but have no ledger file yet."""
    return [page for page in citing_pages(pages(docs)) if not ledger_path(page, ledger).is_file()]


def problems(docs: Path = DOCS, ledger: Path = LEDGER) -> list[str]:
    """One line per broken rule, over every page that has a ledger file and every ledger file."""
    texts = pages(docs)
    citing = citing_pages(texts)
    lines = []
    for page in citing:
        if ledger_path(page, ledger).is_file():
            lines += page_problems(page, texts, ledger)
    for path in sorted(ledger.glob("*.yml")):
        if page_of(path) not in citing:
            lines.append(f"{_rel(path)}: {page_of(path)} cites no test (or does not exist)")
    return lines

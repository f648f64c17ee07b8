"""Every file the rendered skill names is a file the skill ships, or the repository's evidence it says it is not.

An assistant that reads "run `python snippets/reference/latency_metrics.py`" or "the docs page has the table" has
nothing to open: the skill is all it gets. So each path the skill names (in prose, tables or code, HTML comments
aside) must be one of:

- a file of the skill itself (`scripts/rtm_check.py`, `assets/...`, `references/...`);
- the project repository's evidence, which SKILL.md says the skill does not ship: a path under `tests/`, `docs/` or
  `scripts/rtm_lab/`, or one of the measuring commands its footers quote (`scripts/bench.py`, ...), and that file
  exists in the repository;
- a file of Spark's own source tree the pages quote, or a file a reader makes from a block the reference shows.

The scripts the skill ships must run without this repository: they import only public packages, and each reaches
its usage text when copied alone into an empty folder.
"""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rtm_lab.paths import PROJECT_ROOT
from rtm_lab.skillgen.checks import SPARK_FILES

SKILL = PROJECT_ROOT / "skills" / "spark-real-time-mode"
MARKDOWN = sorted([SKILL / "SKILL.md", *(SKILL / "references").glob("*.md")])
# What SKILL.md's "Files" paragraph calls the repository's evidence.
EVIDENCE_FOLDERS = ("tests/", "docs/", "scripts/rtm_lab/")
EVIDENCE_COMMANDS = frozenset({"scripts/bench.py", "scripts/tables.py", "scripts/version_matrix.py"})
# Spark's own files, which the pages quote by path: its source (elided with "...") and its distribution's sbin/.
SPARK_SOURCE = re.compile(r"^(?:sql/core|core|sbin)/")

HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
URL = re.compile(r"\bhttps?://\S+|\b(?:[\w-]+\.)+(?:com|org|io|net|dev|cn)/\S*")
NAMED_PATH = re.compile(
    r"(?<![\w.:/-])(?P<path>(?:\.\./)*[\w.-]+(?:/[\w.-]+)+\.(?:py|sh|java|scala|ya?ml|json|md|conf|txt|png|svg|jar|csv))"
    r"(?![\w/])"
)
# A block the renderer expanded from a whole file (no `:section`) names that file in a note above it.
SOURCE_NOTE = re.compile(r"^<!-- source: (?P<spec>[^:\s]+) -->$", re.M)
DEFERRAL = re.compile(r"\b(docs page has|on the docs page|on the docs site|docs site's|see the site)\b", re.I)


def named_paths(text: str) -> list[str]:
    # A shell line continued with a backslash is one line: a URL wrapped that way is still a URL.
    prose = URL.sub(" ", HTML_COMMENT.sub(" ", text).replace("\\\n", ""))
    return [m["path"] for m in NAMED_PATH.finditer(prose)]


def verdict(path: str, named_in: Path) -> str | None:
    """None when `path` is a file the skill ships or evidence the skill says it does not ship; else why not."""
    if (named_in.parent / path).resolve().is_file() or (SKILL / path).is_file():
        return None
    if any(shipped.as_posix().endswith(f"/{path}") for shipped in SKILL.rglob("*") if shipped.is_file()):
        return None  # "save it as rtmlab/X.java": the skill ships that source under assets/
    shown = SOURCE_NOTE.findall(named_in.read_text(encoding="utf-8"))
    if any(spec.endswith(f"/{path}") for spec in shown):
        return None  # "save it as rtmlab/X.java" under a block showing that whole file
    if path in SPARK_FILES or SPARK_SOURCE.match(path):
        return None
    if path.startswith(EVIDENCE_FOLDERS) or path in EVIDENCE_COMMANDS:
        return None if (PROJECT_ROOT / path).is_file() else "names the repository's evidence, which does not exist"
    return "is neither a file of the skill nor the repository's evidence: ship it (skill_files) or stop naming it"


def test_every_path_the_skill_names_is_a_skill_file_or_named_evidence():
    problems = [
        f"{md.relative_to(SKILL)}: `{path}` {why}"
        for md in MARKDOWN
        for path in named_paths(md.read_text(encoding="utf-8"))
        if (why := verdict(path, md))
    ]
    assert not problems, "\n".join(problems)


def test_skill_md_says_which_paths_are_the_repositorys_evidence_and_lists_what_it_ships():
    text = (SKILL / "SKILL.md").read_text(encoding="utf-8")
    paragraph = next(p for p in text.split("\n\n") if p.startswith("**Files.**"))
    for folder in EVIDENCE_FOLDERS:
        assert f"`{folder}`" in paragraph, folder
    for command in EVIDENCE_COMMANDS:
        assert f"`{command.removeprefix('scripts/')}`" in paragraph, command
    shipped = sorted(
        p.relative_to(SKILL).as_posix()
        for p in SKILL.rglob("*")
        if p.is_file() and p.suffix != ".md" and p.parts[len(SKILL.parts)] in ("scripts", "assets")
    )
    assert shipped and all(f"`{path}`" in paragraph for path in shipped), (shipped, paragraph)


def test_no_sentence_sends_the_reader_to_the_docs_site_for_what_the_skill_leaves_out():
    found = [
        f"{md.relative_to(SKILL)}: {m.group(0)!r}"
        for md in MARKDOWN
        for m in DEFERRAL.finditer(HTML_COMMENT.sub(" ", md.read_text(encoding="utf-8")))
    ]
    assert not found, found


def test_the_checks_catch_a_snippet_path_a_missing_test_and_a_docs_deferral():
    """The rules above on sentences that must fail and sentences that must pass."""
    page = SKILL / "references" / "monitoring.md"
    assert named_paths("run `python snippets/reference/x.py` or <!-- source: snippets/a.py:b -->") == [
        "snippets/reference/x.py"
    ]
    assert named_paths("see https://github.com/apache/spark/blob/master/docs/a.md and docs.databricks.com/x/y.md") == []
    assert verdict("snippets/reference/latency_metrics.py", page) is not None
    assert verdict("scripts/lab.py", page) is not None
    assert verdict("tests/reference/test_nothing_here.py", page) is not None
    assert verdict("scripts/monitoring.py", page) is None
    assert verdict("tests/reference/test_errors.py", page) is None
    assert verdict("scripts/bench.py", page) is None
    assert verdict("rtmlab/PostgresUpsertWriter.java", page) is None
    assert verdict("rtmlab/ShoutUdf.java", SKILL / "references" / "support-matrix-guide.md") is None
    assert verdict("rtmlab/ShoutUdf.java", page) is not None  # the monitoring reference does not show it
    assert named_paths("curl -fO https://repo1.maven.org/maven2/org/\\\n5.0.0-2.2/x-5.0.0-2.2.jar") == []
    assert DEFERRAL.search("outcomes (the docs page has the table).")
    assert DEFERRAL.search("(The table itself is on the docs site's Postgres sink page.)")
    assert not DEFERRAL.search("the quick start (docs page `docs/get-started.md`) pipeline")


SHIPPED_SCRIPTS = sorted(
    p for p in [*(SKILL / "scripts").glob("*.py"), *(SKILL / "assets").rglob("*.py")] if p.is_file()
)
# Imports a shipped script must not make: this repository's own packages.
REPOSITORY_PACKAGES = frozenset({"rtm_lab", "snippets", "tests"})


def imported_modules(source: str) -> set[str]:
    """The top-level package of every import in `source`, function-level ones included."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("script", SHIPPED_SCRIPTS, ids=lambda p: p.relative_to(SKILL).as_posix())
def test_a_shipped_script_imports_only_public_packages(script):
    allowed = set(sys.stdlib_module_names) | {"pyspark", "py4j", "psycopg2", "tenacity", "kafka", "confluent_kafka"}
    allowed |= {"prometheus_client"}
    imported = imported_modules(script.read_text(encoding="utf-8"))
    assert not imported & REPOSITORY_PACKAGES, imported & REPOSITORY_PACKAGES
    assert imported <= allowed, f"not a package of 'Set up your own project': {sorted(imported - allowed)}"


# Runs the script as `python script.py ARGS` would, with this repository's packages unimportable (the project's
# venv installs them, so an import of one would succeed here and fail for a reader).
BLOCKED_RUN = """
import importlib.abc, runpy, sys
class NoRepository(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (this repository's, absent for a reader)")
sys.meta_path.insert(0, NoRepository())
sys.path = [p for p in sys.path if p not in ("", {root!r})]
sys.argv = [{script!r}, *{args!r}]
runpy.run_path({script!r}, run_name="__main__")
"""


@pytest.mark.parametrize("script", SHIPPED_SCRIPTS, ids=lambda p: p.relative_to(SKILL).as_posix())
def test_a_shipped_script_copied_alone_reaches_its_usage(script, tmp_path):
    """Copied into an empty folder, the script starts and prints its usage (argparse's --help, or its docstring
    when called without its arguments): every import it makes at the top resolves without the repository."""
    copy = tmp_path / script.name
    copy.write_bytes(script.read_bytes())
    source = script.read_text(encoding="utf-8")
    args = ["--help"] if "argparse" in source else []
    program = BLOCKED_RUN.format(
        blocked=sorted(REPOSITORY_PACKAGES), root=str(PROJECT_ROOT), script=copy.name, args=args
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    output = done.stdout + done.stderr
    assert "Traceback" not in output, output[-3000:]
    usage = ast.get_docstring(ast.parse(source)) or ""
    if args:
        assert done.returncode == 0 and "usage:" in done.stdout, output[-3000:]
    else:
        assert done.returncode != 0 and usage.splitlines()[0] in output, output[-3000:]

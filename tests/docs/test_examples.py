"""Every fenced Python block in docs/ and skills/: linted with ruff, then run, or accounted for.

A block is one of:
- included: its only lines are `--8<--` includes; the snippet must exist and a test must import its module;
- marked: fence info `python {test="skip" reason="..."}`; it is linted and skipped with its reason;
- inline: linted and run here, so it must be self-contained;
- in skills/: rendered from snippet files by scripts/skills.py; linted here (validate checks where it came from).
"""

import ast
import re
import subprocess
from functools import cache

import pytest
from pytest_examples import CodeExample, EvalExample, find_examples

from rtm_lab.paths import PROJECT_ROOT
from rtm_lab.skillgen.markdown import INCLUDE, snippet_text

EXAMPLES = [
    e for folder in ("docs", "skills") if (PROJECT_ROOT / folder).is_dir() for e in find_examples(PROJECT_ROOT / folder)
]


def example_id(example: CodeExample) -> str:
    return f"{example.path.relative_to(PROJECT_ROOT)}:{example.start_line}"


def kind(example: CodeExample) -> str:
    lines = [line for line in example.source.splitlines() if line.strip()]
    if lines and all(INCLUDE.match(line) for line in lines):
        return "included"  # in a docs page or a skill template
    if example.path.relative_to(PROJECT_ROOT).parts[0] == "skills":
        return "skill"
    if example.prefix_settings().get("test") == "skip":
        return "marked"
    return "inline"


@cache
def all_test_code() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted((PROJECT_ROOT / "tests").rglob("test_*.py")))


def is_imported_by_a_test(snippet_path: str) -> bool:
    """Whether a test imports (or runs with -m) the snippet module."""
    module = snippet_path.removesuffix(".py").replace("/", ".")
    package, _, name = module.rpartition(".")
    sources = all_test_code()
    return module in sources or re.search(rf"from {re.escape(package)} import [^\n]*\b{name}\b", sources) is not None


FRAGMENT_IGNORES = ["F821", "F401", "F811", "E402", "I001", "RUF100"]
SKILL_FILES = sorted(p for p in (PROJECT_ROOT / "skills").rglob("*.md") if "_templates" not in p.parts)


def python_blocks(markdown: str) -> list[str]:
    return [m[1] for m in re.finditer(r"^```python[^\n]*\n(.*?)^```", markdown, flags=re.M | re.S)]


def shipped_names(reference: str) -> set[str]:
    """Top-level functions and classes of the skill's scripts/*.py files that `reference` names by path."""
    names: set[str] = set()
    for script in sorted((PROJECT_ROOT / "skills").glob("*/scripts/*.py")):
        if f"scripts/{script.name}" in reference:
            tree = ast.parse(script.read_text(encoding="utf-8"))
            names |= {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    return names


@pytest.mark.parametrize("path", SKILL_FILES, ids=lambda p: str(p.relative_to(PROJECT_ROOT)))
def test_skill_file_code_defines_every_name_it_uses(path):
    """An assistant copies a reference's blocks in order: together they must import or define every name they use.

    Blocks marked not-run are left out: they are fragments of Databricks-only or otherwise unrunnable code. Private
    helpers (names starting with an underscore) may be left out of a page on purpose.
    """
    from ruff.__main__ import find_ruff_bin

    text = path.read_text(encoding="utf-8")
    runnable = [
        block
        for block, head in zip(
            python_blocks(text), re.findall(r"(?:^(.*)\n\n?)?^```python", text, flags=re.M), strict=True
        )
        if "Not run by the tests" not in head
    ]
    if not runnable:
        return
    result = subprocess.run(
        [find_ruff_bin(), "check", "--isolated", "--select", "F821", "--output-format", "concise", "-"],
        input="\n\n".join(runnable),
        capture_output=True,
        text=True,
        timeout=30,
    )
    # A private helper (leading underscore) may stay out of the page on purpose; a missing import never should.
    # A name the skill ships in one of its scripts/ files, which the reference names, is defined for its reader.
    shipped = shipped_names(text)
    missing = [
        line
        for line in result.stdout.splitlines()
        if "F821" in line and "`_" not in line and not any(f"`{name}`" in line for name in shipped)
    ]
    assert not missing, (
        f"{path.relative_to(PROJECT_ROOT)}: names used but never imported or defined in its code blocks (move the imports "
        "inside the snippet section the page includes):\n" + "\n".join(missing)
    )


def lint(eval_example: EvalExample, example: CodeExample, extra_ignore: list[str] | None = None) -> None:
    # The project's own ruff settings (pyproject.toml) apply; long lines are the formatter's business.
    eval_example.set_config(target_version="py311", ruff_ignore=["E501", *(extra_ignore or [])])
    eval_example.lint_ruff(example)


def test_docs_have_python_blocks():
    """Guards the collection itself: if find_examples found nothing, every parametrized test would vanish silently."""
    assert any(kind(e) == "included" for e in EXAMPLES), "no include-only Python block found in docs/"


@pytest.mark.parametrize("example", EXAMPLES, ids=example_id)
def test_python_block(example: CodeExample, eval_example: EvalExample, example_counts):
    counts = example_counts
    where = example_id(example)
    block_kind = kind(example)
    if block_kind == "included":
        for line in example.source.splitlines():
            match = INCLUDE.match(line)
            if not match:
                continue
            spec = match["spec"]
            assert snippet_text(PROJECT_ROOT, spec, where).strip(), f"{where}: {spec} includes nothing"
            path = spec.partition(":")[0]
            assert path.startswith("snippets/") and path.endswith(".py"), (
                f"{where}: Python blocks include from snippets/*.py, not {path}"
            )
            assert is_imported_by_a_test(path), (
                f"{where}: no test under tests/ imports {path}; add one mirroring the page "
                "(tests/<area>/test_<page>.py) that runs it and asserts what the page says"
            )
        counts["included"] += 1
        return
    if block_kind == "skill":
        # A snippet section is a fragment of a linted file: its imports may serve other sections, and it may use
        # names from earlier blocks. Whether the file's blocks together define every name is checked per file below.
        lint(eval_example, example, extra_ignore=FRAGMENT_IGNORES)
        counts["checked"] += 1
        counts["skill"] += 1
        return
    if block_kind == "marked":
        reason = example.prefix_settings().get("reason", "").strip()
        assert reason, f'{where}: test="skip" needs reason="..." saying why the block cannot run here'
        # A not-run fragment may use names defined elsewhere on the page (a `spark` session, a DataFrame).
        lint(eval_example, example, extra_ignore=["F821"])
        counts["checked"] += 1
        counts["marked"] += 1
        pytest.skip(f"{where}: {reason}")
    lint(eval_example, example)
    counts["checked"] += 1
    eval_example.run(example)
    counts["run"] += 1

"""The skill generator: deterministic, idempotent, catches tampering and staleness, picks up new pages and snippets.

Each test works on a small sandbox repository (the real template and quick-start snippet plus pages written here),
so it does not depend on which docs pages exist yet; one test checks the real repository's skill is current.
"""

import contextlib
import hashlib
import io
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from skillgen import commands

ROOT = Path(__file__).resolve().parents[2]
SKILL = "spark-real-time-mode"
FIX_HINT = "python scripts/skills.py generate"

PAGE = """---
title: Slot sizing
description: "How many task slots a real-time query needs: source partitions plus shuffle partitions."
---

# Slot sizing

## The rule

Intro with a [link to errors](errors.md#error-classes) and one to [get started](../get-started.md).

```python
--8<-- "snippets/reference/slot_sizing.py:rule"
```

!!! note "Databricks only"
    Clusters are sized by workers.

    ```python {test="skip" reason="needs a Databricks cluster"}
    spark.conf.get("spark.databricks.x")
    ```

=== "PySpark 4.2+"

    Use the keyword.

=== "Scala"

    ```scala
    val q = 1
    ```
"""
ERRORS_PAGE = """---
title: Errors
description: Every real-time mode error class, what triggers it and the fix.
---

## Error classes

See [the rule](slot-sizing.md#the-rule).
"""
SNIPPET = '''"""Slot sizing."""

# --8<-- [start:rule]
def slots_needed(source_partitions: int, shuffle_partitions: int) -> int:
    return source_partitions + shuffle_partitions


# --8<-- [end:rule]
'''


def skills(root: Path, *args: str) -> subprocess.CompletedProcess:
    """Run the CLI in this process (a subprocess per call would triple this file's run time)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        # The CLI's only option besides the command is `package --out DIR`.
        code = commands.run(args[0], root, Path(args[2]) if args[1:2] == ("--out",) else None)
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted((root / "skills").rglob("*")) if p.is_file()}


@pytest.fixture
def sandbox(tmp_path) -> Path:
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(ROOT / "skills" / "_templates", tmp_path / "skills" / "_templates")
    (tmp_path / "snippets" / "quickstart").mkdir(parents=True)
    shutil.copy(ROOT / "snippets" / "quickstart" / "kafka_to_kafka.py", tmp_path / "snippets" / "quickstart")
    (tmp_path / "snippets" / "reference").mkdir()
    (tmp_path / "snippets" / "reference" / "slot_sizing.py").write_text(SNIPPET)
    shutil.copy(ROOT / "snippets" / "reference" / "readiness_check.py", tmp_path / "snippets" / "reference")
    (tmp_path / "docs" / "reference").mkdir(parents=True)
    (tmp_path / "docs" / "get-started.md").write_text("---\ntitle: Get started\ndescription: Start here.\n---\n")
    (tmp_path / "docs" / "reference" / "slot-sizing.md").write_text(PAGE)
    (tmp_path / "docs" / "reference" / "errors.md").write_text(ERRORS_PAGE)
    result = skills(tmp_path, "generate")
    assert result.returncode == 0, result.stderr
    return tmp_path


def assert_fails_with_fix(root: Path, *expected: str) -> str:
    result = skills(root, "validate")
    assert result.returncode == 1, result.stdout + result.stderr
    for text in expected:
        assert text in result.stderr, result.stderr
    return result.stderr


def test_the_skill_ships_the_readiness_checker_with_a_manifest_entry(sandbox):
    source = (ROOT / "snippets" / "reference" / "readiness_check.py").read_bytes()
    shipped = sandbox / "skills" / SKILL / "scripts" / "rtm_check.py"
    assert shipped.read_bytes() == source
    manifest = json.loads((sandbox / "manifest.json").read_text())
    entry = next(f for f in manifest["skills"][0]["files"] if f["path"] == "scripts/rtm_check.py")
    assert entry["sha256"] == hashlib.sha256(source).hexdigest() and entry["size"] == len(source)


def test_generate_twice_gives_identical_bytes(sandbox, tmp_path_factory):
    first = snapshot(sandbox)
    other = tmp_path_factory.mktemp("again")
    shutil.copytree(sandbox, other, dirs_exist_ok=True)
    shutil.rmtree(other / "skills" / SKILL)
    (other / "manifest.json").unlink()
    assert skills(other, "generate").returncode == 0
    assert snapshot(other) == first


def test_generate_is_idempotent_and_the_result_validates(sandbox):
    before = snapshot(sandbox)
    again = skills(sandbox, "generate")
    assert again.returncode == 0 and "0 changed" in again.stdout, again.stdout
    assert snapshot(sandbox) == before
    result = skills(sandbox, "validate")
    assert result.returncode == 0, result.stderr


def test_reference_is_plain_markdown_with_code_from_the_snippet(sandbox):
    text = (sandbox / "skills" / SKILL / "references" / "slot-sizing.md").read_text()
    assert text.startswith('---\nname: "slot-sizing"\ndescription: "How many task slots a real-time query needs: ')
    assert "<!-- source: snippets/reference/slot_sizing.py:rule -->\n```python\ndef slots_needed(" in text
    assert "--8<--" not in text and "!!!" not in text and "===" not in text
    assert "> **Databricks only**" in text and "> *Not run by the tests: needs a Databricks cluster.*" in text
    assert "**PySpark 4.2+**\n\nUse the keyword." in text and "```scala\nval q = 1\n```" in text
    # Links between references stay links; a docs page outside the skill becomes text naming it.
    assert "[link to errors](errors.md#error-classes)" in text
    assert "get started (docs page `docs/get-started.md`)" in text


def test_manifest_lists_every_file_with_size_and_sha256(sandbox):
    manifest = json.loads((sandbox / "manifest.json").read_text())
    assert FIX_HINT in manifest["generated"] and manifest["regenerate"] == FIX_HINT
    (entry,) = manifest["skills"]
    assert entry["name"] == SKILL and entry["version"] == "0.1.0" and len(entry["description"]) > 100
    listed = {f["path"]: f for f in entry["files"]}
    assert sorted(listed) == ["SKILL.md", "references/errors.md", "references/slot-sizing.md", "scripts/rtm_check.py"]
    for path, info in listed.items():
        data = (sandbox / "skills" / SKILL / path).read_bytes()
        assert info["size"] == len(data) and info["sha256"] == hashlib.sha256(data).hexdigest()
    raw = (sandbox / "manifest.json").read_text()
    assert raw == json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


@pytest.mark.parametrize(
    "victim",
    [
        "skills/spark-real-time-mode/SKILL.md",
        "skills/spark-real-time-mode/references/slot-sizing.md",
        "skills/spark-real-time-mode/scripts/rtm_check.py",
        "manifest.json",
    ],
)
def test_tampering_with_any_skill_file_is_caught(sandbox, victim):
    path = sandbox / victim
    path.write_text(path.read_text().replace("a", "4", 1))
    assert_fails_with_fix(sandbox, f"stale: {victim}", FIX_HINT)


def test_a_file_added_by_hand_is_caught(sandbox):
    (sandbox / "skills" / SKILL / "references" / "extra.md").write_text("---\nname: extra\n---\n")
    assert_fails_with_fix(sandbox, "references/extra.md: not produced by the generator", FIX_HINT)


def test_editing_a_snippet_without_generate_fails_with_the_command(sandbox):
    snippet = sandbox / "snippets" / "reference" / "slot_sizing.py"
    snippet.write_text(snippet.read_text().replace("source_partitions + shuffle_partitions", "shuffle_partitions"))
    stderr = assert_fails_with_fix(sandbox, "stale: skills/spark-real-time-mode/references/slot-sizing.md", FIX_HINT)
    assert "differs from snippets/reference/slot_sizing.py:rule" in stderr
    assert skills(sandbox, "generate").returncode == 0
    assert "return shuffle_partitions" in (sandbox / "skills" / SKILL / "references" / "slot-sizing.md").read_text()


def test_a_new_page_and_snippet_show_up_after_generate(sandbox):
    (sandbox / "snippets" / "reference" / "kafka_tuning.py").write_text(
        '# --8<-- [start:fetch]\nFETCH_WAIT_MS = "50"\n# --8<-- [end:fetch]\n'
    )
    (sandbox / "docs" / "reference" / "kafka-tuning.md").write_text(
        "---\ntitle: Kafka tuning\ndescription: Consumer settings for low latency.\n---\n\n# Kafka tuning\n\n"
        '```python\n--8<-- "snippets/reference/kafka_tuning.py:fetch"\n```\n'
    )
    assert_fails_with_fix(sandbox, "stale: skills/spark-real-time-mode/references/kafka-tuning.md: missing")
    assert skills(sandbox, "generate").returncode == 0
    skill_dir = sandbox / "skills" / SKILL
    assert 'FETCH_WAIT_MS = "50"' in (skill_dir / "references" / "kafka-tuning.md").read_text()
    skill_md = (skill_dir / "SKILL.md").read_text()
    assert "| [Kafka tuning](references/kafka-tuning.md) | Consumer settings for low latency. |" in skill_md
    # The template's routing row for this page was left out while the page was missing; now it is there.
    assert "| tuning the Kafka source or sink | [Kafka tuning](references/kafka-tuning.md) |" in skill_md
    manifest = json.loads((sandbox / "manifest.json").read_text())
    assert "references/kafka-tuning.md" in {f["path"] for f in manifest["skills"][0]["files"]}
    assert skills(sandbox, "validate").returncode == 0


def test_unquoted_colon_in_template_frontmatter_is_refused(sandbox):
    template = sandbox / "skills" / "_templates" / SKILL / "SKILL.md"
    text = template.read_text()
    start = text.index("description: ")
    end = text.index("\n", start)
    template.write_text(text[:start] + "description: Spark real-time mode, use when: writing RTM queries" + text[end:])
    result = skills(sandbox, "generate")
    assert result.returncode == 2
    assert "unquoted ': '" in result.stderr and "double quotes" in result.stderr
    assert_fails_with_fix(sandbox, "unquoted ': '")


def test_bad_skill_name_is_refused(sandbox):
    template = sandbox / "skills" / "_templates" / SKILL / "SKILL.md"
    template.write_text(template.read_text().replace(f"name: {SKILL}", "name: Spark_RTM", 1))
    result = skills(sandbox, "generate")
    assert result.returncode == 2 and "lowercase letters, digits and single hyphens" in result.stderr


def test_python_block_written_inline_in_a_page_is_refused(sandbox):
    page = sandbox / "docs" / "reference" / "errors.md"
    page.write_text(page.read_text() + "\n```python\nprint('typed into the page')\n```\n")
    assert skills(sandbox, "generate").returncode == 0
    assert_fails_with_fix(sandbox, "a Python block that does not come from a snippet file")


def test_unresolved_anchor_is_caught(sandbox):
    page = sandbox / "docs" / "reference" / "errors.md"
    page.write_text(page.read_text().replace("slot-sizing.md#the-rule", "slot-sizing.md#no-such-heading"))
    assert skills(sandbox, "generate").returncode == 0
    assert_fails_with_fix(sandbox, "anchor #no-such-heading")


def test_package_builds_the_same_archive_twice(sandbox, tmp_path):
    first = skills(sandbox, "package", "--out", str(tmp_path / "a"))
    second = skills(sandbox, "package", "--out", str(tmp_path / "b"))
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    a, b = tmp_path / "a" / f"{SKILL}.zip", tmp_path / "b" / f"{SKILL}.zip"
    assert a.read_bytes() == b.read_bytes()
    with zipfile.ZipFile(a) as zf:
        assert sorted(zf.namelist()) == [
            f"{SKILL}/SKILL.md",
            f"{SKILL}/references/errors.md",
            f"{SKILL}/references/slot-sizing.md",
            f"{SKILL}/scripts/rtm_check.py",
        ]


def test_package_refuses_a_stale_skill(sandbox, tmp_path):
    (sandbox / "skills" / SKILL / "SKILL.md").write_text("edited by hand\n")
    result = skills(sandbox, "package", "--out", str(tmp_path))
    assert result.returncode == 1 and "not packaging" in result.stderr
    assert not (tmp_path / f"{SKILL}.zip").exists()


def test_the_repository_skill_is_current():
    """What CI holds to: the committed skill matches the committed docs and snippets (run as CI runs it)."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "skills.py"), "validate"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr


def test_missing_results_file_fails_and_a_new_one_makes_the_skill_stale(sandbox):
    page = sandbox / "docs" / "reference" / "errors.md"
    page.write_text(page.read_text() + '\n--8<-- "docs/results/latency.md"\n')
    result = skills(sandbox, "generate")
    assert result.returncode == 2 and "docs/results/latency.md does not exist" in result.stderr
    (sandbox / "docs" / "results").mkdir()
    (sandbox / "docs" / "results" / "latency.md").write_text("| mode | p50 ms |\n|---|---|\n| realtime | 7 |\n")
    assert skills(sandbox, "generate").returncode == 0
    assert "| realtime | 7 |" in (sandbox / "skills" / SKILL / "references" / "errors.md").read_text()
    (sandbox / "docs" / "results" / "latency.md").write_text("| mode | p50 ms |\n|---|---|\n| realtime | 8 |\n")
    assert_fails_with_fix(sandbox, "stale: skills/spark-real-time-mode/references/errors.md")


def test_the_skill_expands_includes_with_the_sites_snippet_settings():
    """The renderer runs pymdownx.snippets itself; its settings must be the ones mkdocs.yml gives the site."""
    import yaml

    from skillgen.markdown import SNIPPETS_CONFIG

    extensions = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["markdown_extensions"]
    site = next(e["pymdownx.snippets"] for e in extensions if isinstance(e, dict) and "pymdownx.snippets" in e)
    assert site == {**SNIPPETS_CONFIG, "base_path": ["."]}

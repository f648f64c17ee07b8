"""The skill generator: deterministic, idempotent, catches tampering and staleness, picks up new pages and snippets.

Each test works on a small sandbox repository (the real template and quick-start snippet plus pages written here),
so it does not depend on which docs pages exist yet; one test checks the real repository's skill is current.
"""

import contextlib
import hashlib
import io
import json
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from rtm_lab.paths import PROJECT_ROOT
from rtm_lab.skillgen import commands

SKILL = "spark-real-time-mode"
FIX_HINT = "python scripts/skills.py generate"
TEMPLATES = "scripts/rtm_lab/skillgen/templates"
VERSION = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]["version"]

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

## Worked examples

Four slots.

Verified by `tests/reference/test_slot_sizing.py::test_runs_at_exactly_the_calculated_slots` on Spark 4.3.0.

## Two real-time queries on one cluster

Slots add up.
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
    shutil.copy(PROJECT_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(PROJECT_ROOT / TEMPLATES, tmp_path / TEMPLATES)
    (tmp_path / "snippets" / "quickstart").mkdir(parents=True)
    shutil.copy(PROJECT_ROOT / "snippets" / "quickstart" / "kafka_to_kafka.py", tmp_path / "snippets" / "quickstart")
    (tmp_path / "snippets" / "reference").mkdir()
    (tmp_path / "snippets" / "reference" / "slot_sizing.py").write_text(SNIPPET)
    shutil.copy(PROJECT_ROOT / "snippets" / "reference" / "readiness_check.py", tmp_path / "snippets" / "reference")
    (tmp_path / "snippets" / "guides").mkdir()
    shutil.copy(PROJECT_ROOT / "snippets" / "guides" / "capacity_plan.py", tmp_path / "snippets" / "guides")
    (tmp_path / "docs" / "reference").mkdir(parents=True)
    (tmp_path / "docs" / "get-started.md").write_text("---\ntitle: Get started\ndescription: Start here.\n---\n")
    (tmp_path / "docs" / "reference" / "slot-sizing.md").write_text(PAGE)
    (tmp_path / "docs" / "reference" / "errors.md").write_text(ERRORS_PAGE)
    # The test the page's "Verified by" names: validate checks that a file named in backticks exists.
    (tmp_path / "tests" / "reference").mkdir(parents=True)
    (tmp_path / "tests" / "reference" / "test_slot_sizing.py").write_text("")
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
    source = (PROJECT_ROOT / "snippets" / "reference" / "readiness_check.py").read_bytes()
    shipped = sandbox / "skills" / SKILL / "scripts" / "rtm_check.py"
    assert shipped.read_bytes() == source
    manifest = json.loads((sandbox / "manifest.json").read_text())
    entry = next(f for f in manifest["skills"][0]["files"] if f["path"] == "scripts/rtm_check.py")
    assert entry["sha256"] == hashlib.sha256(source).hexdigest() and entry["size"] == len(source)


def test_a_page_ships_a_whole_file_it_names_and_the_skill_names_it_by_its_skill_path(sandbox):
    """`skill_files` in a page's frontmatter ships a repository file whole; every mention of its repository path in
    the skill (a command, a sentence) becomes its path in the skill, except the source notes validate reads, and
    SKILL.md's `{{ shipped }}` lists it."""
    page = sandbox / "docs" / "reference" / "slot-sizing.md"
    text = page.read_text().replace(
        "title: Slot sizing\n",
        "title: Slot sizing\nskill_files:\n  assets/reference/slot_sizing.py: snippets/reference/slot_sizing.py\n",
    )
    page.write_text(text + "\nRun `python snippets/reference/slot_sizing.py` on your query.\n")
    template = sandbox / TEMPLATES / SKILL / "SKILL.md"
    template.write_text(template.read_text() + "\nShips: {{ shipped }}.\n")
    assert skills(sandbox, "generate").returncode == 0
    out = sandbox / "skills" / SKILL
    assert (out / "assets" / "reference" / "slot_sizing.py").read_text() == SNIPPET
    reference = (out / "references" / "slot-sizing.md").read_text()
    assert "Run `python assets/reference/slot_sizing.py` on your query." in reference
    assert "<!-- source: snippets/reference/slot_sizing.py:rule -->" in reference
    assert (
        "Ships: `assets/quickstart/kafka_to_kafka.py`, `assets/reference/slot_sizing.py`, `scripts/rtm_check.py`, "
        "`scripts/rtm_plan.py`." in (out / "SKILL.md").read_text()
    )
    assert skills(sandbox, "validate").returncode == 0


def test_a_shipped_file_must_land_under_scripts_or_assets(sandbox):
    page = sandbox / "docs" / "reference" / "slot-sizing.md"
    page.write_text(
        page.read_text().replace(
            "title: Slot sizing\n", "title: Slot sizing\nskill_files:\n  x.py: snippets/reference/slot_sizing.py\n"
        )
    )
    result = skills(sandbox, "generate")
    assert result.returncode != 0 and "skill_files: x.py must be a new path under scripts/ or assets/" in result.stderr


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
    assert entry["name"] == SKILL and entry["version"] == VERSION and len(entry["description"]) > 100
    listed = {f["path"]: f for f in entry["files"]}
    assert sorted(listed) == [
        "CHANGELOG.md",
        "SKILL.md",
        "assets/quickstart/kafka_to_kafka.py",
        "references/errors.md",
        "references/slot-sizing.md",
        "scripts/rtm_check.py",
        "scripts/rtm_plan.py",
    ]
    for path, info in listed.items():
        data = (sandbox / "skills" / SKILL / path).read_bytes()
        assert info["size"] == len(data) and info["sha256"] == hashlib.sha256(data).hexdigest()
    raw = (sandbox / "manifest.json").read_text()
    assert raw == json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_the_skill_ships_the_planner_and_the_measured_capacities_once_they_exist(sandbox):
    """The planner ships as scripts/rtm_plan.py; the per-task capacities ship beside it only once the benchmark has
    written them, and then only the parts the planner and a reader of the figures need."""
    planner = sandbox / "skills" / SKILL / "scripts" / "rtm_plan.py"
    assert planner.read_bytes() == (PROJECT_ROOT / "snippets" / "guides" / "capacity_plan.py").read_bytes()
    shipped = sandbox / "skills" / SKILL / "scripts" / "per-task-throughput.json"
    assert not shipped.exists()
    results = sandbox / "docs" / "results"
    results.mkdir(parents=True)
    measured = {"benchmark": "per-task", "runs": [{"rate": 1}], "capacity": {"dedup": {"100": {"held_rate": 9}}}}
    (results / "per-task-throughput.json").write_text(json.dumps(measured))
    assert skills(sandbox, "generate").returncode == 0
    assert json.loads(shipped.read_text()) == {
        "source": "docs/results/per-task-throughput.json",
        "capacity": {"dedup": {"100": {"held_rate": 9}}},
    }


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
    # The template's routing row for this page was left out while the page was missing; now it is there.
    assert "| tuning the Kafka source or sink | [Kafka tuning](references/kafka-tuning.md) |" in skill_md
    manifest = json.loads((sandbox / "manifest.json").read_text())
    assert "references/kafka-tuning.md" in {f["path"] for f in manifest["skills"][0]["files"]}
    assert skills(sandbox, "validate").returncode == 0


def test_unquoted_colon_in_template_frontmatter_is_refused(sandbox):
    template = sandbox / TEMPLATES / SKILL / "SKILL.md"
    text = template.read_text()
    start = text.index("description: ")
    end = text.index("\n", start)
    template.write_text(text[:start] + "description: Spark real-time mode, use when: writing RTM queries" + text[end:])
    result = skills(sandbox, "generate")
    assert result.returncode == 2
    assert "unquoted ': '" in result.stderr and "double quotes" in result.stderr
    assert_fails_with_fix(sandbox, "unquoted ': '")


def test_bad_skill_name_is_refused(sandbox):
    template = sandbox / TEMPLATES / SKILL / "SKILL.md"
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
            f"{SKILL}/CHANGELOG.md",
            f"{SKILL}/SKILL.md",
            f"{SKILL}/assets/quickstart/kafka_to_kafka.py",
            f"{SKILL}/references/errors.md",
            f"{SKILL}/references/slot-sizing.md",
            f"{SKILL}/scripts/rtm_check.py",
            f"{SKILL}/scripts/rtm_plan.py",
        ]


def test_package_refuses_a_stale_skill(sandbox, tmp_path):
    (sandbox / "skills" / SKILL / "SKILL.md").write_text("edited by hand\n")
    result = skills(sandbox, "package", "--out", str(tmp_path))
    assert result.returncode == 1 and "not packaging" in result.stderr
    assert not (tmp_path / f"{SKILL}.zip").exists()


def test_the_repository_skill_is_current():
    """What CI holds to: the committed skill matches the committed docs and snippets (run as CI runs it)."""
    result = subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "scripts" / "skills.py"), "validate"],
        capture_output=True,
        text=True,
        timeout=60,
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

    from rtm_lab.skillgen.markdown import SNIPPETS_CONFIG

    extensions = yaml.safe_load((PROJECT_ROOT / "mkdocs.yml").read_text())["markdown_extensions"]
    site = next(e["pymdownx.snippets"] for e in extensions if isinstance(e, dict) and "pymdownx.snippets" in e)
    assert site == {**SNIPPETS_CONFIG, "base_path": ["."]}


# ---- The skill's format, budget and routing, each rule shown catching a violation ----------------------------------


def set_template_field(root: Path, key: str, value: str) -> None:
    """Replace (or add) one line of the template's frontmatter."""
    template = root / TEMPLATES / SKILL / "SKILL.md"
    text = template.read_text()
    head, sep, body = text[4:].partition("\n---\n")
    lines = [line for line in head.splitlines() if not line.startswith(f"{key}:")]
    template.write_text("---\n" + "\n".join([*lines, f"{key}: {value}"]) + sep + body)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("name", '"' + "a" * 65 + '"', "at most 64 characters"),
        ("name", '"other-skill"', "(the file or folder name)"),
        ("description", '"' + "Use when testing. " * 60 + '"', "20-1024 characters"),
        ("description", '"Use when writing a <query> with real-time mode."', "must not contain '<' or '>'"),
        ("description", '"Apache Spark real-time mode, as tested on 4.3.0."', "must say when to use the skill"),
        ("version", '"1.0"', "not allowed in a SKILL.md"),
    ],
)
def test_each_agent_skills_format_rule_refuses_a_violation(sandbox, key, value, message):
    set_template_field(sandbox, key, value)
    result = skills(sandbox, "generate")
    assert result.returncode == 2 and message in result.stderr, result.stderr


def test_the_rendered_skill_md_is_checked_by_the_same_rules(sandbox):
    """Validate reads the output too: a hand-added field in skills/ is caught, not only in the template."""
    path = sandbox / "skills" / SKILL / "SKILL.md"
    path.write_text(path.read_text().replace("\nmetadata:\n", "\nauthor: someone\nmetadata:\n", 1))
    assert_fails_with_fix(sandbox, "stale: skills/spark-real-time-mode/SKILL.md", "author are not allowed")


def test_the_version_is_in_metadata_and_the_changelog_must_name_it(sandbox):
    skill_md = (sandbox / "skills" / SKILL / "SKILL.md").read_text()
    assert f'\nmetadata:\n  version: "{VERSION}"\n---\n' in skill_md
    changelog = sandbox / TEMPLATES / SKILL / "CHANGELOG.md"
    changelog.write_text(changelog.read_text().replace(f"## {VERSION}", "## 9.9.9", 1))
    assert skills(sandbox, "generate").returncode == 0
    assert_fails_with_fix(sandbox, f"its newest entry must be '## {VERSION}'")


def test_a_link_to_a_missing_file_is_caught(sandbox):
    page = sandbox / "docs" / "reference" / "errors.md"
    page.write_text(page.read_text() + "\nSee [the sizing](slot-sizing.md) and [gone](../../skills/x.md).\n")
    assert skills(sandbox, "generate").returncode == 0
    text = (sandbox / "skills" / SKILL / "references" / "errors.md").read_text()
    assert "[the sizing](slot-sizing.md)" in text  # resolves: stays a link
    path = sandbox / "skills" / SKILL / "references" / "errors.md"
    path.write_text(text.replace("(slot-sizing.md)", "(no-such-file.md)"))
    assert_fails_with_fix(sandbox, "link target 'no-such-file.md' is not a file inside the skill")


def test_a_link_wrapped_over_two_lines_is_followed_and_checked(sandbox):
    """A link whose text wraps onto the next line is one link: the renderer points it at the file holding the
    heading, and validate checks its anchor (a line-by-line reader missed both)."""
    page = sandbox / "docs" / "reference" / "errors.md"
    page.write_text(page.read_text() + "\nSee [the rule for\nslots](slot-sizing.md#the-rule) first.\n")
    assert skills(sandbox, "generate").returncode == 0
    path = sandbox / "skills" / SKILL / "references" / "errors.md"
    text = path.read_text()
    assert "[the rule for\nslots](slot-sizing.md#the-rule)" in text
    assert skills(sandbox, "validate").returncode == 0
    path.write_text(text.replace("[the rule for\nslots](slot-sizing.md#the-rule)", "[the rule for\nslots](#the-rule)"))
    stderr = assert_fails_with_fix(sandbox, "anchor #the-rule of '#the-rule' matches no heading")
    assert "references/errors.md:" in stderr


def test_a_file_path_named_in_backticks_must_exist(sandbox):
    """`references/...`, `assets/...`, `tests/...`: a path in backticks names a file of the skill or of the
    repository; a test or page renamed without its mentions fails validate. Other trees' paths are not ours."""
    page = sandbox / "docs" / "reference" / "errors.md"
    page.write_text(
        page.read_text()
        + "\nThe sizing is in `references/slot-sizing.md`, proven by `tests/reference/test_slot_sizing.py::test_x`;"
        + " Spark's is `sbin/start-master.sh` and its guide `docs/streaming/real-time-mode.md`.\n"
    )
    assert skills(sandbox, "generate").returncode == 0
    assert skills(sandbox, "validate").returncode == 0
    (sandbox / "tests" / "reference" / "test_slot_sizing.py").unlink()
    assert_fails_with_fix(
        sandbox, "`tests/reference/test_slot_sizing.py` names no file of the skill or of the repository"
    )


def test_word_budget_is_enforced_per_file(sandbox):
    page = sandbox / "docs" / "reference" / "errors.md"
    page.write_text(page.read_text() + "\n" + "word " * 2500 + "\n")
    assert skills(sandbox, "generate").returncode == 0
    assert_fails_with_fix(sandbox, "references/errors.md: 25", "over the budget of 2500")
    template = sandbox / TEMPLATES / SKILL / "SKILL.md"
    page.write_text(ERRORS_PAGE)
    template.write_text(template.read_text() + "\n" + "word " * 2000 + "\n")
    assert skills(sandbox, "generate").returncode == 0
    assert_fails_with_fix(sandbox, "SKILL.md: 2", "over the budget of 2000")


def test_a_reference_no_route_reaches_is_caught(sandbox):
    (sandbox / "docs" / "reference" / "orphan.md").write_text(
        "---\ntitle: Orphan\ndescription: A page the template does not route to.\n---\n\n# Orphan\n\nText.\n"
    )
    assert skills(sandbox, "generate").returncode == 0
    assert_fails_with_fix(sandbox, "references/orphan.md: no link from SKILL.md reaches it")


SPLIT_PAGE = """---
title: Sink
description: A sink page split over two skill references.
skill_references:
  sink-ops:
    title: "Sink: operating it"
    description: Running the sink.
---

# Sink

## Writing

See [budget](#budget) and [walkthrough](#walkthrough).

Verified by `tests/x.py::test_writes` on Spark 4.3.0.

<!-- skill-omit -->

## Walkthrough

A long walkthrough.

<!-- /skill-omit -->

<!-- skill-text: The walkthrough is on the site. -->

<!-- skill: sink-ops -->

## Budget

Back to [writing](#writing).

Verified by `tests/x.py::test_budget` and `tests/x.py::test_more` on Spark 4.3.0 with the Kafka connector 4.2.0.
"""


def test_a_page_split_over_references_keeps_links_and_gathers_proofs(sandbox):
    (sandbox / "docs" / "guides").mkdir()
    (sandbox / "docs" / "guides" / "sink.md").write_text(SPLIT_PAGE)
    assert skills(sandbox, "generate").returncode == 0
    refs = sandbox / "skills" / SKILL / "references"
    main, ops = (refs / "sink.md").read_text(), (refs / "sink-ops.md").read_text()
    assert "## Budget" not in main and "# Sink: operating it\n\n## Budget" in ops
    assert "[budget](sink-ops.md#budget)" in main and "[writing](sink.md#writing)" in ops
    # The omitted section is gone, a link to it names the docs page, and the skill-only line shows.
    assert "A long walkthrough" not in main and "walkthrough (docs page `docs/guides/sink.md#walkthrough`)" in main
    assert "The walkthrough is on the site." in main
    # Proof lines: one list at the end, tests named, linked to their section, versions stated once.
    assert "Verified by" not in main + ops
    assert main.rstrip().endswith("- [Writing](#writing): `tests/x.py::test_writes`")
    assert ops.rstrip().endswith("- [Budget](#budget): `tests/x.py::test_budget` and `tests/x.py::test_more`")


def test_an_asset_block_becomes_a_skill_file(sandbox):
    (sandbox / "snippets" / "jvm").mkdir()
    (sandbox / "snippets" / "jvm" / "W.java").write_text("class W {}\n")
    page = sandbox / "docs" / "reference" / "errors.md"
    text = page.read_text().replace("---\n\n", "skill_assets:\n  - snippets/jvm/W.java\n---\n\n", 1)
    page.write_text(text + '\n```java\n--8<-- "snippets/jvm/W.java"\n```\n')
    assert skills(sandbox, "generate").returncode == 0, skills(sandbox, "generate").stderr
    skill_dir = sandbox / "skills" / SKILL
    assert (skill_dir / "assets" / "jvm" / "W.java").read_text() == "class W {}\n"
    assert "[W.java](../assets/jvm/W.java)" in (skill_dir / "references" / "errors.md").read_text()
    assert skills(sandbox, "validate").returncode == 0


def test_an_unknown_case_in_the_template_is_refused(sandbox):
    template = sandbox / TEMPLATES / SKILL / "SKILL.md"
    template.write_text(template.read_text() + "\n| x | {{ case sink-nothing }} | [e](references/errors.md) |\n")
    result = skills(sandbox, "generate")
    assert result.returncode == 2 and "no support-matrix case sink-nothing" in result.stderr


def test_no_template_or_second_skill_under_skills():
    """A tool that scans skills/ for SKILL.md must find exactly the rendered skill."""
    found = sorted(p.relative_to(PROJECT_ROOT).as_posix() for p in (PROJECT_ROOT / "skills").rglob("SKILL.md"))
    assert found == [f"skills/{SKILL}/SKILL.md"]
    assert "--8<--" not in (PROJECT_ROOT / "skills" / SKILL / "SKILL.md").read_text()


# ---- The "Can I ...?" table -----------------------------------------------------------------------------------------

CAN_I_ROWS = 23


def can_i_rows() -> list[list[str]]:
    text = (PROJECT_ROOT / "skills" / SKILL / "SKILL.md").read_text()
    section = text.split("## Can I ...?", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| Can I")]
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]


def section_of(path: Path, anchor: str) -> str:
    """A heading's text up to the next heading of the same or a higher level."""
    from rtm_lab.skillgen.markdown import slugify, strip_fenced

    lines = strip_fenced(path.read_text()).splitlines()
    for index, line in enumerate(lines):
        heading = re.match(r"^(#{1,6})\s+(.*)$", line)
        if heading and slugify(heading[2]) == anchor:
            level, out = len(heading[1]), []
            for rest in lines[index + 1 :]:
                nxt = re.match(r"^(#{1,6})\s", rest)
                if nxt and len(nxt[1]) <= level:
                    break
                out.append(rest)
            return "\n".join(out)
    raise AssertionError(f"{path.name} has no heading #{anchor}")


def test_can_i_table_rows_link_existing_sections_that_back_them():
    rows = can_i_rows()
    assert len(rows) == CAN_I_ROWS, [r[0] for r in rows]
    skill_dir = PROJECT_ROOT / "skills" / SKILL
    for question, oss, databricks, proof in rows:
        links = re.findall(r"\]\((references/[^)#]+)#([^)]+)\)", proof)
        assert links, f"{question}: no link to a section"
        sections = [(skill_dir / file, section_of(skill_dir / file, anchor), anchor) for file, anchor in links]
        if oss.startswith(("**Yes**", "**No**")):
            # An OSS answer is a tested claim: a linked section is in its reference's list of tests, or names one.
            assert any(
                f"](#{anchor})" in path.read_text().split("## Tests behind this reference", 1)[-1] or "`tests/" in text
                for path, text, anchor in sections
            ), f"{question}: no linked section names a test"
        if oss.startswith("Not run here"):
            assert any("Not run here" in text for _, text, _ in sections), f"{question}: no 'Not run here' label"
        if databricks != "-":
            assert any("Databricks" in text for _, text, _ in sections), f"{question}: no Databricks source linked"


def test_can_i_rows_about_cases_say_what_the_case_list_says():
    """Rows about sources, sinks, operators and errors are rendered from the tested cases, not typed."""
    from rtm_lab.probes.mistakes import MISTAKES
    from rtm_lab.probes.support_matrix import CASES

    rows = {row[0]: row for row in can_i_rows()}
    cases = {c.id: c for c in CASES}
    assert cases["sink-foreachbatch"].expected.error in rows["use `foreachBatch`?"][1]
    assert cases["sink-foreachbatch"].databricks == rows["use `foreachBatch`?"][2]
    assert (
        cases["operator-dropduplicateswithinwatermark"].expected.error
        in rows["use `dropDuplicatesWithinWatermark`?"][1]
    )
    from rtm_lab.probes.allowlist_off import CASES as OFF
    from rtm_lab.probes.allowlist_off import RUNS_CORRECTLY

    off = rows["switch the allowlist off (`allowlistCheck=false`)?"][1]
    for case in OFF:
        named = case.refusal.split(" (")[0]
        assert named in off, named
        if case.expected.kind != RUNS_CORRECTLY and f"{named} still fails" in off:
            assert case.expected.error in off
    boolean = next(m for m in MISTAKES if m.id == "boolean_trigger")
    assert (
        boolean.expected.error in rows["write `trigger(realTime=True)`?"][1]
        and boolean.fix in rows["write `trigger(realTime=True)`?"][1]
    )


def test_the_packaged_skill_loads_as_is(tmp_path):
    """What `make skill` ships: unzipped into a skills folder, the folder alone passes the format and link rules."""
    from rtm_lab.skillgen.checks import link_problems
    from rtm_lab.skillgen.frontmatter import frontmatter_problems

    result = skills(PROJECT_ROOT, "package", "--out", str(tmp_path / "dist"))
    assert result.returncode == 0, result.stderr
    with zipfile.ZipFile(tmp_path / "dist" / f"{SKILL}.zip") as zf:
        zf.extractall(tmp_path / "skills")
    folder = tmp_path / "skills" / SKILL
    assert sorted(p.name for p in folder.iterdir()) == ["CHANGELOG.md", "SKILL.md", "assets", "references", "scripts"]
    problems = frontmatter_problems((folder / "SKILL.md").read_text(), "SKILL.md", SKILL, skill=True)
    for path in sorted(folder.rglob("*.md")):
        problems += link_problems(path, path.read_text(), folder)
    assert problems == []


def test_stateful_latency_row_takes_its_figures_from_the_results_file():
    """The stateful-latency answer's numbers are rendered from docs/results/ad_attribution_latency.json, not typed."""
    result = json.loads((PROJECT_ROOT / "docs" / "results" / "ad_attribution_latency.json").read_text())
    (run,) = [r for r in result["runs"] if r["rate"] == 1000]
    wait = result["settings"]["session_conf"]["spark.shuffle.streaming.networkBufferMaxWaitTimeMs"]
    rows = {row[0]: row for row in can_i_rows()}
    answer = rows["cut a stateful query's latency?"][1]

    def shown(value) -> str:
        return f"{int(value):,}" if float(value).is_integer() else f"{value:,}"

    figures = run["modes"]["realtime"]["figures"]
    assert f"At {wait} ms" in answer, answer
    p50, p99 = figures["p50_ms"]["median"], figures["p99_ms"]["median"]
    assert f"p50 {shown(p50)} ms, p99 {shown(p99)} ms, medians of {result['repeat']} runs" in answer, answer
    # The condition the figures hold under: the run's fetch wait and producer linger, at a moderate rate.
    s = result["settings"]
    assert answer.startswith("**Yes**, at a moderate rate:"), answer
    assert f"with fetch wait {s['kafka_fetch_max_wait_ms']} ms and linger {s['producer_linger_ms']} ms:" in answer, (
        answer
    )


def test_stateful_latency_row_says_the_shorter_wait_made_deduplication_worse_near_saturation():
    """At 10,000 events/s on two cores (full CPU), real-time deduplication with the 5 ms shuffle wait had a higher
    median p50 and p99 than at the 50 ms default: in each pair of the stall factorial's cells that differ only in the
    wait, and in the first engine comparison (tuned against default). The row's "made deduplication worse"."""
    import statistics

    from rtm_lab.benchmarks import dedup_stall_report

    engines = json.loads((PROJECT_ROOT / "docs" / "results" / "engines.json").read_text())
    answer = {row[0]: row for row in can_i_rows()}["cut a stateful query's latency?"][1]
    assert ("At full CPU it made deduplication worse: see [the stall](references/rtm-or-flink-stall.md)") in answer
    stall = json.loads((PROJECT_ROOT / "docs" / "results" / "dedup-stall.json").read_text())
    cells = dedup_stall_report.by_cell(stall)
    pairs = [(c, c.replace("/5ms/", "/50ms/")) for c in cells if c.startswith("spark/") and "/5ms/" in c]
    assert len(pairs) == 4 and all(b in cells for _, b in pairs), pairs
    for five, fifty in pairs:
        for figure in ("p50_ms", "p99_ms"):
            slow = statistics.median(r[figure] for r in cells[five])
            assert slow > statistics.median(r[figure] for r in cells[fifty]), (five, figure)
        assert all(min(r["core_busy"].values()) >= 0.57 for r in cells[five])

    def median(profile: str, figure: str) -> float:
        runs = [
            r[figure]
            for r in engines["runs"].values()
            if (r["engine"], r["pipeline"], r["rate"], r["profile"]) == ("spark", "dedup", 10000, profile)
        ]
        assert runs, profile
        return statistics.median(runs)

    tuned = engines["settings"]["profiles"]["tuned"]["spark"]
    assert tuned == {"spark.shuffle.streaming.networkBufferMaxWaitTimeMs": "5"}, tuned
    for figure in ("p50_ms", "p99_ms"):
        assert median("tuned", figure) > median("default", figure), figure


def test_a_figure_directive_with_no_single_value_fails_the_render():
    from rtm_lab.skillgen.answers import expand
    from rtm_lab.skillgen.markdown import RenderError

    with pytest.raises(RenderError, match="no single value at 'rate=7'"):
        expand("{{ figure ad_attribution_latency.json:runs/rate=7/rate }}", "SKILL.md")
    with pytest.raises(RenderError, match="does not exist"):
        expand("{{ figure nothing.json:a }}", "SKILL.md")


def test_skill_md_links_the_bundled_quick_start_and_names_no_repository_path():
    """The quick start ships whole in assets/ and SKILL.md links it there; no link became a repository path."""
    text = (PROJECT_ROOT / "skills" / SKILL / "SKILL.md").read_text()
    assert "](assets/quickstart/kafka_to_kafka.py)" in text
    assert (PROJECT_ROOT / "skills" / SKILL / "assets" / "quickstart" / "kafka_to_kafka.py").read_bytes() == (
        PROJECT_ROOT / "snippets" / "quickstart" / "kafka_to_kafka.py"
    ).read_bytes()
    assert "(`scripts/" not in text and "(`docs/" not in text and "(`snippets/" not in text


def test_skill_names_every_machine_its_results_were_measured_on(tmp_path):
    """SKILL.md's sentence on where figures come from is rendered from the results files' machine records: two
    machines recorded, two named (with the results each measured); one recorded, one named."""
    from rtm_lab.skillgen.answers import machines_answer

    def record(name: str, cpu: str) -> None:
        (tmp_path / f"{name}.json").write_text(json.dumps({"machine": {"cores": 2, "cpu_model": cpu}}))

    record("latency", "AMD EPYC")
    record("sink", "AMD EPYC")
    assert machines_answer(tmp_path) == "one 2-core machine (AMD EPYC)"
    record("sink-5s", "Intel Xeon")
    assert machines_answer(tmp_path) == "two 2-core machines (AMD EPYC; Intel Xeon for sink-5s)"
    skill = (Path(__file__).resolve().parents[2] / "skills" / "spark-real-time-mode" / "SKILL.md").read_text()
    assert machines_answer() in skill


def test_a_machine_recorded_per_run_is_named_too(tmp_path):
    """A results file that keeps its machine in each run's record (the engine comparison does) counts like one that
    keeps it at the top."""
    from rtm_lab.skillgen.answers import machines_answer

    (tmp_path / "latency.json").write_text(json.dumps({"machine": {"cores": 2, "cpu_model": "AMD EPYC"}}))
    (tmp_path / "sink.json").write_text(json.dumps({"machine": {"cores": 2, "cpu_model": "AMD EPYC"}}))
    per_run = {"runs": {"spark/1": {"machine": {"cores": 2, "cpu_model": "Intel Xeon"}}}, "capacity": {}}
    (tmp_path / "engines.json").write_text(json.dumps(per_run))
    assert machines_answer(tmp_path) == "two 2-core machines (AMD EPYC; Intel Xeon for engines)"


def test_every_results_file_with_a_machine_record_is_named_in_the_skill():
    """Each results file is accounted for in SKILL.md's machine list: its machine is named, and a file measured on a
    machine other than the one most results come from is named beside that machine."""
    from rtm_lab.skillgen.answers import RESULTS, machines_answer, recorded_machines

    answer = machines_answer()
    by_file = {p.stem: recorded_machines(json.loads(p.read_text())) for p in sorted(RESULTS.glob("*.json"))}
    by_file = {name: machines for name, machines in by_file.items() if machines}
    assert "engines" in by_file  # its machine records sit in each run's record, none at the top
    counts: dict[tuple, int] = {}
    for machines in by_file.values():
        for machine in machines:
            counts[machine] = counts.get(machine, 0) + 1
    main = max(counts, key=lambda m: counts[m])
    for name, machines in by_file.items():
        for cores, cpu in machines:
            assert cpu in answer, name
            if (cores, cpu) != main:
                assert re.search(rf"{re.escape(cpu)}[^;)]* for [^;)]*\b{re.escape(name)}\b", answer), (name, answer)

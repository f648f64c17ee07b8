"""`validate`: every way the skill on disk can differ from what the docs and snippets say, as fixable messages."""

import re
from pathlib import Path

from rtm_lab.skillgen.frontmatter import frontmatter_problems
from rtm_lab.skillgen.markdown import LINK, NOT_RUN_NOTE, RenderError, anchors, fence_spans, snippet_text, strip_fenced
from rtm_lab.skillgen.render import (
    CHANGELOG,
    GENERATE_COMMAND,
    MANIFEST,
    SKILLS_DIR,
    TEMPLATES_DIR,
    project_version,
    render_all,
)

SOURCE_NOTE = re.compile(r"^\s*<!-- source: (?P<specs>.+?) -->\s*$")
# The context an assistant spends on one file: whitespace-separated tokens of the whole file, code included.
MAX_WORDS = {"SKILL.md": 2000, "references": 2500}
NOT_RUN = re.compile("^\\s*" + re.escape(NOT_RUN_NOTE).replace(re.escape("{reason}"), ".+") + "\\s*$")


# A file path in backticks (`references/setup.md`, `tests/x.py::test_y`): a folder, then a name with an extension.
CODE_PATH = re.compile(r"`(?P<path>(?:\.\.?/)*[\w.-]+(?:/[\w.-]+)+\.[A-Za-z]\w*)(?:::[^`]*)?`")
# The top-level folders of the skill and of the repository: a path under one of them names a file of ours.
OWN_FOLDERS = ("references", "assets", "scripts", "docs", "tests", "snippets", ".", "..")
# Files of Spark's repository the pages quote by path, which this repository does not have.
SPARK_FILES = frozenset({"docs/streaming/real-time-mode.md"})


def link_problems(path: Path, text: str, skill_dir: Path) -> list[str]:
    """Every link (one wrapped over two lines included) must reach a file inside the skill, and its anchor a heading
    there. The skill alone is enough to check this: a packaged copy passes it too."""
    problems = []
    where = path.relative_to(skill_dir.parent.parent).as_posix()
    own = anchors(text)
    prose = strip_fenced(text)
    for match in LINK.finditer(prose):
        number, target = _line_of(prose, match.start("target")), match["target"]
        if "://" in target or target.startswith("mailto:"):
            continue
        file_part, _, anchor = target.partition("#")
        if file_part:
            resolved = (path.parent / file_part).resolve()
            if skill_dir.resolve() not in resolved.parents or not resolved.is_file():
                problems.append(f"{where}:{number}: link target {target!r} is not a file inside the skill.")
                continue
            found = anchors(resolved.read_text(encoding="utf-8")) if resolved.suffix == ".md" else set()
        else:
            found = own
        if anchor and anchor not in found:
            problems.append(f"{where}:{number}: anchor #{anchor} of {target!r} matches no heading.")
    return problems


def path_problems(path: Path, text: str, skill_dir: Path, root: Path) -> list[str]:
    """Every file path named in backticks under one of our top-level folders must be a file of the skill or of the
    repository at `root` (a renamed test or page leaves its mentions behind otherwise)."""
    problems = []
    where = path.relative_to(root).as_posix()
    prose = strip_fenced(text)
    for match in CODE_PATH.finditer(prose):
        named = match["path"]
        if named.split("/", 1)[0] not in OWN_FOLDERS or named in SPARK_FILES:
            continue
        if not any(p.is_file() for p in (path.parent / named, skill_dir / named, root / named)):
            problems.append(
                f"{where}:{_line_of(prose, match.start())}: `{named}` names no file of the skill or of the repository."
            )
    return problems


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def code_problems(root: Path, path: Path, text: str) -> list[str]:
    """Every Python block must be a snippet section (unchanged) or an explicitly not-run illustration."""
    problems = []
    where = path.relative_to(root).as_posix()
    lines = text.splitlines()
    for index, close, fence in fence_spans(lines):
        language = fence["info"].strip().split(" ")[0].lower()
        if language not in ("python", "py", "python3", "pycon"):
            continue
        previous = next((lines[n] for n in range(index - 1, -1, -1) if lines[n].strip()), "")
        body = "\n".join(line[len(fence["indent"]) :] for line in lines[index + 1 : close]).strip("\n")
        source = SOURCE_NOTE.match(previous)
        if source:
            try:
                expected = "\n".join(snippet_text(root, s.strip(), where) for s in source["specs"].split(", "))
            except RenderError as exc:
                problems.append(f"{where}:{index + 1}: {exc}")
            else:
                if body != expected:
                    problems.append(
                        f"{where}:{index + 1}: this block differs from {source['specs']}. Run `{GENERATE_COMMAND}`."
                    )
        elif not NOT_RUN.match(previous):
            problems.append(
                f"{where}:{index + 1}: a Python block that does not come from a snippet file. Move the code into "
                "snippets/<area>/<page>.py between '# --8<-- [start:name]' / '[end:name]' markers and include it "
                'on the page with --8<-- "snippets/...py:name", or mark the page\'s block '
                '`python {test="skip" reason="..."}` if it cannot run here.'
            )
    return problems


def word_problems(rel: str, text: str) -> list[str]:
    """SKILL.md is read whenever the skill applies; a reference whenever its topic comes up: both stay small."""
    limit = MAX_WORDS["SKILL.md"] if rel.endswith("/SKILL.md") else MAX_WORDS["references"]
    if "/references/" not in rel and not rel.endswith("/SKILL.md"):
        return []
    words = len(text.split())
    if words <= limit:
        return []
    return [
        f"{rel}: {words} words, over the budget of {limit}. Leave long walkthroughs out of the skill "
        "(<!-- skill-omit --> ... <!-- /skill-omit --> on the page), or split the page over several references "
        "(<!-- skill: name --> markers; see scripts/rtm_lab/skillgen/parts.py)."
    ]


def routing_problems(skill_dir: Path, root: Path) -> list[str]:
    """Every reference is reachable from SKILL.md: an assistant opens only what SKILL.md points it to."""
    skill_md = skill_dir / "SKILL.md"
    if not skill_md.is_file():
        return []
    linked = {m["target"].partition("#")[0] for m in LINK.finditer(strip_fenced(skill_md.read_text(encoding="utf-8")))}
    return [
        f"{path.relative_to(root).as_posix()}: no link from SKILL.md reaches it; add a row to the template's "
        f"'Route by task' table ({TEMPLATES_DIR}/{skill_dir.name}/SKILL.md)."
        for path in sorted((skill_dir / "references").glob("*.md"))
        if f"references/{path.name}" not in linked
    ]


def changelog_problems(skill_dir: Path, root: Path) -> list[str]:
    path = skill_dir / CHANGELOG
    rel = path.relative_to(root).as_posix()
    if not path.is_file():
        return [f"{rel}: missing; the skill carries a short changelog, newest version first."]
    version = project_version(root)
    first = re.search(r"^## (?P<version>\S+)", path.read_text(encoding="utf-8"), re.M)
    if not first or first["version"] != version:
        return [f"{rel}: its newest entry must be '## {version}' (the version in pyproject.toml and SKILL.md)."]
    return []


def validate(root: Path) -> list[str]:
    try:
        rendered = render_all(root)
    except RenderError as exc:
        return [f"cannot render the skill: {exc}"]
    problems: list[str] = []
    stale: list[str] = []
    for rel, data in rendered.files.items():
        target = root / rel
        if not target.is_file():
            stale.append(f"{rel}: missing")
        elif target.read_bytes() != data:
            stale.append(f"{rel}: differs from what its sources render to (stale, or edited by hand)")
    skill_folders = {rel.split("/")[1] for rel in rendered.files if rel != MANIFEST}
    for folder in sorted(skill_folders):
        for path in sorted((root / SKILLS_DIR / folder).rglob("*")):
            rel = path.relative_to(root).as_posix()
            if path.is_file() and rel not in rendered.files:
                stale.append(f"{rel}: not produced by the generator (a page was removed, or a file added by hand)")
    for rel in sorted(rendered.files):
        path = root / rel
        if rel == MANIFEST or not path.is_file() or path.suffix != ".md":
            continue
        text = path.read_text(encoding="utf-8")
        if path.name == CHANGELOG:
            problems += link_problems(path, text, root / SKILLS_DIR / rel.split("/")[1])
            continue
        expected = path.parent.name if path.name == "SKILL.md" else path.stem
        problems += frontmatter_problems(text, rel, expected, skill=path.name == "SKILL.md")
        problems += word_problems(rel, text)
        problems += link_problems(path, text, root / SKILLS_DIR / rel.split("/")[1])
        problems += path_problems(path, text, root / SKILLS_DIR / rel.split("/")[1], root)
        problems += code_problems(root, path, text)
    for folder in sorted(skill_folders):
        problems += changelog_problems(root / SKILLS_DIR / folder, root)
        problems += routing_problems(root / SKILLS_DIR / folder, root)
    if stale:
        problems = [*(f"stale: {s}" for s in stale), *problems]
    if problems and stale:
        problems.append(f"Fix: run `{GENERATE_COMMAND}` and commit the result.")
    elif problems:
        problems.append(
            f"Fix the sources named above (pages under docs/, snippets/, or {TEMPLATES_DIR}/), "
            f"then run `{GENERATE_COMMAND}`."
        )
    return problems

"""`validate`: every way the skill on disk can differ from what the docs and snippets say, as fixable messages."""

import re
from pathlib import Path

from skillgen.frontmatter import frontmatter_problems
from skillgen.markdown import LINK, NOT_RUN_NOTE, RenderError, anchors, fence_spans, snippet_text, strip_fenced
from skillgen.render import GENERATE_COMMAND, MANIFEST, SKILLS_DIR, TEMPLATES_DIR, render_all

SOURCE_NOTE = re.compile(r"^\s*<!-- source: (?P<specs>.+?) -->\s*$")
NOT_RUN = re.compile("^\\s*" + re.escape(NOT_RUN_NOTE).replace(re.escape("{reason}"), ".+") + "\\s*$")


def link_problems(path: Path, text: str, skill_dir: Path) -> list[str]:
    problems = []
    where = path.relative_to(skill_dir.parent.parent).as_posix()
    own = anchors(text)
    for number, line in enumerate(strip_fenced(text).splitlines(), start=1):
        for match in LINK.finditer(line):
            target = match["target"]
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
        expected = path.parent.name if path.name == "SKILL.md" else path.stem
        problems += frontmatter_problems(text, rel, expected)
        problems += link_problems(path, text, root / SKILLS_DIR / rel.split("/")[1])
        problems += code_problems(root, path, text)
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

"""How a docs page maps to skill references: split by markers, parts left out, proof lines gathered into one list.

A page renders to one reference named after it (or its frontmatter's `skill_name`), unless it says otherwise with HTML comments (invisible on the site):

    <!-- skill: postgres-sink-jvm -->   what follows goes to the reference `postgres-sink-jvm` (its title and
                                        description are in the page's frontmatter, under `skill_references`)
    <!-- skill: postgres-sink -->       ... and back to the page's own reference (parts of one name are joined)
    <!-- skill-omit -->                 what follows, up to <!-- /skill-omit -->, stays on the site only
    <!-- skill-text: Some words. -->    a line only the skill shows (e.g. where an omitted table is instead)

Every paragraph that starts "Verified by" (or "X verified by") is taken out of the body and listed, by section, at
the end of its reference: the test names stay, the repetition goes.
"""

import re
from dataclasses import dataclass

from rtm_lab.skillgen.markdown import Page, RenderError, in_code, slugify

SWITCH = re.compile(r"^<!-- skill: (?P<name>[a-z0-9]+(?:-[a-z0-9]+)*) -->\s*$")
OMIT, END_OMIT = "<!-- skill-omit -->", "<!-- /skill-omit -->"
SKILL_TEXT = re.compile(r"^(?P<indent>\s*)<!-- skill-text: (?P<text>.*) -->\s*$")
HEADING = re.compile(r"^(?P<level>#{1,6})\s+(?P<title>.*?)\s*#*\s*$")
VERIFIED = re.compile(r"^(?P<what>[A-Z][^`]*?\s)?[Vv]erified by\s+(?P<rest>.*)$", re.S)
# Every test runs on the versions SKILL.md states once, so each proof line need not repeat them.
ON_VERSIONS = re.compile(r",?\s*on Spark 4\.3\.0(?: with (?:the )?Kafka connector 4\.2\.0)?\s*\.?\s*$")
EVIDENCE = re.compile(r'^\?\?\?\+?\s+note\s+"Evidence"\s*$')
PROOF_HEADING = "Tests behind this reference"
PROOF_INTRO = "Tests (Spark 4.3.0, Kafka connector 4.2.0) that assert each section's claims:"


@dataclass
class Part:
    """One skill reference: a whole page, or the parts of a page marked with one name."""

    name: str
    title: str
    description: str
    body: str
    page: Page


def split_page(page: Page) -> list[Part]:
    """The references a page renders to, in order of first appearance; the page's own one first."""
    declared = page.extra.get("skill_references") or {}
    if not isinstance(declared, dict):
        raise RenderError(f"{page.path}: `skill_references` must map reference names to a title and description.")
    own = page.extra.get("skill_name") or page.path.stem
    if not SWITCH.match(f"<!-- skill: {own} -->"):
        raise RenderError(f"{page.path}: skill_name {own!r} must be lowercase letters, digits and single hyphens.")
    chunks: dict[str, list[str]] = {own: []}
    current, omitting = own, False
    lines = page.body.splitlines()
    for line, code in zip(lines, in_code(lines), strict=True):
        stripped = line.strip()
        if not code and stripped == OMIT:
            omitting = True
            continue
        if not code and stripped == END_OMIT:
            if not omitting:
                raise RenderError(f"{page.path}: {END_OMIT} without a {OMIT} before it.")
            omitting = False
            continue
        switch = None if code else SWITCH.match(stripped)
        if switch:
            if omitting:
                raise RenderError(f"{page.path}: a skill marker inside a {OMIT} span; close the span first.")
            current = switch["name"]
            if current != own and current not in declared:
                raise RenderError(
                    f"{page.path}: <!-- skill: {current} --> names a reference its frontmatter does not declare "
                    f"under `skill_references` (title and description)."
                )
            chunks.setdefault(current, [])
            continue
        if omitting:
            continue
        text = None if code else SKILL_TEXT.match(line)
        chunks[current].append(text["indent"] + text["text"] if text else line)
    if omitting:
        raise RenderError(f"{page.path}: {OMIT} is never closed by {END_OMIT}.")
    parts = []
    for name, body in chunks.items():
        if name == own:
            parts.append(Part(name, page.title, page.description, "\n".join(body), page))
            continue
        meta = declared[name]
        if not isinstance(meta, dict) or not all(isinstance(meta.get(k), str) for k in ("title", "description")):
            raise RenderError(f"{page.path}: skill_references.{name} needs a `title` and a `description` (text).")
        joined = "\n".join(body)
        if not re.search(r"^# ", joined, re.M):
            joined = f"# {meta['title']}\n\n{joined}"
        parts.append(Part(name, meta["title"].strip(), " ".join(meta["description"].split()), joined, page))
    unused = set(declared) - set(chunks)
    if unused:
        raise RenderError(f"{page.path}: skill_references declares {', '.join(sorted(unused))} but no marker uses it.")
    return parts


def unwrap_evidence(body: str) -> str:
    """A page's collapsed `??? note "Evidence"` block made only of "Verified by" paragraphs, as those paragraphs: the
    skill lists them with the rest (gather_proofs) instead of quoting them where they stand. A block holding anything
    else stays a block (flatten_blocks quotes it)."""
    lines = body.splitlines()
    code = in_code(lines)
    out: list[str] = []
    index = 0
    while index < len(lines):
        if not code[index] and EVIDENCE.match(lines[index]):
            inner, end = _indented(lines, index + 1)
            paragraphs = " ".join(line.strip() or "\n" for line in inner).split("\n")
            if all(VERIFIED.match(p.strip()) for p in paragraphs if p.strip()):
                out.extend(inner)
                index = end
                continue
        out.append(lines[index])
        index += 1
    return "\n".join(out)


def _indented(lines: list[str], start: int) -> tuple[list[str], int]:
    """The block indented by four spaces from `start` (blank lines included), dedented, and the index after it."""
    body: list[str] = []
    index = start
    while index < len(lines) and (not lines[index].strip() or lines[index].startswith("    ")):
        body.append(lines[index][4:])
        index += 1
    return body, index


def gather_proofs(body: str) -> str:
    """Move every "Verified by" paragraph into one list at the end, one entry per section, linking the section."""
    lines = body.splitlines()
    code = in_code(lines)
    kept: list[str] = []
    proofs: dict[tuple[str, str], list[str]] = {}
    section = ("", "")
    index = 0
    while index < len(lines):
        if code[index] or not lines[index].strip():
            kept.append(lines[index])
            index += 1
            continue
        heading = HEADING.match(lines[index])
        if heading:
            section = (heading["title"], slugify(heading["title"]))
            kept.append(lines[index])
            index += 1
            continue
        end = index
        while end < len(lines) and lines[end].strip() and not code[end] and not HEADING.match(lines[end]):
            end += 1
        paragraph = lines[index:end]
        match = VERIFIED.match(" ".join(line.strip() for line in paragraph))
        if match and not paragraph[0].startswith((" ", ">", "|", "-")):
            what = (match["what"] or "").strip()
            rest = ON_VERSIONS.sub("", match["rest"].strip())
            proofs.setdefault(section, []).append(f"{what}: {rest}" if what else rest)
        else:
            kept.extend(paragraph)
        index = end
    if not proofs:
        return body
    out = "\n".join(kept).rstrip("\n")
    entries = []
    for (title, anchor), items in proofs.items():
        label = f"[{title}](#{anchor})" if title else "Above"
        entries.append(f"- {label}: " + "; ".join(items))
    return f"{out}\n\n## {PROOF_HEADING}\n\n{PROOF_INTRO}\n\n" + "\n".join(entries)

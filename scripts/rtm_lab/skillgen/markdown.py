"""Turn a docs page (mkdocs + pymdownx Markdown) into self-contained plain Markdown.

What an assistant cannot follow is resolved here: snippet includes are expanded from the snippet files, admonitions
become block quotes, content tabs become bold labels, and links point at skill files or become plain text.
"""

import functools
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

INCLUDE = re.compile(r'^(?P<indent>[ \t]*)--8<--[ \t]+"(?P<spec>[^"]+)"[ \t]*$')
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
ADMONITION = re.compile(
    r'^(?P<indent>[ \t]*)(?:!!!|\?\?\?\+?)[ \t]+(?P<kind>[\w-]+)(?:[ \t]+"(?P<title>[^"]*)")?[ \t]*$'
)
TAB = re.compile(r'^(?P<indent>[ \t]*)===!?[ \t]+"(?P<label>[^"]+)"[ \t]*$')
# A link; its text may wrap onto the next line (a page wrapped to its width), never across a blank line or a bracket.
LINK = re.compile(r"(?P<bang>!?)\[(?P<text>(?:[^\[\]\n]|\n(?![ \t]*\n))*)\]\((?P<target>[^)\s]+)\)")
FENCE_SETTINGS = re.compile(r'(\w+)="([^"]*)"')

SOURCE_NOTE = "<!-- source: {spec} -->"
# How a reference links a file the skill carries in its assets/ folder (already a skill path: never rewritten).
SKILL_ASSET_LINK = "../assets/"
NOT_RUN_NOTE = "*Not run by the tests: {reason}.*"


class RenderError(ValueError):
    """A page that cannot be rendered, worded as what to fix in which file."""


@dataclass
class Page:
    """A docs page split into its frontmatter fields and body."""

    path: Path  # relative to the repo root, e.g. docs/reference/slot-sizing.md
    title: str
    description: str
    body: str
    extra: dict = field(default_factory=dict)


def split_frontmatter(text: str, where: str) -> tuple[dict, str]:
    import yaml

    if not text.startswith("---\n"):
        raise RenderError(f"{where}: starts without YAML frontmatter ('---' line, title, description, '---').")
    end = text.find("\n---\n", 4)
    if end < 0:
        raise RenderError(f"{where}: frontmatter is not closed by a '---' line.")
    try:
        meta = yaml.safe_load(text[4:end]) or {}
    except yaml.YAMLError as exc:
        raise RenderError(f"{where}: frontmatter is not valid YAML ({exc}). Quote values that contain ': '.") from exc
    if not isinstance(meta, dict):
        raise RenderError(f"{where}: frontmatter must be a mapping of fields.")
    return meta, text[end + 5 :]


def read_page(root: Path, rel: Path) -> Page:
    meta, body = split_frontmatter((root / rel).read_text(encoding="utf-8"), str(rel))
    missing = [key for key in ("title", "description") if not isinstance(meta.get(key), str) or not meta[key].strip()]
    if missing:
        raise RenderError(f"{rel}: frontmatter lacks {', '.join(missing)} (one line of text each).")
    extra = {k: v for k, v in meta.items() if k not in ("title", "description")}
    return Page(rel, meta["title"].strip(), " ".join(meta["description"].split()), body, extra)


# pymdownx.snippets' settings in mkdocs.yml (base_path is the repository root): the skill expands includes with the
# very code that builds the site, so both show the same lines.
SNIPPETS_CONFIG = {"check_paths": True, "dedent_subsections": True}


@functools.cache
def _snippets(root: Path):
    import markdown

    config = {**SNIPPETS_CONFIG, "base_path": [str(root)]}
    md = markdown.Markdown(extensions=["pymdownx.snippets"], extension_configs={"pymdownx.snippets": config})
    return md.preprocessors["snippet"]


def snippet_text(root: Path, spec: str, where: str) -> str:
    """The text pymdownx.snippets includes for `path` or `path:section` (markers removed, section dedented)."""
    from pymdownx.snippets import SnippetMissingError

    path_part = spec.partition(":")[0]
    if not (root / path_part).is_file():
        raise RenderError(f"{where}: include {spec!r}: {path_part} does not exist.")
    try:
        lines = _snippets(root.resolve()).run([f'--8<-- "{spec}"'])
    except SnippetMissingError as exc:
        raise RenderError(
            f"{where}: include {spec!r}: {exc}. A section needs '# --8<-- [start:name]' ... '[end:name]' markers."
        ) from exc
    return "\n".join(lines).strip("\n")


def slugify(heading: str) -> str:
    """The anchor Python-Markdown's toc extension (mkdocs' default) gives a heading."""
    text = re.sub(r"\{#([^}]+)\}\s*$", "", heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[`*]", "", text).strip()
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(markdown: str) -> set[str]:
    """Every anchor the headings of a Markdown text define (explicit `{#id}` or generated, de-duplicated like toc)."""
    found: set[str] = set()
    for line in strip_fenced(markdown).splitlines():
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        explicit = re.search(r"\{#([^}]+)\}\s*$", match[1])
        slug = explicit[1] if explicit else slugify(match[1])
        candidate, n = slug, 0
        while candidate in found:
            n += 1
            candidate = f"{slug}_{n}"
        found.add(candidate)
    return found


def fence_spans(lines: list[str]) -> Iterator[tuple[int, int, re.Match]]:
    """Every fenced code block as (opening line, closing line, the opening's match); an unclosed one runs to the end."""
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening:
            close = _closing_fence(lines, index, opening)
            yield index, close, opening
            index = close + 1
        else:
            index += 1


def in_code(lines: list[str]) -> list[bool]:
    """For each line, whether it belongs to a fenced code block (fence lines included)."""
    flags = [False] * len(lines)
    for start, close, _ in fence_spans(lines):
        flags[start : close + 1] = [True] * (close + 1 - start)
    return flags


def strip_fenced(markdown: str) -> str:
    """The text with fenced code blocks blanked, so code is never read as headings or links."""
    lines = markdown.splitlines()
    return "\n".join("" if code else line for line, code in zip(lines, in_code(lines), strict=True))


def expand_includes(root: Path, text: str, where: str) -> str:
    """Expand every include; a fenced block made only of includes gets a source note naming the snippet(s)."""
    lines = text.splitlines()
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        fence = FENCE.match(line)
        if fence:
            close = _closing_fence(lines, index, fence)
            body = lines[index + 1 : close]
            lines_in = [b for b in body if b.strip()]
            specs = [m for m in (INCLUDE.match(b) for b in lines_in) if m is not None]
            indent = fence["indent"]
            info = fence["info"].strip()
            if specs and len(specs) == len(lines_in):
                out.append(indent + SOURCE_NOTE.format(spec=", ".join(m["spec"] for m in specs)))
                out.append(indent + fence["fence"] + _language(info))
                for match in specs:
                    code = snippet_text(root, match["spec"], where)
                    out.extend((indent + c if c else c) for c in code.splitlines())
                out.append(lines[close])
            else:
                settings = dict(FENCE_SETTINGS.findall(info))
                if settings.get("test") == "skip":
                    reason = settings.get("reason", "").strip().rstrip(".")
                    if not reason:
                        raise RenderError(f'{where}: a block marked test="skip" needs reason="..." saying why.')
                    out.append(indent + NOT_RUN_NOTE.format(reason=reason))
                    out.append("")
                out.append(indent + fence["fence"] + _language(info))
                out.extend(body)
                out.append(lines[close])
            index = close + 1
            continue
        include = INCLUDE.match(line)
        if include:
            content = snippet_text(root, include["spec"], where)
            out.extend((include["indent"] + c if c else c) for c in content.splitlines())
        else:
            out.append(line)
        index += 1
    return "\n".join(out)


def _language(info: str) -> str:
    return info.split("{", 1)[0].split()[0] if info.split("{", 1)[0].split() else ""


def _closing_fence(lines: list[str], start: int, opening: re.Match) -> int:
    fence = opening["fence"]
    for number in range(start + 1, len(lines)):
        stripped = lines[number].strip()
        if stripped.startswith(fence) and not stripped.strip(fence[0]):
            return number
    return len(lines) - 1


def flatten_blocks(text: str) -> str:
    """Admonitions -> block quotes with a bold title; content tabs -> a bold label over their content."""
    lines = text.splitlines()
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        fence = FENCE.match(line)
        if fence:
            close = _closing_fence(lines, index, fence)
            out.extend(lines[index : close + 1])
            index = close + 1
            continue
        admonition, tab = ADMONITION.match(line), TAB.match(line)
        head = admonition or tab
        if head is not None:
            indent = head["indent"]
            body, index = _indented_body(lines, index + 1, len(indent) + 4)
            inner = flatten_blocks("\n".join(body)).splitlines()
            if admonition:
                title = admonition["title"] if admonition["title"] is not None else admonition["kind"].capitalize()
                quoted = [f"**{title}**"] if title else []
                quoted += ["", *inner] if inner else []
                out.extend(indent + ("> " + q if q else ">") for q in quoted)
            else:
                out.append(f"{indent}**{head['label']}**")
                out.append("")
                out.extend((indent + q if q else q) for q in inner)
            out.append("")
            continue
        out.append(line)
        index += 1
    return squeeze_blank_lines("\n".join(out))


def squeeze_blank_lines(text: str) -> str:
    """At most one blank line in a row outside fenced code; code keeps its blank lines exactly."""
    lines = text.splitlines()
    out: list[str] = []
    for line, code in zip(lines, in_code(lines), strict=True):
        if not code and not line.strip() and out and not out[-1].strip():
            continue
        out.append(line)
    return "\n".join(out)


def _indented_body(lines: list[str], start: int, width: int) -> tuple[list[str], int]:
    body: list[str] = []
    index = start
    while index < len(lines):
        line = lines[index]
        if line.strip() and (len(line) - len(line.lstrip(" "))) < width:
            break
        body.append(line[width:] if line.strip() else "")
        index += 1
    while body and not body[-1]:
        body.pop()
    return body, index


def rewrite_links(
    text: str,
    page_dir: Path,
    targets: dict[Path, str],
    anchor_targets: dict[tuple[Path, str], str | None] | None = None,
    page: Path | None = None,
    own_file: str | None = None,
) -> str:
    """Links to rendered pages point at their skill file; other links become text an assistant can act on.

    `page_dir` is the page's folder relative to the repo root; `targets` maps docs paths to skill file names.
    `anchor_targets` maps (docs path, anchor) to the skill file holding that heading, for pages split over several
    references (None for a heading the page leaves out of the skill: such a link becomes text naming the docs page);
    `page` is the page being rendered, so its own `#anchor` links follow a heading to another part. A link to an
    anchor no page has stays a link, for `validate` to report.
    """
    anchor_targets = anchor_targets or {}
    split = {path for path, _ in anchor_targets}

    def rewrite(match: re.Match) -> str:
        target, text_, bang = match["target"], match["text"], match["bang"]
        if "://" in target or target.startswith(("mailto:", SKILL_ASSET_LINK)):
            return match[0]
        if target.startswith("#"):
            if page is None or page not in split:
                return match[0]
            target = f"{page.name}{target}"
        path_part, _, anchor = target.partition("#")
        resolved = Path(_normalize(page_dir / path_part))
        if bang:
            return f"*{text_}* (image `{resolved.as_posix()}` in the repository)" if text_ else ""
        if (resolved.as_posix(), anchor) in IN_SKILL_MD:
            return f"[{text_}]({IN_SKILL_MD[resolved.as_posix(), anchor]})"
        if anchor and (resolved, anchor) in anchor_targets:
            file = anchor_targets[resolved, anchor]
            if file is None:  # a heading the page keeps out of the skill
                return f"{text_} (docs page `{resolved.as_posix()}#{anchor}`)"
            return f"[{text_}]({'' if file == own_file else file}#{anchor})"
        if resolved in targets:
            return f"[{text_}]({targets[resolved]}{'#' + anchor if anchor else ''})"
        if resolved.suffix == ".md" and resolved.parts[:1] == ("docs",):
            return f"{text_} (docs page `{resolved.as_posix()}`)"
        return f"{text_} (`{resolved.as_posix()}`)"

    return _outside_code(text, lambda chunk: LINK.sub(rewrite, chunk))


# Docs sections SKILL.md itself carries (its template repeats them): a reference's link goes there, not to a docs
# page the skill does not have.
IN_SKILL_MD = {("docs/get-started.md", "set-up-your-own-project"): "../SKILL.md#set-up-your-own-project"}


def _outside_code(text: str, func) -> str:
    """Apply func to each run of lines outside fenced code, whole, so a link wrapped over two lines is one match."""
    lines = text.splitlines()
    out: list[str] = []
    prose: list[str] = []
    for line, code in zip(lines, in_code(lines), strict=True):
        if code:
            if prose:
                out += func("\n".join(prose)).split("\n")
                prose = []
            out.append(line)
        else:
            prose.append(line)
    if prose:
        out += func("\n".join(prose)).split("\n")
    return "\n".join(out)


def _normalize(path: Path) -> str:
    parts: list[str] = []
    for part in path.as_posix().split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/".join(parts)

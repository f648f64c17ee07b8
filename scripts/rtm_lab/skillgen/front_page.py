"""The docs front page's generated includes, each built from a source another reader uses too.

  can_i_markdown()        the "Can I ...?" table from can_i.py's source (SKILL.md's too): the OSS answer, the oldest
                          PySpark with that answer, and its proof, with links to skill references turned into links
                          to the docs pages (and sections) those references are rendered from
  when_to_use_markdown()  the table under Setup's "When to use it, and when not", its links rebased for docs/

`python scripts/tables.py can-i` and `python scripts/tables.py when-to-use` write them; `--check` keeps them current.
"""

import posixpath
import re
from pathlib import Path

from rtm_lab.generated import generated_note
from rtm_lab.paths import PROJECT_ROOT
from rtm_lab.skillgen import answers, can_i
from rtm_lab.skillgen.markdown import LINK, RenderError, anchors, in_code, slugify
from rtm_lab.skillgen.parts import HEADING, SWITCH, split_page
from rtm_lab.skillgen.render import DEFAULT_SOURCES, source_pages

DOCS = Path("docs")
FRONT_PAGE_COLUMNS = (0, 1, 2, 4)  # question, OSS answer, From PySpark, proof: the Databricks column stays in SKILL.md
SETUP = DOCS / "reference" / "setup.md"
WHEN_TO_USE = "When to use it, and when not"
SKILL_REFERENCE = re.compile(r"^references/(?P<name>[a-z0-9-]+)\.md(?:#(?P<anchor>[\w-]+))?$")


class SiteLinks:
    """Where each skill reference came from: its docs page, and the section a link without an anchor lands on."""

    def __init__(self, root: Path = PROJECT_ROOT):
        # reference name -> (its page, the anchor it starts at or "" for the page's top, its own title's anchor)
        self.pages: dict[str, tuple[Path, str, str]] = {}
        self.anchors: dict[Path, set[str]] = {}
        for page in source_pages(root, DEFAULT_SOURCES):
            self.anchors[page.path] = anchors(page.body)
            for index, part in enumerate(split_page(page)):
                start = "" if index == 0 else _section_of_marker(page.body, part.name)
                self.pages[part.name] = (page.path, start, slugify(part.title))

    def site_target(self, target: str, where: str) -> str:
        """`references/NAME.md#anchor` as a link from docs/index.md to the page (and section) NAME renders from."""
        match = SKILL_REFERENCE.match(target)
        if not match or match["name"] not in self.pages:
            raise RenderError(f"{where}: link {target!r} names no skill reference rendered from a docs page.")
        page, start, title = self.pages[match["name"]]
        anchor = match["anchor"] or ""
        if anchor in ("", title):
            anchor = start  # the reference's own top: where its part of the page starts
        elif anchor not in self.anchors[page]:
            raise RenderError(f"{where}: link {target!r}: #{anchor} is no heading of {page}.")
        return page.relative_to(DOCS).as_posix() + (f"#{anchor}" if anchor else "")

    def rewrite(self, text: str, where: str) -> str:
        return LINK.sub(lambda m: f"[{m['text']}]({self.site_target(m['target'], where)})", text)


def _section_of_marker(body: str, name: str) -> str:
    """The anchor where reference `name` starts: the heading right after its marker when one follows it (blank lines
    aside), else the last heading before the marker (a part split off mid-section)."""
    section = ""
    lines = body.splitlines()
    marked = False
    for line, code in zip(lines, in_code(lines), strict=True):
        if code:
            if marked:
                return section
            continue
        heading = HEADING.match(line)
        if marked:
            if heading:
                return slugify(heading["title"])
            if line.strip():
                return section
            continue
        switch = SWITCH.match(line.strip())
        if switch and switch["name"] == name:
            marked = True
            continue
        if heading:
            section = slugify(heading["title"])
    return section


def can_i_markdown(root: Path = PROJECT_ROOT) -> str:
    where = str(can_i.SOURCE)
    links = SiteLinks(root)
    header = tuple(can_i.COLUMNS[i] for i in FRONT_PAGE_COLUMNS)
    rows = []
    for row in can_i.rows(root):
        cells = [row.cells()[i] for i in FRONT_PAGE_COLUMNS]
        cells = [can_i.expand_since(answers.expand(cell, where), where) for cell in cells]
        rows.append(tuple(links.rewrite(cell, where) for cell in cells))
    return generated_note("python scripts/tables.py can-i") + "\n\n" + can_i.table(header, rows) + "\n"


def when_to_use_markdown(root: Path = PROJECT_ROOT) -> str:
    """The first table under Setup's heading, each relative link rebased from docs/reference/ to docs/."""
    lines = (root / SETUP).read_text(encoding="utf-8").splitlines()
    try:
        start = lines.index(f"## {WHEN_TO_USE}")
    except ValueError:
        raise RenderError(f"{SETUP}: no heading '## {WHEN_TO_USE}' (the front page includes its table).") from None
    section = []
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        section.append(line)
    rows = [line for line in _first_block(section, lambda line: line.startswith("|"))]
    if not rows:
        raise RenderError(f"{SETUP}: no table under '## {WHEN_TO_USE}'.")
    table = "\n".join(LINK.sub(lambda m: _rebased(m, SETUP.parent), row) for row in rows)
    return generated_note("python scripts/tables.py when-to-use") + "\n\n" + table + "\n"


def _first_block(lines: list[str], belongs) -> list[str]:
    block: list[str] = []
    for line in lines:
        if belongs(line):
            block.append(line)
        elif block:
            break
    return block


def _rebased(match: re.Match, folder: Path) -> str:
    target = match["target"]
    if "://" in target:
        return match[0]
    if target.startswith("#"):  # one of Setup's own sections, seen from the front page
        target = SETUP.name + target
    path, _, anchor = target.partition("#")
    rebased = posixpath.normpath(posixpath.join(folder.relative_to(DOCS).as_posix(), path))
    return f"[{match['text']}]({rebased}{'#' + anchor if anchor else ''})"

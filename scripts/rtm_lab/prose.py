"""How readable each docs page's prose is: the units a reader reads, split into sentences, and four figures per page.

Counting rules (tests/lint/test_prose.py has a case for each; change both together):

1. A page is rendered as the site renders it: Python-Markdown with mkdocs.yml's extensions, front matter dropped,
   and every `--8<--` include expanded (pymdownx.snippets, base paths from mkdocs.yml, relative to the project root).
2. Code blocks are left out (`<pre>` and the highlight blocks around them), and so are HTML comments and images.
3. An inline code span counts as one word, whatever it holds; its dots and parentheses are not punctuation.
4. Each list item is a unit: a sentence never runs from one item into the next, and an item's end ends its last
   sentence even without a full stop. A nested list's items are units of their own. Paragraphs are units too.
5. A table cell (header or body) of 12 words or more counts as prose, as a unit; a shorter cell is left out.
6. Headings, admonition and block titles (`!!! note "Title"`, `??? note "Title"`) and tab labels are titles, not
   sentences: left out of the figures (the term check still reads them).
7. A collapsed block (`??? note`, rendered as `<details>` without `open`) is left out only if it holds evidence: its
   title says so (Evidence, Verified by, Measured, How it was measured, Run details, Results, Source, Databricks) and
   its text cites evidence: a test (`tests/...py`, "Verified by"), a results footer or file (Machine, Load average,
   Versions, Command, Run at, Measured, `scripts/bench.py`, `docs/results/`), a Databricks page, or Spark's source (a
   `.scala` or `.java` file, a line number). The check fails when a collapsed block is anything else, and when a
   page's collapsed words exceed 25 % of its words (collapsed plus counted): that bounds what an evidence block may
   hide. An open block (`???+`) counts like any other text.
8. Sentences end at `.`, `!` or `?` (closing quotes or brackets may follow) before white space and a capital letter,
   a digit, a quote, an opening bracket or a code span. A full stop does not end a sentence after an abbreviation
   (e.g., i.e., vs., cf., approx., incl., no., fig.), after a step's number that opens a sentence ("1. What
   changes."), inside a number (4.3.0, 2.5) or inside a word (p99.9).
9. A word is a white-space separated token holding a letter, a digit or a code span ("—" alone is not a word).
10. Per page: words; sentences; mean words per sentence; p90 (the nearest-rank 90th percentile of sentence lengths:
    the length of a real sentence); the share of sentences over 40 words (in %); opening parentheses per 100 words
    (outside code spans).
"""

import fnmatch
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from rtm_lab.paths import PROJECT_ROOT

DOCS = PROJECT_ROOT / "docs"
MKDOCS_YML = PROJECT_ROOT / "mkdocs.yml"

# An inline code span inside a unit's text: its content between these two private-use characters, so the counting
# can treat it as one word and prose_after can show it in backticks.
CODE_OPEN, CODE_CLOSE = "\ue000", "\ue001"
_CODE_SPAN = re.compile(f"{CODE_OPEN}[^{CODE_CLOSE}]*{CODE_CLOSE}")
_CODE_WORD = "\ue002"  # one word standing for a whole code span while counting

CELL_MIN_WORDS = 12
COLLAPSED_MAX_SHARE = 25.0
LONG_SENTENCE_WORDS = 40

ABBREVIATIONS = frozenset({"e.g", "i.e", "vs", "cf", "approx", "incl", "no", "fig", "resp", "ca"})

# Rule 7: what a collapsed block's title and text must say for it to be evidence.
EVIDENCE_TITLE = re.compile(
    r"evidence|verified|measured|how (it|this|these|they) (was|were)|run details|results?\b|source|databricks",
    re.IGNORECASE,
)
EVIDENCE_CITATION = re.compile(
    r"verified (by|on)\b|\btests/\S+\.py|::test_|databricks|scripts/bench\.py|docs/results/|\.scala\b|\.java\b"
    r"|\blines? \d|^\s*(machine|load average|versions?|commands?|runs?|run at|latest run|measured)\b",
    re.IGNORECASE | re.MULTILINE,
)

PROSE_KINDS = frozenset({"paragraph", "item"})
TITLE_KINDS = frozenset({"heading", "title"})
_UNIT_TAGS = {"p": "paragraph", "li": "item", "td": "cell", "th": "cell", "dt": "paragraph", "dd": "paragraph"}
_UNIT_TAGS |= {f"h{n}": "heading" for n in range(1, 7)} | {"summary": "title", "label": "title", "caption": "title"}
_SKIPPED_TAGS = frozenset({"pre", "script", "style", "svg", "img"})
_CONTAINER_TAGS = frozenset({"div", "details", "blockquote", "ul", "ol", "table", "body", "section"})
_VOID_TAGS = frozenset({"br", "hr", "img", "input", "meta", "link", "wbr", "source", "area", "col", "embed"})


@dataclass(frozen=True)
class Unit:
    """A stretch of text sentences never cross: a paragraph, a list item, a table cell, a heading or a title."""

    text: str  # code spans marked with CODE_OPEN ... CODE_CLOSE
    kind: str  # paragraph | item | cell | heading | title
    block: int | None = None  # the collapsed block it sits in (an index), or None
    block_title: str = ""

    @property
    def collapsed(self) -> bool:
        return self.block is not None

    @property
    def is_prose(self) -> bool:
        """Rules 4-6: paragraphs and items, and table cells of CELL_MIN_WORDS words or more."""
        if self.kind in PROSE_KINDS:
            return True
        return self.kind == "cell" and word_count(self.text) >= CELL_MIN_WORDS


@dataclass
class RenderedPage:
    page: str  # path under docs/, e.g. "reference/slot-sizing.md"
    units: list[Unit]
    anchors: dict[str, int]  # element id -> index of the first unit at or after it


# --- rendering ---------------------------------------------------------------------------------------------------


def _markdown_config() -> tuple[list[str], dict[str, dict[str, Any]], list[str]]:
    """mkdocs.yml's extensions and their settings, with snippet base paths made absolute, and its exclude_docs."""
    import yaml

    config = yaml.safe_load(MKDOCS_YML.read_text())
    names: list[str] = []
    settings: dict[str, dict[str, Any]] = {}
    for entry in config.get("markdown_extensions", []):
        if isinstance(entry, dict):
            ((name, options),) = entry.items()
            names.append(name)
            settings[name] = dict(options or {})
        else:
            names.append(entry)
    snippets = settings.setdefault("pymdownx.snippets", {})
    bases = snippets.get("base_path", ["."])
    snippets["base_path"] = [str(PROJECT_ROOT / base) for base in ([bases] if isinstance(bases, str) else bases)]
    excluded = [line.strip() for line in (config.get("exclude_docs") or "").splitlines() if line.strip()]
    return names, settings, excluded


def pages() -> list[str]:
    """Every page of the site (docs/**/*.md less mkdocs.yml's exclude_docs), as paths under docs/."""
    excluded = _markdown_config()[2]
    found = (path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md"))
    return sorted(page for page in found if not any(fnmatch.fnmatch(page, pattern) for pattern in excluded))


_FRONT_MATTER = re.compile(r"\A---\s*\n.*?\n---\s*\n", re.DOTALL)


def render_markdown(text: str) -> str:
    """Markdown (front matter dropped) to HTML the way the site renders it, includes expanded."""
    import markdown

    names, settings, _ = _markdown_config()
    return str(markdown.Markdown(extensions=names, extension_configs=settings).convert(_FRONT_MATTER.sub("", text)))


def render(page: str) -> RenderedPage:
    """A page under docs/ as the units a reader reads."""
    path = DOCS / page
    if not path.is_file():
        raise FileNotFoundError(f"no page {page!r} under {DOCS}")
    return units_of_html(render_markdown(path.read_text()), page)


def units_of_html(markup: str, page: str = "<text>") -> RenderedPage:
    parser = _UnitParser()
    parser.feed(markup)
    parser.close()
    return RenderedPage(page, parser.finish(), parser.anchors)


@dataclass
class _Open:
    tag: str
    unit_index: int | None = None  # the unit this element owns (its slot in the list), if any
    skipped: bool = False
    code: bool = False
    details: int | None = None  # a collapsed block's index


@dataclass
class _Buffer:
    kind: str
    parts: list[str] = field(default_factory=list)


class _UnitParser(HTMLParser):
    """Python-Markdown's HTML to units. Each unit element reserves its place when it opens, so a list item's text
    comes before the items of a list nested in it; a <p> inside a list item or a cell adds to that item's unit."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[_Open] = []
        self.slots: list[Unit | None] = []
        self.buffers: list[tuple[int, _Buffer]] = []  # open units, innermost last
        self.anchors: dict[str, int] = {}
        self.blocks = 0
        self.block_titles: dict[int, str] = {}
        self.pending_loose: _Buffer | None = None

    # state helpers
    def _skipping(self) -> bool:
        return any(element.skipped for element in self.stack)

    def _in_code(self) -> bool:
        return any(element.code for element in self.stack)

    def _block(self) -> int | None:
        """The outermost collapsed block around the current position (what hides it), or None."""
        for element in self.stack:
            if element.details is not None:
                return element.details
        return None

    def _flush_loose(self) -> None:
        if self.pending_loose is not None and "".join(self.pending_loose.parts).strip():
            self.slots.append(self._unit(self.pending_loose))
        self.pending_loose = None

    def _unit(self, buffer: _Buffer) -> Unit:
        text = re.sub(r"\s+", " ", "".join(buffer.parts)).strip()
        text = re.sub(f"{CODE_OPEN}\\s+", CODE_OPEN, re.sub(f"\\s+{CODE_CLOSE}", CODE_CLOSE, text))
        block = self._block()
        return Unit(text, buffer.kind, block, self.block_titles.get(block, "") if block is not None else "")

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        classes = (attributes.get("class") or "").split()
        element = _Open(tag)
        if tag in _SKIPPED_TAGS or "highlight" in classes or "headerlink" in classes or self._skipping():
            element.skipped = True
        if not element.skipped:
            if tag == "code":
                element.code = True
                self._text(CODE_OPEN)
            elif tag == "details":
                if "open" not in attributes:
                    element.details = self.blocks
                self.blocks += 1
            kind = "title" if tag == "p" and "admonition-title" in classes else _UNIT_TAGS.get(tag)
            nested_paragraph = tag == "p" and self.buffers and self.buffers[-1][1].kind in {"item", "cell"}
            if kind and not nested_paragraph:
                self._flush_loose()
                element.unit_index = len(self.slots)
                self.slots.append(None)
                self.buffers.append((element.unit_index, _Buffer(kind)))
            elif nested_paragraph:
                self._text(" ")
        if element_id := attributes.get("id"):
            if element.unit_index is None:
                self._flush_loose()
            self.anchors.setdefault(element_id, len(self.slots) if element.unit_index is None else element.unit_index)
        if tag not in _VOID_TAGS:
            self.stack.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in _VOID_TAGS:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in _VOID_TAGS:
            return
        # Close up to the matching element (Python-Markdown's HTML is well formed; this tolerates stray tags).
        while self.stack:
            if self.stack[-1].tag in _CONTAINER_TAGS:
                self._flush_loose()  # text loose in a container belongs to it (and to its collapsed block)
            element = self.stack.pop()
            self._close(element)
            if element.tag == tag:
                break

    def _close(self, element: _Open) -> None:
        if element.code:
            self._text(CODE_CLOSE)
        if element.unit_index is not None:
            index, buffer = self.buffers.pop()
            unit = self._unit(buffer)
            if unit.kind == "title" and element.tag == "summary":
                block = self._block()
                if block is not None and block not in self.block_titles:  # a nested block's title is not its own
                    self.block_titles[block] = unit.text
                    unit = Unit(unit.text, unit.kind, block, unit.text)
            self.slots[index] = unit

    def _text(self, text: str) -> None:
        if self.buffers:
            self.buffers[-1][1].parts.append(text)
        else:
            if self.pending_loose is None:
                self.pending_loose = _Buffer("paragraph")
            self.pending_loose.parts.append(text)

    def handle_data(self, data: str) -> None:
        if self._skipping():
            return
        if not self.buffers and not data.strip():
            return
        if self._in_code():
            data = data.replace(CODE_OPEN, "").replace(CODE_CLOSE, "")
        self._text(data)

    def finish(self) -> list[Unit]:
        """The units in reading order (empty ones dropped), with the anchors moved to the units kept."""
        while self.stack:
            self._close(self.stack.pop())
        self._flush_loose()
        kept_before = [0]
        for unit in self.slots:
            kept_before.append(kept_before[-1] + (1 if unit is not None and unit.text else 0))
        self.anchors = {anchor: kept_before[min(index, len(self.slots))] for anchor, index in self.anchors.items()}
        return [unit for unit in self.slots if unit is not None and unit.text]


# --- words and sentences -----------------------------------------------------------------------------------------


def _counting_text(text: str) -> str:
    """A unit's text with each code span as one word (rule 3)."""
    return _CODE_SPAN.sub(_CODE_WORD, text)


def mark_code_spans(text: str) -> str:
    """Raw Markdown's `code spans` marked as a rendered unit's are, so its sentences split and count the same way."""
    return re.sub(r"`([^`]*)`", lambda match: f"{CODE_OPEN}{match.group(1)}{CODE_CLOSE}", text)


def plain_text(text: str) -> str:
    """A unit's text as a reader sees it, code spans in backticks."""
    return text.replace(CODE_OPEN, "`").replace(CODE_CLOSE, "`")


def _is_word(token: str) -> bool:
    return any(char.isalnum() or char == _CODE_WORD for char in token)


def word_count(text: str) -> int:
    return sum(1 for token in _counting_text(text).split() if _is_word(token))


_SENTENCE_END = re.compile(r"[.!?]+[\"'”’)\]]*\s+(?=[A-Z0-9\"'“‘(\[" + _CODE_WORD + "])")


def sentences(text: str, keep_code: bool = False) -> list[str]:
    """A unit's sentences (rule 8). Each code span stands as one word, or with `keep_code` as its text in backticks
    (what the term check reads)."""
    counted = _counting_text(text)
    spans = iter(_CODE_SPAN.findall(text))
    found: list[str] = []
    start = 0
    for end in _SENTENCE_END.finditer(counted):
        before = counted[start : end.start()].split()
        last = before[-1].lower().rstrip(".") if before else ""
        if last in ABBREVIATIONS or last.lstrip("(") in ABBREVIATIONS:
            continue
        if len(before) == 1 and last.isdigit():
            continue  # a step's number ("1. What changes."), not a sentence
        found.append(counted[start : end.end()].strip())
        start = end.end()
    rest = counted[start:].strip()
    if rest:
        found.append(rest)
    found = [sentence for sentence in found if word_count(sentence)]
    if keep_code:
        found = [re.sub(_CODE_WORD, lambda _: plain_text(next(spans)), sentence) for sentence in found]
    return found


def _show(sentence: str) -> str:
    return sentence.replace(_CODE_WORD, "`…`")


# --- figures -----------------------------------------------------------------------------------------------------


@dataclass
class PageFigures:
    page: str
    words: int
    sentences: int
    mean: float
    p90: float
    over_40_pct: float
    parens_per_100: float
    collapsed_words: int
    longest: list[tuple[int, str]]  # the longest sentences, (words, text), longest first
    collapsed_problems: list[str]  # rule 7 failures, each a sentence naming what is wrong

    def figures(self) -> dict[str, float]:
        """The figures the ratchet keeps, rounded as recorded."""
        return {
            "mean": round(self.mean, 2),
            "p90": round(self.p90, 2),
            "over_40_pct": round(self.over_40_pct, 2),
            "parens_per_100": round(self.parens_per_100, 2),
        }

    @property
    def collapsed_share(self) -> float:
        total = self.words + self.collapsed_words
        return 100.0 * self.collapsed_words / total if total else 0.0


def nearest_rank(values: list[int], percent: float) -> float:
    """The nearest-rank percentile: the smallest value with at least `percent` % of the values at or below it."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return float(ordered[max(0, math.ceil(percent / 100 * len(ordered)) - 1)])


def measure_units(page: str, units: list[Unit]) -> PageFigures:
    lengths: list[int] = []
    shown: list[tuple[int, str]] = []
    parens = 0
    collapsed_words = 0
    problems: list[str] = []
    blocks: dict[int, list[Unit]] = {}
    for unit in units:
        if unit.block is not None:
            blocks.setdefault(unit.block, []).append(unit)
        if not unit.is_prose:
            continue
        if unit.collapsed:
            collapsed_words += word_count(unit.text)
            continue
        parens += _counting_text(unit.text).count("(")
        for sentence in sentences(unit.text):
            count = word_count(sentence)
            lengths.append(count)
            shown.append((count, _show(sentence)))
    words = sum(lengths)
    figures = PageFigures(
        page=page,
        words=words,
        sentences=len(lengths),
        mean=words / len(lengths) if lengths else 0.0,
        p90=nearest_rank(lengths, 90),
        over_40_pct=100.0 * sum(1 for n in lengths if n > LONG_SENTENCE_WORDS) / len(lengths) if lengths else 0.0,
        parens_per_100=100.0 * parens / words if words else 0.0,
        collapsed_words=collapsed_words,
        longest=sorted(shown, key=lambda pair: -pair[0])[:5],
        collapsed_problems=problems,
    )
    for block_units in blocks.values():
        problems += _not_evidence(block_units)
    if figures.collapsed_share > COLLAPSED_MAX_SHARE:
        problems.append(
            f"collapsed blocks hold {figures.collapsed_share:.0f} % of the page's words "
            f"({collapsed_words} of {words + collapsed_words}); at most {COLLAPSED_MAX_SHARE:.0f} %"
        )
    return figures


def _not_evidence(block: list[Unit]) -> list[str]:
    """Rule 7 for one collapsed block: [] when it is evidence, else the problem."""
    title = block[0].block_title
    text = "\n".join(plain_text(unit.text) for unit in block if unit.kind != "title")
    if EVIDENCE_TITLE.search(title) and EVIDENCE_CITATION.search(text):
        return []
    why = "its title does not say it is evidence" if not EVIDENCE_TITLE.search(title) else "it cites no evidence"
    return [f"collapsed block {title or '(untitled)'!r} is not evidence ({why}): {_clip(text.replace(chr(10), ' '))!r}"]


def measure(page: str) -> PageFigures:
    rendered = render(page)
    return measure_units(page, rendered.units)


def _clip(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- prose after an anchor ---------------------------------------------------------------------------------------


def prose_units_after(page: str, anchor: str) -> Iterator[Unit]:
    """The prose units (rules 4-7: what the figures count) from the element with id `anchor` (the page's top when
    empty) to the page's end."""
    rendered = render(page)
    if anchor and anchor not in rendered.anchors:
        raise KeyError(f"{page} has no anchor #{anchor}")
    for unit in rendered.units[rendered.anchors[anchor] if anchor else 0 :]:
        if unit.is_prose and not unit.collapsed:
            yield unit


# A white-space separated token, a code span (spaces and all) staying whole.
_TOKEN = re.compile(f"(?:[^\\s{CODE_OPEN}]*{CODE_OPEN}[^{CODE_CLOSE}]*{CODE_CLOSE})+[^\\s{CODE_OPEN}]*|\\S+")


def prose_after(page: str, anchor: str, words: int = 400) -> str:
    """The first `words` words of prose after `#anchor` (from the top when "") on `page` (a path under docs/, e.g.
    "reference/setup.md"), as a reader sees them: code spans in backticks (each one word), units joined by newlines;
    headings, code blocks, short table cells and collapsed evidence left out (the counting rules in this module's
    docstring). Raises KeyError for an unknown anchor, FileNotFoundError for an unknown page."""
    taken: list[str] = []
    left = words
    for unit in prose_units_after(page, anchor):
        tokens = _TOKEN.findall(unit.text)
        kept: list[str] = []
        for token in tokens:
            if left <= 0:
                break
            kept.append(token)
            left -= 1 if _is_word(_counting_text(token)) else 0
        if kept:
            taken.append(plain_text(" ".join(kept)))
        if left <= 0:
            break
    return "\n".join(taken)


# --- targets and the ratchet -------------------------------------------------------------------------------------

# The house targets (mean <= 18 words, p90 <= 33, <= 3 % of sentences over 40 words, <= 1.5 opening parentheses per
# 100 words). The twelve main pages must reach them by the end of the rewrite; `check --targets` enforces that.
TARGETS = {"mean": 18.0, "p90": 33.0, "over_40_pct": 3.0, "parens_per_100": 1.5}
FIGURE_NAMES = {
    "mean": "mean words per sentence",
    "p90": "p90 words per sentence",
    "over_40_pct": "% of sentences over 40 words",
    "parens_per_100": "opening parentheses per 100 words",
}
MAIN_PAGES = (
    "index.md",
    "get-started.md",
    "concepts.md",
    "reference/setup.md",
    "reference/support-matrix.md",
    "reference/slot-sizing.md",
    "reference/delivery-semantics.md",
    "reference/latency-metrics.md",
    "reference/kafka-tuning.md",
    "guides/postgres-sink.md",
    "guides/rtm-or-flink.md",
    "guides/monitoring.md",
)
RATCHET = Path(__file__).with_name("prose_ratchet.json")


def load_ratchet(path: Path = RATCHET) -> dict[str, dict[str, float]]:
    import json

    if not path.is_file():
        return {}
    return dict(json.loads(path.read_text())["pages"])


def save_ratchet(pages: dict[str, dict[str, float]], path: Path = RATCHET) -> None:
    import json

    note = (
        "Each page's prose figures (scripts/rtm_lab/prose.py): no page may get worse than recorded here, or than the "
        "targets where it meets them. Written by `python scripts/prose.py ratchet`, which only tightens."
    )
    body = {"note": note, "targets": TARGETS, "pages": dict(sorted(pages.items()))}
    path.write_text(json.dumps(body, indent=1) + "\n")


def tightened(recorded: dict[str, dict[str, float]], current: list[PageFigures]) -> dict[str, dict[str, float]]:
    """The ratchet after a run: each figure the lower of recorded and now; new pages added, gone pages dropped."""
    pages = {}
    for figures in current:
        now: dict[str, float] = {**figures.figures(), "words": figures.words, "sentences": figures.sentences}
        before = recorded.get(figures.page)
        if before:
            now |= {key: min(now[key], before[key]) for key in TARGETS if key in before}
        pages[figures.page] = now
    return pages


def limit(page: str, key: str, recorded: dict[str, dict[str, float]]) -> float:
    """A figure's ceiling: the recorded figure, or the target where the page meets it (a page may move within the
    target); a page with no record must meet the target."""
    before = recorded.get(page, {}).get(key)
    return TARGETS[key] if before is None else max(before, TARGETS[key])


def worse_figures(figures: PageFigures, recorded: dict[str, dict[str, float]]) -> list[str]:
    """Each figure above its ceiling, as "mean words per sentence 19.4 (limit 18.8)"."""
    return [
        f"{FIGURE_NAMES[key]} {value:g} (limit {limit(figures.page, key, recorded):g})"
        for key, value in figures.figures().items()
        if value > limit(figures.page, key, recorded)
    ]


def missed_targets(figures: PageFigures) -> list[str]:
    return [
        f"{FIGURE_NAMES[key]} {value:g} (target {TARGETS[key]:g})"
        for key, value in figures.figures().items()
        if value > TARGETS[key]
    ]

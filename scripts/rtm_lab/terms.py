"""One name per concept: the glossary (scripts/rtm_lab/glossary.yml), its page, and the checks that read it.

Two checks:
- A retired name (glossary.yml's `retired`) anywhere in a page's rendered text: prose, headings, titles and table
  cells of every size (code blocks left out; code spans kept, in backticks). The skill's Markdown (skills/) is read
  too, outside its code blocks. The glossary's own "Not: ..." lines are the one place a retired name may stand.
- "recommend" in a sentence about the batch duration (its name, 5 minutes, `realTime`, or a retired name such as an
  unqualified "interval"): Spark's guide calls 5 minutes the *default*. Checked in the rendered pages; in snippets/,
  skills/ and scripts/, line by line with the lines around (comments, strings, names); and in test function names
  under tests/. Not checked: a changelog's earlier entries (they record what a release said, and a newer entry
  corrects them), and the check's own definitions (this module, glossary.yml, scripts/prose.py).
"""

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rtm_lab import prose
from rtm_lab.paths import PROJECT_ROOT

GLOSSARY = Path(__file__).with_name("glossary.yml")
GLOSSARY_PAGE = "glossary.md"
BATCH_DURATION = "batch duration"  # the term whose retired names also make "recommend" next to them fail

RECOMMEND = re.compile(r"recommend", re.IGNORECASE)
# What makes a sentence about the batch duration, besides its retired names (see _mentions_batch_duration):
# its name, 5 minutes, or the trigger's keyword `realTime` (in that spelling: "a real-time query" is not about it).
BATCH_DURATION_WORDS = re.compile(
    r"(?i:batch[- _]duration|\b(5|five)[- _]?min(ute)?s?\b)|realTime|RealTime|real_time_interval",
)


@dataclass(frozen=True)
class Retired:
    shown: str
    pattern: re.Pattern[str]
    allowed_before: frozenset[str] = frozenset()
    allowed_in: re.Pattern[str] | None = None


@dataclass(frozen=True)
class Term:
    name: str
    definition: str
    explained_in: str
    retired: tuple[Retired, ...] = field(default_factory=tuple)

    @property
    def anchor(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-")


def load(path: Path = GLOSSARY) -> list[Term]:
    import yaml

    data = yaml.safe_load(path.read_text())
    terms = []
    for entry in data["terms"]:
        retired = tuple(
            Retired(
                shown=item["shown"],
                pattern=re.compile(item["pattern"], re.IGNORECASE),
                allowed_before=frozenset(word.lower() for word in item.get("allowed_before", [])),
                allowed_in=re.compile(item["allowed_in"], re.IGNORECASE) if item.get("allowed_in") else None,
            )
            for item in entry.get("retired", [])
        )
        terms.append(Term(entry["name"], " ".join(entry["definition"].split()), entry["explained_in"], retired))
    return terms


def glossary_markdown(terms: list[Term]) -> str:
    """The glossary's entries, for docs/glossary.md to include: a heading per term (its anchor is the name, e.g.
    #held-rate), the name in bold with its definition, the retired names, the page that explains it."""
    from rtm_lab.generated import generated_note

    blocks = [generated_note("python scripts/tables.py glossary") + " <!-- from scripts/rtm_lab/glossary.yml -->"]
    for term in sorted(terms, key=lambda t: t.name.lower()):
        title = term.name[0].upper() + term.name[1:]
        lines = [f"## {title}", "", f"**{title}**: {term.definition}", ""]
        if term.retired:
            lines += ["Not: " + "; ".join(item.shown for item in term.retired) + ".", ""]
        lines.append(f"Explained in {term.explained_in}.")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


# --- finding retired names ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hit:
    where: str  # a page, or a file and line
    found: str  # the words that matched
    rule: str  # what is wrong, in a few words
    sentence: str

    def __str__(self) -> str:
        return f"{self.where}: {self.rule}: {self.found!r} in {_clip(self.sentence)!r}"


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _words_before(sentence: str, start: int, count: int = 2) -> list[str]:
    words = re.findall(r"[\w`'’.-]+", sentence[:start])[-count:]
    return [word.lower().replace("’", "'").strip(".") for word in words]


def _allowed(rule: Retired, sentence: str, start: int) -> bool:
    if rule.allowed_in is not None and rule.allowed_in.search(sentence):
        return True
    return any(word in rule.allowed_before for word in _words_before(sentence, start))


def retired_names(sentence: str, terms: list[Term]) -> Iterator[tuple[Term, Retired, str]]:
    """Each retired name in one sentence (plain text, code spans in backticks) that its rule does not allow."""
    for term in terms:
        for rule in term.retired:
            for match in rule.pattern.finditer(sentence):
                if not _allowed(rule, sentence, match.start()):
                    yield term, rule, match.group(0)


def _mentions_batch_duration(sentence: str, terms: list[Term]) -> bool:
    """The batch duration by its name, 5 minutes or `realTime`, or by a retired name (an unqualified "interval")."""
    if BATCH_DURATION_WORDS.search(sentence):
        return True
    return any(term.name == BATCH_DURATION for term, _, _ in retired_names(sentence.replace("_", " "), terms))


def recommended_next_to_batch_duration(sentence: str, terms: list[Term]) -> bool:
    """True when the sentence says "recommend..." about the batch duration (5 minutes is Spark's default)."""
    return bool(RECOMMEND.search(sentence)) and _mentions_batch_duration(sentence, terms)


# --- where the checks look ---------------------------------------------------------------------------------------


def _page_sentences(page: str) -> Iterator[tuple[prose.Unit, str]]:
    for unit in prose.render(page).units:
        for sentence in prose.sentences(unit.text, keep_code=True):
            yield unit, sentence


def check_pages(terms: list[Term], pages: Iterable[str] | None = None) -> list[Hit]:
    hits: list[Hit] = []
    for page in pages if pages is not None else prose.pages():
        for unit, sentence in _page_sentences(page):
            if page == GLOSSARY_PAGE and unit.text.startswith("Not:"):
                continue
            for _, rule, found in retired_names(sentence, terms):
                hits.append(Hit(page, found, f"retired name (glossary: {rule.shown})", sentence))
            if recommended_next_to_batch_duration(sentence, terms):
                hits.append(Hit(page, "recommend", "Spark's default called a recommendation", sentence))
    return hits


# Text files under these folders are read line by line for "recommend" next to the batch duration.
TEXT_FOLDERS = ("snippets", "skills", "scripts")
TEXT_SUFFIXES = frozenset({".py", ".md", ".sh", ".yml", ".yaml", ".json", ".java", ".txt", ".toml", ".properties"})
# The checks' own definitions and the entry point that describes them.
NOT_CHECKED = (GLOSSARY, Path(__file__), PROJECT_ROOT / "scripts" / "prose.py")


def _is_changelog(path: Path) -> bool:
    return path.name.lower().startswith("changelog")


def _newest_changelog_entry(lines: list[str]) -> list[str]:
    """A changelog's lines up to its second "## " heading: the newest entry (the ones below it are history)."""
    headings = [number for number, line in enumerate(lines) if line.startswith("## ")]
    return lines[: headings[1]] if len(headings) > 1 else lines


_COMMENT_MARKER = re.compile(r"^\s*(#+|//+|/?\*+|--|<!--)\s?")
_MARKDOWN_BREAK = re.compile(r"^\s*([-*+] |\d+\. |#|\||>|!!!|\?\?\?)")


def _markdown_units(lines: list[str], code: bool = True) -> Iterator[tuple[int, str]]:
    """A Markdown file's paragraphs, list items, headings and table rows, each with its first line number; with
    `code`, the lines of a fenced code block come out as code (see _code_units)."""
    buffer: list[tuple[int, str]] = []
    fence: list[tuple[int, str]] | None = None
    for number, line in enumerate(lines, start=1):
        if line.strip().startswith(("```", "~~~")):
            yield from _flush(buffer)
            buffer = []
            if fence is None:
                fence = []
            else:
                if code:
                    yield from _code_units(fence)
                fence = None
            continue
        if fence is not None:
            fence.append((number, line))
            continue
        if not line.strip() or _MARKDOWN_BREAK.match(line):
            yield from _flush(buffer)
            buffer = []
        if line.strip():
            buffer.append((number, line.strip()))
    yield from _flush(buffer)
    if fence and code:
        yield from _code_units(fence)


def _code_units(numbered: list[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """Each line of code or comment that says "recommend", with the lines before and after it (a comment or a
    docstring wraps a sentence over lines), comment markers dropped."""
    texts = [_COMMENT_MARKER.sub("", line).strip() for _, line in numbered]
    for index, (number, _) in enumerate(numbered):
        if RECOMMEND.search(texts[index]):
            yield number, " ".join(text for text in texts[max(0, index - 1) : index + 2] if text)


def _flush(buffer: list[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    if buffer:
        yield buffer[0][0], " ".join(text for _, text in buffer)


def check_files(terms: list[Term], root: Path = PROJECT_ROOT) -> list[Hit]:
    hits: list[Hit] = []
    for folder in TEXT_FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            if not path.is_file() or path.suffix not in TEXT_SUFFIXES or path in NOT_CHECKED:
                continue
            if any(part in {"__pycache__", ".venv", "node_modules"} for part in path.parts):
                continue
            lines = path.read_text(errors="replace").splitlines()
            if _is_changelog(path):
                lines = _newest_changelog_entry(lines)
            where = path.relative_to(root).as_posix()
            units = _markdown_units(lines) if path.suffix == ".md" else _code_units(list(enumerate(lines, start=1)))
            hits += _recommended_in(units, where, terms)
            if folder == "skills" and path.suffix == ".md" and not _is_changelog(path):
                hits += _retired_in(_markdown_units(lines, code=False), where, terms)
    hits += check_test_names(terms, root)
    return hits


def _recommended_in(units: Iterable[tuple[int, str]], where: str, terms: list[Term]) -> list[Hit]:
    hits = []
    for number, text in units:
        for sentence in prose.sentences(prose.mark_code_spans(text), keep_code=True) or [text]:
            if recommended_next_to_batch_duration(sentence, terms):
                hits.append(Hit(f"{where}:{number}", "recommend", "Spark's default called a recommendation", sentence))
    return hits


def _retired_in(units: Iterable[tuple[int, str]], where: str, terms: list[Term]) -> list[Hit]:
    """Retired names in a skill file's prose (its code blocks are the snippets' code, checked with the pages)."""
    hits = []
    for number, text in units:
        for sentence in prose.sentences(prose.mark_code_spans(text), keep_code=True):
            for _, rule, found in retired_names(sentence, terms):
                hits.append(Hit(f"{where}:{number}", found, f"retired name (glossary: {rule.shown})", sentence))
    return hits


_TEST_NAME = re.compile(r"^\s*(?:async\s+)?def\s+(test\w*)", re.MULTILINE)


def check_test_names(terms: list[Term], root: Path = PROJECT_ROOT) -> list[Hit]:
    hits = []
    for path in sorted((root / "tests").rglob("*.py")):
        for match in _TEST_NAME.finditer(path.read_text(errors="replace")):
            name = match.group(1)
            if recommended_next_to_batch_duration(name.replace("_", " "), terms):
                line = path.read_text(errors="replace")[: match.start(1)].count("\n") + 1
                where = f"{path.relative_to(root).as_posix()}:{line}"
                hits.append(Hit(where, name, "a test name calls Spark's default a recommendation", name))
    return hits


def check(terms: list[Term] | None = None) -> list[Hit]:
    """Every hit once (a page that includes one generated file twice has its sentences twice)."""
    terms = terms if terms is not None else load()
    return list(dict.fromkeys(check_pages(terms) + check_files(terms)))

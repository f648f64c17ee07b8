"""The front page answers a new user's seven first-day questions, and every page is within two clicks of it.

The seven questions are those of a data engineer who knows PySpark micro-batch and has never used real-time mode.
QUESTIONS below is the published list: for each question, the facts its answer must hold. The test reads the built
site: it follows the first link of the question's row in the front page's "Route by task" table to that page and
anchor, and finds every fact within the first 400 words of prose after the anchor, as rtm_lab.prose counts prose
(paragraphs, list items, admonitions and table cells of 12 words or more, an inline code span as one word; not code
blocks, headings, block titles or collapsed evidence).
"""

import posixpath
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest

from rtm_lab.paths import PROJECT_ROOT
from rtm_lab.prose import prose_after

WORDS = 400
ROUTE_HEADING = "route-by-task"


@dataclass(frozen=True)
class Question:
    asks: str  # the start of the question's cell in the route table
    facts: tuple[str, ...]  # each found, case-insensitively and as whole words, in the prose after the anchor


QUESTIONS = (
    Question(
        "what real-time mode is, and when to use it",
        (
            "as it arrives",
            "milliseconds",
            "micro-batch",
            "task slot",
            "source partition",
            "shuffle partition",
            "CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT",
            "Kafka only",
        ),
    ),
    Question(
        "how to run a first Kafka to Kafka query, and which settings matter",
        ("realTime", "output mode", "update", "checkpoint", "5 seconds", "support matrix", "RealTimeStreamScan"),
    ),
    Question(
        "how many task slots a query needs",
        ("source partitions", "shuffle partitions", "200", "CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT"),
    ),
    Question(
        "which of your sources, sinks and operators work",
        (
            "foreachBatch",
            "reads Kafka only",
            "pandas UDFs",
            "stream-stream joins",
            "dropDuplicatesWithinWatermark",
            "dropDuplicates",
            "4.3.0",
            "OPERATOR_OR_SINK_NOT_IN_ALLOWLIST",
        ),
    ),
    Question(
        "how to write into PostgreSQL with low latency",
        ("JVM", "ForeachWriter", "Python", "until the batch ends", "upserts", "dead letters"),
    ),
    Question(
        "how to know latency is fine in production",
        ("no latency figures", "timestamps", "Prometheus", "p99", "stalled", "alert rules"),
    ),
    Question(
        "whether to use real-time mode or Flink",
        (
            "1,000 events/s",
            "stream-stream joins",
            "Python UDFs",
            "upsert-kafka",
            "networkBufferMaxWaitTimeMs",
            "restart",
        ),
    ),
)


class Links(HTMLParser):
    """The links in a built page's article (the navigation and the headings' permalinks left out)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.in_article = 0
        self.found: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "article":
            self.in_article += 1
        elif self.in_article and tag == "a" and attrs.get("href") and "headerlink" not in (attrs.get("class") or ""):
            self.found.append(attrs["href"])

    def handle_endtag(self, tag):
        if tag == "article":
            self.in_article -= 1


def built_page(site: Path, path: str) -> str:
    """The HTML of a page by its site path ("" for the front page, "reference/setup/" for a page)."""
    return (site / path / "index.html").read_text(encoding="utf-8")


def answer(site: Path, path: str, anchor: str) -> str:
    """The first 400 words of prose after the anchor (the page's title when the link has none), as rtm_lab.prose
    counts them."""
    page = "index.md" if not path else path.rstrip("/") + ".md"
    if not anchor:
        title = re.search(r'<h1 id="([^"]+)"', built_page(site, path))
        assert title, f"/{path}: no title with an id"
        anchor = title[1]
    return prose_after(page, anchor, words=WORDS)


def links_of(site: Path, path: str) -> list[tuple[str, str]]:
    """Every link in a page's article to a page of the site, as (site path, anchor)."""
    links = Links()
    links.feed(built_page(site, path))
    pages = [href for href in links.found if "://" not in href and not href.startswith("mailto:")]
    # Links to files (a plot, a JSON results file) are not pages.
    return [_resolve(path, href) for href in pages if not posixpath.splitext(href.partition("#")[0])[1]]


def site_pages() -> list[str]:
    docs = PROJECT_ROOT / "docs"
    pages = sorted(
        p.relative_to(docs)
        for p in docs.rglob("*.md")
        if p.relative_to(docs).parts[0] not in ("results", "includes", "drafts")
    )
    return ["" if p.as_posix() == "index.md" else f"{p.with_suffix('').as_posix()}/" for p in pages]


def route_rows(site: Path) -> dict[str, tuple[str, str]]:
    """The route table's rows: the question's text -> the first link of its row (site path, anchor)."""
    html = built_page(site, "")
    table = html[html.index(f'id="{ROUTE_HEADING}"') :]
    table = table[: table.index("</table>")]
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:]:
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        asks = re.sub(r"<[^>]+>", "", cells[0]).strip()
        href = re.search(r'href="([^"]+)"', cells[1])
        assert href, f"route row {asks!r} links nothing"
        rows[asks] = _resolve("", href[1])
    return rows


def _resolve(path: str, href: str) -> tuple[str, str]:
    target, _, anchor = href.partition("#")
    if not target:
        return path, anchor
    page = posixpath.normpath(posixpath.join("/" + path, target)).strip("/")
    return (f"{page}/" if page and page != "." else ""), anchor


def _found(fact: str, text: str) -> bool:
    """The fact's words in order, whole words (a plural counts: "checkpoint" finds "checkpoints"), any case."""
    pattern = r"(?<!\w)" + r"\s+".join(re.escape(word) for word in fact.split()) + r"s?(?!\w)"
    return re.search(pattern, text, re.I) is not None


@pytest.mark.parametrize("question", QUESTIONS, ids=[f"q{n}" for n in range(1, len(QUESTIONS) + 1)])
def test_each_first_day_question_is_answered_within_400_words_of_its_link(question, built_site):
    rows = route_rows(built_site)
    assert question.asks in rows, f"the route table has no row {question.asks!r}; it has {list(rows)}"
    page, anchor = rows[question.asks]
    text = answer(built_site, page, anchor)
    missing = [fact for fact in question.facts if not _found(fact, text)]
    assert not missing, f"/{page}#{anchor}: not in the first {WORDS} words of prose: {missing}\n\n{text}"


def test_the_route_table_asks_exactly_the_seven_questions(built_site):
    assert list(route_rows(built_site)) == [q.asks for q in QUESTIONS]


def test_the_front_page_links_every_page(built_site):
    """Every guide and reference is one click from the front page, not only in the navigation."""
    linked = {page for page, _ in links_of(built_site, "")}
    missing = [page for page in site_pages() if page and page not in linked]
    assert not missing, f"the front page links none of {missing}"


def test_every_page_is_linked_from_another_page_the_front_page_links(built_site):
    """Each page is reached by a second path too: a page the front page links (not the front page itself) links it."""
    first = {page for page, _ in links_of(built_site, "")} - {""}
    incoming: dict[str, set[str]] = {}
    for source in first:
        for page, _ in links_of(built_site, source):
            if page != source:
                incoming.setdefault(page, set()).add(source)
    missing = [page for page in site_pages() if page and not incoming.get(page)]
    assert not missing, (
        f"linked from no page the front page links (only from the front page or the navigation): {missing}"
    )

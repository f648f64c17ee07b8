"""The prose check's counting rules (rtm_lab.prose's docstring), one case per rule, on Markdown rendered as the site
renders it; and the ratchet's arithmetic."""

import pytest

from rtm_lab import prose


def units(markdown: str) -> list[prose.Unit]:
    return prose.units_of_html(prose.render_markdown(markdown)).units


def figures(markdown: str) -> prose.PageFigures:
    return prose.measure_units("test.md", units(markdown))


def counted_sentences(markdown: str) -> list[str]:
    return [s for u in units(markdown) if u.is_prose and not u.collapsed for s in prose.sentences(u.text, True)]


# Rule 1: rendered with the includes expanded, front matter dropped.
def test_a_page_is_rendered_with_its_includes_expanded_and_its_front_matter_dropped():
    page = prose.render("glossary.md")
    texts = [prose.plain_text(unit.text) for unit in page.units]
    # The entries live in docs/results/glossary.md; the page only includes them.
    assert any(text.startswith("Held rate: a rate is held when the p99") for text in texts)
    assert not any("description:" in text for text in texts)


def test_every_nav_page_is_measured_and_results_includes_are_not_pages():
    pages = prose.pages()
    assert {"index.md", "glossary.md", "reference/slot-sizing.md"} <= set(pages)
    assert not any(page.startswith("results/") for page in pages)


# Rule 2: code blocks left out.
def test_code_blocks_are_left_out():
    markdown = "One short sentence here.\n\n```python\n# A comment. With sentences. Many of them.\nx = 1\n```\n"
    assert counted_sentences(markdown) == ["One short sentence here."]


# Rule 3: an inline code span is one word; its dots and brackets are not punctuation.
def test_an_inline_code_span_counts_as_one_word():
    markdown = 'Call `trigger(realTime="5 minutes")` on the writer. Then start it.'
    found = figures(markdown)
    assert found.sentences == 2
    assert found.words == 5 + 3
    assert found.parens_per_100 == 0


# Rule 4: each list item is a unit, nested items too.
def test_each_list_item_is_a_unit_even_without_a_full_stop():
    markdown = "- first item with no full stop\n- second item. It has two sentences\n    - a nested item\n"
    assert counted_sentences(markdown) == [
        "first item with no full stop",
        "second item.",
        "It has two sentences",
        "a nested item",
    ]


def test_a_list_item_with_paragraphs_is_one_unit():
    markdown = "-   **Run it**\n\n    Run a query on your laptop.\n"
    assert counted_sentences(markdown) == ["Run it Run a query on your laptop."]


# Rule 5: a table cell of 12 words or more is prose; a shorter one is not.
def test_a_table_cell_counts_from_twelve_words():
    long_cell = "one two three four five six seven eight nine ten eleven twelve"
    markdown = (
        f"| Setting | Meaning |\n|---|---|\n| short cell | {long_cell} |\n| x | {' '.join(long_cell.split()[:11])} |\n"
    )
    assert counted_sentences(markdown) == [long_cell]


# Rule 6: headings and titles are not sentences.
def test_headings_and_titles_are_left_out():
    markdown = '# A heading\n\n!!! warning "A title"\n\n    The body counts.\n\n=== "A tab"\n\n    So does this.\n'
    assert counted_sentences(markdown) == ["The body counts.", "So does this."]
    kinds = {unit.kind for unit in units(markdown)}
    assert {"heading", "title"} <= kinds


# Rule 7: collapsed blocks.
PROSE = " ".join(["Plenty of prose words sit on this page around the block."] * 6)


def test_a_collapsed_evidence_block_is_left_out():
    markdown = (
        "The answer comes first. It is short. "
        + " ".join(["More prose follows it."] * 5)
        + '\n\n??? note "Evidence"\n\n'
        + "    Verified by `tests/reference/test_x.py::test_y` on Spark 4.3.0.\n"
    )
    found = figures(markdown)
    assert (found.sentences, found.words) == (7, 27)
    assert found.collapsed_words == 6
    assert found.collapsed_problems == []


@pytest.mark.parametrize(
    "evidence",
    [
        "Verified by `tests/a.py::test_b` on Spark 4.3.0.",
        "- Machine: 2 cores, 23.5 GiB, AMD EPYC",
        "- Command: `python scripts/bench.py latency --repeat 3`",
        "- Run at 2026-11-24T10:35:01Z (2264 s in all)",
        "Databricks Runtime reports latency percentiles in the query progress (read 2026-11).",
    ],
)
def test_evidence_may_be_collapsed(evidence):
    found = figures(f'{PROSE}\n\n??? note "Evidence"\n\n    {evidence}\n')
    assert found.collapsed_problems == []
    assert found.collapsed_words > 0


def test_spark_source_read_for_a_claim_may_be_collapsed():
    table = "| step | where |\n    |---|---|\n    | the task writes every row, asks for the commit, then closes the writer last | `WriteToDataSourceV2Exec.scala` (line 704) |"
    found = figures(
        f'{PROSE}\n\n??? note "Evidence: the race in Spark\'s source"\n\n    Read in the jars:\n\n    {table}\n'
    )
    assert found.collapsed_problems == []


def test_a_databricks_note_names_the_databricks_page():
    note = (
        "The runtime has its own cluster flag (Databricks docs: structured-streaming/real-time/setup, November 2026)."
    )
    assert figures(f'{PROSE}\n\n??? note "Databricks only"\n\n    {note}\n').collapsed_problems == []


@pytest.mark.parametrize(
    ("title", "text", "why"),
    [
        (
            "More",
            "Verified by `tests/a.py::test_b`. Set the fetch wait to 50 ms.",
            "its title does not say it is evidence",
        ),
        ("Evidence", "Set the fetch wait to 50 ms for lower latency.", "it cites no evidence"),
    ],
)
def test_a_collapsed_block_that_is_not_evidence_fails(title, text, why):
    found = figures(f'{PROSE}\n\n??? tip "{title}"\n\n    {text}\n')
    assert len(found.collapsed_problems) == 1
    assert f"is not evidence ({why})" in found.collapsed_problems[0]


def test_collapsed_words_over_a_quarter_of_the_page_fail():
    footer = "Verified by `tests/a.py::test_b` on Spark 4.3.0 with the Kafka connector 4.2.0 and a real broker."
    found = figures(f'A short page.\n\n??? note "Evidence"\n\n    {footer}\n')
    assert found.collapsed_share > 25
    assert any("at most 25 %" in problem for problem in found.collapsed_problems)


def test_an_open_block_counts():
    found = figures('???+ note "Open"\n\n    This text is shown, so it counts.\n')
    assert found.sentences == 1
    assert found.collapsed_words == 0


# Rule 8: sentence ends.
@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("Use a sink that tolerates duplicates, e.g. an upsert. Then restart.", 2),
        ("Spark 4.3.0 added it. PySpark 4.1.4 fails.", 2),
        ("The p99.9 was 14 ms. The max was 61 ms.", 2),
        ('He said "stop." Then it stopped.', 2),
        ("It ends here. `spark.sql.shuffle.partitions` is the next word.", 2),
        ("Is it real time? Yes! It is.", 3),
        ("Compare RTM vs. micro-batch at 2.5 s (i.e. a short batch).", 1),
        ("Read the docs (see Setup). Then run it.", 2),
        ("it costs 2 s. and then it ends", 1),
        ("1. What changes. The trigger alone.", 2),
        ("It ran in step 2. Then it stopped.", 2),
    ],
)
def test_sentences_end_at_a_full_stop_before_a_new_sentence(text, count):
    assert len(prose.sentences(prose.mark_code_spans(text))) == count


# Rule 9: a word holds a letter, a digit or a code span.
def test_a_dash_alone_is_not_a_word():
    assert prose.word_count(prose.mark_code_spans("real-time mode — a trigger – 4.3.0 `x y z`")) == 6


# Rule 10: the figures.
def test_the_figures_of_a_page():
    long = " ".join(["word"] * 44) + "."
    markdown = "\n\n".join(["Five words in this one."] * 9 + [long, "It has (one) bracket (two)."])
    found = figures(markdown)
    assert found.sentences == 11
    assert found.words == 9 * 5 + 44 + 5
    assert found.mean == pytest.approx(94 / 11)
    assert found.p90 == 5  # nearest rank: the 10th of 11 sorted lengths
    assert found.over_40_pct == pytest.approx(100 / 11)
    assert found.parens_per_100 == pytest.approx(200 / 94)
    assert found.longest[0][0] == 44


def test_nearest_rank_is_the_length_of_a_real_sentence():
    assert prose.nearest_rank(list(range(1, 11)), 90) == 9
    assert prose.nearest_rank(list(range(1, 12)), 90) == 10
    assert prose.nearest_rank([], 90) == 0


# The ratchet.
def page_figures(page: str, mean: float) -> prose.PageFigures:
    return prose.PageFigures(page, 100, 5, mean, 30, 0, 1, 0, [], [])


def test_a_page_may_not_get_worse_than_recorded():
    recorded = {"a.md": {"mean": 20.0, "p90": 30.0, "over_40_pct": 0.0, "parens_per_100": 1.0}}
    assert prose.worse_figures(page_figures("a.md", 20.0), recorded) == []
    assert prose.worse_figures(page_figures("a.md", 20.01), recorded) == ["mean words per sentence 20.01 (limit 20)"]


def test_a_page_under_the_target_may_move_within_it_and_a_new_page_must_meet_it():
    recorded = {"a.md": {"mean": 12.0, "p90": 30.0, "over_40_pct": 0.0, "parens_per_100": 1.0}}
    assert prose.worse_figures(page_figures("a.md", 17.5), recorded) == []
    assert prose.worse_figures(page_figures("new.md", 18.5), recorded) == ["mean words per sentence 18.5 (limit 18)"]


def test_the_ratchet_only_tightens():
    recorded = {"a.md": {"mean": 20.0, "p90": 30.0, "over_40_pct": 5.0, "parens_per_100": 1.0}, "gone.md": {}}
    pages = prose.tightened(recorded, [page_figures("a.md", 19.0), page_figures("b.md", 25.0)])
    assert pages["a.md"]["mean"] == 19.0
    assert pages["a.md"]["over_40_pct"] == 0.0
    assert pages["b.md"]["mean"] == 25.0
    assert "gone.md" not in pages
    assert prose.tightened({"a.md": {"mean": 18.0}}, [page_figures("a.md", 19.0)])["a.md"]["mean"] == 18.0


def test_the_main_pages_exist():
    assert set(prose.MAIN_PAGES) <= set(prose.pages())
    assert len(prose.MAIN_PAGES) == 12


# prose_after, for the first-day questions test.
def test_prose_after_an_anchor_gives_the_words_a_reader_reads_first():
    text = prose.prose_after("glossary.md", "held-rate", words=8)
    assert text == "Held rate: a rate is held when the"
    with pytest.raises(KeyError):
        prose.prose_after("glossary.md", "no-such-anchor")
    assert prose.prose_after("glossary.md", "", words=3) == "Each concept on"


def test_prose_after_keeps_code_spans_whole_as_one_word_each():
    text = prose.prose_after("glossary.md", "allowlist", words=30)
    assert "`STREAMING_REAL_TIME_MODE.OPERATOR_OR_SINK_NOT_IN_ALLOWLIST`" in text

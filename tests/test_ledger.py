"""The citation ledger (tests/citation_ledger.py, tests/ledger/): each test a page cites, with the assert that backs it.

The first two tests check the real pages and ledgers; the rest check the checker on a small page of their own, whose
ledger cites the `sample_*` functions below (they are never collected: their names do not start with `test_`).
"""

import textwrap

import citation_ledger as cl
import pytest


def test_every_page_that_cites_a_test_has_a_ledger():
    missing = cl.missing_ledgers()
    assert not missing, "pages without a ledger file in tests/ledger/ (see its README): " + ", ".join(missing)


def test_every_ledger_entry_matches_its_page_and_its_test():
    lines = cl.problems()
    assert not lines, f"{len(lines)} ledger problem(s):\n" + "\n".join(lines)


def sample_test():
    value = 50
    assert value == 50, "the default"
    with pytest.raises(ZeroDivisionError):
        print(1 / 0)
    sample_helper(value)


def sample_helper(value):
    assert value > 0


def sample_other():
    assert "other", "a second test the page cites"


def sample_unrelated():
    return "called by no sample test"


ME = "tests/test_ledger.py"
PAGE = f"""# Title

Some claim. Verified by `{ME}::sample_test` and `{ME}::sample_other`.

```python
# not a heading
```

## Cases

| Case | Test |
|---|---|
| a | `{ME}::sample_test[a]` |
| b | `{ME}::sample_test[b]` |
"""


def write(tmp_path, page: str, ledger: str):
    docs, folder = tmp_path / "docs", tmp_path / "ledger"
    docs.mkdir()
    folder.mkdir()
    (docs / "x.md").write_text(page)
    (folder / "x.yml").write_text(textwrap.dedent(ledger))
    return docs, folder


GOOD = f"""\
    page: docs/x.md
    citations:
      - claim: "The default is 50."
        section: "Title"
        test: {ME}::sample_test
        asserts:
          - 'assert value == 50'
          - 'pytest.raises(ZeroDivisionError)'
      - claim: "Each case's value is positive."
        section: "Cases"
        test: {ME}::sample_test
        asserts: ['assert value > 0']
        via: {ME}::sample_helper
        rows: 2
      - claim: "The other sample holds."
        section: "Title"
        test: {ME}::sample_other
        asserts: ['assert "other"']
"""


def test_a_complete_ledger_is_clean(tmp_path):
    assert cl.problems(*write(tmp_path, PAGE, GOOD)) == []


def test_a_page_without_a_ledger_is_named(tmp_path):
    docs, folder = write(tmp_path, PAGE, GOOD)
    (folder / "x.yml").unlink()
    assert cl.missing_ledgers(docs, folder) == ["docs/x.md"]


def test_an_uncited_test_and_an_uncovered_citation_are_each_named(tmp_path):
    page = PAGE.replace(f"{ME}::sample_other", f"{ME}::sample_x")
    lines = cl.problems(*write(tmp_path, page, GOOD))
    assert any(f"`{ME}::sample_x` is cited but has no entry" in line for line in lines)
    assert any("sample_other: no longer cited on docs/x.md" in line for line in lines)


def test_an_assert_found_only_outside_the_function_does_not_count(tmp_path):
    ledger = GOOD.replace(
        "'assert value > 0']\n        via: tests/test_ledger.py::sample_helper", "'assert value > 0']"
    )
    lines = cl.problems(*write(tmp_path, PAGE, ledger))
    assert len(lines) == 1 and lines[0].endswith(
        f"x.yml: {ME}::sample_test: no assert in {ME}::sample_test contains 'assert value > 0'"
    )


def test_text_outside_an_assert_does_not_count(tmp_path):
    lines = cl.problems(*write(tmp_path, PAGE, GOOD.replace("'assert value == 50'", "'value = 50'")))
    assert len(lines) == 1 and "contains 'value = 50'" in lines[0]


def test_a_helper_the_test_does_not_call_is_named(tmp_path):
    ledger = GOOD.replace(f"via: {ME}::sample_helper", f"via: {ME}::sample_unrelated").replace(
        "'assert value > 0'", "'assert nothing'"
    )
    lines = cl.problems(*write(tmp_path, PAGE, ledger))
    assert [line.partition("x.yml: ")[2] for line in lines] == [
        f"{ME}::sample_test: the test does not call its `via` helper {ME}::sample_unrelated",
        f"{ME}::sample_test: no assert in {ME}::sample_test or {ME}::sample_unrelated contains 'assert nothing'",
    ]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (('section: "Cases"', 'section: "not a heading"'), "section 'not a heading' is not a heading"),
        (("rows: 2", "rows: 3"), "`rows: 3` but the page cites 2 case(s)"),
        (("        rows: 2\n", "        rows: 2\n        note: x\n"), "unknown field(s) note"),
        (("page: docs/x.md", "page: docs/y.md"), "should be `page: docs/x.md`"),
        (("asserts: ['assert \"other\"']", "asserts: []"), "`asserts` must be a non-empty list"),
        ((f"test: {ME}::sample_other", "test: sample_other"), "node id"),
        (('      - claim: "The other sample holds."\n        section', "      - section"), "missing claim"),
    ],
)
def test_format_breaks_are_named(tmp_path, change, expected):
    ledger = GOOD.replace(*change)
    assert ledger != GOOD
    lines = cl.problems(*write(tmp_path, PAGE, ledger))
    assert any(expected in line for line in lines), lines


def test_a_bare_test_name_in_a_table_is_a_citation():
    table = "| x | `test_a_complete_ledger_is_clean` | `test_no_such_thing_anywhere` |"
    assert cl.citations(table) == ["test_a_complete_ledger_is_clean"]
    assert cl.covers(f"{ME}::test_a_complete_ledger_is_clean", "test_a_complete_ledger_is_clean")
    assert cl.covers(f"{ME}::test_a_complete_ledger_is_clean", ME)
    assert not cl.covers("tests/a.py::test_two[p1]", "tests/a.py::test_two[p2]")


def test_headings_skip_code_blocks_and_anchors():
    text = "# One\n```python\n# code\n```\n## Two `x` {#two}\n"
    assert cl.headings(text) == ["One", "Two x"]


def test_the_ledger_file_is_named_after_the_page():
    assert cl.ledger_path("docs/reference/setup.md").name == "reference__setup.yml"
    assert cl.page_of(cl.ledger_path("docs/results/support-matrix.md")) == "docs/results/support-matrix.md"

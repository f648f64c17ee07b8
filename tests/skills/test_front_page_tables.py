"""The front page's generated tables: the "Can I ...?" rows SKILL.md shares, their From column, and the links each
table carries over from the skill (Can I) or from Setup (when to use)."""

import pytest

from rtm_lab.paths import PROJECT_ROOT
from rtm_lab.skillgen import can_i, front_page
from rtm_lab.skillgen.markdown import RenderError


def matrix(**outcomes: list[tuple]) -> dict:
    """A version matrix with one case per keyword, its (kind, error) on 4.1.4, 4.2.1 and 4.3.0 in that order."""
    versions = ("4.1.4", "4.2.1", "4.3.0")
    return {
        "versions": {
            version: {
                "cases": [
                    {"id": case, "kind": kind, "error": error}
                    for case, per_version in outcomes.items()
                    for kind, error in [per_version[n]]
                ]
            }
            for n, version in enumerate(versions)
        }
    }


REFUSED = ("fails at run time", "STREAMING_REAL_TIME_MODE.OPERATOR_OR_SINK_NOT_IN_ALLOWLIST")
RUNS = ("runs", None)


def test_since_is_the_oldest_version_with_the_newest_answer():
    found = matrix(
        same=[REFUSED] * 3, new=[REFUSED, REFUSED, RUNS], changed=[("fails at start()", "X"), REFUSED, REFUSED]
    )
    assert can_i.since(found, ["same"], "here") == "4.1.4"
    assert can_i.since(found, ["new"], "here") == "4.3.0"
    assert can_i.since(found, ["changed"], "here") == "4.2.1"
    # Several cases: the newest version from which all of them hold.
    assert can_i.since(found, ["same", "changed"], "here") == "4.2.1"


def test_since_counts_a_version_only_when_every_later_one_agrees():
    found = matrix(back_and_forth=[REFUSED, RUNS, REFUSED])
    assert can_i.since(found, ["back_and_forth"], "here") == "4.3.0"


def test_since_names_an_unknown_case_and_the_known_ones():
    with pytest.raises(RenderError, match="no version-matrix case nope; known: same"):
        can_i.since(matrix(same=[RUNS] * 3), ["nope"], "here")


def test_skill_md_gets_four_columns_and_the_front_page_four_others():
    """The front page's copy is the committed include (`tables.py --check`, in lint, keeps it equal to a fresh render,
    which imports the support-matrix cases and PySpark with them)."""
    skill = can_i.skill_table().splitlines()[0]
    assert skill == "| Can I ... | OSS Spark 4.3.0 (tested) | Databricks (from its docs) | Proof |"
    site = (PROJECT_ROOT / "docs" / "results" / "can-i.md").read_text(encoding="utf-8").split("\n\n", 1)[1].splitlines()
    assert site[0] == "| Can I ... | OSS Spark 4.3.0 (tested) | From PySpark | Proof |"
    assert len(site) == len(can_i.skill_table().splitlines())
    assert "{{" not in "\n".join(site) and "](references/" not in "\n".join(site)


@pytest.mark.parametrize(
    ("skill_link", "site_link"),
    [
        ("references/support-matrix.md#sources-sinks-and-operators", "reference/support-matrix.md"),
        ("references/slot-sizing.md#worked-examples", "reference/slot-sizing.md#worked-examples"),
        # A reference split off a page: its own title lands where its part of the page starts.
        (
            "references/postgres-sink-jvm.md#latency-a-python-writer-gets-rows-late-in-oss",
            "guides/postgres-sink.md#latency-a-python-writer-gets-rows-late-in-oss",
        ),
        # A page of its own: a link to its title lands on the page's top.
        ("references/version-matrix.md", "reference/version-matrix.md"),
        (
            "references/version-matrix.md#pyspark-414-421-and-430-every-case-on-each-version",
            "reference/version-matrix.md",
        ),
        ("references/version-matrix.md#the-table", "reference/version-matrix.md#the-table"),
        # A marker right before a heading: the part starts at that heading, not at the one before the marker.
        ("references/rtm-or-flink-stall.md", "guides/rtm-or-flink.md#why-deduplication-falls-behind-at-10000-eventss"),
        ("references/rtm-or-flink-limits.md", "guides/rtm-or-flink.md#after-a-kill"),
    ],
)
def test_skill_links_become_links_to_the_docs_section(skill_link, site_link):
    assert front_page.SiteLinks(PROJECT_ROOT).site_target(skill_link, "here") == site_link


@pytest.mark.parametrize(
    ("skill_link", "error"),
    [
        ("references/no-such-page.md", "names no skill reference"),
        (
            "references/slot-sizing.md#no-such-heading",
            "#no-such-heading is no heading of docs/reference/slot-sizing.md",
        ),
        ("../SKILL.md#quick-start", "names no skill reference"),
    ],
)
def test_a_link_the_site_has_no_place_for_is_an_error(skill_link, error):
    with pytest.raises(RenderError, match=error):
        front_page.SiteLinks(PROJECT_ROOT).site_target(skill_link, "here")


def test_when_to_use_is_setups_table_with_links_rebased_for_the_front_page():
    table = front_page.when_to_use_markdown().split("\n\n", 1)[1]
    setup = (PROJECT_ROOT / front_page.SETUP).read_text(encoding="utf-8")
    assert table.splitlines()[0] in setup and len(table.splitlines()) >= 4
    assert "](../guides/rtm-or-flink.md)" in setup and "](guides/rtm-or-flink.md)" in table
    assert "](slot-sizing.md)" in setup and "](reference/slot-sizing.md)" in table
    assert "](version-matrix.md)" in setup and "](reference/version-matrix.md)" in table

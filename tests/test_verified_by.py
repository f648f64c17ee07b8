"""The check that fails a full run when a page names a test that does not back it (tests/verified_by.py)."""

import re
from pathlib import Path

import verified_by as vb

from rtm_lab.paths import PROJECT_ROOT

PAGE = "docs/x.md"
IDS = ["tests/a.py::test_one", "tests/a.py::test_two[p1]", "tests/a.py::test_two[p2]", "tests/b.py::test_three"]


def refs(*targets: str) -> list[vb.Reference]:
    return [vb.Reference(PAGE, t) for t in targets]


def test_all_passed_is_clean():
    outcomes = dict.fromkeys(IDS, vb.PASSED)
    assert vb.problems(refs("tests/a.py::test_one", "tests/a.py::test_two", "tests/b.py"), outcomes, IDS) == []


def test_missing_skipped_and_not_run_are_each_named():
    outcomes = {"tests/a.py::test_one": vb.SKIPPED, "tests/a.py::test_two[p1]": vb.PASSED}
    lines = vb.problems(refs("tests/a.py::test_gone", "tests/a.py::test_one", "tests/a.py::test_two"), outcomes, IDS)
    assert lines == [
        f"{PAGE}: `tests/a.py::test_gone` names no test that exists (renamed or removed?)",
        f"{PAGE}: `tests/a.py::test_one` was skipped (1 of 1)",
        f"{PAGE}: `tests/a.py::test_two` did not run (1 of 2)",
    ]


def test_a_case_reference_matches_that_case_only():
    outcomes = {"tests/a.py::test_two[p1]": vb.PASSED}
    assert vb.problems(refs("tests/a.py::test_two[p1]"), outcomes, IDS) == []
    assert vb.problems(refs("tests/a.py::test_two[p3]"), outcomes, IDS) != []


def test_only_a_run_that_selects_nothing_is_checked(tmp_path):
    (tmp_path / "tests").mkdir()
    assert vb.is_full_run([], tmp_path, "", "")
    assert vb.is_full_run([str(tmp_path / "tests")], tmp_path, "", "")
    assert not vb.is_full_run([], tmp_path, "not slow", "")  # the fast loop
    assert not vb.is_full_run([], tmp_path, "", "errors")
    assert not vb.is_full_run([str(tmp_path / "tests" / "test_x.py")], tmp_path, "", "")


def test_every_test_a_page_names_is_defined():
    """The fast loop's share of the check: each named file exists and defines each named test function."""
    found = vb.references()
    assert len(found) > 50, "the pages name their tests in backticks; the pattern no longer finds them"
    for ref in found:
        path, _, name = ref.target.partition("::")
        source = Path(PROJECT_ROOT / path)
        assert source.is_file(), ref
        if name:
            function = name.split("[")[0]
            assert re.search(rf"^def {function}\(", source.read_text(), re.MULTILINE), ref

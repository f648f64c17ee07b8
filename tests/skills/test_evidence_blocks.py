"""A page's collapsed Evidence block in the skill: listed with the other proofs when it holds only "Verified by"
paragraphs, quoted where it stands when it holds anything else."""

from rtm_lab.skillgen.markdown import flatten_blocks
from rtm_lab.skillgen.parts import PROOF_HEADING, gather_proofs, unwrap_evidence

PROOF_ONLY = """## Section

A claim.

??? note "Evidence"

    Verified by `tests/a.py::test_claim` on Spark 4.3.0.
"""

MIXED = """## Section

A claim.

??? note "Evidence"

    - **What was tested.** Nine rows, one restart.

    Verified by `tests/a.py::test_claim` on Spark 4.3.0.
"""


def skill_body(page: str) -> str:
    return gather_proofs(flatten_blocks(unwrap_evidence(page)))


def test_a_proof_only_block_joins_the_list_of_proofs():
    body = skill_body(PROOF_ONLY)
    assert "Evidence" not in body
    assert f"## {PROOF_HEADING}" in body and "- [Section](#section): `tests/a.py::test_claim`" in body


def test_a_block_with_more_than_proofs_stays_a_quoted_block():
    body = skill_body(MIXED)
    assert "> **Evidence**" in body and "> - **What was tested.** Nine rows, one restart." in body
    assert PROOF_HEADING not in body

"""Answers the SKILL.md template takes from the tested case lists instead of typing them, so they cannot drift.

In the template:

    {{ case ID [ID ...] }}        what OSS Spark does with these support-matrix cases (scripts/rtm_lab/probes/support_matrix.py)
    {{ databricks ID [ID ...] }}  what the Databricks docs say about them (the same cases' `databricks` field)
    {{ mistake ID }}              the error a mistake in scripts/rtm_lab/probes/mistakes.py gets, and its fix

IDs are `Case.id` (e.g. `sink-foreachbatch`) and `Mistake.id` (e.g. `boolean_trigger`); an unknown one is an error
naming the known ones.
"""

import functools
import re

from rtm_lab.skillgen.markdown import RenderError

DIRECTIVE = re.compile(r"\{\{ (?P<kind>case|databricks|mistake) (?P<ids>[\w-]+(?: [\w-]+)*) \}\}")


@functools.cache
def _cases() -> dict:
    from rtm_lab.probes.support_matrix import CASES

    return {c.id: c for c in CASES}


@functools.cache
def _mistakes() -> dict:
    from rtm_lab.probes.mistakes import MISTAKES

    return {m.id: m for m in MISTAKES}


def _where(kind: str) -> str:
    from rtm_lab.probes.harness import AT_CALL, AT_START

    return {AT_CALL: "at the call", AT_START: "at `start()`"}.get(kind, "at run time")


def _lookup(table: dict, ids: list[str], what: str, where: str) -> list:
    unknown = [i for i in ids if i not in table]
    if unknown:
        raise RenderError(f"{where}: no {what} {', '.join(unknown)}; known: {', '.join(sorted(table))}.")
    return [table[i] for i in ids]


def _case_answer(cases: list) -> str:
    from rtm_lab.probes.harness import RUNS

    if all(c.expected.kind == RUNS for c in cases):
        return "**Yes**, runs (tested)"
    if all(c.expected.kind != RUNS for c in cases) and len({str(c.expected) for c in cases}) == 1:
        outcome = cases[0].expected
        return f"**No**: fails {_where(outcome.kind)}, `{outcome.error}`"
    return "; ".join(
        f"{c.name}: " + ("runs" if c.expected.kind == RUNS else f"fails, `{c.expected.error}`") for c in cases
    )


def _databricks(cases: list) -> str:
    said = {c.databricks for c in cases}
    return said.pop() if len(said) == 1 else "; ".join(f"{c.name}: {c.databricks}" for c in cases)


def _mistake_answer(mistake) -> str:
    outcome = mistake.expected
    return f"**No**: fails {_where(outcome.kind)}, `{outcome.error}`. {mistake.fix}"


def expand(text: str, where: str) -> str:
    def replace(match: re.Match) -> str:
        ids = match["ids"].split()
        if match["kind"] == "mistake":
            (mistake,) = _lookup(_mistakes(), ids[:1], "mistake", where)
            return _mistake_answer(mistake)
        cases = _lookup(_cases(), ids, "support-matrix case", where)
        return _case_answer(cases) if match["kind"] == "case" else _databricks(cases)

    return DIRECTIVE.sub(replace, text)

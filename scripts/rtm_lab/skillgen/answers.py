"""Answers the SKILL.md template takes from the tested case lists instead of typing them, so they cannot drift.

In the template:

    {{ case ID [ID ...] }}        what OSS Spark does with these support-matrix cases (scripts/rtm_lab/probes/support_matrix.py)
    {{ databricks ID [ID ...] }}  what the Databricks docs say about them (the same cases' `databricks` field)
    {{ mistake ID }}              the error a mistake in scripts/rtm_lab/probes/mistakes.py gets, and its fix
    {{ allowlist-off }}           what the bypassed refusals of scripts/rtm_lab/probes/allowlist_off.py do with the check off
    {{ figure FILE.json:PATH }}   one value from docs/results/FILE.json, so a measured figure is never typed: PATH
                                  is keys joined by "/", and `key=value` picks the list item whose key has that value
                                  (e.g. `ad_attribution_latency.json:runs/rate=1000/modes/realtime/p50_ms`)
    {{ machines }}                the machines the results in docs/results/*.json were measured on, from their records

IDs are `Case.id` (e.g. `sink-foreachbatch`) and `Mistake.id` (e.g. `boolean_trigger`); an unknown one is an error
naming the known ones.
"""

import functools
import json
import re
from pathlib import Path

from rtm_lab.paths import PROJECT_ROOT
from rtm_lab.skillgen.markdown import RenderError

FIGURE = re.compile(r"\{\{ figure (?P<file>[\w.-]+\.json):(?P<path>\S+) \}\}")
ALLOWLIST_OFF = "{{ allowlist-off }}"
DIRECTIVE = re.compile(r"\{\{ (?P<kind>case|databricks|mistake) (?P<ids>[\w-]+(?: [\w-]+)*) \}\}")
MACHINES = "{{ machines }}"
RESULTS = PROJECT_ROOT / "docs" / "results"
NUMBERS = {1: "one", 2: "two", 3: "three", 4: "four"}


def machines_answer(results: Path = RESULTS) -> str:
    """Which machines the results files record (cores and CPU model), each with the results it measured: a sentence
    that cannot say "one machine" when the files say two."""
    measured: dict[tuple, list[str]] = {}
    for path in sorted(results.glob("*.json")):
        stat = path.stat()
        for machine in _file_machines(str(path), stat.st_mtime_ns, stat.st_size):
            measured.setdefault(machine, []).append(path.stem)
    # The machine most results come from is named alone; each other one with the results it measured.
    ranked = sorted(measured.items(), key=lambda item: -len(item[1]))
    cores = {c for c, _ in measured}
    size = f"{cores.pop()}-core " if len(cores) == 1 else ""
    count = NUMBERS.get(len(measured), str(len(measured)))
    if len(measured) == 1:
        return f"one {size}machine ({ranked[0][0][1]})"
    named = [_machine(ranked[0][0], size)] + [
        f"{_machine(machine, size)} for {', '.join(names)}" for machine, names in ranked[1:]
    ]
    return f"{count} {size}machines ({'; '.join(named)})"


@functools.cache
def _file_machines(path: str, mtime_ns: int, size: int) -> tuple[tuple, ...]:
    """One results file's machines, read once per version of the file: the front page's table asks for the answer
    once per row, and the files run to megabytes (the modification time and size in the key see a rewrite)."""
    return tuple(recorded_machines(json.loads(Path(path).read_text())))


def recorded_machines(record) -> list[tuple]:
    """Every (cores, CPU model) a results file records, wherever its `machine` records sit: at the top, or per run
    (the engine comparison keeps one per run, invocation, recovery run and capacity step)."""
    found: list[tuple] = []
    if isinstance(record, dict):
        machine = record.get("machine")
        if isinstance(machine, dict) and "cores" in machine and "cpu_model" in machine:
            found.append((machine["cores"], machine["cpu_model"]))
        children = list(record.values())
    elif isinstance(record, list):
        children = record
    else:
        return []
    for child in children:
        found += [m for m in recorded_machines(child) if m not in found]
    return found


def _machine(machine: tuple, size: str) -> str:
    cores, cpu = machine
    return cpu if size else f"{cpu}, {cores} cores"


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


def _figure(file: str, path: str, where: str) -> str:
    source = RESULTS / file
    if not source.is_file():
        raise RenderError(f"{where}: {{{{ figure {file}:{path} }}}}: docs/results/{file} does not exist.")
    value = json.loads(source.read_text(encoding="utf-8"))
    for step in path.split("/"):
        key, eq, wanted = step.partition("=")
        if eq and isinstance(value, list):
            found = [item for item in value if isinstance(item, dict) and str(item.get(key)) == wanted]
            value = found[0] if len(found) == 1 else None
        elif isinstance(value, dict) and step in value:
            value = value[step]
        else:
            value = None
        if value is None:
            raise RenderError(
                f"{where}: {{{{ figure {file}:{path} }}}}: no single value at {step!r} in docs/results/{file}."
            )
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def _allowlist_off() -> str:
    """Which bypassed refusals ran correctly with the check off, and which still fail (with their classes)."""
    from rtm_lab.probes.allowlist_off import CASES, RUNS_CORRECTLY

    def short(refusal: str) -> str:
        return re.sub(r" \(.*\)$", "", refusal)

    ran = list(dict.fromkeys(short(c.refusal) for c in CASES if c.expected.kind == RUNS_CORRECTLY))
    failing: dict[str, list[str]] = {}
    for c in CASES:
        if c.expected.kind != RUNS_CORRECTLY and short(c.refusal) not in ran:
            failing.setdefault(short(c.refusal), []).append(f"`{c.expected.error}`")
    still = "; ".join(f"{name} still fails ({', then '.join(errors)})" for name, errors in failing.items())
    return f"{', '.join(ran)} ran correctly; {still}"


def expand(text: str, where: str) -> str:
    text = FIGURE.sub(lambda m: _figure(m["file"], m["path"], where), text)
    if ALLOWLIST_OFF in text:
        text = text.replace(ALLOWLIST_OFF, _allowlist_off())

    def replace(match: re.Match) -> str:
        ids = match["ids"].split()
        if match["kind"] == "mistake":
            (mistake,) = _lookup(_mistakes(), ids[:1], "mistake", where)
            return _mistake_answer(mistake)
        cases = _lookup(_cases(), ids, "support-matrix case", where)
        return _case_answer(cases) if match["kind"] == "case" else _databricks(cases)

    return DIRECTIVE.sub(replace, text).replace(MACHINES, machines_answer())

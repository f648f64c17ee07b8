"""The "Can I ...?" table: one source for SKILL.md and for the docs front page.

The source is scripts/rtm_lab/skillgen/templates/can-i.md, a Markdown table with the columns

    Can I ... | OSS Spark 4.3.0 (tested) | From PySpark | Databricks (from its docs) | Proof

Its cells may hold the directives of answers.py (`{{ case ID }}`, ...). The From cell may also hold

    {{ since ID [ID ...] }}   the oldest PySpark version from which every one of these version-matrix cases
                              (docs/results/version-matrix.json) has the outcome it has on the newest version

SKILL.md's template takes the table with `{{ can-i }}`: every column but From, its links pointing at skill
references. The front page takes it from docs/results/can-i.md (`python scripts/tables.py can-i`, see front_page.py).
"""

import json
import re
from dataclasses import dataclass
from pathlib import Path

from rtm_lab.paths import PROJECT_ROOT
from rtm_lab.skillgen.markdown import RenderError

SOURCE = Path("scripts/rtm_lab/skillgen/templates/can-i.md")
PLACEHOLDER = "{{ can-i }}"
COLUMNS = ("Can I ...", "OSS Spark 4.3.0 (tested)", "From PySpark", "Databricks (from its docs)", "Proof")
SKILL_COLUMNS = (0, 1, 3, 4)  # SKILL.md's table predates the From column and keeps its four
SINCE = re.compile(r"\{\{ since (?P<ids>[\w.-]+(?: [\w.-]+)*) \}\}")
VERSION_MATRIX = PROJECT_ROOT / "docs" / "results" / "version-matrix.json"


@dataclass(frozen=True)
class Row:
    question: str
    oss: str
    since: str
    databricks: str
    proof: str

    def cells(self) -> tuple[str, ...]:
        return (self.question, self.oss, self.since, self.databricks, self.proof)


def rows(root: Path = PROJECT_ROOT) -> list[Row]:
    """The table's rows as written in the source, directives unexpanded."""
    lines = [line for line in (root / SOURCE).read_text(encoding="utf-8").splitlines() if line.strip()]
    header, rule, *body = (_cells(line) for line in lines)
    if tuple(header) != COLUMNS or rule != ["|".join(["---"] * len(COLUMNS))]:
        raise RenderError(f"{SOURCE}: the table must start with the header | {' | '.join(COLUMNS)} | and its rule.")
    found = []
    for number, cells in enumerate(body, start=3):
        if len(cells) != len(COLUMNS):
            raise RenderError(f"{SOURCE}:{number}: {len(cells)} cells, expected {len(COLUMNS)}.")
        found.append(Row(*cells))
    return found


def _cells(line: str) -> list[str]:
    if not (line.startswith("| ") and line.endswith(" |")) and not line.startswith("|-"):
        raise RenderError(f"{SOURCE}: every line is a table row starting '| ' and ending ' |'; got {line[:60]!r}.")
    return line.strip().strip("|").strip().split(" | ")


def table(header: tuple[str, ...], cells: list[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in cells])


def skill_table(root: Path = PROJECT_ROOT) -> str:
    """The four columns SKILL.md shows, directives left for answers.expand."""
    return table(
        tuple(COLUMNS[i] for i in SKILL_COLUMNS),
        [tuple(row.cells()[i] for i in SKILL_COLUMNS) for row in rows(root)],
    )


def expand_since(text: str, where: str, matrix_path: Path = VERSION_MATRIX) -> str:
    if not SINCE.search(text):
        return text
    matrix = json.loads(matrix_path.read_text(encoding="utf-8"))
    return SINCE.sub(lambda m: since(matrix, m["ids"].split(), where), text)


def since(matrix: dict, ids: list[str], where: str) -> str:
    """The oldest version from which each case's outcome is the newest version's, in every version after it too."""
    versions = sorted(matrix["versions"], key=lambda v: tuple(int(p) for p in v.split(".")))
    outcomes = {v: {c["id"]: _outcome(c) for c in matrix["versions"][v]["cases"]} for v in versions}
    newest = outcomes[versions[-1]]
    unknown = [i for i in ids if i not in newest]
    if unknown:
        raise RenderError(f"{where}: no version-matrix case {', '.join(unknown)}; known: {', '.join(sorted(newest))}.")
    oldest = versions[-1]
    for version in reversed(versions[:-1]):
        if any(outcomes[version].get(i) != newest[i] for i in ids):
            break
        oldest = version
    return oldest


def _outcome(case: dict) -> tuple:
    # What the answers state: whether it ran, when it failed and with which class, or a setting's value; the
    # operators an error names may differ between versions without changing the answer.
    return (case["kind"], case.get("error"), case.get("value"), tuple(case.get("checks", ())))

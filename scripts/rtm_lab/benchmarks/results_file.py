"""Open a benchmark's results file to resume it: a fresh one when it does not exist yet, else its JSON, refused in one
line when it is not JSON or belongs to another benchmark (a wrong --json must not mix two benchmarks' runs)."""

import json
from pathlib import Path

from rtm_lab.errors import LabError


def load(path: Path, benchmark: str, empty: dict) -> dict:
    """The results file at `path`, or `empty` (with "benchmark" set) when there is none."""
    if not path.is_file():
        return {"benchmark": benchmark, **empty}
    try:
        result = json.loads(path.read_text())
    except ValueError as exc:
        raise LabError(f"{path} is not JSON ({exc}); choose another --json") from None
    if result.get("benchmark") != benchmark:
        article = "an" if benchmark[0] in "aeiou" else "a"
        raise LabError(f"{path} is not {article} {benchmark} results file; choose another --json")
    return result

"""Write the errors table (docs/results/errors.md) from the mistakes tests/reference/test_errors.py reproduces.

Each row's error class and message phrase are the ones the test asserts against Spark; --check fails when the file
on disk is stale.
"""

import sys
from pathlib import Path

from rtm_lab.generated import write_or_check
from snippets.reference.errors import render_markdown

OUTPUT = Path(__file__).resolve().parents[1] / "docs" / "results" / "errors.md"

if __name__ == "__main__":
    sys.exit(write_or_check(None, __doc__, render_markdown, OUTPUT, "python scripts/errors_table.py"))

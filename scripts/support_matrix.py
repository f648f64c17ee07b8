"""Write the support-matrix table (docs/results/support-matrix.md) from the cases the tests run.

The table's OSS column is each case's expected outcome in snippets/reference/support_matrix.py, which
tests/reference/test_support_matrix.py asserts against Spark; --check fails when the file on disk is stale.
"""

import sys
from pathlib import Path

from rtm_lab.generated import write_or_check
from snippets.reference.support_matrix import render_markdown

OUTPUT = Path(__file__).resolve().parents[1] / "docs" / "results" / "support-matrix.md"

if __name__ == "__main__":
    sys.exit(write_or_check(None, __doc__, render_markdown, OUTPUT, "python scripts/support_matrix.py"))

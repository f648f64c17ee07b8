"""Write the support-matrix table (docs/results/support-matrix.md) from the cases the tests run.

The table's OSS column is each case's expected outcome in snippets/reference/support_matrix.py, which
tests/reference/test_support_matrix.py asserts against Spark; --check fails when the file on disk is stale.
"""

import argparse
import sys
from pathlib import Path

from snippets.reference.support_matrix import render_markdown

DEFAULT_OUTPUT = Path(__file__).resolve().parents[1] / "docs" / "results" / "support-matrix.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="where to write the table (%(default)s)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if the file is missing or stale")
    args = parser.parse_args(argv)

    table = render_markdown()
    if args.check:
        current = args.output.read_text() if args.output.exists() else None
        if current != table:
            print(f"{args.output} is stale or missing: run `python scripts/support_matrix.py`", file=sys.stderr)
            return 1
        print(f"{args.output} is up to date")
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(table)
    print(f"wrote {args.output} ({table.count(chr(10)) - 4} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Write the errors table (docs/results/errors.md) from the mistakes tests/reference/test_errors.py reproduces.

Each row's error class and message phrase are the ones the test asserts against Spark; --check fails when the file
on disk is stale.
"""

import argparse
import sys
from pathlib import Path

from snippets.reference.errors import render_markdown

DEFAULT_OUTPUT = Path(__file__).resolve().parents[1] / "docs" / "results" / "errors.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="where to write the table (%(default)s)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if the file is missing or stale")
    args = parser.parse_args(argv)

    table = render_markdown()
    if args.check:
        if not args.output.exists() or args.output.read_text() != table:
            print(f"{args.output} is stale or missing: run `python scripts/errors_table.py`", file=sys.stderr)
            return 1
        print(f"{args.output} is up to date")
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(table)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

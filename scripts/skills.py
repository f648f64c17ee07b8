#!/usr/bin/env python3
"""Render, check and package the AI-assistant skill under skills/ from the docs pages and snippet files.

  python scripts/skills.py generate   render skills/<name>/ and manifest.json (run after editing docs/snippets)
  python scripts/skills.py validate   exit 1, saying what to run, when anything in skills/ is stale or malformed
  python scripts/skills.py package    validate, then write dist/<name>.zip for uploading to an assistant

Sources: scripts/rtm_lab/skillgen/templates/<name>/SKILL.md and CHANGELOG.md (hand-written), docs/concepts.md and the pages
under docs/reference, docs/guides and docs/benchmarks (one reference each, or several where a page marks its parts:
see scripts/rtm_lab/skillgen/parts.py), and whatever snippet or results files those include. `validate` also holds each
file to its word budget and SKILL.md to the Agent Skills format.
"""

import sys
from pathlib import Path

from rtm_lab import cli
from rtm_lab.paths import PROJECT_ROOT
from rtm_lab.skillgen.commands import run


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser_from_doc("skills.py", __doc__)
    parser.add_argument(
        "--root", type=cli.existing_dir, default=PROJECT_ROOT, help="repository root (default: this checkout)"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("generate", help="render the skill files and the manifest")
    sub.add_parser("validate", help="check the skill is current and well-formed (non-zero exit if not)")
    pack = sub.add_parser("package", help="validate, then build one zip per skill")
    pack.add_argument("--out", type=Path, default=None, help="output folder (default: <root>/dist)")
    args = parser.parse_args(argv)
    return run(args.command, args.root.resolve(), getattr(args, "out", None))


if __name__ == "__main__":
    sys.exit(main())

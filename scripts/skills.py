#!/usr/bin/env python3
"""Render, check and package the AI-assistant skill under skills/ from the docs pages and snippet files.

  python scripts/skills.py generate   render skills/<name>/ and manifest.json (run after editing docs/snippets)
  python scripts/skills.py validate   exit 1, saying what to run, when anything in skills/ is stale or malformed
  python scripts/skills.py package    validate, then write dist/<name>.zip for uploading to an assistant

Sources: skills/_templates/<name>/SKILL.md (hand-written), docs/reference/*.md and docs/guides/*.md (one reference
file each), and whatever snippet or results files those include.
"""

import argparse
import hashlib
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from skillgen.checks import validate
from skillgen.markdown import RenderError
from skillgen.render import SKILLS_DIR, render_all

from rtm_lab import cli

ROOT = Path(__file__).resolve().parents[1]
# Zip entries carry a timestamp: a fixed one keeps the archive byte-identical for identical content.
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def generate(root: Path) -> int:
    rendered = render_all(root)
    changed = 0
    for rel, data in rendered.files.items():
        target = root / rel
        if target.is_file() and target.read_bytes() == data:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        changed += 1
        print(f"wrote     {rel}")
    expected = set(rendered.files)
    for folder in sorted({rel.split("/")[1] for rel in expected if rel.count("/") >= 2}):
        for path in sorted((root / SKILLS_DIR / folder).rglob("*.md")):
            if path.relative_to(root).as_posix() not in expected:
                path.unlink()
                changed += 1
                print(f"removed   {path.relative_to(root).as_posix()} (its page is gone)")
    for note in rendered.notes:
        print(f"note      {note}")
    print(f"{len(rendered.files)} files rendered, {changed} changed")
    return 0


def package(root: Path, out_dir: Path) -> int:
    problems = validate(root)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        print("error: not packaging a skill that fails validation.", file=sys.stderr)
        return 1
    out_dir.mkdir(parents=True, exist_ok=True)
    for skill_dir in sorted(p for p in (root / SKILLS_DIR).iterdir() if (p / "SKILL.md").is_file()):
        archive = out_dir / f"{skill_dir.name}.zip"
        with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for path in sorted(p for p in skill_dir.rglob("*") if p.is_file()):
                entry = zipfile.ZipInfo(f"{skill_dir.name}/{path.relative_to(skill_dir).as_posix()}", ZIP_TIME)
                entry.external_attr = 0o644 << 16
                entry.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(entry, path.read_bytes())
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        print(f"{archive}  {archive.stat().st_size} bytes  sha256 {digest}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = cli.Parser(
        prog="skills.py",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--root", type=cli.existing_dir, default=ROOT, help="repository root (default: this checkout)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("generate", help="render the skill files and the manifest")
    sub.add_parser("validate", help="check the skill is current and well-formed (non-zero exit if not)")
    pack = sub.add_parser("package", help="validate, then build one zip per skill")
    pack.add_argument("--out", type=Path, default=None, help="output folder (default: <root>/dist)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    try:
        if args.command == "generate":
            return generate(root)
        if args.command == "validate":
            problems = validate(root)
            if problems:
                print("\n".join(problems), file=sys.stderr)
                return 1
            print("skills: up to date and valid")
            return 0
        return package(root, args.out or root / "dist")
    except RenderError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

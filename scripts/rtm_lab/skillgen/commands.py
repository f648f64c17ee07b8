"""The skill commands (`generate`, `validate`, `package`) behind scripts/skills.py, callable in-process by tests."""

import hashlib
import sys
import zipfile
from pathlib import Path

from rtm_lab.skillgen.checks import validate
from rtm_lab.skillgen.markdown import RenderError
from rtm_lab.skillgen.render import SKILLS_DIR, render_all

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
        for path in sorted(p for p in (root / SKILLS_DIR / folder).rglob("*") if p.is_file()):
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


def run(command: str, root: Path, out_dir: Path | None = None) -> int:
    """Run one command on the repository at `root`; a source that cannot be rendered is exit 2 with one line."""
    try:
        if command == "generate":
            return generate(root)
        if command == "validate":
            problems = validate(root)
            if problems:
                print("\n".join(problems), file=sys.stderr)
                return 1
            print("skills: up to date and valid")
            return 0
        return package(root, out_dir or root / "dist")
    except RenderError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

"""Where the lab keeps its state: one git-ignored folder at the project root, overridable for shared machines."""

import contextlib
import os
import tempfile
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def state_dir() -> Path:
    return Path(os.environ.get("RTM_LAB_DIR", PROJECT_ROOT / ".lab")).resolve()


def jars_dir() -> Path:
    return Path(os.environ.get("RTM_JARS_DIR", state_dir() / "jars")).resolve()


def make_private_dir(path: Path) -> Path:
    """Create path (and missing parents) readable by its owner only; an existing folder keeps its mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    return path


def write_private(path: Path, text: str, owner: tuple[int, int] | None = None) -> None:
    """Replace path's content atomically with a file only its owner can read.

    A reader sees the old file or the new one, never half of one; the temporary file is created exclusively (so a
    symlink planted at its name is never followed) and renamed over the target (which replaces a symlink, never
    writes through it).
    """
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        if owner is not None:
            os.fchown(fd, *owner)
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise

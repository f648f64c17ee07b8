"""Where the lab keeps its state: one git-ignored folder at the project root, overridable for shared machines."""

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def state_dir() -> Path:
    return Path(os.environ.get("RTM_LAB_DIR", PROJECT_ROOT / ".lab")).resolve()


def jars_dir() -> Path:
    return Path(os.environ.get("RTM_JARS_DIR", state_dir() / "jars")).resolve()

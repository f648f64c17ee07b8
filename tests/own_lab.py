"""A lab folder of a test's own, driven through `scripts/lab.py` as a user runs it.

The session lab's Kafka and PostgreSQL are given to it as external services, so `up --with NAME` starts only the
service under test; the binaries the session lab already has are named by environment (RTM_PROMETHEUS_BIN,
RTM_VERSITYGW_BIN), so nothing is downloaded or built again.
"""

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from rtm_lab.paths import PROJECT_ROOT, jars_dir


def lab_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, PROJECT_ROOT / "scripts" / "lab.py", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@contextlib.contextmanager
def own_lab_folder(lab, tmp_path: Path, **binaries: str) -> Iterator[tuple[dict[str, str], Path]]:
    """(the environment that points lab.py at the folder, the folder); `down --purge` on the way out."""
    env = dict(
        os.environ,
        RTM_LAB_DIR=str(tmp_path / "lab"),
        RTM_JARS_DIR=str(jars_dir()),
        KAFKA_BOOTSTRAP_SERVERS=lab.kafka_bootstrap,
        POSTGRES_DSN=lab.postgres_dsn,
        **binaries,
    )
    try:
        yield env, tmp_path / "lab"
    finally:
        lab_cli("down", "--purge", env=env)

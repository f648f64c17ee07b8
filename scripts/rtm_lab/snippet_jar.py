"""Build the jar of the JVM snippets (Java sources under snippets/jvm/rtmlab/) and the `spark.jars` that loads it.

Some things OSS real-time mode runs well only on the JVM (a ForeachWriter, a StatefulProcessor). The sources are
snippets like any other: pages include them, and the build is the page's own recipe (`snippets/jvm/build_writer.sh`,
javac against PySpark's jars, then jar), run here with this JDK and this venv's Python, rebuilding only when a
source or the recipe changes. It builds from snippets/, so it sits above them in the layers (pyproject.toml's
import-linter contract): the snippets' own code never imports it; their `__main__` takes the jar path instead.
"""

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from rtm_lab import jars
from rtm_lab.errors import LabError
from rtm_lab.java import java_executable
from rtm_lab.paths import PROJECT_ROOT, state_dir
from rtm_lab.spark import connector_jars

JVM_SOURCES = PROJECT_ROOT / "snippets" / "jvm"
BUILD_SCRIPT = JVM_SOURCES / "build_writer.sh"


def _javac() -> str:
    javac = Path(java_executable()).resolve().parent / "javac"
    if javac.exists():
        return str(javac)
    found = shutil.which("javac")
    if not found:
        raise LabError(
            "javac was not found: the JVM snippets need a JDK, not only a JRE. Install one "
            "(Debian/Ubuntu: `apt-get install openjdk-17-jdk-headless`) or set JAVA_HOME to a JDK."
        )
    return found


def build(sources: Path = JVM_SOURCES) -> Path:
    """Compile every .java file under `sources`/rtmlab into one jar with the page's build recipe; return its path
    (cached by a hash of the sources and the recipe)."""
    files = sorted((sources / "rtmlab").glob("*.java"))
    if not files:
        raise LabError(f"No Java sources under {sources / 'rtmlab'}.")
    digest = hashlib.sha256()
    for path in [*files, BUILD_SCRIPT]:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    target = state_dir() / "jvm" / f"rtm-snippets-{digest.hexdigest()[:12]}.jar"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    javac = _javac()
    env = dict(os.environ, OUT=str(target), PYTHON=sys.executable, JAVAC=javac, JAR=str(Path(javac).with_name("jar")))
    result = subprocess.run(["sh", str(BUILD_SCRIPT)], cwd=sources, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        target.unlink(missing_ok=True)
        raise LabError(f"{BUILD_SCRIPT.name} failed in {sources}:\n{result.stderr[-3000:]}")
    return target


def session_jars() -> str:
    """`spark.jars` (read once, when a session starts) for a session that loads the JVM snippets: the Kafka
    connector, the snippets' jar (the JVM processor and Postgres writer) and PgJDBC, which that writer needs."""
    paths = [*connector_jars(), build(), *jars.ensure("postgres-jdbc", quiet=True)]
    return ",".join(str(p) for p in paths)

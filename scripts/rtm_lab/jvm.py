"""Compile the project's small JVM pieces (Java sources under snippets/jvm/) into a jar Spark can load.

Some things OSS real-time mode runs well only on the JVM (a ForeachWriter, a StatefulProcessor). The sources are
snippets like any other: pages include them, and this builds them with the JDK's javac against PySpark's own jars,
rebuilding only when a source changes.
"""

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from rtm_lab import jars
from rtm_lab.errors import LabError
from rtm_lab.java import java_executable
from rtm_lab.paths import PROJECT_ROOT, state_dir

JVM_SOURCES = PROJECT_ROOT / "snippets" / "jvm"


def pyspark_jars() -> list[Path]:
    import pyspark

    return sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar"))


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


def build(
    sources: Path = JVM_SOURCES, jar_groups: tuple[str, ...] = ("spark-kafka-connector", "postgres-jdbc")
) -> Path:
    """Compile every .java file under `sources` into one jar; return its path (cached by a hash of the sources)."""
    files = sorted(sources.rglob("*.java"))
    if not files:
        raise LabError(f"No Java sources under {sources}.")
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(sources)).encode())
        digest.update(path.read_bytes())
    target = state_dir() / "jvm" / f"rtm-snippets-{digest.hexdigest()[:12]}.jar"
    if target.exists():
        return target
    classpath = [*pyspark_jars()]
    for group in jar_groups:
        classpath += jars.ensure(group, quiet=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as classes:
        result = subprocess.run(
            [_javac(), "-nowarn", "--release", "17", "-cp", os.pathsep.join(map(str, classpath)), "-d", classes]
            + [str(f) for f in files],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise LabError(f"javac failed on {sources}:\n{result.stderr[-3000:]}")
        jar_tool = Path(_javac()).with_name("jar")
        packed = subprocess.run([str(jar_tool), "cf", str(target), "-C", classes, "."], capture_output=True, text=True)
        if packed.returncode != 0:
            raise LabError(f"Packing {target} failed:\n{packed.stderr[-2000:]}")
    return target

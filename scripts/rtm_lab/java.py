"""Find a Java runtime and check it is new enough for Spark 4 and Kafka 4."""

import os
import re
import shutil
import subprocess
from pathlib import Path

from rtm_lab.errors import LabError
from rtm_lab.versions import JAVA_MIN_MAJOR

INSTALL_HINT = (
    f"Install Java {JAVA_MIN_MAJOR} or newer (Debian/Ubuntu: `apt-get install openjdk-{JAVA_MIN_MAJOR}-jdk-headless`, "
    f"macOS: `brew install openjdk@{JAVA_MIN_MAJOR}`) and put it on PATH or set JAVA_HOME."
)


def java_executable() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if not candidate.exists():
            raise LabError(f"JAVA_HOME={java_home} has no bin/java. Fix JAVA_HOME or unset it. {INSTALL_HINT}")
        return str(candidate)
    found = shutil.which("java")
    if not found:
        raise LabError(f"No `java` on PATH and JAVA_HOME is not set. {INSTALL_HINT}")
    return found


def parse_major(version_output: str) -> int:
    # `java -version` prints e.g. 'openjdk version "17.0.15"' or the legacy 'java version "1.8.0_392"'.
    match = re.search(r'version "(\d+)(?:\.(\d+))?', version_output)
    if not match:
        raise LabError(f"Could not read the Java version from: {version_output.strip()[:200]!r}. {INSTALL_HINT}")
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def check_java() -> tuple[str, int]:
    """Return (path to java, major version), or raise LabError saying what to install."""
    java = java_executable()
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except OSError as exc:
        raise LabError(f"Could not run {java}: {exc}. {INSTALL_HINT}") from exc
    major = parse_major(out.stderr + out.stdout)
    if major < JAVA_MIN_MAJOR:
        raise LabError(f"{java} is Java {major}; Spark 4 and Kafka 4 need Java {JAVA_MIN_MAJOR}+. {INSTALL_HINT}")
    return java, major

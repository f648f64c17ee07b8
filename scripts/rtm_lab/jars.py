"""Fetch the pinned jars (Kafka broker, Spark's Kafka connector) from Maven Central into the lab folder, once.

Every jar is listed with its sha1 in `jars.lock.json`, so the download is reproducible and, once done, nothing
needs the network again. A local Maven repository (~/.m2) or a mirror (RTM_MAVEN_URL) is used when present.
"""

import functools
import hashlib
import json
import os
import shutil
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential

from rtm_lab.errors import LabError
from rtm_lab.paths import jars_dir

LOCK_FILE = Path(__file__).with_name("jars.lock.json")
DEFAULT_MAVEN_URL = "https://repo1.maven.org/maven2"
GROUPS = ("kafka-broker", "spark-kafka-connector", "postgres-jdbc")
# Fetched only by what needs them (`ensure(group)`), never by `lab.py setup`: the engine comparison's Flink connector,
# and for s3a:// checkpoints hadoop-aws with the AWS SDK modules it calls (36 jars, 13 MB) and Spark's cloud module
# (one 32 KB jar: the stream-based checkpoint file manager); Flink's S3 filesystems for s3:// checkpoints, one shaded jar
# each (flink-s3-fs-hadoop 31.7 MB, flink-s3-fs-presto 97.4 MB).
ON_DEMAND_GROUPS = ("flink-kafka-connector", "s3a", "spark-hadoop-cloud", "flink-s3-fs-hadoop", "flink-s3-fs-presto")


@dataclass(frozen=True)
class Jar:
    group: str
    artifact: str
    version: str
    sha1: str

    @property
    def coordinates(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"

    @property
    def file_name(self) -> str:
        return f"{self.artifact}-{self.version}.jar"

    @property
    def repo_path(self) -> str:
        return f"{self.group.replace('.', '/')}/{self.artifact}/{self.version}/{self.file_name}"


@functools.cache
def _locked_groups() -> dict:
    # Read once per process: a lab started as root that then drops to another user (whom a 0700 clone shuts out)
    # keeps what it read.
    return json.loads(LOCK_FILE.read_text())["groups"]


def locked(group: str) -> list[Jar]:
    groups = _locked_groups()
    if group not in groups:
        raise LabError(f"Unknown jar group {group!r}; known: {', '.join(sorted(groups))}.")
    return [Jar(**entry) for entry in groups[group]]


def group_dir(group: str) -> Path:
    return jars_dir() / group


def _sha1(path: Path) -> str:
    return hashlib.sha1(path.read_bytes()).hexdigest()


def _is_good(path: Path, jar: Jar) -> bool:
    return path.is_file() and _sha1(path) == jar.sha1


@retry(
    retry=retry_if_exception_type((urllib.error.URLError, TimeoutError, ConnectionError)),
    stop=stop_after_attempt(4),
    wait=wait_exponential(multiplier=1, max=10),
    reraise=True,
)
def _download(url: str, target: Path) -> None:
    tmp = target.with_suffix(".part")
    with urllib.request.urlopen(url, timeout=60) as response, tmp.open("wb") as out:
        shutil.copyfileobj(response, out)
    tmp.replace(target)


def _offline_help(group: str, missing: list[Jar], reason: str) -> str:
    coords = "\n".join(f"  {j.coordinates}  (sha1 {j.sha1})" for j in missing)
    return (
        f"Could not fetch {len(missing)} jar(s) of '{group}': {reason}\n{coords}\n"
        f"To supply them offline, copy these files into {group_dir(group)}/ (named ARTIFACT-VERSION.jar), "
        f"or put them in a Maven repository under ~/.m2/repository, or point RTM_MAVEN_URL at a mirror."
    )


def ensure(group: str, quiet: bool = False) -> list[Path]:
    """Make sure every jar of the group is present and verified; return their paths."""
    jars = locked(group)
    target_dir = group_dir(group)
    target_dir.mkdir(parents=True, exist_ok=True)
    base_url = os.environ.get("RTM_MAVEN_URL", DEFAULT_MAVEN_URL).rstrip("/")
    m2 = Path.home() / ".m2" / "repository"
    todo = [j for j in jars if not _is_good(target_dir / j.file_name, j)]
    for index, jar in enumerate(todo, start=1):
        target = target_dir / jar.file_name
        cached = m2 / jar.repo_path
        if not quiet:
            print(f"  [{index}/{len(todo)}] {jar.coordinates}", file=sys.stderr, flush=True)
        if _is_good(cached, jar):
            shutil.copyfile(cached, target)
            continue
        try:
            _download(f"{base_url}/{jar.repo_path}", target)
        except (urllib.error.URLError, OSError) as exc:
            raise LabError(_offline_help(group, todo[index - 1 :], f"{base_url}: {exc}")) from exc
        if not _is_good(target, jar):
            target.unlink(missing_ok=True)
            raise LabError(_offline_help(group, [jar], "checksum mismatch (corrupt download or wrong mirror)"))
    return [target_dir / j.file_name for j in jars]


def ensure_all(quiet: bool = False) -> dict[str, list[Path]]:
    return {group: ensure(group, quiet=quiet) for group in GROUPS}

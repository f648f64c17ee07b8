#!/usr/bin/env python3
"""Regenerate scripts/rtm_lab/jars.lock.json: which jars the lab fetches, with their sha1.

The Kafka broker's jars are Maven's runtime resolution of org.apache.kafka:kafka_2.13 (plus a log4j binding), so this
needs `mvn` on PATH; the Spark connector and PgJDBC are pinned by coordinates (see rtm_lab/versions.py for why the
connector is 4.2.0) and only their checksums are refreshed. Run it after changing a version, then commit the lock.
"""

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from rtm_lab import jars, versions

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>rtm</groupId><artifactId>lock</artifactId><version>1</version><packaging>pom</packaging><dependencies>
<dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>{kafka}</version></dependency>
<dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId>
<version>2.25.4</version></dependency></dependencies></project>"""
# Spark's parent POM names extra repositories; resolve everything from Maven Central only.
SETTINGS = """<settings><mirrors><mirror><id>central</id><mirrorOf>*</mirrorOf>
<url>https://repo.maven.apache.org/maven2</url></mirror></mirrors></settings>"""
PINNED = {
    "spark-kafka-connector": [
        ("org.apache.spark", "spark-sql-kafka-0-10_2.13", versions.SPARK_KAFKA_CONNECTOR_VERSION),
        ("org.apache.spark", "spark-token-provider-kafka-0-10_2.13", "4.0.0"),
        ("org.apache.kafka", "kafka-clients", versions.KAFKA_CLIENTS_VERSION),
        ("org.apache.commons", "commons-pool2", "2.13.1"),
    ],
    "postgres-jdbc": [("org.postgresql", "postgresql", "42.7.14")],
    # Flink's SQL Kafka connector for the engine comparison (rtm_lab.engines.flink): one shaded jar, kafka-clients
    # inside; the newest release for a PyFlink line on PyPI (see rtm_lab/versions.py).
    "flink-kafka-connector": [
        ("org.apache.flink", "flink-sql-connector-kafka", versions.FLINK_KAFKA_CONNECTOR_VERSION)
    ],
    # Only scripts/version_matrix.py loads these (versions.VERSION_MATRIX_CONNECTORS): the connector and the
    # kafka-clients / commons-pool2 versions its POM names, for the older PySpark lines.
    "spark-kafka-connector-4.1": [
        ("org.apache.spark", "spark-sql-kafka-0-10_2.13", "4.1.3"),
        ("org.apache.spark", "spark-token-provider-kafka-0-10_2.13", "4.1.1"),
        ("org.apache.kafka", "kafka-clients", "3.9.1"),
        ("org.apache.commons", "commons-pool2", "2.12.1"),
    ],
    "spark-kafka-connector-4.2": [
        ("org.apache.spark", "spark-sql-kafka-0-10_2.13", "4.2.0"),
        ("org.apache.spark", "spark-token-provider-kafka-0-10_2.13", "4.2.0"),
        ("org.apache.kafka", "kafka-clients", "3.9.2"),
        ("org.apache.commons", "commons-pool2", "2.13.1"),
    ],
}


def broker_entries() -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "pom.xml").write_text(POM.format(kafka=versions.KAFKA_BROKER_VERSION))
        (Path(tmp) / "settings.xml").write_text(SETTINGS)
        listing = Path(tmp) / "list.txt"
        subprocess.run(
            ["mvn", "-q", "-B", "-s", "settings.xml", "dependency:list", "-DincludeScope=runtime",
             f"-DoutputFile={listing}", "-DoutputAbsoluteArtifactFilename=true"],
            cwd=tmp, check=True,
        )  # fmt: skip
        entries = []
        for line in listing.read_text().splitlines():
            match = re.match(r"\s*([^:]+):([^:]+):jar:(?:[^:]+:)?([^:]+):(?:runtime|compile):(.+)$", line)
            if match:
                group, artifact, version, path = match.groups()
                sha1 = hashlib.sha1(Path(path).read_bytes()).hexdigest()
                entries.append({"group": group, "artifact": artifact, "version": version, "sha1": sha1})
    return entries


def pinned_entries(coords: list[tuple[str, str, str]]) -> list[dict]:
    entries = []
    for group, artifact, version in coords:
        jar = jars.Jar(group, artifact, version, sha1="")
        with urllib.request.urlopen(f"{jars.DEFAULT_MAVEN_URL}/{jar.repo_path}", timeout=60) as response:
            sha1 = hashlib.sha1(response.read()).hexdigest()
        entries.append({"group": group, "artifact": artifact, "version": version, "sha1": sha1})
    return entries


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="lock_jars.py", description=__doc__).parse_args(argv)
    lock = json.loads(jars.LOCK_FILE.read_text())
    print("resolving the Kafka broker with mvn ...", file=sys.stderr)
    groups = {"kafka-broker": broker_entries()}
    for name, coords in PINNED.items():
        print(f"checksumming {name} ...", file=sys.stderr)
        groups[name] = pinned_entries(coords)
    lock["groups"] = {name: sorted(items, key=lambda e: (e["group"], e["artifact"])) for name, items in groups.items()}
    jars.LOCK_FILE.write_text(json.dumps(lock, indent=2, sort_keys=True) + "\n")
    print(f"wrote {jars.LOCK_FILE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

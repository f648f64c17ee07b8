#!/usr/bin/env python3
"""Regenerate scripts/rtm_lab/jars.lock.json: which jars the lab fetches, with their sha1.

The Kafka broker's jars (org.apache.kafka:kafka_2.13 plus a log4j binding) and the s3a group (hadoop-aws plus AWS SDK
modules) are Maven's runtime resolutions, so this needs `mvn` on PATH; the Spark connector and PgJDBC are pinned by coordinates (see rtm_lab/versions.py for why the
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
# Hadoop's S3A connector for s3a:// checkpoints: hadoop-aws without the AWS SDK's shaded `bundle` (hundreds of MB),
# and instead the SDK modules S3A calls (the S3 client and its transfer manager), at the SDK release Hadoop pins.
S3A_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>rtm</groupId><artifactId>lock-s3a</artifactId><version>1</version><packaging>pom</packaging><dependencies>
<dependency><groupId>org.apache.hadoop</groupId><artifactId>hadoop-aws</artifactId><version>{hadoop}</version>
<exclusions><exclusion><groupId>software.amazon.awssdk</groupId><artifactId>bundle</artifactId></exclusion></exclusions>
</dependency>
<dependency><groupId>software.amazon.awssdk</groupId><artifactId>s3</artifactId><version>{sdk}</version></dependency>
<dependency><groupId>software.amazon.awssdk</groupId><artifactId>s3-transfer-manager</artifactId><version>{sdk}</version>
</dependency></dependencies></project>"""
# Libraries PySpark's own jars folder already provides (netty, httpclient, slf4j; commons-logging through
# jcl-over-slf4j): a second copy on the classpath could shadow Spark's, so the s3a group leaves them out.
PROVIDED_BY_SPARK = ("io.netty:", "org.apache.httpcomponents:", "org.slf4j:", "commons-codec:", "commons-logging:")
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
    # The stream-based checkpoint file manager (AbortableStreamBasedCheckpointFileManager), tried with s3a:// paths.
    "spark-hadoop-cloud": [("org.apache.spark", "spark-hadoop-cloud_2.13", versions.SPARK_HADOOP_CLOUD_VERSION)],
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
    return resolved_entries(POM.format(kafka=versions.KAFKA_BROKER_VERSION))


def s3a_entries() -> list[dict]:
    pom = S3A_POM.format(hadoop=versions.HADOOP_AWS_VERSION, sdk=versions.AWS_SDK_VERSION)
    return [e for e in resolved_entries(pom) if not f"{e['group']}:".startswith(PROVIDED_BY_SPARK)]


def resolved_entries(pom: str) -> list[dict]:
    """Maven's runtime resolution of the POM's dependencies, each jar with its sha1."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "pom.xml").write_text(pom)
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
    print("resolving hadoop-aws and the AWS SDK modules with mvn ...", file=sys.stderr)
    groups["s3a"] = s3a_entries()
    for name, coords in PINNED.items():
        print(f"checksumming {name} ...", file=sys.stderr)
        groups[name] = pinned_entries(coords)
    lock["groups"] = {name: sorted(items, key=lambda e: (e["group"], e["artifact"])) for name, items in groups.items()}
    jars.LOCK_FILE.write_text(json.dumps(lock, indent=2, sort_keys=True) + "\n")
    print(f"wrote {jars.LOCK_FILE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

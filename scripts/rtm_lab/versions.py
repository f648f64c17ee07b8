"""The one place that states what the project is tested with.

`pyproject.toml` pins the Python packages; `jars.lock.json` pins every jar. The constants here are what pages,
benchmarks and tests read, and `tests/lab/test_versions.py` checks that they agree with what actually runs.
"""

SPARK_VERSION = "4.3.0"
SCALA_BINARY_VERSION = "2.13"
KAFKA_BROKER_VERSION = "4.3.1"
# Maven Central, as reachable from this project's machines, has no spark-sql-kafka-0-10 4.3.0: the newest published
# connector is 4.2.0 (and its token-provider module only up to 4.0.0). They load and run RTM on Spark 4.3.0; the
# tests prove it. Change these when the 4.3.0 connector is published.
SPARK_KAFKA_CONNECTOR_VERSION = "4.2.0"
KAFKA_CLIENTS_VERSION = "3.9.2"
JAVA_MIN_MAJOR = 17

# Apache Flink, the engine the "Real-time mode or Flink?" guide compares with (rtm_lab.engines.flink). PyPI has
# apache-flink 2.3.0, but Maven Central's newest Kafka connector, flink-sql-connector-kafka 5.0.0-2.2, is built for
# Flink 2.2 (there is none for 2.3 yet): the pair is PyFlink 2.2.1 (the newest 2.2.x) with that connector. The
# connector shades kafka-clients 4.2.0 (its META-INF/DEPENDENCIES says so; tests/guides/test_rtm_or_flink.py reads it).
# Every package of the Flink venv is pinned in rtm_lab/engines/flink-requirements.txt.
FLINK_VERSION = "2.2.1"
FLINK_KAFKA_CONNECTOR_VERSION = "5.0.0-2.2"
FLINK_KAFKA_CLIENTS_VERSION = "4.2.0"
# Flink's S3 filesystems (flink-s3-fs-hadoop, flink-s3-fs-presto), for s3:// checkpoints. Maven Central, as reachable
# here, has no 2.2.1 of either (404): the newest of the 2.2 line is 2.2.0, loaded on Flink 2.2.1.
FLINK_S3_FS_VERSION = "2.2.0"
POSTGRES_DEBIAN_PACKAGE = "postgresql"

# The PySpark versions `make test-versions` (scripts/version_matrix.py) runs the quick start, the trigger cases and the
# support matrix on, each in a venv of its own, with the `jars.lock.json` group of Kafka connector jars it loads.
# Maven Central, as reachable here, has no connector of the exact patch release for any of them: each gets the newest
# of its own line that is published (4.1.3, with the 4.1 line's newest token provider, 4.1.1; 4.2.0), and 4.3.0 the
# project's own.
VERSION_MATRIX_CONNECTORS = {
    "4.1.4": "spark-kafka-connector-4.1",
    "4.2.1": "spark-kafka-connector-4.2",
    SPARK_VERSION: "spark-kafka-connector",
}

# The lab's Prometheus server and promtool (rtm_lab.monitoring.prometheus): Debian 12's package, unpacked into the lab
# folder rather than installed, so no system service starts listening on every interface.
PROMETHEUS_DEBIAN_PACKAGE = "prometheus"
PROMETHEUS_VERSION = "2.42.0"

# The lab's S3-compatible object store (rtm_lab.s3store), for checkpoints on object storage: versitygw with its POSIX
# backend (Apache-2.0), built from the Go module proxy with the Go toolchain, the one registry here that serves an S3
# server. Pinned to one release because the build is cached by version and the S3 behaviour the tests see (checksum
# headers, error codes) changes between releases; v1.8.0's go.mod asks for Go >= 1.25.
VERSITYGW_MODULE = "github.com/versity/versitygw/cmd/versitygw"
VERSITYGW_VERSION = "v1.8.0"
VERSITYGW_MIN_GO = (1, 25)
# Spark writes s3a:// paths through Hadoop's S3A connector: hadoop-aws of the pinned Spark's Hadoop (PySpark 4.3.0
# ships hadoop-client-api-3.5.0), with the AWS SDK v2 release that Hadoop 3.5.0 is built against (its hadoop-project
# POM: aws-java-sdk-v2.version 2.35.4). The `s3a` jar group holds the SDK's modules, not its shaded `bundle`.
HADOOP_AWS_VERSION = "3.5.0"
AWS_SDK_VERSION = "2.35.4"
# Spark's cloud module holds the stream-based checkpoint file manager. Maven Central, as reachable here, has no
# spark-hadoop-cloud_2.13 4.2.0, 4.1.3 or 4.3.0: the newest found is 4.1.1, loaded on Spark 4.3.0.
SPARK_HADOOP_CLOUD_VERSION = "4.1.1"

"""The versions the project states (scripts/rtm_lab/versions.py) are the ones that actually run."""

import json

import pyspark

from rtm_lab import jars, versions
from rtm_lab.java import check_java


def test_pyspark_is_the_pinned_version():
    assert pyspark.__version__ == versions.SPARK_VERSION


def test_spark_runs_the_stated_scala_and_java(spark):
    jvm = spark.sparkContext._jvm
    assert spark.version == versions.SPARK_VERSION
    assert jvm.scala.util.Properties.versionNumberString().startswith(versions.SCALA_BINARY_VERSION + ".")
    assert check_java()[1] >= versions.JAVA_MIN_MAJOR


def test_jar_lock_matches_the_stated_versions():
    by_artifact = {j.artifact: j.version for group in jars.GROUPS for j in jars.locked(group)}
    assert by_artifact["kafka_2.13"] == versions.KAFKA_BROKER_VERSION
    assert by_artifact["spark-sql-kafka-0-10_2.13"] == versions.SPARK_KAFKA_CONNECTOR_VERSION
    assert by_artifact["kafka-clients"] in (versions.KAFKA_CLIENTS_VERSION, versions.KAFKA_BROKER_VERSION)
    connector = {j.artifact: j.version for j in jars.locked("spark-kafka-connector")}
    assert connector["kafka-clients"] == versions.KAFKA_CLIENTS_VERSION
    flink = {j.artifact: j.version for j in jars.locked("flink-kafka-connector")}
    assert flink == {"flink-sql-connector-kafka": versions.FLINK_KAFKA_CONNECTOR_VERSION}


def test_the_session_loads_the_locked_connector(spark):
    loaded = spark.sparkContext.getConf().get("spark.jars")
    assert f"spark-sql-kafka-0-10_2.13-{versions.SPARK_KAFKA_CONNECTOR_VERSION}.jar" in loaded
    lock = json.loads(jars.LOCK_FILE.read_text())
    # The lab's groups, the ones fetched on demand, and the older PySpark lines' connectors that only
    # scripts/version_matrix.py loads.
    expected = set(jars.GROUPS) | set(jars.ON_DEMAND_GROUPS) | set(versions.VERSION_MATRIX_CONNECTORS.values())
    assert set(lock["groups"]) == expected

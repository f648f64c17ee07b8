"""Which kafka-clients each engine's Kafka connector runs: read from the locked jars, not assumed.

Spark's connector loads the kafka-clients jar beside it (its `kafka/kafka-version.properties`, the file Kafka's own
start-up log line reads). Flink's SQL connector shades kafka-clients into one jar without that file; the jar's
META-INF/DEPENDENCIES names the bundled version.
"""

import re
import zipfile

from rtm_lab import jars
from rtm_lab.engines import flink


def spark_kafka_clients() -> str:
    (clients,) = [p for p in jars.ensure("spark-kafka-connector", quiet=True) if p.name.startswith("kafka-clients-")]
    with zipfile.ZipFile(clients) as jar:
        text = jar.read("kafka/kafka-version.properties").decode()
    return _group(re.search(r"^version=(\S+)$", text, flags=re.M), "kafka-version.properties")


def flink_kafka_clients() -> str:
    with zipfile.ZipFile(flink.connector_jar()) as jar:
        text = jar.read("META-INF/DEPENDENCIES").decode()
    return _group(re.search(r"org\.apache\.kafka:kafka-clients:jar:(\S+)", text), "META-INF/DEPENDENCIES")


def _group(match: re.Match[str] | None, where: str) -> str:
    if match is None:
        raise ValueError(f"no kafka-clients version in the jar's {where}")
    return match[1]


def versions() -> dict[str, str]:
    return {"spark": spark_kafka_clients(), "flink": flink_kafka_clients()}

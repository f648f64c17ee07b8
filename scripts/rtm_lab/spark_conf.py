"""The lab's Spark configuration folder: a `spark-defaults.conf` that puts the pinned Kafka connector on `spark.jars`.

PySpark ships no Kafka connector. A session built with a plain `SparkSession.builder` (the quick start's command line,
a reader's own script) gets it from `spark-defaults.conf` in the folder SPARK_CONF_DIR names: spark-submit reads that
file when PySpark launches its JVM. It is the route "Set up your own project" teaches, with the lab's checksummed jars
instead of a download, so it works offline. `python scripts/lab.py env` writes the file and exports the folder.
Sessions built by `rtm_lab.spark` set `spark.jars` themselves, which takes precedence over the file.
"""

from pathlib import Path

from rtm_lab import jars
from rtm_lab.errors import LabError
from rtm_lab.paths import make_private_dir, state_dir, write_private

CONNECTOR_GROUP = "spark-kafka-connector"


def conf_dir() -> Path:
    return state_dir() / "spark-conf"


def defaults_text(connector: list[Path]) -> str:
    listed = ",".join(str(path) for path in connector)
    return (
        "# Written by `python scripts/lab.py env`: the lab's pinned Kafka connector (scripts/rtm_lab/jars.lock.json).\n"
        f"spark.jars  {listed}\n"
    )


def write() -> Path:
    """Write the folder's spark-defaults.conf from the connector jars `lab.py setup` fetched; return the folder.

    Nothing is downloaded here (`env` only prints settings): a missing jar is a LabError that says to run setup.
    """
    connector = [jars.group_dir(CONNECTOR_GROUP) / jar.file_name for jar in jars.locked(CONNECTOR_GROUP)]
    missing = [path.name for path in connector if not path.is_file()]
    if missing:
        raise LabError(
            f"the Kafka connector's jars are not in {jars.group_dir(CONNECTOR_GROUP)} ({', '.join(missing)}): "
            "run `python scripts/lab.py setup` first"
        )
    folder = make_private_dir(conf_dir())
    write_private(folder / "spark-defaults.conf", defaults_text(connector))
    return folder

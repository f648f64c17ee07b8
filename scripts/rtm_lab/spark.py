"""The one SparkSession builder that snippets, tests and benchmarks share.

`local[N]` gives N task slots whatever the core count; real-time mode needs as many slots as the tasks of every
stage it schedules at once, so N is a setting here, not the number of cores. SPARK_MASTER points at a cluster.
"""

import os
import sys
from pathlib import Path

from rtm_lab import jars
from rtm_lab.java import check_java

DEFAULT_SLOTS = 4
LOOPBACK = "127.0.0.1"
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")
LOG4J_FILE_CONFIG = Path(__file__).with_name("log4j2-file.properties")
# The file set-up plus who holds each partition's output commit (rtm_lab.task_commits reads it).
LOG4J_COMMITS_CONFIG = Path(__file__).with_name("log4j2-commits.properties")


def master_url(slots: int | None = None) -> str:
    return os.environ.get("SPARK_MASTER") or f"local[{slots or int(os.environ.get('RTM_LOCAL_SLOTS', DEFAULT_SLOTS))}]"


def keep_on_loopback() -> None:
    """In local mode, make the driver, its block manager and its UI listen on 127.0.0.1 only.

    Left alone, Spark binds the driver's RPC and block-manager ports to the host's outward address (it warns "Your
    hostname resolves to a loopback address ... using <address> instead") and the UI to every interface, all without
    authentication. SPARK_LOCAL_IP is read by the JVM at launch and inherited by the processes it starts (the UI reads
    only this); a cluster named by SPARK_MASTER needs reachable addresses, so it is left to that cluster's settings.
    """
    if not os.environ.get("SPARK_MASTER"):
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)


def add_driver_java_options(options: str) -> None:
    """Have every Spark driver JVM this process and its children launch take `options` too (SPARK_SUBMIT_OPTS, which
    spark-submit passes to the driver only: not to executors on a cluster, nor to Kafka's or Flink's JVMs)."""
    current = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if options and options not in current:
        os.environ["SPARK_SUBMIT_OPTS"] = " ".join(filter(None, [current, options]))


def driver_memory() -> str:
    """The Spark driver's heap (`spark.driver.memory`, its -Xmx); the Flink runs of the engine comparison get the same."""
    return os.environ.get("RTM_DRIVER_MEMORY", "2g")


def connector_jars() -> list[Path]:
    return jars.ensure("spark-kafka-connector", quiet=True)


def session_jars() -> str:
    """The `spark.jars` value (read once, when a session starts): the Kafka connector. A session that loads the JVM
    snippets takes `rtm_lab.snippet_jar.session_jars()` instead."""
    return ",".join(str(p) for p in connector_jars())


def spark_session(
    app_name: str = "rtm", slots: int | None = None, conf: dict[str, str] | None = None, log_file: Path | None = None
):
    """Return a SparkSession with Spark's Kafka connector, quiet logs and the running interpreter for workers.

    A session already running in this process is reused (Spark allows one per JVM); `conf` is then applied to it
    where Spark allows runtime changes. With `log_file`, Spark's warnings and errors go to that file instead of
    stderr (a new session only: the JVM reads its logging set-up once).
    """
    check_java()
    keep_on_loopback()
    # Workers must run the same interpreter (and venv) as the driver, or pickled functions fail to load.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    java_opts = f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG}"
    if log_file is not None:
        java_opts = f"-Dlog4j2.configurationFile=file:{LOG4J_FILE_CONFIG} -Drtm.spark.log={log_file}"
    builder = (
        SparkSession.builder.appName(app_name)
        .master(master_url(slots))
        .config("spark.jars", session_jars())
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.executor.extraJavaOptions", java_opts)
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", driver_memory())
        # Python workers must connect back to the JVM within this time; 15 s (the default) can pass on a loaded box.
        .config("spark.python.authenticate.socketTimeout", "120s")
    )
    for key, value in (conf or {}).items():
        if key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
            value = f"{java_opts} {value}"  # added to the lab's logging set-up, not instead of it
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark

"""A class-data-sharing archive of the classes a Spark driver loads, so the test suite's Spark start-ups cost less.

The suite starts a Spark driver JVM in its own process and in dozens of child programs (benchmark smokes, the
readiness check's CLI, the copied pages' code), and each spends seconds of CPU loading and verifying the same Spark
classes; on 2 cores those start-ups compete with whatever else runs. The JDK's AppCDS maps the classes from an archive
instead: measured on this project's machine, a session and its first query were up in 6-8 s with the archive against
11-13 s without. `make setup` writes the archive once (`lab.py setup --spark-archive`); tests/short_lived_jvms.py
puts `java_options()` into SPARK_SUBMIT_OPTS, which spark-submit passes to the driver JVM only (not to Kafka's, Flink's or
Prometheus's). The demo and the benchmarks' own runs leave it out: nothing they measure depends on start-up, but their
figures should come from the JVM a reader runs.

A JVM whose class path or JDK differs from the one that wrote the archive ignores it (`-Xshare:auto`, the default)
and its warning is silenced, so a stale or unreadable archive costs only the time it would have saved.
"""

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from rtm_lab.paths import state_dir

ENV = "SPARK_SUBMIT_OPTS"
# Off: the "Unable to use shared archive" warning a mismatched JVM prints on stdout, which a program's output carries.
QUIET = "-Xlog:cds=off,cds+dynamic=off"
# What the archiving run loads: a session as the lab builds it, a shuffle, and a streaming query's micro-batches.
WORKLOAD = """
import time
from pyspark.sql import functions as F
from rtm_lab.spark import spark_session

spark = spark_session("spark-class-archive", slots=2)
spark.range(1000).groupBy((F.col("id") % 10).alias("k")).count().collect()
query = spark.readStream.format("rate").option("rowsPerSecond", 100).load().writeStream.format("noop").start()
time.sleep(4)
query.stop()
spark.stop()
"""


def _key() -> str:
    """The JDK and the PySpark install the archive is valid for: another of either gets its own archive."""
    import pyspark

    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=True).stderr
    return hashlib.sha256(f"{java}\n{Path(pyspark.__file__).parent}".encode()).hexdigest()[:12]


def archive_path() -> Path:
    return state_dir() / "spark-class-archive" / f"spark-{_key()}.jsa"


def ensure(log=print) -> Path:
    """Write the archive unless it exists (about 30 s: one Spark session whose classes are dumped at exit)."""
    path = archive_path()
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    log(f"spark     archiving the classes a Spark driver loads into {path} (about 30 s) ...")
    env = {**os.environ, ENV: f"-XX:ArchiveClassesAtExit={temp} {QUIET}"}
    done = subprocess.run([sys.executable, "-c", WORKLOAD], env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0 or not temp.exists():
        temp.unlink(missing_ok=True)
        raise RuntimeError(f"the archiving Spark run failed (exit {done.returncode}): {done.stderr.strip()[-800:]}")
    os.replace(temp, path)  # whole or absent: a JVM never maps a half-written archive
    return path


def java_options() -> str:
    """The driver JVM options that map the archive, or "" when there is none yet."""
    path = archive_path()
    return f"-XX:SharedArchiveFile={path} {QUIET}" if path.exists() else ""


def use_in_children() -> None:
    """Have every Spark driver this process and its children start map the archive (SPARK_SUBMIT_OPTS)."""
    from rtm_lab.spark import add_driver_java_options  # here: scripts/lab.py imports this module, not Spark's helpers

    add_driver_java_options(java_options())

"""JVM options for the short-lived JVMs the suite starts: C1-compiled code only, and Spark's classes from an archive.

The suite starts dozens of JVMs that live seconds to a minute (Spark drivers in this process and in child programs,
executors on the standalone cluster, PyFlink's gateway). Their start-up is mostly class loading and JIT compiling, and
on 2 cores that CPU is taken from the other test worker. Two cuts, measured on this project's machine:

- `-XX:TieredStopAtLevel=1` (C1 only): in a JVM this short, C2's compiles cost more CPU than its faster code saves.
  A lab session and a 6 s query used 11 s of machine CPU this way against 18-22 s with both compilers (two runs each).
- Spark's driver classes mapped from the archive `make setup` wrote (rtm_lab.spark_class_archive).

What the engines do is the same; only their speed differs, and no test asserts an absolute time. The demo and the
benchmarks run outside pytest get neither. Checked where each JVM runs: tests/lab/test_short_lived_jvms.py (drivers,
and the executor option of a PySpark session), tests/guides/test_cluster.py (the cluster's daemons) and
tests/guides/test_rtm_or_flink.py (PyFlink's gateway). The executors of an application started with `spark-submit`
(tests/guides/test_cluster.py's) take theirs from a spark-defaults.conf, `submit_defaults` below: the page's submit
script stays as the reader sees it. The copied pages' programs (tests/docs/test_copy.py) run in a reader's
environment built from nothing and get C1 only, through its SPARK_SUBMIT_OPTS (the archive fits only the project's
own PySpark install).
"""

import os
from pathlib import Path

from rtm_lab import spark_class_archive
from rtm_lab.spark import add_driver_java_options

C1_ONLY = "-XX:TieredStopAtLevel=1"


def _add(name: str, options: str) -> None:
    current = os.environ.get(name, "")
    if options not in current:
        os.environ[name] = " ".join(filter(None, [current, options]))


def apply() -> None:
    """Set the environment every JVM the tests start (here or in a child program) reads its options from."""
    # Spark drivers: spark-submit passes SPARK_SUBMIT_OPTS to the driver JVM.
    spark_class_archive.use_in_children()
    add_driver_java_options(C1_ONLY)
    # Executors on the standalone cluster, for a session PySpark launches (in this process or a child): its
    # spark-submit arguments, which must end in `pyspark-shell`. Administrators' defaults go first on the line.
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", f"--conf spark.executor.defaultJavaOptions={C1_ONLY} pyspark-shell")
    # The standalone cluster's master and workers (bin/spark-class reads it for Spark's daemons).
    _add("SPARK_DAEMON_JAVA_OPTS", C1_ONLY)
    # PyFlink's gateway JVM, which runs the MiniCluster (rtm_lab.engines.flink keeps it and adds the heap).
    _add("JVM_ARGS", C1_ONLY)


def submit_defaults(folder: Path) -> Path:
    """A SPARK_CONF_DIR whose spark-defaults.conf gives a `spark-submit` application's executors C1 only."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "spark-defaults.conf").write_text(f"spark.executor.defaultJavaOptions {C1_ONLY}\n")
    return folder

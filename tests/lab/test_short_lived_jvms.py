"""tests/short_lived_jvms.py: the Spark drivers the suite starts, here and in child programs, compile with C1 only and
map Spark's class archive, and the sessions PySpark launches give their cluster executors C1 too. (The standalone
cluster's daemons are checked in tests/guides/test_cluster.py, PyFlink's gateway in tests/guides/test_rtm_or_flink.py,
where those JVMs already run.)"""

import subprocess
import sys

from short_lived_jvms import C1_ONLY

from rtm_lab import spark_class_archive

CHILD = """
from rtm_lab.spark import spark_session
spark = spark_session("short-lived-child", slots=1)
bean = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
print(sorted(a for a in bean.getInputArguments() if a.startswith(("-XX:TieredStopAtLevel", "-XX:SharedArchiveFile"))))
print("executors:", spark.sparkContext.getConf().get("spark.executor.defaultJavaOptions"))
spark.stop()
"""


def test_the_test_processs_driver_compiles_with_c1_only_and_its_executors_would_too(spark):
    jvm = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    assert C1_ONLY in list(jvm.getInputArguments())
    assert spark.sparkContext.getConf().get("spark.executor.defaultJavaOptions") == C1_ONLY


def test_a_child_programs_driver_gets_both_options_and_its_executors_c1():
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    archive = spark_class_archive.archive_path()
    assert f"['-XX:SharedArchiveFile={archive}', '{C1_ONLY}']" in done.stdout
    assert f"executors: {C1_ONLY}" in done.stdout

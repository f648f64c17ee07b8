"""rtm_lab.spark_class_archive: the suite's Spark drivers start from the class archive `make setup` wrote, and a JVM
that cannot use the archive runs as before, printing nothing about it. tests/conftest.py also has them compile with C1
only; a child program's driver gets both, as the test process's own does."""

import subprocess
import sys

from rtm_lab import spark_class_archive


def test_the_suites_spark_driver_maps_the_archive(spark):
    archive = spark_class_archive.archive_path()
    assert archive.is_file(), "make setup writes it: python scripts/lab.py setup --spark-archive"
    jvm = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    assert f"-XX:SharedArchiveFile={archive}" in list(jvm.getInputArguments())
    assert "sharing" in spark._jvm.java.lang.System.getProperty("java.vm.info")


def test_a_jvm_with_another_class_path_ignores_the_archive_silently(tmp_path):
    options = spark_class_archive.java_options().split()
    assert options, "make setup writes it: python scripts/lab.py setup --spark-archive"
    done = subprocess.run(["java", *options, "-cp", str(tmp_path), "-version"], capture_output=True, text=True)
    assert done.returncode == 0 and "version" in done.stderr
    assert "warning" not in done.stdout + done.stderr and "archive" not in done.stdout + done.stderr


def test_the_suites_drivers_compile_with_c1_only_in_this_process_and_in_children(spark):
    jvm = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    assert "-XX:TieredStopAtLevel=1" in list(jvm.getInputArguments())
    child = """
from rtm_lab.spark import spark_session
spark = spark_session("c1-child", slots=1)
bean = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
print(sorted(a for a in bean.getInputArguments() if a.startswith(("-XX:TieredStopAtLevel", "-XX:SharedArchiveFile"))))
spark.stop()
"""
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    archive = spark_class_archive.archive_path()
    assert f"['-XX:SharedArchiveFile={archive}', '-XX:TieredStopAtLevel=1']" in done.stdout

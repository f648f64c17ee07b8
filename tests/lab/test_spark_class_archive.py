"""rtm_lab.spark_class_archive: the suite's Spark drivers start from the class archive `make setup` wrote, and a JVM
that cannot use the archive runs as before, printing nothing about it."""

import subprocess

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

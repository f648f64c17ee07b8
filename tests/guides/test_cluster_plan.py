"""What the cluster guide's "Deploying the plan" says about Spark, checked against the pinned version.

Every `spark.kubernetes.*` key the cluster guide shows exists in the pinned Spark: the Kubernetes resource
manager's `Config` object, loaded from the spark-kubernetes jar PySpark ships, registers it as a configuration entry
(`ConfigEntry.findEntry`), or it starts with one of the key prefixes that object declares as string constants (such as
`spark.kubernetes.driver.label.`, read from the constant pool of its class file, as `javap -v` lists them). Nothing
here runs on Kubernetes: the guide says so. And Spark's own driver restart (`spark-submit --supervise`) needs cluster
deploy mode, which spark-submit refuses for a Python application on a standalone cluster: restarting a failed PySpark
driver is left to something outside Spark."""

import os
import re
import struct
import subprocess
import zipfile
from pathlib import Path

import pyspark

from rtm_lab.paths import PROJECT_ROOT
from snippets.guides.capacity_plan import Request, Slots, submit_settings

JARS = Path(pyspark.__file__).parent / "jars"
CONFIG_CLASS = "org/apache/spark/deploy/k8s/Config$.class"
KEY = re.compile(r"spark\.kubernetes\.[A-Za-z0-9.\-_]*[A-Za-z0-9]")
# Where the guide's Kubernetes settings come from: the page, the planner's settings and its recorded run.
SOURCES = ("docs/guides/cluster.md", "snippets/guides/capacity_plan.py", "docs/results/capacity-plan.txt")


def utf8_constants(class_bytes: bytes) -> list[str]:
    """The CONSTANT_Utf8 entries of a class file's constant pool (JVM spec 4.4)."""
    count = struct.unpack_from(">H", class_bytes, 8)[0]
    at, index, found = 10, 1, []
    fixed = {3: 4, 4: 4, 5: 8, 6: 8, 7: 2, 8: 2, 9: 4, 10: 4, 11: 4, 12: 4, 15: 3, 16: 2, 17: 4, 18: 4, 19: 2, 20: 2}
    while index < count:
        tag = class_bytes[at]
        if tag == 1:
            length = struct.unpack_from(">H", class_bytes, at + 1)[0]
            found.append(class_bytes[at + 3 : at + 3 + length].decode("utf-8", errors="replace"))
            at += 3 + length
        else:
            at += 1 + fixed[tag]
        index += 2 if tag in (5, 6) else 1  # a long or a double takes two slots
    return found


def key_prefixes() -> set[str]:
    """The `spark.kubernetes.` key prefixes the pinned jar's Config object declares."""
    (jar,) = JARS.glob("spark-kubernetes_*.jar")
    with zipfile.ZipFile(jar) as archive:
        constants = utf8_constants(archive.read(CONFIG_CLASS))
    return {c for c in constants if c.startswith("spark.kubernetes.") and c.endswith(".")}


def registered(spark):
    """A key -> registered? function: the Config object loaded (its entries register as it initialises), then
    Spark's registry of configuration entries asked."""
    jvm = spark._jvm
    jvm.java.lang.Class.forName("org.apache.spark.deploy.k8s.Config$").getField("MODULE$").get(None)
    registry = (
        jvm.java.lang.Class.forName("org.apache.spark.internal.config.ConfigEntry$").getField("MODULE$").get(None)
    )
    return lambda key: registry.findEntry(key) is not None


def test_the_pinned_jar_defines_the_kubernetes_settings(spark):
    (jar,) = JARS.glob("spark-kubernetes_*.jar")
    assert jar.name == "spark-kubernetes_2.13-4.3.0.jar"
    known = registered(spark)
    # Keys Spark's "Running on Kubernetes" page documents are found; a made-up one is not.
    assert known("spark.kubernetes.container.image") and known("spark.kubernetes.namespace")
    assert not known("spark.kubernetes.executor.slots")
    assert "spark.kubernetes.driver.label." in key_prefixes()


def test_every_kubernetes_key_the_guide_shows_is_defined_by_the_pinned_jar(spark):
    known, prefixes = registered(spark), key_prefixes()
    shown = set()
    for source in SOURCES:
        shown |= set(KEY.findall((PROJECT_ROOT / source).read_text()))
    request = Request(rate=1000, source_partitions=2, shape="dedup", shuffle_partitions=2)
    for line in submit_settings(request, Slots(2, (2,), ""), 4, 2, "kubernetes"):
        shown |= set(KEY.findall(line))
    assert "spark.kubernetes.executor.request.cores" in shown, "the planner's settings are among those checked"
    unknown = sorted(k for k in shown if not known(k) and not any(k.startswith(p) for p in prefixes))
    assert unknown == [], f"not defined by the pinned Spark's Kubernetes Config: {unknown}"


def test_spark_submit_refuses_cluster_deploy_mode_for_python_on_standalone(tmp_path):
    """So `--supervise`, Spark's driver restart on standalone, is out of reach for a PySpark query."""
    app = tmp_path / "app.py"
    app.write_text("print('never runs')\n")
    spark_home = Path(pyspark.__file__).parent
    env = {**os.environ, "SPARK_HOME": str(spark_home), "SPARK_LOCAL_IP": "127.0.0.1"}
    command = [str(spark_home / "bin" / "spark-submit"), "--master", "spark://127.0.0.1:1", "--deploy-mode", "cluster"]
    done = subprocess.run(
        [*command, "--supervise", str(app)], capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path
    )
    assert done.returncode != 0
    assert (
        "Cluster deploy mode is currently not supported for python applications on standalone clusters." in done.stderr
    ), done.stderr[-2000:]

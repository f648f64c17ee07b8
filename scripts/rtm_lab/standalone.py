"""A Spark standalone cluster on loopback (one master, N workers) started with PySpark's own `bin/spark-class`.

    with standalone.cluster(workers=2, cores_per_worker=2) as spark_cluster:
        spark = SparkSession.builder.master(spark_cluster.master_url)...

`start()` / `Cluster.stop()` do the same without a `with`. Every process is recorded and stopped (its whole process
group, SIGTERM then SIGKILL) even when a worker fails to register; logs stay in `work_dir`.
"""

import contextlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

from rtm_lab import ports, processes
from rtm_lab.waiting import wait_until

HOST = "127.0.0.1"


@dataclass
class Cluster:
    master_url: str
    work_dir: Path
    pids: list[int] = field(default_factory=list)

    @property
    def master_log(self) -> Path:
        return self.work_dir / "master.log"

    def stop(self) -> None:
        """Stop workers before the master so they do not try to reconnect; safe to call twice."""
        for pid in reversed(self.pids):
            processes.stop(pid, timeout=20.0)
        self.pids.clear()


def start(
    workers: int = 2, cores_per_worker: int = 2, memory: str = "1g", work_dir: str | Path | None = None
) -> Cluster:
    """Start the master and `workers` workers, each offering `cores_per_worker` task slots; wait until all registered."""
    spark_home = Path(pyspark.__file__).parent
    spark_class = str(spark_home / "bin" / "spark-class")
    work = Path(work_dir or tempfile.mkdtemp(prefix="spark-standalone-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SPARK_HOME": str(spark_home), "SPARK_LOCAL_IP": HOST, "SPARK_LOG_DIR": str(work)}
    master_port = ports.free_port()
    spark_cluster = Cluster(f"spark://{HOST}:{master_port}", work)
    master = [spark_class, "org.apache.spark.deploy.master.Master", "--host", HOST, "--port", str(master_port)]
    master += ["--webui-port", str(ports.free_port())]
    try:
        spark_cluster.pids.append(processes.spawn(master, spark_cluster.master_log, env=env))
        for i in range(workers):
            worker = [spark_class, "org.apache.spark.deploy.worker.Worker", spark_cluster.master_url, "--host", HOST]
            worker += ["--cores", str(cores_per_worker), "--memory", memory]
            worker += ["--webui-port", str(ports.free_port()), "--work-dir", str(work / f"worker-{i}")]
            spark_cluster.pids.append(processes.spawn(worker, work / f"worker-{i}.log", env=env))
        _wait_for_workers(spark_cluster, workers)
    except BaseException:
        spark_cluster.stop()
        raise
    return spark_cluster


def _wait_for_workers(spark_cluster: Cluster, workers: int, timeout_s: float = 90.0) -> None:
    def registered() -> bool:
        log = spark_cluster.master_log
        return log.exists() and log.read_text(errors="replace").count("Registering worker") >= workers

    def exited() -> BaseException | None:
        if all(processes.is_alive(pid) for pid in spark_cluster.pids):
            return None
        return RuntimeError(f"A standalone process exited early; see the logs in {spark_cluster.work_dir}.")

    wait_until(registered, timeout_s, f"{workers} workers to register (see {spark_cluster.master_log})", 0.5, exited)


@contextlib.contextmanager
def cluster(
    workers: int = 2, cores_per_worker: int = 2, memory: str = "1g", work_dir: str | Path | None = None
) -> Iterator[Cluster]:
    """`start()` as a context manager: the cluster is stopped on leaving the block, whatever happened inside."""
    spark_cluster = start(workers, cores_per_worker, memory, work_dir)
    try:
        yield spark_cluster
    finally:
        spark_cluster.stop()

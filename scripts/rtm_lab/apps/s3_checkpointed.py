"""Real-time queries checkpointed to the lab's object store, as their own `spark-submit` application, for kills.

`S3Driver` starts the guide's `snippets/guides/s3_checkpoints.py` with the Kafka connector and the S3A jars, in its
own process group, so one SIGKILL takes the whole driver (no shutdown hook, no final commit). The store's keys reach
it by environment, never on its command line. `committed_offsets` reads a query's checkpoint back through the S3 API:
what a restart resumes from.
"""

import json
from pathlib import Path

from rtm_lab.apps.submitted_app import SubmittedApp
from rtm_lab.s3_requests import get_object, list_keys
from rtm_lab.s3a import Store, s3a_jars
from rtm_lab.spark import LOG4J_CONFIG, connector_jars
from snippets.guides import rtm_or_flink_spark, s3_checkpoints


class S3Driver(SubmittedApp):
    """The queries of `s3_checkpoints.py`, one process group, checkpoints under `prefix` in the store's bucket."""

    LOG_NAME = "s3-driver"

    def __init__(
        self,
        store: Store,
        kafka_bootstrap: str,
        source: str,
        sinks: dict[str, str],
        prefix: str,
        log_dir: Path,
        batch_duration: str = "5 seconds",
        file_manager: str | None = None,
        spark_conf: dict[str, str] | None = None,
    ):
        super().__init__(log_dir)
        self.spark_conf = spark_conf or {}
        self.store, self.kafka_bootstrap, self.source, self.sinks = store, kafka_bootstrap, source, sinks
        self.prefix, self.batch_duration, self.file_manager = prefix, batch_duration, file_manager

    @property
    def event_log_dir(self) -> Path:
        folder = self.log_dir / "event-logs"
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def command(self) -> list[str]:
        jars = [*connector_jars(), *s3a_jars(stream_file_manager=self.file_manager is not None)]
        # Every stage of a real-time query runs at once: 2 source tasks for each query, and 2 shuffle tasks for a
        # stateful one (spark.sql.shuffle.partitions=2), so 4 slots per query cover either kind.
        cmd = [str(self.spark_submit()), "--master", f"local[{4 * len(self.sinks)}]"]
        cmd += ["--jars", ",".join(map(str, jars))]
        cmd += ["--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2"]
        # Spark's event log (what a history server shows): the settings as Spark lists them, redactions applied; plain
        # JSON lines (Spark 4 compresses it by default).
        cmd += ["--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={self.event_log_dir.as_uri()}"]
        cmd += ["--conf", "spark.eventLog.compress=false"]
        for key, value in self.spark_conf.items():
            cmd += ["--conf", f"{key}={value}"]
        cmd += ["--driver-java-options", f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG}"]
        cmd += ["--py-files", rtm_or_flink_spark.__file__, s3_checkpoints.__file__]
        cmd += ["--source", self.source, "--checkpoints", self.store.uri(self.prefix)]
        cmd += ["--batch-duration", self.batch_duration]
        for pipeline, sink in self.sinks.items():
            cmd += ["--query", f"{pipeline}={sink}"]
        if self.file_manager:
            cmd += ["--file-manager", self.file_manager]
        return cmd

    def environment(self) -> dict[str, str]:
        # The store's keys go by environment, never on the command line.
        return {
            "KAFKA_BOOTSTRAP_SERVERS": self.kafka_bootstrap,
            "S3_ENDPOINT": self.store.endpoint,
            "AWS_ACCESS_KEY_ID": self.store.credentials.access_key,
            "AWS_SECRET_ACCESS_KEY": self.store.credentials.secret_key,
        }

    def checkpoint_keys(self, pipeline: str) -> list[str]:
        """Every object of the pipeline's checkpoint, as keys relative to the checkpoint folder."""
        folder = f"{self.prefix.strip('/')}/{pipeline}/"
        keys = list_keys(self.store.endpoint, self.store.credentials, self.store.bucket, folder)
        return [key[len(folder) :] for key in keys]

    def committed_offsets(self, pipeline: str) -> dict[int, int]:
        """Per source partition, the next offset after the pipeline's last committed batch ({} before any commit)."""
        keys = self.checkpoint_keys(pipeline)
        commits = sorted(int(k.split("/")[1]) for k in keys if k.startswith("commits/") and k.split("/")[1].isdigit())
        if not commits:
            return {}
        key = f"{self.prefix.strip('/')}/{pipeline}/offsets/{commits[-1]}"
        lines = get_object(self.store.endpoint, self.store.credentials, self.store.bucket, key).decode().splitlines()
        (positions,) = json.loads(lines[-1]).values()  # one source: {topic: {partition: offset}}
        return {int(partition): offset for partition, offset in positions.items()}

"""Spark settings for checkpoints on the lab's object store, through Hadoop's S3A connector (`s3a://` paths).

`lab.py up --with s3` starts the store and creates its bucket (rtm_lab.s3store). This module gives a SparkSession the
rest: the S3A jars on `spark.jars` (the on-demand `s3a` group, 36 jars, 13 MB; `spark-hadoop-cloud` too for the
stream-based checkpoint file manager) and the `spark.hadoop.fs.s3a.*` settings that point S3A at the store. Tests,
benchmarks and the guide's snippet (snippets/guides/s3_checkpoints.py shows the same settings to readers) use it.

The keys go into the session's configuration, never onto a command line: Spark's `spark.redaction.regex` (default
`(?i)secret|password|token|access[.]?key|credential`) hides both fs.s3a.access.key and fs.s3a.secret.key wherever it
lists settings (the UI's environment page, the event log).
"""

from dataclasses import dataclass
from pathlib import Path

from rtm_lab import jars, s3store
from rtm_lab import lab as lab_module
from rtm_lab.errors import LabError
from rtm_lab.s3_requests import REGION, Credentials

# Spark's stream-based checkpoint file manager (spark-hadoop-cloud): writes each checkpoint file straight to its final
# name and aborts the upload on failure, instead of writing a temporary file and renaming it (on S3 a rename is a
# COPY and a DELETE).
STREAM_FILE_MANAGER = "org.apache.spark.internal.io.cloud.AbortableStreamBasedCheckpointFileManager"


@dataclass(frozen=True)
class Store:
    """Where checkpoints go: the store's endpoint, a bucket in it, and the keys that may write there."""

    endpoint: str
    bucket: str
    credentials: Credentials

    def uri(self, path: str) -> str:
        """The s3a:// URI of `path` inside the bucket."""
        return f"s3a://{self.bucket}/{path.strip('/')}"


def lab_store() -> Store:
    """The lab's running object store and its bucket (`lab.py up --with s3` starts it)."""
    state = lab_module.status().s3
    if not state.running:
        raise LabError("The lab's object store is not running: start it with `python scripts/lab.py up --with s3`.")
    return Store(state.address, s3store.BUCKET, s3store.credentials())


def s3a_jars(stream_file_manager: bool = False) -> list[Path]:
    """hadoop-aws and the AWS SDK modules (fetched on first use), and Spark's cloud module when asked for."""
    found = jars.ensure("s3a", quiet=True)
    if stream_file_manager:
        found += jars.ensure("spark-hadoop-cloud", quiet=True)
    return found


def spark_conf(store: Store, stream_file_manager: bool = False) -> dict[str, str]:
    """The session settings for s3a:// checkpoints in `store` (not `spark.jars`: see `s3a_jars`)."""
    conf = {
        "spark.hadoop.fs.s3a.endpoint": store.endpoint,
        # Skip the region lookup the SDK would otherwise try; the lab's store answers as us-east-1.
        "spark.hadoop.fs.s3a.endpoint.region": REGION,
        # http://127.0.0.1:PORT/bucket/key: a loopback address has no per-bucket host names.
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": str(store.endpoint.startswith("https://")).lower(),
        "spark.hadoop.fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        "spark.hadoop.fs.s3a.access.key": store.credentials.access_key,
        "spark.hadoop.fs.s3a.secret.key": store.credentials.secret_key,
        # Request checksums are left at Hadoop 3.5.0's default: fs.s3a.checksum.generation=false makes S3A build the
        # SDK client with RequestChecksumCalculation.WHEN_REQUIRED, so the SDK (2.35.4, which on its own would add a
        # CRC32 trailer to every PUT) sends none unless an operation requires one. versitygw 1.8.0 takes either: by
        # default it stores a CRC64NVME of its own (tests/guides/test_checkpoint_storage.py asserts it); with
        # generation=true and fs.s3a.create.checksum.algorithm=CRC32 it stored the SDK's CRC32 trailer (one run by
        # hand, read from the object's user.checksums xattr). Nothing fails either way.
    }
    if stream_file_manager:
        conf["spark.sql.streaming.checkpointFileManagerClass"] = STREAM_FILE_MANAGER
    return conf

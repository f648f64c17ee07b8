"""Real-time queries that checkpoint to S3 through `s3a://`, restartable from there.

The settings below point Hadoop's S3A connector at an S3-compatible endpoint. Spark
needs hadoop-aws of its own Hadoop version (3.5.0 for Spark 4.3.0) and the AWS SDK.
`--packages org.apache.hadoop:hadoop-aws:3.5.0` brings both (the SDK as its shaded
bundle); the lab loads hadoop-aws and only the SDK modules it calls, offline, with
`--jars`. Against the lab (`scripts/lab.py up --with s3`):

    export S3_ENDPOINT=http://127.0.0.1:PORT
    export AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=...
    export KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:9092
    KAFKA=org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0
    spark-submit --packages "$KAFKA,org.apache.hadoop:hadoop-aws:3.5.0" \\
        --py-files rtm_or_flink_spark.py s3_checkpoints.py \\
        --source events --checkpoints s3a://BUCKET/checkpoints \\
        --query transform=events-out --query dedup=events-first

Each `--query PIPELINE=SINK` runs one of the comparison pipelines
(snippets/guides/rtm_or_flink_spark.py) with its checkpoint at CHECKPOINTS/PIPELINE.
Started again with the same `--checkpoints`, each resumes after its last committed
batch. The keys are read from the environment, never from the command line.
"""

import argparse
import os
import sys

# --8<-- [start:settings]
from pyspark.sql import SparkSession


def s3a_settings(endpoint: str, access_key: str, secret_key: str) -> dict[str, str]:
    """Session settings for checkpoints at s3a://BUCKET/... on an S3-compatible
    store."""
    return {
        "spark.hadoop.fs.s3a.endpoint": endpoint,
        "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
        # Bucket in the path (http://host:port/bucket/key), not in the host name.
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": str(
            endpoint.startswith("https://")
        ).lower(),
        "spark.hadoop.fs.s3a.aws.credentials.provider": (
            "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        ),
        # Spark's default spark.redaction.regex hides both keys in the UI and event log.
        "spark.hadoop.fs.s3a.access.key": access_key,
        "spark.hadoop.fs.s3a.secret.key": secret_key,
    }


def s3a_session(app_name: str, settings: dict[str, str]) -> SparkSession:
    builder = SparkSession.builder.appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


# --8<-- [end:settings]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description="Real-time queries checkpointed to s3a://, restartable"
    )
    parser.add_argument("--source", required=True, help="Kafka topic to read")
    parser.add_argument(
        "--checkpoints", required=True, help="s3a://BUCKET/PREFIX for the checkpoints"
    )
    parser.add_argument(
        "--query",
        action="append",
        required=True,
        metavar="PIPELINE=SINK",
        help="a pipeline of rtm_or_flink_spark.py and its sink topic (repeatable)",
    )
    parser.add_argument("--batch-duration", default="5 minutes")
    parser.add_argument(
        "--file-manager",
        help="spark.sql.streaming.checkpointFileManagerClass (default: Spark's own)",
    )
    args = parser.parse_args(argv)
    from rtm_or_flink_spark import PIPELINES, start_pipeline

    queries = dict(item.split("=", 1) for item in args.query)
    unknown = set(queries) - set(PIPELINES)
    missing = [
        name
        for name in ("S3_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
        if not os.environ.get(name)
    ]
    if unknown or missing or not args.checkpoints.startswith("s3a://"):
        print(
            f"unknown pipeline(s) {sorted(unknown)}; missing {missing}; or "
            f"--checkpoints is not s3a://",
            file=sys.stderr,
        )
        return 2
    settings = s3a_settings(
        os.environ["S3_ENDPOINT"],
        os.environ["AWS_ACCESS_KEY_ID"],
        os.environ["AWS_SECRET_ACCESS_KEY"],
    )
    if args.file_manager:
        settings["spark.sql.streaming.checkpointFileManagerClass"] = args.file_manager
    spark = s3a_session("rtm-s3-checkpoints", settings)
    bootstrap = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
    for name, sink in queries.items():
        checkpoint = f"{args.checkpoints.rstrip('/')}/{name}"
        start_pipeline(
            spark, name, bootstrap, args.source, sink, checkpoint, args.batch_duration
        )
        print(f"{name}: {args.source} -> {sink}, checkpoint {checkpoint}", flush=True)
    spark.streams.awaitAnyTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

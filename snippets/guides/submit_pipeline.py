"""The Kafka -> real-time mode -> Postgres pipeline as a `spark-submit` application,
restartable from its checkpoint.

The pipeline and the writer are the guide's own files, saved next to this one and
shipped with `--py-files`:

    spark-submit --master spark://HOST:7077 \\
        --py-files kafka_to_postgres.py,postgres_sink.py submit_pipeline.py \\
        --topic events --table events --checkpoint /shared/checkpoints/events

(`snippets/guides/submit_cluster.sh` is the full command, with the connector and the JVM
writer.)

It reads KAFKA_BOOTSTRAP_SERVERS and POSTGRES_DSN from the environment, creates the
tables if needed and runs until stopped. Started again with the same `--checkpoint`, it
resumes after the last committed real-time batch.
"""

# --8<-- [start:submit]
import argparse
import os

from pyspark.sql import SparkSession


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Kafka -> real-time mode -> Postgres, restartable from a checkpoint"
    )
    parser.add_argument("--topic", required=True, help="Kafka topic to read")
    parser.add_argument(
        "--table", default="events", help="Postgres table to upsert into"
    )
    parser.add_argument(
        "--schema",
        default="public",
        help="Postgres schema of the table and the dead letters",
    )
    parser.add_argument(
        "--checkpoint",
        required=True,
        help="checkpoint folder, on storage every node can reach",
    )
    parser.add_argument(
        "--batch-duration",
        default="5 minutes",
        help="real-time batch duration (default: 5 minutes, Spark's default)",
    )
    parser.add_argument(
        "--dedup",
        action="store_true",
        help="drop duplicate keys (adds a shuffle: more slots)",
    )
    parser.add_argument(
        "--writer",
        choices=("python", "jvm"),
        default="python",
        help="python: PostgresSink; jvm: PostgresUpsertWriter "
        "(its jar and PgJDBC on --jars/--packages)",
    )
    args = parser.parse_args()

    # Shipped with --py-files: on the driver and on every executor they import as
    # top-level modules.
    from kafka_to_postgres import start_pipeline
    from postgres_sink import PostgresSink, SinkConfig, create_tables

    config = SinkConfig(
        dsn=os.environ["POSTGRES_DSN"], schema=args.schema, table=args.table
    )
    create_tables(config)
    spark = SparkSession.builder.appName(
        f"kafka-to-postgres-{args.topic}"
    ).getOrCreate()
    if args.writer == "jvm":
        from postgres_jvm_writer import (
            jvm_postgres_writer,
        )  # also shipped with --py-files

        writer = jvm_postgres_writer(spark, config)
    else:
        writer = PostgresSink(config)
    query = start_pipeline(
        spark,
        os.environ["KAFKA_BOOTSTRAP_SERVERS"],
        args.topic,
        writer,
        args.checkpoint,
        dedup=args.dedup,
        batch_duration=args.batch_duration,
    )
    print(
        f"started query {query.id} (run {query.runId}) reading {args.topic}", flush=True
    )
    query.awaitTermination()


if __name__ == "__main__":
    main()
# --8<-- [end:submit]

"""The Flink side of the checkpoint-storage comparison: one PyFlink job per process, Kafka -> Kafka.

Run in the Flink venv by rtm_lab.engines.flink.start (never imported by the project's own venv at run time). The
three shapes mirror the Spark ones of rtm_lab.benchmarks.checkpoint_shapes, written as Flink SQL, and every output
record carries the event's `id` and its source record's broker timestamp `source_ts_ms`, so the Spark runs' latency
reader (rtm_lab.topics.SinkLatencyReader) measures both engines the same way:

- `stateless`: parse, reshape, write, as the guide's transform (snippets/guides/rtm_or_flink_flink.py);
- `dedup`: Flink's deduplication query (ROW_NUMBER over processing time, first row kept) on the event id;
- `count`: a keyed count, grouped by the event id and its source timestamp as the Spark shape groups.

The table environment is the guide's (RocksDB state backend, AT_LEAST_ONCE checkpoints), with the benchmark's
settings (`--conf`) on top. `--checkpoint-uri s3://...` checkpoints on the lab's object store: the S3 filesystem is
initialised here with the store's endpoint and keys, read from the lab's 0600 credentials file, so no key is ever on
a command line or in the job's configuration (which Flink's REST API serves).
"""

import argparse
import json
import os
import sys
from pathlib import Path

# The project root, for the guide's snippet: this file runs as a script in the Flink venv, where only pyflink is
# installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from snippets.guides.rtm_or_flink_flink import (
    PRODUCER,
    create_source,
    kafka_options,
    kafka_sink,
    table_environment,
)

# The event's source timestamp in epoch ms: whole seconds since the epoch, then the milliseconds within the second.
SOURCE_TS_MS = (
    "CAST(TIMESTAMPDIFF(SECOND, TO_TIMESTAMP_LTZ(0, 3), ts) AS BIGINT) * 1000 + MOD(EXTRACT(MILLISECOND FROM ts), 1000)"
)


def stateless(t_env, bootstrap: str, sink_topic: str):
    t_env.execute_sql(f"""
        CREATE TEMPORARY TABLE transformed (
            k BYTES, id BIGINT, `user` STRING, amount_cents BIGINT, source_ts_ms BIGINT
        ) WITH ({kafka_sink(bootstrap, sink_topic)})""")
    return t_env.execute_sql(f"""
        INSERT INTO transformed
        SELECT k, id, UPPER(`user`), CAST(ROUND(amount * 100) AS BIGINT), {SOURCE_TS_MS} FROM events""")


def dedup(t_env, bootstrap: str, sink_topic: str):
    t_env.execute_sql(f"""
        CREATE TEMPORARY TABLE deduplicated (
            k BYTES, id BIGINT, `user` STRING, source_ts_ms BIGINT
        ) WITH ({kafka_sink(bootstrap, sink_topic)})""")
    return t_env.execute_sql(f"""
        INSERT INTO deduplicated
        SELECT k, id, `user`, {SOURCE_TS_MS} FROM (
            SELECT *, ROW_NUMBER() OVER (PARTITION BY id ORDER BY pt ASC) AS row_num
            FROM events
        ) WHERE row_num = 1""")


def count(t_env, bootstrap: str, sink_topic: str):
    # An updating result: upsert-kafka writes each key's new count (one per event here, as ids are unique).
    t_env.execute_sql(f"""
        CREATE TEMPORARY TABLE counts (
            id BIGINT, source_ts_ms BIGINT, events BIGINT,
            PRIMARY KEY (id, source_ts_ms) NOT ENFORCED
        ) WITH (
            'connector' = 'upsert-kafka', {kafka_options(bootstrap, sink_topic, PRODUCER)},
            'key.format' = 'json', 'value.format' = 'json'
        )""")
    return t_env.execute_sql(f"""
        INSERT INTO counts
        SELECT id, source_ts_ms, COUNT(*) FROM (SELECT id, {SOURCE_TS_MS} AS source_ts_ms FROM events)
        GROUP BY id, source_ts_ms""")


SHAPES = {"stateless": stateless, "dedup": dedup, "count": count}


def initialise_s3(credentials_file: str, endpoint: str) -> None:
    """Configure Flink's S3 filesystem (flink-s3-fs-hadoop, on the gateway's classpath) for the lab's store.

    A local MiniCluster never initialises Flink's filesystems with the job's configuration, so it is done here, once,
    in the JVM, before the job starts."""
    from pyflink.java_gateway import get_gateway  # type: ignore[import-not-found]  # the Flink venv has it

    keys = json.loads(Path(credentials_file).read_text())
    jvm = get_gateway().jvm
    conf = jvm.org.apache.flink.configuration.Configuration()
    settings = {
        "s3.endpoint": endpoint,
        "s3.endpoint.region": "us-east-1",
        "s3.path.style.access": "true",
        "s3.connection.ssl.enabled": "false",  # flink-s3-fs-hadoop's name for it
        "s3.ssl.enabled": "false",  # flink-s3-fs-presto's
        # Hadoop 3.3.4's S3A (inside flink-s3-fs-hadoop 2.2.0) deletes the parent folders' markers after each mkdir
        # by default; against the lab's store that bulk delete was retried with back-off for about two minutes per
        # mkdir (smoke run, 2026-11-27). Keeping markers is the default from Hadoop 3.4, the S3A Spark uses.
        "s3.directory.marker.retention": "keep",
        "s3.access-key": keys["access_key"],
        "s3.secret-key": keys["secret_key"],
    }
    for key, value in settings.items():
        conf.setString(key, value)
    jvm.org.apache.flink.core.fs.FileSystem.initialize(conf)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jar", required=True, help="flink-sql-connector-kafka jar")
    parser.add_argument("--tmp-dir", required=True, help="Flink's io.tmp.dirs")
    parser.add_argument("--checkpoint-dir", required=True, help="a local folder for checkpoints")
    parser.add_argument("--checkpoint-uri", help="checkpoint here instead (s3://BUCKET/PATH)")
    parser.add_argument("--s3-endpoint", help="with an s3:// --checkpoint-uri: the store's (or its proxy's) endpoint")
    parser.add_argument("--s3-credentials", help="with an s3:// --checkpoint-uri: the lab's credentials file")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("shape", choices=sorted(SHAPES))
    parser.add_argument("source")
    parser.add_argument("sink")
    args = parser.parse_args(argv)
    on_s3 = (args.checkpoint_uri or "").startswith("s3://")
    if on_s3 and not (args.s3_endpoint and args.s3_credentials):
        parser.error("an s3:// --checkpoint-uri needs --s3-endpoint and --s3-credentials")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    extra = dict(item.split("=", 1) for item in args.conf)
    extra["io.tmp.dirs"] = args.tmp_dir
    extra["execution.checkpointing.dir"] = args.checkpoint_uri or Path(args.checkpoint_dir).resolve().as_uri()
    bootstrap = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
    t_env = table_environment(args.parallelism, args.jar, extra)
    if args.checkpoint_uri and args.checkpoint_uri.startswith("s3://"):
        initialise_s3(args.s3_credentials, args.s3_endpoint)
    create_source(t_env, bootstrap, args.source)
    result = SHAPES[args.shape](t_env, bootstrap, args.sink)
    print(f"started {args.shape}: {args.source} -> {args.sink}", flush=True)
    result.wait()  # until the process is stopped (or the job fails, which raises here)


if __name__ == "__main__":
    main()

"""Attach the JVM `rtmlab.PostgresUpsertWriter` (snippets/jvm) to a PySpark streaming query.

In OSS real-time mode a Python foreach writer receives rows late (the JVM hands them to the Python worker in
pickled batches that grow until the batch ends); a JVM writer receives each row as the source reads it. Its jar
(`rtm_lab.jvm.build()`) and PgJDBC must be on `spark.jars` before the session starts: see `session_jars()`.
"""

# --8<-- [start:attach]
import psycopg2.extensions
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from snippets.guides.postgres_sink import SinkConfig


def jvm_postgres_writer(spark: SparkSession, config: SinkConfig):
    """The JVM writer with the same settings as the Python PostgresSink; the password goes as a JDBC property,
    not in the URL, so the writer's log lines can't contain it."""
    dsn = psycopg2.extensions.parse_dsn(config.dsn)
    url = f"jdbc:postgresql://{dsn.get('host', 'localhost')}:{dsn.get('port', 5432)}/{dsn['dbname']}"
    return spark._jvm.rtmlab.PostgresUpsertWriter(
        url,
        dsn.get("user", ""),
        dsn.get("password", ""),
        config.schema,
        config.table,
        config.dead_letter_table,
        config.max_rows,
        config.max_dwell_ms,
    )


def start_with_jvm_writer(events: DataFrame, writer, checkpoint: str, real_time: str = "5 seconds") -> StreamingQuery:
    stream = (
        events.writeStream.option("checkpointLocation", checkpoint).outputMode("update").trigger(realTime=real_time)
    )
    # PySpark's foreach() takes Python writers only; the JVM DataStreamWriter takes any ForeachWriter[Row].
    stream._jwrite = stream._jwrite.foreach(writer)
    return stream.start()


# --8<-- [end:attach]


def session_jars() -> str:
    """spark.jars for a session that can load the JVM writer: the Kafka connector, this jar and PgJDBC."""
    from rtm_lab import jars, jvm
    from rtm_lab.spark import connector_jars

    paths = [*connector_jars(), jvm.build(), *jars.ensure("postgres-jdbc", quiet=True)]
    return ",".join(str(p) for p in paths)

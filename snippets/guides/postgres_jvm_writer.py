"""Attach the JVM `rtmlab.PostgresUpsertWriter` (snippets/jvm) to a PySpark streaming
query.

In OSS real-time mode a Python foreach writer receives rows late (the JVM hands them to
the Python worker in pickled batches that grow until the batch ends); a JVM writer
receives each row as the source reads it. Its jar (`snippets/jvm/build_writer.sh`) and
PgJDBC must be on `spark.jars` before the session starts.

After `eval "$(python scripts/lab.py env)"`:

    python snippets/guides/postgres_jvm_writer.py TOPIC JARS

JARS is the `spark.jars` value: the writer's jar and PgJDBC's, comma-separated.
"""

# --8<-- [start:jdbc]
from dataclasses import dataclass, fields
from urllib.parse import quote, urlencode

import psycopg2.extensions

# libpq keyword -> PgJDBC property, for what both clients can express.
LIBPQ_TO_JDBC = {
    "sslmode": "sslmode",
    "sslrootcert": "sslrootcert",
    "sslcert": "sslcert",
    "sslkey": "sslkey",
    "sslpassword": "sslpassword",
    "options": "options",
    "channel_binding": "channelBinding",
    "gssencmode": "gssEncMode",
    "krbsrvname": "kerberosServerName",
    "target_session_attrs": "targetServerType",
}
TARGET_SERVER_TYPE = {
    "any": "any",
    "read-write": "primary",
    "primary": "primary",
    "read-only": "secondary",
    "standby": "secondary",
    "prefer-standby": "preferSecondary",
}
# The writer sets these itself from its own options (application_name,
# connect_timeout_s, io_timeout_s).
SET_BY_THE_WRITER = {
    "application_name",
    "fallback_application_name",
    "connect_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "tcp_user_timeout",
}


class UnsupportedDsnError(ValueError):
    pass


@dataclass(frozen=True, repr=False)
class JdbcTarget:
    url: str  # never holds the password: it goes to the driver as a property
    user: str
    password: str | None

    def __repr__(self) -> str:
        return f"JdbcTarget(url={self.url!r}, user={self.user!r})"


def jdbc_target(dsn: str) -> JdbcTarget:
    """The PgJDBC URL, user and password for a libpq DSN (a URI or key=value), or
    UnsupportedDsnError naming what PgJDBC can't express."""
    parts = psycopg2.extensions.parse_dsn(
        dsn
    )  # libpq's own parser: every form libpq accepts
    hosts = (parts.pop("host", None) or parts.pop("hostaddr", None) or "").split(",")
    parts.pop("hostaddr", None)
    if not hosts[0] or any(h.startswith(("/", "@")) for h in hosts):
        raise UnsupportedDsnError(
            "PgJDBC connects over TCP only, and this DSN's host is a Unix-socket "
            "directory "
            f"({hosts[0] or 'none given: libpq would use its default socket'}); give a "
            "TCP host and port, "
            "e.g. host=127.0.0.1 port=5432."
        )
    ports = parts.pop("port", "5432").split(",")
    if len(ports) == 1:
        ports *= len(hosts)
    if len(ports) != len(hosts):
        raise UnsupportedDsnError(
            f"{len(hosts)} hosts but {len(ports)} ports in the DSN."
        )
    user = parts.pop("user", "")
    password = parts.pop("password", None)
    dbname = parts.pop("dbname", None) or user
    params = {}
    for key, value in parts.items():
        if key in SET_BY_THE_WRITER:
            continue
        if key not in LIBPQ_TO_JDBC:
            raise UnsupportedDsnError(
                f"PgJDBC has no equivalent of libpq's '{key}'; remove it from the DSN"
                + (" and use the writer's password_file" if key == "passfile" else "")
                + "."
            )
        if key == "target_session_attrs":
            value = TARGET_SERVER_TYPE[value]
        if key == "sslkey" and not value.endswith((".pk8", ".p12", ".pfx")):
            raise UnsupportedDsnError(
                "PgJDBC reads a client key as PKCS-8 DER (.pk8) or PKCS-12 (.p12); "
                "convert it with "
                "`openssl pkcs8 -topk8 -outform DER -nocrypt -in client.key -out "
                "client.pk8`."
            )
        params[LIBPQ_TO_JDBC[key]] = value
    if not dbname:
        raise UnsupportedDsnError(
            "The DSN names no dbname and no user to default it to."
        )
    netloc = ",".join(
        f"[{h}]:{p}" if ":" in h else f"{h}:{p}"
        for h, p in zip(hosts, ports, strict=True)
    )
    query = f"?{urlencode(params, quote_via=quote)}" if params else ""
    return JdbcTarget(
        f"jdbc:postgresql://{netloc}/{quote(dbname, safe='')}{query}", user, password
    )


# --8<-- [end:jdbc]


# --8<-- [start:attach]
def jvm_postgres_writer(spark, config):
    """The JVM writer for a SinkConfig: every option goes to it by the same name, as a
    string, so both writers read their names and defaults from the one dataclass."""
    target = jdbc_target(config.dsn)
    if config.password_provider is not None:
        raise ValueError(
            "password_provider is a Python callable; give the JVM writer password_file "
            "or password_command"
        )
    options = {}
    for f in fields(config):
        value = getattr(config, f.name)
        if f.name in ("dsn", "password_provider") or value is None:
            continue
        options[f.name] = ",".join(value) if isinstance(value, tuple) else str(value)
    return spark._jvm.rtmlab.PostgresUpsertWriter(
        target.url, target.user, target.password, options
    )


# --8<-- [end:attach]


if __name__ == "__main__":
    import os
    import sys
    import tempfile

    from pyspark.sql import SparkSession

    from snippets.guides.kafka_to_postgres import start_pipeline
    from snippets.guides.postgres_sink import SinkConfig, create_tables

    if len(sys.argv) != 3:
        sys.exit(__doc__)
    config = SinkConfig(dsn=os.environ["POSTGRES_DSN"], table="events_jvm")
    create_tables(config)
    spark = (
        SparkSession.builder.appName("kafka-to-postgres-jvm")
        .config("spark.jars", sys.argv[2])
        .getOrCreate()
    )
    # A temporary checkpoint, removed when the query ends (Ctrl-C included): a run
    # leaves nothing behind.
    with tempfile.TemporaryDirectory(prefix="rtm-checkpoint-") as checkpoint:
        query = start_pipeline(
            spark,
            os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092"),
            sys.argv[1],
            jvm_postgres_writer(spark, config),
            checkpoint,
        )
        query.awaitTermination()

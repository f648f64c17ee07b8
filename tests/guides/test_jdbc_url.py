"""The JVM writer's JDBC URL from a libpq DSN: every form libpq accepts maps to the URL PgJDBC reads, the password
never goes into the URL, and what PgJDBC can't express fails with a message that says what to change. Pure: no
server is needed, the DSN is only parsed."""

import pytest

from snippets.guides.postgres_jvm_writer import UnsupportedDsnError, jdbc_target


@pytest.mark.parametrize(
    ("dsn", "url", "user"),
    [
        ("postgresql://ada:pw@db.example.com:6543/sales", "jdbc:postgresql://db.example.com:6543/sales", "ada"),
        ("postgres://ada:pw@[::1]/sales", "jdbc:postgresql://[::1]:5432/sales", "ada"),
        ("postgresql://ada@[2001:db8::7]:5433/sales", "jdbc:postgresql://[2001:db8::7]:5433/sales", "ada"),
        (
            "postgresql://ada:pw@db:5432/sales?sslmode=verify-full&sslrootcert=/etc/ssl/root%20ca.crt",
            "jdbc:postgresql://db:5432/sales?sslmode=verify-full&sslrootcert=%2Fetc%2Fssl%2Froot%20ca.crt",
            "ada",
        ),
        (
            "host=db port=5432 dbname='my sales' user=ada password='p w' sslmode=require",
            "jdbc:postgresql://db:5432/my%20sales?sslmode=require",
            "ada",
        ),
        ("host=10.0.0.5 user=ada", "jdbc:postgresql://10.0.0.5:5432/ada", "ada"),  # dbname defaults to the user
        ("hostaddr=10.0.0.5 dbname=d user=ada", "jdbc:postgresql://10.0.0.5:5432/d", "ada"),
        (
            "postgresql://ada@h1:5432,h2:5433/d?target_session_attrs=read-write",
            "jdbc:postgresql://h1:5432,h2:5433/d?targetServerType=primary",
            "ada",
        ),
        (
            # The writer sets application name, connect timeout and keepalives from its own options.
            "host=db dbname=d user=ada application_name=x connect_timeout=3 keepalives=1",
            "jdbc:postgresql://db:5432/d",
            "ada",
        ),
    ],
)
def test_libpq_dsn_forms_map_to_the_jdbc_url(dsn, url, user):
    target = jdbc_target(dsn)
    assert (target.url, target.user) == (url, user)


def test_password_goes_as_a_property_never_in_the_url_or_repr():
    target = jdbc_target("postgresql://ada:s3cret@db/sales?sslmode=require")
    assert target.password == "s3cret"
    assert "s3cret" not in target.url and "s3cret" not in repr(target)
    assert jdbc_target("host=db dbname=d user=ada").password is None


@pytest.mark.parametrize(
    ("dsn", "says"),
    [
        ("host=/var/run/postgresql dbname=d user=ada", "Unix-socket directory (/var/run/postgresql)"),
        ("postgresql:///d?host=/tmp", "Unix-socket directory (/tmp)"),
        ("dbname=d user=ada", "none given"),  # libpq would use its default socket
        (
            "host=db dbname=d user=ada passfile=/home/ada/.pgpass",
            "'passfile'; remove it from the DSN and use the writer's password_file",
        ),
        ("host=db dbname=d user=ada service=prod", "no equivalent of libpq's 'service'"),
        ("host=db dbname=d user=ada sslkey=/k/client.key", "PKCS-8 DER (.pk8)"),
        ("host=h1,h2 port=1,2,3 dbname=d user=ada", "2 hosts but 3 ports"),
    ],
)
def test_what_pgjdbc_cannot_express_fails_clearly(dsn, says):
    with pytest.raises(UnsupportedDsnError) as failure:
        jdbc_target(dsn)
    assert says in str(failure.value)

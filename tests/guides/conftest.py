"""Fixtures of the Postgres writer tests: a PostgreSQL server of a test's own, which it may restart or re-password
while every other test goes on using the lab's."""

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg2
import pytest
from sink_helpers import with_password

from rtm_lab import ports, postgres
from rtm_lab.errors import LabError

SCHEMA = "sink"


@dataclass
class OwnPostgres:
    root: Path
    port: int
    password: str = postgres.PASSWORD
    schema: str = SCHEMA

    @property
    def dsn(self) -> str:
        """The DSN with the role's current password."""
        return with_password(postgres.dsn(self.port), self.password)

    def restart(self) -> None:
        postgres.stop(self.root)
        postgres.start(self.root, self.port)

    def set_role_password(self, new: str) -> None:
        """ALTER ROLE of the server's own role (any role may change its own password; the lab's scram-sha-256 rule
        checks it over TCP)."""
        conn = psycopg2.connect(self.dsn)
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                cur.execute("ALTER ROLE CURRENT_USER PASSWORD %s", (new,))
        finally:
            conn.close()
        self.password = new


@pytest.fixture
def own_postgres(tmp_path_factory) -> Iterator[OwnPostgres]:
    """A server started from the lab's PostgreSQL binaries in a fresh folder, with the lab's role, database and a
    `sink` schema; removed after the test. A restart or a password change there disturbs no other test, so such a
    test runs beside the others (the lab's server would need it to run alone)."""
    root = tmp_path_factory.mktemp("own-postgres")
    server = OwnPostgres(root, ports.free_port())
    try:
        postgres.start(root, server.port)
    except LabError as error:
        postgres.remove(root)
        pytest.fail(f"This test starts a PostgreSQL server of its own: {error}", pytrace=False)
    try:
        conn = psycopg2.connect(server.dsn)
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                cur.execute(f"CREATE SCHEMA {SCHEMA}")
        finally:
            conn.close()
        yield server
    finally:
        postgres.remove(root)

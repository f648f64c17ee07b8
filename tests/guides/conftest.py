"""Fixtures of the guides' fault tests: a PostgreSQL server or a Kafka broker of a test's own, which it may restart,
re-password or kill while every other test goes on using the lab's (so such a test runs beside the others)."""

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sink_helpers import run_sql, with_password

from rtm_lab import kafka, ports, postgres, processes
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
        run_sql(self.dsn, "ALTER ROLE CURRENT_USER PASSWORD %s", (new,))
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
        run_sql(server.dsn, f"CREATE SCHEMA {SCHEMA}")
        yield server
    finally:
        postgres.remove(root)


@dataclass
class OwnBroker:
    """A Kafka broker of the test's own, from the lab's jars in a fresh folder: killing it takes nothing from the
    other tests, which go on with the lab's (so the test runs beside them, and with an external lab broker too)."""

    root: Path
    port: int = field(default_factory=ports.free_port)
    controller_port: int = field(default_factory=ports.free_port)
    pid: int = 0

    @property
    def bootstrap(self) -> str:
        return f"{ports.HOST}:{self.port}"

    def start(self) -> None:
        self.pid = kafka.start(self.root, self.port, self.controller_port)


@pytest.fixture
def own_broker(tmp_path_factory) -> Iterator[OwnBroker]:
    broker = OwnBroker(tmp_path_factory.mktemp("own-kafka"))
    broker.start()
    yield broker
    processes.stop(broker.pid)

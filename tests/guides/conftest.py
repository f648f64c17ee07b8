"""Fixtures of the Postgres writer tests: change the lab role's own password, restored after the test."""

from collections.abc import Callable, Iterator
from contextlib import ExitStack

import psycopg2
import pytest
from sink_helpers import with_password


@pytest.fixture
def set_role_password(lab, quiet_machine) -> Iterator[Callable[[str], None]]:
    """set_role_password(new): ALTER ROLE of the lab's own role (any role may change its own password; the lab's
    scram-sha-256 rule checks it over TCP). The original password is put back when the test ends.

    No other test may connect while the password is not the lab's: the test runs beside others until its first
    change, and alone from then until the original is back (tests/parallel.py)."""
    original = psycopg2.extensions.parse_dsn(lab.postgres_dsn)["password"]
    current = [original]
    alone, held = ExitStack(), []

    def change(new: str) -> None:
        if not held:  # the first change: alone from here to the end of the teardown
            alone.enter_context(quiet_machine())
            held.append(True)
        conn = psycopg2.connect(with_password(lab.postgres_dsn, current[0]))
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                cur.execute("ALTER ROLE CURRENT_USER PASSWORD %s", (new,))
        finally:
            conn.close()
        current[0] = new

    with alone:
        yield change
        if current[0] != original:
            change(original)

"""The get-started page's set-up check: three events through the quick-start pipeline come back transformed.

The same code also runs outside the repository, in a venv built from the page's pip line with the connector route the
page gives (tests/docs/test_copy.py); this test checks its result with the project's own session.
"""

import pytest

from snippets.get_started.own_project import check_setup

pytestmark = pytest.mark.slow


def test_three_events_come_back_transformed(spark, lab):
    rows = check_setup(spark, lab.kafka_bootstrap)
    assert [(r["id"], r["user"], r["amount_cents"]) for r in rows] == [(1, "ANN", 250), (2, "BOB", 100), (3, "CY", 25)]

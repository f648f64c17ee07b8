"""Each mistake on the errors page fails on the pinned Spark with the error class and message the page quotes."""

import pytest

from snippets.reference.errors import MISTAKES, session_confs
from snippets.reference.support_matrix import Probe, probe


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.id for m in MISTAKES])
def test_mistake_fails_as_documented(mistake, spark, lab, tmp_path):
    runner = Probe(spark, lab.kafka_bootstrap, tmp_path)
    try:
        with session_confs(spark, mistake.confs):
            observed = probe(mistake, runner, timeout_s=90)
    finally:
        runner.cleanup()

    assert observed == mistake.expected, observed.message
    assert mistake.expected.detail in observed.message, observed.message


def test_session_confs_are_restored(spark):
    before = spark.conf.get("spark.sql.shuffle.partitions")
    with session_confs(spark, {"spark.sql.shuffle.partitions": "8"}):
        assert spark.conf.get("spark.sql.shuffle.partitions") == "8"
    assert spark.conf.get("spark.sql.shuffle.partitions") == before

"""The engine comparison's key space and each engine's key-to-task assignment (rtm_lab.keyspace).

Spark's partitioner is checked against Spark itself: `hash()` and the partition `repartition(2, key)` puts each key
in, which is the hashing of the aggregation's exchange. Flink's is checked against a real Flink job in every engine
run (its GroupAggregate subtasks' record counts, asserted in test_engines.py's quick run); here, against values
Flink 2.2.1's own BinaryRowWriter and KeyGroupRangeAssignment gave for the same keys.
"""

import pytest

from rtm_lab import keyspace

SOME_KEYS = ["user0", "user7", "user1234", "user9999", "a", "", "héllo wörld, longer", "abcde", "abé"]


def test_the_draw_is_a_pure_function_of_the_sequence_and_skewed_as_stated():
    first = [keyspace.user_of(s) for s in range(50_000)]
    assert first == [keyspace.user_of(s) for s in range(50_000)]
    assert len(set(first)) > 5_000
    # Zipf with exponent 1 over 10,000 keys: the top key's weight is 1 / H(10000), about 10.2 %.
    harmonic = sum(1 / k for k in range(1, keyspace.KEYS + 1))
    assert first.count("user0") / len(first) == pytest.approx(1 / harmonic, rel=0.05)
    assert first.count("user1") / len(first) == pytest.approx(1 / 2 / harmonic, rel=0.1)


def test_the_enrichment_table_is_a_thousand_distinct_users_of_the_key_space():
    table = keyspace.enrichment_table()
    users = [user for user, _ in table]
    assert len(users) == len(set(users)) == keyspace.ENRICHED_KEYS
    assert all(0 <= int(user.removeprefix("user")) < keyspace.KEYS for user in users)


def test_the_flink_partitioner_matches_flinks_own_code():
    # (key, BinaryRowData.hashCode, operator of 2 with maxParallelism 128), from Flink 2.2.1's classes.
    flink = [
        ("user0", 351517107, 0),
        ("user7", -1595745686, 0),
        ("user1234", -514533918, 0),
        ("user9999", 2053798401, 1),
        (42, 907821237, 1),
        (-3, -1512827124, 0),
    ]
    assert [(k, keyspace.flink_key_hash(k), keyspace.flink_operator(k, 2)) for k, _, _ in flink] == flink


def test_shares_follow_the_counts():
    counts = keyspace.task_counts(["a", "b", "a", "c"], lambda k: 0 if k == "a" else 1)
    assert counts == {0: 2, 1: 2}
    assert keyspace.shares(counts, 3) == [0.5, 0.5, 0.0]


@pytest.mark.slow
def test_the_spark_partitioner_matches_sparks_hash_and_its_shuffle(spark):
    from pyspark.sql import functions as F

    keys = SOME_KEYS + [keyspace.user_of(s) for s in range(200)]
    frame = spark.createDataFrame([(k,) for k in keys], "k string").repartition(2, "k")
    rows = frame.select("k", F.hash("k").alias("h"), F.spark_partition_id().alias("p")).collect()
    assert sorted((r.k, r.h, r.p) for r in rows) == sorted(
        (k, keyspace.spark_hash(k), keyspace.spark_partition(k, 2)) for k in keys
    )
    ids = [0, 1, -3, 42, 2**40 + 7]
    frame = spark.createDataFrame([(i,) for i in ids], "i bigint").repartition(2, "i")
    rows = frame.select("i", F.hash("i").alias("h"), F.spark_partition_id().alias("p")).collect()
    assert sorted((r.i, r.h, r.p) for r in rows) == sorted(
        (i, keyspace.spark_hash(i), keyspace.spark_partition(i, 2)) for i in ids
    )

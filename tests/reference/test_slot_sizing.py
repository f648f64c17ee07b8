"""The slot calculator against Spark itself: each worked example runs at exactly the slots the calculator gives and
fails with CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT at one fewer, on local[N] and on a standalone cluster."""

import json
import subprocess
import sys
import tempfile

import pytest

from rtm_lab import topics
from snippets.reference import slot_sizing
from snippets.reference.slot_sizing import SlotNeed, slots_needed

MULTI_STAGE = ("aggregation", "deduplication", "repartition")


def run_examples(bootstrap: str, *args: str) -> subprocess.Popen:
    # One SparkSession per process, and local[N] is fixed when it starts: each slot count gets its own process.
    cmd = [sys.executable, "-m", "rtm_lab.probes.slots", "--bootstrap", bootstrap, *args]
    # Spark's log goes to a file: a full stderr pipe would stall the process while nobody reads it.
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=tempfile.TemporaryFile(), text=True)


def outcomes(proc: subprocess.Popen, timeout_s: float = 240) -> dict[str, dict]:
    out, _ = proc.communicate(timeout=timeout_s)
    assert proc.returncode == 0, f"rtm_lab.probes.slots exited with {proc.returncode}; stdout: {out[-2000:]}"
    return {row["example"]: row for row in map(json.loads, out.splitlines())}


@pytest.fixture(scope="module")
def local_processes(lab):
    # One process per slot count, both at once. Requested by the slow tests only, so the fast loop starts none.
    procs = run_examples(lab.kafka_bootstrap, "--slots", "4"), run_examples(lab.kafka_bootstrap, "--slots", "3")
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()


@pytest.fixture(scope="module")
def local_runs(local_processes):
    at_four, at_three = local_processes
    return outcomes(at_four), outcomes(at_three)


def test_calculator_reads_exchanges_from_the_plan(spark, lab, kafka_topic):
    topic = kafka_topic(partitions=3)
    raw = topics.kafka_stream(spark, lab.kafka_bootstrap, topic)
    source_tasks = slot_sizing.kafka_partitions(lab.kafka_bootstrap, topic)
    assert source_tasks == 3
    assert slots_needed(slot_sizing.stateless(raw), source_tasks) == SlotNeed(3, ())
    # The session's spark.sql.shuffle.partitions is 2.
    assert slots_needed(slot_sizing.aggregation(raw), source_tasks) == SlotNeed(3, (2,))
    assert slots_needed(slot_sizing.deduplication(raw), source_tasks) == SlotNeed(3, (2,))
    assert slots_needed(slot_sizing.repartition(raw, 5), source_tasks) == SlotNeed(3, (5,))
    # Stages add up: repartition(5) then an aggregation is three stages, 3 + 5 + 2 tasks.
    both = slots_needed(slot_sizing.aggregation(slot_sizing.repartition(raw, 5)), source_tasks)
    assert sorted(both.shuffle_tasks) == [2, 5] and both.total == 10
    # Left at Spark's default, the aggregation's shuffle is 200 tasks (AQE, which could merge them, is off in
    # real-time mode): the trap the page's warning and its diagram name.
    session_value = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.unset("spark.sql.shuffle.partitions")
    try:
        at_default = slots_needed(slot_sizing.aggregation(raw), source_tasks)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", session_value)
    assert at_default == SlotNeed(3, (200,)) and at_default.total == 203


@pytest.mark.slow
@pytest.mark.parametrize("example", MULTI_STAGE)
def test_runs_at_exactly_the_calculated_slots(local_runs, example):
    at_four, _ = local_runs
    run = at_four[example]
    assert run["needed_before_start"] == 4 and run["needed_while_running"] == 4
    assert run["outcome"] == "ran", run
    # The readiness check (scripts/rtm_check.py) said so before the start: it runs, 4 slots, no slot finding.
    assert (run["checker_verdict"], run["checker_needs"], run["checker_slot_finding"]) == (["runs", None], 4, None)
    # Spark runs every stage at once: the active stages' tasks add up to the calculated slots.
    assert sum(run["stages"]) == 4, run


@pytest.mark.slow
@pytest.mark.parametrize("example", MULTI_STAGE)
def test_fails_with_one_slot_fewer(local_runs, example):
    _, at_three = local_runs
    run = at_three[example]
    assert run["outcome"] == "failed", run
    assert run["error_class"] == "CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT"
    # Spark's own count of the slots the query needs matches the calculator.
    assert (run["spark_needs"], run["spark_free"]) == (run["needed_before_start"], 3) == (4, 3)
    # The readiness check predicted the failure, its error class and the count, before the start.
    assert run["checker_verdict"] == ["fails at run time", run["error_class"]], run
    assert (run["checker_needs"], run["checker_slot_finding"]) == (4, "error"), run


@pytest.mark.slow
def test_stateless_with_too_few_slots_does_not_fail_but_delays_a_partition(local_runs):
    at_four, at_three = local_runs
    enough, short = at_four["stateless"], at_three["stateless"]
    assert enough["outcome"] == "ran" and enough["partitions_seen"] == [0, 1, 2, 3], enough
    # One stage only: no pipelined group, so no slot check. The task without a slot waits instead.
    assert short["error_class"] is None and len(short["partitions_seen"]) >= 3, short
    late = short["arrival_spread_ms"] is None or short["arrival_spread_ms"] >= 5000
    assert late and enough["arrival_spread_ms"] < 2500, (enough, short)
    # The readiness check: at 4 slots nothing to say; at 3 it runs (exit 0) with a warning that one partition waits.
    assert (enough["checker_verdict"], enough["checker_slot_finding"]) == (["runs", None], None), enough
    assert (short["checker_verdict"], short["checker_needs"], short["checker_slot_finding"]) == (
        ["runs", None],
        4,
        "warning",
    ), short


@pytest.mark.slow
def test_same_sizing_on_a_standalone_cluster(lab, standalone_cluster):
    # Two workers, 2 cores each (tests/conftest.py).
    on_cluster = (lab.kafka_bootstrap, "--master", standalone_cluster.master_url, "--examples", "aggregation", "--conf")
    four = outcomes(run_examples(*on_cluster, "spark.cores.max=4"))
    three = outcomes(run_examples(*on_cluster, "spark.cores.max=3"))
    ran, failed = four["aggregation"], three["aggregation"]
    # The probe makes Spark wait for spark.cores.max before the query starts: both workers' executors are there.
    assert ran["executors_at_start"] == 2, ran
    assert failed["error_class"] == "CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT", failed
    assert (failed["spark_needs"], failed["spark_free"]) == (4, 3)
    assert ran["outcome"] == "ran" and ran["needed_before_start"] == 4, ran
    assert sum(ran["stages"]) == 4, ran
    # The tasks ran on both executors (one per worker); the driver runs none outside local mode.
    assert len([n for n in ran["tasks_per_executor"].values() if n]) == 2, ran


@pytest.mark.slow
def test_a_second_real_time_query_sees_only_the_slots_the_first_left(spark, lab, tmp_path):
    """Two real-time queries on one local[4]: a stateless one holds 2 slots (2 partitions) for as long as it runs, so
    a stateful one that needs 4 (2 source tasks + 2 shuffle partitions) fails for want of slots, while the first runs
    on."""
    from rtm_lab import plans
    from rtm_lab.probes.harness import AT_RUN_TIME, Probe, probe
    from rtm_lab.probes.support_matrix import parsed

    assert spark.sparkContext.master == "local[4]"
    first_probe, second_probe = (
        Probe(spark, lab.kafka_bootstrap, tmp_path / "a"),
        Probe(spark, lab.kafka_bootstrap, tmp_path / "b"),
    )
    first = None
    try:
        first = first_probe.to_kafka(parsed(first_probe.kafka()))
        plans.wait_for_real_time_scan(first)  # its batch (and its 2 tasks) is running before the second starts
        second = probe(lambda p: p.to_kafka(parsed(p.kafka()).dropDuplicates(["id"])), second_probe, timeout_s=90)
        assert (second.kind, second.error) == (AT_RUN_TIME, "CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT"), second.message
        assert "needs 4 concurrent task slots" in second.message, second.message
        # The first query never noticed: it is active and still carries rows.
        assert first.isActive and first.exception() is None
        first_probe.feed()
        assert probe_arrived(first_probe, first), "the first query stopped carrying rows"
    finally:
        if first is not None:
            first.stop()
        first_probe.cleanup()
        second_probe.cleanup()


def probe_arrived(p, query, timeout_s: float = 60.0) -> bool:
    from rtm_lab.waiting import WaitTimeout, wait_until

    try:
        wait_until(lambda: p.arrived(query), timeout_s, "rows through the first query")
        return True
    except WaitTimeout:
        return False

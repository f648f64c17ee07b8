"""The capacity planner (snippets/guides/capacity_plan.py, scripts/rtm_plan.py): its arithmetic against a table of cases,
what it says when the measured table is missing, and its one-line errors.

The capacities come from capacity_plan_fixture.json beside this file: made-up figures, marked as a fixture, so the
arithmetic is checked without a benchmark run. No case needs Spark: the planner is pure arithmetic unless given a query
file (that path is the readiness check's, tested in tests/reference/test_readiness_check.py).
"""

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from rtm_lab.paths import PROJECT_ROOT
from snippets.guides.capacity_plan import Request, plan, text

FIXTURE = Path(__file__).with_name("capacity_plan_fixture.json")
TABLE = json.loads(FIXTURE.read_text())
LABEL = FIXTURE.name


def figures(request: Request, results: dict | None = TABLE, stalls: dict | None = None) -> dict[str, str]:
    planned = plan(request, results, LABEL, stalls)
    assert all(f.source for f in planned), "every figure names where it comes from"
    return {f.name: f.value for f in planned}


# (request, expected figures): the question first, then the other branches of the arithmetic.
CASES = {
    # 64 partitions, 100,000 events/s, a groupBy with 32 shuffle partitions: 64 + 32 slots; the shuffle tasks carry
    # 100,000 / 32 = 3,125 each, the busiest; cores = max(96, ceil(100,000 / (10,000 x 0.5)) = 20); 24 executors of 4;
    # backlog 300 s x 3,125 = 937,500, drained at 10,000 - 3,125 = 6,875/s: 136 s.
    "the 64-partition question": (
        Request(rate=100_000, source_partitions=64, shape="groupby-count", shuffle_partitions=32),
        {
            "task slots": "96",
            "busiest task's rate": "3,125 events/s",
            "per-task capacity": "10,000 events/s at p99 <= 100 ms",
            "cores": "96",
            "executors": "24 of 4 cores (spark.executor.cores=4)",
            "backlog after a restart": "up to 937,500 events",
            "catch-up time": "up to 136 s",
            "executor memory": "the one-task engine peaked at 900 MiB resident",
        },
    ),
    # The 1 s bound reads the other column: 14,000; catch-up 937,500 / 10,875 = 86 s.
    "the same at p99 <= 1 s": (
        Request(
            rate=100_000, source_partitions=64, shape="groupby-count", shuffle_partitions=32, latency_bound_ms=1000
        ),
        {"per-task capacity": "14,000 events/s at p99 <= 1000 ms", "catch-up time": "up to 86 s"},
    ),
    # Spark's default 200 shuffle partitions: 264 slots, and the source tasks are the busiest (100,000 / 64).
    "default shuffle partitions": (
        Request(rate=100_000, source_partitions=64, shape="groupby-count", shuffle_partitions=None),
        {
            "task slots": "264",
            "busiest task's rate": "1,562 events/s",
            "executors": "66 of 4 cores (spark.executor.cores=4)",
        },
    ),
    # Stateless, few partitions: load sets the cores above the slots. 400,000 / (40,000 x 0.5) = 20 cores for 16 slots.
    "cores for the load": (
        Request(rate=400_000, source_partitions=16, shape="stateless", shuffle_partitions=None, cores_per_executor=8),
        {
            "task slots": "16",
            "busiest task's rate": "25,000 events/s",
            "cores": "20",
            "executors": "3 of 8 cores (spark.executor.cores=8)",
        },
    ),
    # Over capacity: 12,500 per task against 10,000. Never catches up; 40 partitions each way bring it to 50 %.
    "over capacity": (
        Request(rate=200_000, source_partitions=16, shape="groupby-count", shuffle_partitions=16),
        {
            "headroom": "-25% (over capacity: the busiest task runs at 125% of capacity, target 50%)",
            "catch-up time": "never: the busiest task gets more than it can carry",
            "what to change": "at least 40 source partitions (Kafka topic partitions); "
            "spark.sql.shuffle.partitions of at least 40; each added partition is one more task slot to ask for",
        },
    ),
    # A skewed partition: a quarter of 100,000 on one task, whatever the partition count: spread its keys.
    "a skewed partition": (
        Request(rate=100_000, source_partitions=64, shape="stateless", shuffle_partitions=None, busiest_share=0.25),
        {
            "busiest task's rate": "25,000 events/s",
            "headroom": "38% (over the target utilisation: the busiest task runs at 62% of capacity, target 50%)",
            "what to change": "spread the busiest partition's keys: at 25.0% of the rate it carries 25,000 events/s, "
            "over 20,000, whatever the partition count; each added partition is one more task slot to ask for",
        },
    ),
    # Downtime adds to the backlog: (300 + 60) s x 1,562.5 = 562,500, drained at 40,000 - 1,562.5: 15 s.
    "downtime": (
        Request(rate=100_000, source_partitions=64, shape="stateless", shuffle_partitions=None, downtime_s=60),
        {
            "backlog after a restart": "up to 562,500 events",
            "catch-up time": "up to 15 s",
            "state store memory": "none: no state",
        },
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_plan_arithmetic(case):
    request, expected = CASES[case]
    got = figures(request)
    assert {name: got.get(name) for name in expected} == expected


def test_within_target_needs_no_change():
    got = figures(CASES["the 64-partition question"][0])
    assert (
        got["headroom"] == "69% (within the target utilisation: the busiest task runs at 31% of capacity, target 50%)"
    )
    assert "what to change" not in got


def test_no_table_gives_slots_and_formulas_and_no_invented_figure():
    request = CASES["the 64-partition question"][0]
    planned = plan(request, None, "per-task-throughput.json")
    got = {f.name: f for f in planned}
    assert got["task slots"].value == "96" and got["cores"].value == "96"
    for name in ("per-task capacity", "catch-up time"):
        assert got[name].value == "unknown" and got[name].source.startswith("not measured")
    assert "does not exist" in got["per-task capacity"].source
    assert got["executor memory"].value == "not measured"
    assert "headroom" not in got and "what to change" not in got


def test_a_shape_missing_from_the_table_is_said_plainly():
    request = Request(rate=10_000, source_partitions=4, shape="dedup", shuffle_partitions=4, latency_bound_ms=1000)
    got = {f.name: f for f in plan(request, TABLE, LABEL)}
    assert got["per-task capacity"].value == "unknown"
    assert got["per-task capacity"].source == f"not measured: {LABEL}: capacity.dedup.1000 is missing"


def test_a_capacity_with_no_failed_step_above_it_is_called_a_floor():
    # An open search, or one the generator ended, has a held rate and no rate not held: the planner uses the held
    # rate (cores come out high, never low) and says it is a floor.
    table = {"capacity": {"dedup": {"100": {"held_rate": 8000, "not_held_rate": None}}}}
    request = Request(rate=10_000, source_partitions=4, shape="dedup", shuffle_partitions=4)
    got = {f.name: f for f in plan(request, table, LABEL)}
    assert got["per-task capacity"].value == "8,000 events/s at p99 <= 100 ms"
    assert got["per-task capacity"].source.endswith("(one task on one core; a floor: no higher step has failed yet)")
    held = {f.name: f for f in plan(request, TABLE, LABEL)}["per-task capacity"].source
    assert held.endswith("(one task on one core, not held at 9,900)")


def test_a_capacity_the_harness_core_set_is_called_a_floor():
    # On the measuring machine the generator and broker's core can run full before the task's does: the step above
    # failed for the harness, so the held rate is a floor for the task, and the planner says so.
    entry = {"held_rate": 6490, "not_held_rate": 7070, "full_cores": ["harness core"]}
    request = Request(rate=10_000, source_partitions=4, shape="stateless", shuffle_partitions=None)
    got = {f.name: f for f in plan(request, {"capacity": {"stateless": {"100": entry}}}, LABEL)}
    assert got["per-task capacity"].source.endswith(
        "(one task on one core, not held at 7,070, where the harness core ran full, not the task's: a floor)"
    )
    # The Postgres writer's database ran on the harness core: its limit there may be PostgreSQL's, not a floor.
    writer = {
        f.name: f
        for f in plan(replace(request, shape="postgres-jvm"), {"capacity": {"postgres-jvm": {"100": entry}}}, LABEL)
    }
    assert writer["per-task capacity"].source.endswith(
        "(one task on one core, not held at 7,070, where the harness core ran full with PostgreSQL on it:"
        " your database may set the limit)"
    )
    both = {**entry, "full_cores": ["engine core", "harness core"]}
    got = {f.name: f for f in plan(request, {"capacity": {"stateless": {"100": both}}}, LABEL)}
    assert got["per-task capacity"].source.endswith("(one task on one core, not held at 7,070)")


def test_boundary_stall_is_read_from_the_checkpoint_results_or_not_measured():
    request = CASES["the 64-partition question"][0]
    assert figures(request)["boundary stall"] == "not measured"
    stalls = {"planner": {"groupby-count": {"300": 150}}}
    assert figures(request, stalls=stalls)["boundary stall"] == "150 ms at each batch end"


def test_text_puts_each_source_under_its_figure():
    lines = text(plan(CASES["the 64-partition question"][0], TABLE, LABEL)).splitlines()
    assert lines[0] == "task slots: 96"
    assert lines[1].strip().startswith("from: 64 source partitions + 32 shuffle partitions")


def plan_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "scripts/rtm_plan.py", *args], capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=60
    )


QUESTION = ["--rate", "100000", "--source-partitions", "64", "--shape", "groupby-count", "--shuffle-partitions", "32"]


def test_cli_answers_the_question_from_a_results_file():
    result = plan_cli(*QUESTION, "--results", str(FIXTURE))
    assert result.returncode == 0, result.stderr
    assert "catch-up time: up to 136 s" in result.stdout


BAD = {
    "rate 0": (["--rate", "0", "--source-partitions", "4", "--shape", "stateless"], "--rate must be above 0"),
    "rate nan": (["--rate", "nan", "--source-partitions", "4", "--shape", "stateless"], "--rate must be above 0"),
    "rate text": (["--rate", "fast", "--source-partitions", "4", "--shape", "stateless"], "invalid float value"),
    "no partitions": (["--rate", "10", "--shape", "stateless"], "pass --source-partitions N"),
    "no shape": (["--rate", "10", "--source-partitions", "4"], "pass --shape NAME, or --query FILE"),
    "unknown shape": (["--rate", "10", "--source-partitions", "4", "--shape", "join"], "invalid choice: 'join'"),
    "zero shuffle": (
        [*QUESTION[:6], "--shuffle-partitions", "0"],
        "--shuffle-partitions must be at least 1",
    ),
    "share under even": ([*QUESTION, "--busiest-share", "1%"], "is below an even share"),
    "share over 100": ([*QUESTION, "--busiest-share", "120"], "--busiest-share must be above 0"),
    "utilisation 0": ([*QUESTION, "--target-utilisation", "0"], "--target-utilisation must be above 0"),
    "bound 500": ([*QUESTION, "--p99-bound-ms", "500"], "--p99-bound-ms must be 100 or 1000"),
    "short batch": ([*QUESTION, "--batch-duration-s", "1"], "at least 5 (Spark's minimum)"),
    "no cores": ([*QUESTION, "--cores-per-executor", "0"], "--cores-per-executor must be at least 1"),
    "bad results": ([*QUESTION, "--results", "docs/index.md"], "is not a readable JSON file"),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_input_is_one_line_and_exit_2(case):
    args, phrase = BAD[case]
    result = plan_cli(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and phrase in result.stderr, result.stderr


# The run the cluster guide shows: the question, planned from the real results files (none measured yet is
# what it then says), with the spark-submit settings for both clusters. RTM_RECORD_PLAN=1 writes it again.
RECORDED = PROJECT_ROOT / "docs" / "results" / "capacity-plan.txt"


def recorded_text() -> str:
    """The planner's output for the question, in sections the guide includes: the plan, then each cluster's settings."""
    sections = []
    for cluster in ("standalone", "kubernetes"):
        result = plan_cli(*QUESTION, "--submit", cluster)
        assert result.returncode == 0, result.stderr
        plan_part, _, submit_part = result.stdout.partition("spark-submit (")
        if not sections:
            command = " ".join(["python scripts/rtm_plan.py", *QUESTION[:4]]) + " \\\n    "
            command += " ".join(QUESTION[4:])
            sections.append(("plan", f"$ {command}\n{plan_part}"))
        sections.append((cluster, f"$ ... --submit {cluster}\nspark-submit ({submit_part}"))
    return "".join(f"# --8<-- [start:{name}]\n{body}# --8<-- [end:{name}]\n" for name, body in sections)


def test_the_guide_shows_a_real_run_of_the_planner():
    text = recorded_text()
    if os.environ.get("RTM_RECORD_PLAN"):
        RECORDED.write_text(text)
    assert RECORDED.read_text() == text, (
        "docs/results/capacity-plan.txt is not what the planner prints now: run "
        "RTM_RECORD_PLAN=1 pytest tests/guides/test_capacity_plan.py -k real_run"
    )


@pytest.mark.slow
def test_a_query_file_gets_its_slots_from_the_readiness_check(lab, kafka_topic, tmp_path):
    """--query: the slots are the readiness check's count from Spark's plan of the file (a groupBy at 32 shuffle
    partitions, the production topic's 64 partitions), and the rest of the plan is built on them."""
    from rtm_lab.probes import public_examples

    groupby = next(c for c in public_examples.CASES if c.id == "groupby-default-shuffle-partitions")
    query = tmp_path / "key_counts.py"
    query.write_text(groupby.text)
    source, sink = kafka_topic(partitions=2), kafka_topic(partitions=1)
    args = ["--rate", "100000", "--source-partitions", "64", "--shape", "groupby-count"]
    args += ["--conf", "spark.sql.shuffle.partitions=32", "--results", str(FIXTURE)]
    done = plan_cli(*args, "--query", str(query), lab.kafka_bootstrap, source, sink, str(tmp_path / "checkpoint"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(
        "task slots: 96\n    from: 64 source tasks + 32 shuffle tasks, read from Spark 4.3.0"
    ), done.stdout
    assert "catch-up time: up to 136 s" in done.stdout


def test_the_skills_planner_runs_alone_outside_the_repository(tmp_path):
    """The skill's scripts/rtm_plan.py, copied alone (with a capacity file beside it, as the skill ships the measured
    one), runs on the standard library only (python -S: no site-packages, so no pyspark and no project code)."""
    shutil.copy(PROJECT_ROOT / "skills" / "spark-real-time-mode" / "scripts" / "rtm_plan.py", tmp_path)
    shutil.copy(FIXTURE, tmp_path / "per-task-throughput.json")
    done = subprocess.run(
        [sys.executable, "-S", "rtm_plan.py", *QUESTION], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "catch-up time: up to 136 s" in done.stdout
    assert "from: per-task-throughput.json: capacity.groupby-count.100" in done.stdout

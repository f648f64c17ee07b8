"""docs/concepts.md's model, observed on a running query: a real-time batch is one Spark stage whose tasks (one per
Kafka partition) start once and stay running for the whole batch duration, rows pass through while it runs, and the batch
is committed only when the stage ends (a stage stays active until its last task ends).

The driver's status tracker is sampled every 0.2 s while rows are sent at a steady pace; the checkpoint's commit
files and the sink records' broker timestamps are then compared with the stages' lifetimes. All clocks are on one
machine (the driver, the executor and the broker's LogAppendTime).
"""

import itertools
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rtm_lab.probes.stamped_rows import LOG_APPEND_TIME, produce_paced, read_latencies
from snippets.reference.latency_metrics import start_stamped_query

pytestmark = pytest.mark.slow

INTERVAL_S = 5
PARTITIONS = 2
RATE = 20  # rows/s, paced
SAMPLE_S = 0.2


@dataclass
class Stage:
    first_s: float
    last_s: float
    active_tasks: list[int] = field(default_factory=list)


def sample_stages(spark, query, checkpoint: str, batches: int, timeout_s: float) -> dict[int, Stage]:
    """Each active stage id with the first and last time (epoch seconds) it was seen and its running task counts,
    sampled until `batches` more batches committed (the window is set by batches, not by seconds: a busy machine is
    slower)."""
    tracker = spark.sparkContext.statusTracker()
    commits = Path(checkpoint) / "commits"

    def committed() -> int:
        return sum(p.name.isdigit() for p in commits.iterdir()) if commits.is_dir() else 0

    before = committed()
    stages: dict[int, Stage] = {}
    end = time.monotonic() + timeout_s
    while time.monotonic() < end and query.exception() is None:
        if committed() - before >= batches:
            break
        now = time.time()
        for stage_id in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage_id)
            stage = stages.setdefault(stage_id, Stage(now, now))
            stage.last_s = now
            if info is not None:
                stage.active_tasks.append(info.numActiveTasks)
        time.sleep(SAMPLE_S)
    return stages


def produce_until(bootstrap: str, topic: str, stop: threading.Event) -> int:
    """Send paced rows (RATE per second) until `stop` is set; return how many."""
    sent = 0
    while not stop.is_set():
        produce_paced(bootstrap, topic, RATE, RATE, first_id=sent)
        sent += RATE
    return sent


@pytest.mark.timing
def test_tasks_stay_running_for_the_batch_duration_and_the_batch_commits_when_they_end(
    spark, lab, kafka_topic, checkpoint, stop_after, quiet_machine
):
    source = kafka_topic(partitions=PARTITIONS, configs=LOG_APPEND_TIME)
    sink = kafka_topic(partitions=PARTITIONS, configs=LOG_APPEND_TIME)
    query = stop_after(
        start_stamped_query(
            spark, lab.kafka_bootstrap, source, sink, checkpoint, batch_duration=f"{INTERVAL_S} seconds"
        )
    )
    stop, sent = threading.Event(), []
    producer = threading.Thread(
        target=lambda: sent.append(produce_until(lab.kafka_bootstrap, source, stop)), daemon=True
    )
    producer.start()
    try:
        # The query starts beside other tests; the batches it is judged by are sampled alone.
        with quiet_machine():
            stages = sample_stages(spark, query, checkpoint, batches=4, timeout_s=180)
    finally:
        stop.set()
        producer.join(timeout=30)
    assert query.exception() is None
    out = read_latencies(lab.kafka_bootstrap, sink, sent[0], timeout_s=90)
    commits = {int(p.name): p.stat().st_mtime for p in (Path(checkpoint) / "commits").iterdir() if p.name.isdigit()}

    ordered = sorted(stages.items())
    # Stages seen from their start to their end (not the first or the last, which the window may cut).
    whole = [stage for _, stage in ordered[1:-1]]
    assert len(whole) >= 2, ordered
    for stage in whole:
        # Tasks stay running: one stage lives for most of the batch (a wide ratio, never an absolute time) ...
        assert stage.last_s - stage.first_s >= 0.6 * INTERVAL_S, ordered
        # (A stage is active until its last task ends. The tracker's running-task count lags under real-time
        # mode, often reading 0 while the stage runs, so it is recorded but not asserted.)
        # Rows pass through while the stage runs: some rows reached the sink topic well before the stage ended.
        inside = [r for r in out if stage.first_s * 1000 < r["sink_append_ms"] < (stage.last_s - 1) * 1000]
        assert inside, (stage, [r["sink_append_ms"] for r in out])
        # The batch commits when the tasks end: no commit file is written while the stage runs ...
        during = [b for b, t in commits.items() if stage.first_s + 2 * SAMPLE_S < t < stage.last_s - 2 * SAMPLE_S]
        assert not during, (stage, commits)
    # ... and one is written as each stage ends, before (or just after) the next batch's stage starts.
    for (_, stage), (_, following) in itertools.pairwise(ordered[1:]):
        assert any(stage.last_s - 2 * SAMPLE_S <= t <= following.first_s + 1.0 for t in commits.values()), (
            stage,
            following,
            commits,
        )
    print(
        f"\nstages (id: seconds alive) {[(i, round(s.last_s - s.first_s, 1)) for i, s in ordered]}, "
        f"commits {sorted(commits)}, {len(out)} rows"
    )


def _kafka_copy(spark, bootstrap: str, source: str, sink: str, checkpoint: str, dedup: bool = False):
    from snippets.reference.errors import read_events, to_kafka

    events = read_events(spark, bootstrap, source)
    return to_kafka(events.dropDuplicates(["id"]) if dedup else events, bootstrap, sink, checkpoint)


def _has_adaptive_plan(plan: str) -> bool:
    return "AdaptiveSparkPlan" in plan


def test_aqe_is_off_in_a_real_time_plan(spark, lab, kafka_topic, checkpoint, stop_after):
    """Adaptive query execution is on by default; Spark turns it off for real-time queries, stateless ones included:
    the executed plan of a stateless real-time query with a `repartition` shuffle has no AdaptiveSparkPlan node."""
    from rtm_lab import plans
    from snippets.reference.errors import read_events, to_kafka

    assert spark.conf.get("spark.sql.adaptive.enabled") == "true"
    # 2 source + 2 shuffle partitions: the 4 slots the session has (a pipelined group needs all at once).
    events = read_events(spark, lab.kafka_bootstrap, kafka_topic()).repartition(2)
    writer = to_kafka(events, lab.kafka_bootstrap, kafka_topic(), checkpoint)
    query = stop_after(writer.outputMode("update").trigger(realTime=f"{INTERVAL_S} seconds").start())
    plan = plans.wait_for_real_time_scan(query, timeout_s=90)
    assert "Exchange" in plan and not _has_adaptive_plan(plan), plan
    assert query.exception() is None
    batch = spark.range(10).selectExpr("id % 2 AS k").groupBy("k").count()
    assert _has_adaptive_plan(batch._jdf.queryExecution().executedPlan().toString())  # the batch default


@pytest.mark.parametrize("stateful", [False, True], ids=["stateless", "stateful"])
def test_aqe_in_micro_batch_is_kept_only_for_stateless_queries(spark, lab, kafka_topic, checkpoint, stateful):
    """Micro-batch is different (SPARK-53941, Spark 4.1): a stateless micro-batch query with a shuffle keeps AQE
    (its executed plan has an AdaptiveSparkPlan node); a stateful one (dropDuplicates) runs without it."""
    from rtm_lab import plans
    from snippets.reference.errors import read_events, to_kafka

    source = kafka_topic()
    produce_paced(lab.kafka_bootstrap, source, 4, rate=100)
    events = read_events(spark, lab.kafka_bootstrap, source)
    shaped = events.dropDuplicates(["id"]) if stateful else events.repartition(3)
    query = to_kafka(shaped, lab.kafka_bootstrap, kafka_topic(), checkpoint).trigger(availableNow=True).start()
    query.awaitTermination(120)
    assert not query.isActive and query.exception() is None
    plan = plans.executed_plan(query)
    assert "Exchange" in plan, plan
    assert _has_adaptive_plan(plan) is not stateful, plan


def test_legacy_continuous_processing_is_a_different_trigger(spark, lab, kafka_topic, checkpoint, stop_after):
    """Continuous processing (Spark 2.3's experimental `trigger(continuous=...)`) still exists beside real-time mode:
    a stateless Kafka to Kafka copy runs under it, but a stateful operator such as dropDuplicates, which real-time
    mode 4.3 runs, is refused at start()."""
    from rtm_lab import plans
    from snippets.reference.errors import error_class

    source, sink = kafka_topic(), kafka_topic()
    query = stop_after(
        _kafka_copy(spark, lab.kafka_bootstrap, source, sink, checkpoint).trigger(continuous="1 second").start()
    )
    deadline = time.monotonic() + 90
    while "ContinuousScan" not in plans.executed_plan(query) and time.monotonic() < deadline:
        assert query.exception() is None
        time.sleep(0.5)
    assert "ContinuousScan" in plans.executed_plan(query)
    produce_paced(lab.kafka_bootstrap, source, 5, rate=50)
    assert len(read_latencies_or_values(lab.kafka_bootstrap, sink, 5)) == 5
    assert "RealTimeStreamScan" not in plans.executed_plan(query)
    query.stop()
    stateful = _kafka_copy(spark, lab.kafka_bootstrap, kafka_topic(), kafka_topic(), checkpoint + "-2", dedup=True)
    with pytest.raises(Exception) as refused:
        stop_after(stateful.outputMode("update").trigger(continuous="1 second").start())
    assert "Continuous processing does not support" in str(refused.value), error_class(refused.value)


@dataclass(frozen=True)
class StageSpan:
    stage_id: int
    submitted_ms: int
    completed_ms: int


def batch_stage_spans(spark, run_id: str) -> dict[int, list[StageSpan]]:
    """{batch id: its completed stages}, for one query run, from the driver's status store: what the Spark UI's
    stage pages show, read through py4j because the test session runs without the UI. Each batch's job carries the
    description Spark sets per batch (run id, then "batch = N"). Skipped stages (nothing to run) are left out."""
    store = spark.sparkContext._jsc.sc().statusStore()
    jobs = store.jobsList(None)
    spans: dict[int, list[StageSpan]] = {}
    for i in range(jobs.size()):
        job = jobs.apply(i)
        description = job.description().get() if job.description().isDefined() else ""
        batch = re.search(r"\bbatch = (\d+)\s*$", description)
        if run_id not in description or not batch:
            continue
        stage_ids = job.stageIds()
        for k in range(stage_ids.length()):
            stage = store.lastStageAttempt(stage_ids.apply(k))
            if stage.status().toString() == "COMPLETE":
                span = StageSpan(
                    stage.stageId(), stage.submissionTime().get().getTime(), stage.completionTime().get().getTime()
                )
                spans.setdefault(int(batch.group(1)), []).append(span)
    return {batch: sorted(stages, key=lambda s: s.submitted_ms) for batch, stages in spans.items()}


def test_micro_batch_runs_stages_one_after_the_other_and_real_time_mode_runs_them_at_once(
    spark, lab, kafka_topic, checkpoint, stop_after
):
    """The timeline diagram's two lanes, on one stateful query (dropDuplicates: a source stage, then a shuffle stage
    of 2 partitions). Micro-batch: in each batch the shuffle stage is submitted only after the source stage
    completed. Real-time mode: both stages of the batch are submitted before either completes. Orderings of the
    driver's own stage timestamps, never a duration."""
    source = kafka_topic()
    produce_paced(lab.kafka_bootstrap, source, 20, rate=100)
    micro = _kafka_copy(spark, lab.kafka_bootstrap, source, kafka_topic(), checkpoint + "-micro", dedup=True)
    query = micro.outputMode("update").trigger(availableNow=True).start()
    query.awaitTermination(120)
    assert not query.isActive and query.exception() is None
    micro_batches = [s for s in batch_stage_spans(spark, str(query.runId)).values() if len(s) == 2]
    assert micro_batches, batch_stage_spans(spark, str(query.runId))
    for first, second in micro_batches:
        assert second.submitted_ms >= first.completed_ms, (first, second)

    real_time = _kafka_copy(spark, lab.kafka_bootstrap, source, kafka_topic(), checkpoint + "-rt", dedup=True)
    query = stop_after(real_time.outputMode("update").trigger(realTime=f"{INTERVAL_S} seconds").start())
    # Batch 0 ends after the batch duration; its stages are recorded as complete once its tasks have finished.
    deadline = time.monotonic() + 120
    while len(batch_stage_spans(spark, str(query.runId)).get(0, [])) < 2 and time.monotonic() < deadline:
        assert query.exception() is None
        time.sleep(0.5)
    query.stop()
    stages = batch_stage_spans(spark, str(query.runId)).get(0, [])
    assert len(stages) == 2, stages
    assert max(s.submitted_ms for s in stages) < min(s.completed_ms for s in stages), stages
    print(f"\nmicro-batch stages per batch {micro_batches}\nreal-time batch 0 stages {stages}")


def read_latencies_or_values(bootstrap: str, topic: str, expected: int) -> list:
    from rtm_lab import topics

    return topics.read_all(bootstrap, topic, expected=expected, timeout_s=60)

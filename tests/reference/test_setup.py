"""Setup claims: how the trigger turns real-time mode on, from Python and through py4j, and the settings around it."""

import json
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from rtm_lab import plans, topics
from rtm_lab.probes.harness import session_confs
from snippets.reference.setup import (
    ALLOWLIST_CHECK,
    ASYNC_PROGRESS_BY_DEFAULT,
    BATCH_DURATION,
    MIN_BATCH_DURATION,
    default_batch_duration_ms,
    real_time_settings,
    real_time_trigger,
    start_real_time,
)


def kafka_events(spark, lab, topic):
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", lab.kafka_bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .select("key", "value")
    )


@pytest.mark.slow
def test_trigger_alone_turns_real_time_mode_on(spark, lab, kafka_topic, checkpoint, stop_after):
    # No enable flag exists in OSS Spark: this session sets none, and the trigger gives a real-time plan.
    assert spark.conf.get("spark.databricks.streaming.realTimeMode.enabled", None) is None
    source, sink = kafka_topic(), kafka_topic()
    query = stop_after(start_real_time(kafka_events(spark, lab, source), lab.kafka_bootstrap, sink, checkpoint))
    plan = plans.wait_for_real_time_scan(query)
    assert plans.REAL_TIME_SCAN in plan and "MicroBatchScan" not in plan

    topics.produce_json(lab.kafka_bootstrap, source, [{"id": i} for i in range(3)])
    assert len(topics.read_all(lab.kafka_bootstrap, sink, expected=3, timeout_s=60)) == 3
    assert query.exception() is None


@pytest.mark.slow
def test_py4j_trigger_gives_a_real_time_plan(spark, lab, kafka_topic, checkpoint, stop_after):
    sink = kafka_topic()
    writer = (
        kafka_events(spark, lab, kafka_topic())
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", lab.kafka_bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .outputMode("update")
    )
    query = stop_after(real_time_trigger(writer, spark, BATCH_DURATION).start())
    assert plans.REAL_TIME_SCAN in plans.wait_for_real_time_scan(query)
    # The running query holds the JVM trigger object the py4j call built.
    assert BATCH_DURATION == "5 minutes"
    assert query._jsq.streamingQuery().trigger().toString() == "RealTimeTrigger(300000)"


def test_default_batch_duration_is_five_minutes(spark):
    assert default_batch_duration_ms(spark) == 300_000


def test_default_settings(spark):
    assert real_time_settings(spark) == {
        MIN_BATCH_DURATION: "5000ms",
        ALLOWLIST_CHECK: "true",
        ASYNC_PROGRESS_BY_DEFAULT: "true",
    }
    # This project's sessions set 2 shuffle partitions; Spark's own default is what a reader's session starts with.
    sql_conf = spark._jvm.org.apache.spark.sql.internal.SQLConf
    assert sql_conf.SHUFFLE_PARTITIONS().defaultValueString() == "200"
    # A core (not SQL) setting: real-time mode's streaming shuffle holds a partly filled buffer this long.
    core_conf = getattr(getattr(spark._jvm.org.apache.spark.internal.config, "package$"), "MODULE$")
    shuffle_wait = core_conf.STREAMING_SHUFFLE_NETWORK_BUFFER_MAX_WAIT_TIME_MS()
    assert (shuffle_wait.key(), shuffle_wait.defaultValueString()) == (
        "spark.shuffle.streaming.networkBufferMaxWaitTimeMs",
        "50",
    )


@pytest.mark.slow
def test_lowering_min_batch_duration_admits_a_shorter_batch_duration(spark, lab, kafka_topic, checkpoint, stop_after):
    # With the default minimum, "1 second" is refused at start() (tests/reference/test_errors.py shows the error).
    with session_confs(spark, {MIN_BATCH_DURATION: "1000"}):
        query = stop_after(
            kafka_events(spark, lab, kafka_topic())
            .select(F.col("value"))
            .writeStream.format("kafka")
            .option("kafka.bootstrap.servers", lab.kafka_bootstrap)
            .option("topic", kafka_topic())
            .option("checkpointLocation", checkpoint)
            .outputMode("update")
            .trigger(realTime="1 second")
            .start()
        )
        assert plans.REAL_TIME_SCAN in plans.wait_for_real_time_scan(query)


def execution_kind(query) -> str:
    """The engine class behind a running query: AsyncProgressTrackingMicroBatchExecution writes its offset and
    commit logs off the query's thread; MicroBatchExecution writes them before and after each batch."""
    return query._jsq.streamingQuery().getClass().getSimpleName()


@pytest.mark.slow
def test_stateless_real_time_queries_track_progress_asynchronously_by_default(
    spark, lab, kafka_topic, tmp_path, stop_after
):
    source = kafka_topic()

    def started(df, name: str, confs: dict[str, str] | None = None, **options: str):
        with session_confs(spark, confs or {}):
            writer = (
                df.writeStream.format("kafka")
                .option("kafka.bootstrap.servers", lab.kafka_bootstrap)
                .option("topic", kafka_topic())
                .option("checkpointLocation", str(tmp_path / name))
                .outputMode("update")
                .trigger(realTime="5 seconds")
            )
            for key, value in options.items():
                writer = writer.option(key, value)
            query = stop_after(writer.start())
        plans.wait_for_real_time_scan(query)
        kind = execution_kind(query)
        query.stop()
        return kind

    events = kafka_events(spark, lab, source)
    assert started(events, "stateless") == "AsyncProgressTrackingMicroBatchExecution"
    assert started(events, "conf_off", {ASYNC_PROGRESS_BY_DEFAULT: "false"}) == "MicroBatchExecution"
    # The writer option wins over the session default.
    assert started(events, "option_off", asyncProgressTrackingEnabled="false") == "MicroBatchExecution"
    # A stateful query keeps synchronous progress tracking.
    deduped = events.dropDuplicates(["key"])
    assert started(deduped, "stateful") == "MicroBatchExecution"


@pytest.mark.slow
def test_micro_batch_async_progress_tracking_runs_stateless_and_fails_a_stateful_query(
    spark, lab, kafka_topic, tmp_path, stop_after
):
    """In micro-batch mode asyncProgressTrackingEnabled is yours to set, and only a stateless query takes it: a
    stateful one (dropDuplicates) fails once running (Spark's performance-tips guide lists the limitation)."""
    from snippets.reference.errors import error_class, read_events, to_kafka

    source = kafka_topic()
    topics.produce_json(lab.kafka_bootstrap, source, ({"id": i, "k": "a"} for i in range(5)))

    def started(stateful: bool):
        events = read_events(spark, lab.kafka_bootstrap, source)
        if stateful:
            events = events.dropDuplicates(["id"])
        writer = to_kafka(events, lab.kafka_bootstrap, kafka_topic(), str(tmp_path / str(stateful)))
        writer = writer.outputMode("update").option("asyncProgressTrackingEnabled", "true")
        return stop_after(writer.trigger(processingTime="1 second").start())

    stateless = started(stateful=False)
    plans.wait_for_first_batch(stateless, timeout_s=90)
    assert execution_kind(stateless) == "AsyncProgressTrackingMicroBatchExecution"
    stateless.stop()
    stateful = started(stateful=True)
    with pytest.raises(Exception) as failed:
        stateful.awaitTermination(90)
    assert error_class(failed.value) == "IllegalArgumentException"
    assert "Stateful streaming queries does not support async progress tracking" in str(failed.value)


def _switch(spark, bootstrap: str, source: str, sink: str, checkpoint: str, stateful: bool, first: str, second: str):
    """Run `first` ("micro-batch": availableNow, or "real-time") on a checkpoint with 5 rows, then 5 more rows and
    `second` on the same checkpoint. Returns (error class or None, rows in the sink)."""
    from snippets.reference.errors import error_class, read_events, to_kafka

    def start(kind: str):
        events = read_events(spark, bootstrap, source)
        if stateful:
            events = events.dropDuplicates(["id"])
        writer = to_kafka(events, bootstrap, sink, checkpoint).outputMode("update")
        if kind == "micro-batch":
            return writer.trigger(availableNow=True).start()
        return writer.trigger(realTime="5 seconds").start()

    topics.produce_json(bootstrap, source, ({"id": i, "k": "a"} for i in range(5)))
    query = start(first)
    if first == "micro-batch":
        query.awaitTermination()
    else:
        topics.read_all(bootstrap, sink, expected=5, timeout_s=60)
        # Stop once a batch holding the rows is committed; stopping earlier leaves them to be replayed.
        from rtm_lab.waiting import wait_until

        wait_until(lambda: (Path(checkpoint) / "commits" / "0").exists(), 60, "the first real-time commit")
        query.stop()
    topics.produce_json(bootstrap, source, ({"id": i, "k": "a"} for i in range(5, 10)))
    query = start(second)
    try:
        if second == "micro-batch":
            query.awaitTermination(120)
        else:
            plans.wait_for_real_time_scan(query, timeout_s=90)
            topics.read_all(bootstrap, sink, expected=10, timeout_s=30)
            query.awaitTermination(1)
    except Exception as exc:
        return error_class(exc), len(topics.read_all(bootstrap, sink, expected=10, timeout_s=2))
    finally:
        query.stop()
    return None, len(topics.read_all(bootstrap, sink, expected=10, timeout_s=10))


@pytest.mark.slow
@pytest.mark.parametrize("stateful", [False, True], ids=["stateless", "stateful"])
def test_micro_batch_checkpoint_cannot_switch_to_real_time_but_back_works(spark, lab, kafka_topic, tmp_path, stateful):
    """A checkpoint written by a micro-batch query (format v1, Spark's default) is refused by real-time mode once
    running, stateless or not; a real-time checkpoint (v2, RocksDB) is taken by a micro-batch query, which goes on
    from the committed offsets."""
    forward = _switch(
        spark,
        lab.kafka_bootstrap,
        kafka_topic(),
        kafka_topic(),
        str(tmp_path / "a"),
        stateful,
        "micro-batch",
        "real-time",
    )
    assert forward[0] == "STREAMING_REAL_TIME_MODE.CHECKPOINT_FORMAT_V1_NOT_SUPPORTED", forward
    back = _switch(
        spark,
        lab.kafka_bootstrap,
        kafka_topic(),
        kafka_topic(),
        str(tmp_path / "b"),
        stateful,
        "real-time",
        "micro-batch",
    )
    assert back == (None, 10), back  # every row once: the micro-batch query read only what real-time left


# ---- Soft defaults (SPARK-58659): what a real-time query sets for itself when you have not ---------------------

PROVIDER = "spark.sql.streaming.stateStore.providerClass"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
FORMAT_VERSION = "spark.sql.streaming.stateStore.checkpointFormatVersion"
SORT_BEFORE_REPARTITION = "spark.sql.execution.sortBeforeRepartition"
SOFT_DEFAULT_KEYS = (PROVIDER, CHANGELOG, FORMAT_VERSION, SORT_BEFORE_REPARTITION)


def recorded_confs(checkpoint: Path, batch: int = 0) -> dict[str, str]:
    """The session settings Spark wrote into the offset log for `batch` (offsets/N: a version line, then the
    batch's metadata as JSON, whose "conf" holds the settings a restart must keep)."""
    lines = (checkpoint / "offsets" / str(batch)).read_text().splitlines()
    return json.loads(lines[1])["conf"]


def query_session_conf(query, key: str) -> str:
    """A setting as the running query's own session sees it: Spark starts each query on a copy of your session."""
    return query._jsq.streamingQuery().sparkSessionForStream().conf().get(key)


def _deduplicating_query(spark, lab, kafka_topic, checkpoint: Path, stop_after):
    """A stateful real-time query, Kafka to Kafka: dropDuplicates on the key, one source partition."""
    from snippets.reference.errors import read_events, to_kafka

    source = kafka_topic(partitions=1)
    events = read_events(spark, lab.kafka_bootstrap, source).dropDuplicates(["id"])
    writer = to_kafka(events, lab.kafka_bootstrap, kafka_topic(partitions=1), str(checkpoint)).outputMode("update")
    query = stop_after(writer.trigger(realTime="5 seconds").start())
    plans.wait_for_real_time_scan(query, timeout_s=90)
    # Rows with a repeated key, so the first batch has state to write.
    topics.produce_json(lab.kafka_bootstrap, source, ({"id": i % 2, "k": "a"} for i in range(4)))
    return query


@pytest.mark.slow
def test_soft_defaults_read_back_from_a_running_stateful_query_and_an_explicit_setting_wins(
    spark, lab, kafka_topic, tmp_path, stop_after
):
    """A dropDuplicates query started with none of the soft-default settings: each default read back from what the
    query wrote or runs with, not from the configuration. Beside it, the same query with changelog checkpointing
    set to false by the user: that setting wins, and the state is written without changelog files."""
    from rtm_lab.waiting import wait_until

    assert all(spark.conf.get(key, None) is None for key in SOFT_DEFAULT_KEYS)
    defaults, explicit = tmp_path / "defaults", tmp_path / "explicit"
    # 1 source and 1 shuffle partition each: both queries' tasks fit the session's 4 slots at once.
    with session_confs(spark, {"spark.sql.shuffle.partitions": "1"}):
        by_default = _deduplicating_query(spark, lab, kafka_topic, defaults, stop_after)
        with session_confs(spark, {CHANGELOG: "false"}):
            overridden = _deduplicating_query(spark, lab, kafka_topic, explicit, stop_after)
    for checkpoint in (defaults, explicit):
        # A batch's state is written when its tasks end, at the batch end; its commit follows.
        wait_until(lambda c=checkpoint: (c / "commits" / "0").exists(), 90, f"the first commit in {checkpoint.name}")
    state_files = {c: sorted(p.name for p in (c / "state").rglob("*") if p.is_file()) for c in (defaults, explicit)}

    # The RocksDB state store: the provider the offset log recorded for batch 0.
    assert recorded_confs(defaults)[PROVIDER] == ROCKSDB
    # Changelog checkpointing: the state store wrote a changelog file per partition, not a snapshot.
    assert any(name.endswith(".changelog") for name in state_files[defaults]), state_files[defaults]
    # Checkpoint format v2: the commit log is written in its version 2, which carries the state's unique ids.
    commit = (defaults / "commits" / "0").read_text().splitlines()
    assert commit[0] == "v2" and "stateUniqueIds" in commit[1], commit
    # sortBeforeRepartition off: written nowhere in the checkpoint, so read from the query's own session.
    assert query_session_conf(by_default, SORT_BEFORE_REPARTITION) == "false"
    # A stateful query keeps synchronous progress tracking (asynchronous is the stateless default, tested above).
    assert execution_kind(by_default) == "MicroBatchExecution"
    # Spark set all of this on the query's copy of the session: yours still has none of them.
    assert all(spark.conf.get(key, None) is None for key in SOFT_DEFAULT_KEYS)

    # The user's explicit false is kept: no changelog files, RocksDB snapshots instead, still RocksDB and v2.
    assert query_session_conf(overridden, CHANGELOG) == "false"
    assert not any(name.endswith(".changelog") for name in state_files[explicit]), state_files[explicit]
    assert any(name.endswith(".zip") for name in state_files[explicit]), state_files[explicit]
    assert recorded_confs(explicit)[PROVIDER] == ROCKSDB
    assert (explicit / "commits" / "0").read_text().startswith("v2\n")


HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("key", "value"), [(PROVIDER, HDFS), (FORMAT_VERSION, "1")], ids=["hdfs-state-store", "checkpoint-format-v1"]
)
def test_an_explicit_value_real_time_mode_cannot_run_with_fails_at_start(spark, lab, kafka_topic, tmp_path, key, value):
    """Where a soft default is a requirement, an explicit other value is refused at start(), naming the setting
    (sortBeforeRepartition=true: tests/reference/test_errors.py, the incompatible_conf mistake)."""
    from snippets.reference.errors import error_class, read_events, to_kafka

    events = read_events(spark, lab.kafka_bootstrap, kafka_topic()).dropDuplicates(["id"])
    writer = to_kafka(events, lab.kafka_bootstrap, kafka_topic(), str(tmp_path / "checkpoint")).outputMode("update")
    with session_confs(spark, {key: value}), pytest.raises(Exception) as refused:
        writer.trigger(realTime="5 seconds").start().stop()
    assert error_class(refused.value) == "STREAMING_REAL_TIME_MODE.SQL_CONFIGURATION_NOT_SUPPORTED"
    assert key in str(refused.value)


ALLOW_V1 = "spark.sql.streaming.realTimeMode.dangerouslyAllowCheckpointV1.enabled"


def test_allowing_checkpoint_v1_is_off_by_default_and_warns_of_data_loss(spark):
    sql_conf = spark._jvm.org.apache.spark.sql.internal.SQLConf
    entry = sql_conf.STREAMING_REAL_TIME_MODE_DANGEROUSLY_ALLOW_CHECKPOINT_V1()
    assert (entry.key(), entry.defaultValueString()) == (ALLOW_V1, "false")
    assert "exposes the query to data loss on failure" in entry.doc()


@pytest.mark.slow
def test_allowing_checkpoint_v1_lets_real_time_mode_run_on_a_micro_batch_checkpoint(
    spark, lab, kafka_topic, tmp_path, stop_after
):
    """Without the setting a micro-batch checkpoint is refused (the switching test above). With it, a stateful
    real-time query runs on it from the committed offsets, and keeps what the checkpoint recorded: format v1 and the
    HDFS-backed state store, not RocksDB."""
    from rtm_lab.waiting import wait_until
    from snippets.reference.errors import read_events, to_kafka

    source, sink, checkpoint = kafka_topic(), kafka_topic(), tmp_path / "checkpoint"

    def writer():
        events = read_events(spark, lab.kafka_bootstrap, source).dropDuplicates(["id"])
        return to_kafka(events, lab.kafka_bootstrap, sink, str(checkpoint)).outputMode("update")

    topics.produce_json(lab.kafka_bootstrap, source, ({"id": i, "k": "a"} for i in range(5)))
    stop_after(writer().trigger(availableNow=True).start()).awaitTermination(120)
    topics.produce_json(lab.kafka_bootstrap, source, ({"id": i, "k": "a"} for i in range(5, 10)))
    with session_confs(spark, {ALLOW_V1: "true"}):
        query = stop_after(writer().trigger(realTime="5 seconds").start())
    topics.read_all(lab.kafka_bootstrap, sink, expected=10, timeout_s=90)
    wait_until(lambda: (checkpoint / "commits" / "1").exists(), 60, "the real-time batch's commit")
    assert query.exception() is None
    # Every row once, after the real-time batch's commit: 5 written in micro-batch mode, the 5 new ones in real time.
    written = [json.loads(r.value)["id"] for r in topics.read_all(lab.kafka_bootstrap, sink, expected=11, timeout_s=3)]
    assert sorted(written) == list(range(10)), written
    # What the real-time batch wrote: a version 1 commit, the HDFS-backed provider, delta files and no changelog.
    assert (checkpoint / "commits" / "1").read_text().startswith("v1\n")
    assert recorded_confs(checkpoint, 1)[PROVIDER].endswith(".HDFSBackedStateStoreProvider")
    state_files = [p.name for p in (checkpoint / "state").rglob("*") if p.is_file()]
    assert any(name == "2.delta" for name in state_files), state_files
    assert not any(name.endswith(".changelog") for name in state_files), state_files

"""docs/reference/advice-checked.md's rows that no other test covers: `current_timestamp()` inside a real-time batch,
and `spark.shuffle.manager` class names copied into a real-time set-up. The other rows cite the errors, concepts,
allowlist-off and version-matrix tests."""

import json
import subprocess
import sys
import time
from datetime import datetime

import pytest

from rtm_lab import plans, topics
from rtm_lab.probes.harness import RUNS
from snippets.reference.advice_checked import (
    MULTI_SHUFFLE_MANAGER,
    STREAMING_SHUFFLE_MANAGER,
    stamped_rows,
)
from snippets.reference.errors import error_class, foreach_batch

WAVE_GAP_S = 1.5  # the second wave is sent this long after the first, so its Kafka timestamps are later


def _instant(text: str) -> datetime:
    """A timestamp as to_json writes it (ISO 8601 with an offset)."""
    return datetime.fromisoformat(text)


@pytest.mark.slow
def test_current_timestamp_is_one_value_for_the_whole_batch(spark, lab, kafka_topic, checkpoint, stop_after):
    """Rows sent at two moments inside one real-time batch all carry the same current_timestamp(), earlier than any
    of them was produced; their Kafka timestamps differ."""
    source, sink = kafka_topic(), kafka_topic()
    query = stop_after(stamped_rows(spark, lab.kafka_bootstrap, source, sink, checkpoint))
    plans.wait_for_real_time_scan(query, 90)
    topics.produce_json(lab.kafka_bootstrap, source, ({"id": i, "k": "a"} for i in range(3)))
    time.sleep(WAVE_GAP_S)
    topics.produce_json(lab.kafka_bootstrap, source, ({"id": i, "k": "b"} for i in range(3, 6)))
    rows = [json.loads(r.value) for r in topics.read_all(lab.kafka_bootstrap, sink, expected=6, timeout_s=90)]
    # No batch ended while the rows passed: a real-time query reports progress only when a batch ends.
    assert query.recentProgress == []
    assert sorted(r["id"] for r in rows) == list(range(6))
    stamps = {_instant(r["stamped_at"]) for r in rows}
    kafka_times = {_instant(r["ts"]) for r in rows}
    assert len(stamps) == 1, stamps
    assert len(kafka_times) > 1, kafka_times
    assert max(stamps) < min(kafka_times), (stamps, kafka_times)


def test_the_allowlist_refusal_says_switching_it_off_is_at_your_own_risk(spark, lab, kafka_topic, checkpoint):
    """The refusal names the switch and the risk: what the allowlist row quotes."""
    with pytest.raises(Exception) as refused:
        foreach_batch(spark, lab.kafka_bootstrap, kafka_topic(), kafka_topic(), checkpoint).stop()
    assert error_class(refused.value) == "STREAMING_REAL_TIME_MODE.OPERATOR_OR_SINK_NOT_IN_ALLOWLIST"
    message = str(refused.value)
    assert "set spark.sql.streaming.realTimeMode.allowlistCheck to false" in message, message
    assert "you agree to run the query at your own risk" in message, message


def test_shuffle_manager_cannot_be_set_on_a_running_session(spark):
    """spark.conf.set() refuses the core setting, and Spark's defaults already route real-time shuffles."""
    with pytest.raises(Exception) as refused:
        spark.conf.set("spark.shuffle.manager", MULTI_SHUFFLE_MANAGER)
    assert error_class(refused.value) == "CANNOT_MODIFY_CONFIG"
    core_conf = getattr(getattr(spark._jvm.org.apache.spark.internal.config, "package$"), "MODULE$")
    regular, pipelined = core_conf.SHUFFLE_MANAGER(), core_conf.SHUFFLE_MANAGER_INCREMENTAL()
    assert (regular.key(), regular.defaultValueString()) == ("spark.shuffle.manager", "sort")
    assert (pipelined.key(), pipelined.defaultValueString()) == ("spark.shuffle.manager.incremental", "streaming")
    assert "pipelined" in pipelined.doc()


@pytest.mark.slow
@pytest.mark.timeout(600)  # a child JVM and two SparkContexts; about 40 s on a loaded 2-core machine
def test_shuffle_manager_class_names_at_session_start(lab, tmp_path):
    """In a session of its own: MultiShuffleManager starts and a dropDuplicates query runs in real-time mode;
    StreamingShuffleManager stops the session from starting."""
    command = [sys.executable, "-m", "rtm_lab.probes.shuffle_manager", "--bootstrap", lab.kafka_bootstrap]
    command += ["--workdir", str(tmp_path), MULTI_SHUFFLE_MANAGER, STREAMING_SHUFFLE_MANAGER]
    done = subprocess.run(command, capture_output=True, text=True, timeout=540, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    multi, streaming = (json.loads(line) for line in done.stdout.splitlines() if line.startswith("{"))
    assert (multi["session"], multi["conf"], multi["query"]) == ("starts", MULTI_SHUFFLE_MANAGER, RUNS), multi
    assert (streaming["session"], streaming["error"]) == ("fails", "IllegalArgumentException"), streaming
    assert "spark.shuffle.manager must be a BlockingShuffleManager" in streaming["message"]
    assert "spark.shuffle.manager.incremental" in streaming["message"]

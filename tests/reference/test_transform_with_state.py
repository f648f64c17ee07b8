"""Python transformWithState: one handleInputRows call per key per micro-batch; under real-time mode OSS 4.3 fails."""

import json
import subprocess
import sys
import tempfile

import pytest
from pyspark.errors import StreamingQueryException

from rtm_lab import plans, topics
from rtm_lab.apps.transform_with_state import STATE_STORE, wait_for_table_rows
from rtm_lab.probes.harness import session_confs
from rtm_lab.waiting import wait_until
from snippets.reference.errors import error_class
from snippets.reference.transform_with_state import kafka_rows, record_calls, start_micro_batch, start_real_time

# Every test here runs Spark queries for many seconds (or a benchmark): not part of the fast loop.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def jvm_process(lab):
    # spark.jars is fixed when a session starts, so the JVM processor runs in its own process with its jar added;
    # started first, it runs while the in-process tests do.
    cmd = [sys.executable, "-m", "rtm_lab.apps.transform_with_state", "--bootstrap", lab.kafka_bootstrap]
    # Spark's log goes to a file: a full stderr pipe would stall the process while nobody reads it.
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
        proc.log = log
        yield proc
        if proc.poll() is None:
            proc.kill()


@pytest.fixture
def rocksdb(spark):
    with session_confs(spark, STATE_STORE):
        yield


def test_handle_input_rows_is_called_once_per_key_per_micro_batch(
    spark, lab, kafka_topic, checkpoint, rocksdb, stop_after
):
    source = kafka_topic(partitions=2)
    topics.produce_json(lab.kafka_bootstrap, source, [{"id": k} for k in "aaabbc"])
    calls_df = record_calls(kafka_rows(spark, lab.kafka_bootstrap, source))
    query = stop_after(start_micro_batch(calls_df, checkpoint, "tws_calls"))
    calls = wait_for_table_rows(spark, query, "tws_calls", 3)
    # Six rows, three keys, one batch: three calls, each handed all of its key's rows at once.
    assert sorted((r.key, r.rows_in_call, r.rows_so_far) for r in calls) == [("a", 3, 3), ("b", 2, 2), ("c", 1, 1)]

    # A later batch: one more call per key with new rows; the state carried the running totals.
    topics.produce_json(lab.kafka_bootstrap, source, [{"id": k} for k in "aac"])
    calls = wait_for_table_rows(spark, query, "tws_calls", 5)
    later = sorted((r.key, r.rows_in_call, r.rows_so_far) for r in calls[3:])
    assert later == [("a", 2, 5), ("c", 1, 2)], calls


def test_python_transform_with_state_fails_under_real_time_mode(spark, lab, kafka_topic, checkpoint, stop_after):
    source, sink = kafka_topic(partitions=2), kafka_topic(partitions=2)
    topics.produce_json(lab.kafka_bootstrap, source, [{"id": k} for k in "aab"])
    query = stop_after(start_real_time(spark, lab.kafka_bootstrap, source, sink, checkpoint))
    # start() accepts it; the failure comes when the first batch runs.
    error = wait_until(lambda: plans.failure(query), 120, "the query to fail", interval_s=0.5)
    assert error_class(error) == "STDS_FAILED_TO_READ_OPERATOR_METADATA", str(error)[:2000]
    assert topics.read_all(lab.kafka_bootstrap, sink, expected=1, timeout_s=2) == []


def test_state_ttl_needs_a_time_mode(spark, lab, kafka_topic, checkpoint, rocksdb, stop_after):
    source = kafka_topic(partitions=1)
    topics.produce_json(lab.kafka_bootstrap, source, [{"id": "a"}])
    calls_df = record_calls(kafka_rows(spark, lab.kafka_bootstrap, source), time_mode="None")
    query = stop_after(start_micro_batch(calls_df, checkpoint, "tws_no_time"))
    with pytest.raises(StreamingQueryException) as failure:
        wait_for_table_rows(spark, query, "tws_no_time", 1)
    # The check runs in the Python worker when the processor is set up: the query's error class is the worker's
    # PYTHON_EXCEPTION, and the TTL rule is named in its message.
    assert error_class(failure.value) == "PYTHON_EXCEPTION", str(failure.value)[:2000]
    assert "STATEFUL_PROCESSOR_INCORRECT_TIME_MODE_TO_ASSIGN_TTL" in str(failure.value)


def test_jvm_processor_is_called_once_per_row_under_real_time_mode(jvm_process):
    out, _ = jvm_process.communicate(timeout=300)
    jvm_process.log.seek(0)
    assert jvm_process.returncode == 0, jvm_process.log.read()[-3000:]
    result = json.loads(out.splitlines()[-1])

    # The same JVM processor in micro-batch mode: one call per key, handed all of the key's rows.
    micro = sorted((c["key"], c["rows_in_call"], c["rows_so_far"]) for c in result["micro_batch"])
    assert micro == [("a", 3, 3), ("b", 2, 2), ("c", 1, 1)]

    # Real-time mode: one call per row, even for the six rows already waiting in Kafka when the query started.
    assert result["real_time_error"] is None
    plan = result["real_time_plan"]
    assert "RealTimeStreamScan" in plan and "TransformWithState" in plan, plan
    calls = result["real_time"]
    assert len(calls) == result["rows"] == 9
    assert all(c["rows_in_call"] == 1 for c in calls), calls
    for key, expected in (("a", 5), ("b", 3), ("c", 1)):
        assert sorted(c["rows_so_far"] for c in calls if c["key"] == key) == list(range(1, expected + 1))

"""transformWithState run by the tests: the JVM twin of the page's processor in micro-batch and in real-time mode.

    python -m rtm_lab.apps.transform_with_state --bootstrap HOST:PORT

prints one JSON object: the calls the JVM CallRecorderProcessor (snippets/jvm) made in each mode. It runs in its own
process because its jar must be in `spark.jars` when the session starts.
"""

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time

from pyspark.sql import Row

from rtm_lab import plans, topics
from rtm_lab.waiting import WaitTimeout, wait_until
from snippets.reference.transform_with_state import BATCH_DURATION, jvm_record_calls, start_micro_batch

STATE_STORE = {
    # transformWithState needs the RocksDB state store; real-time mode sets it by default, micro-batch does not.
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
}


def wait_for_table_rows(spark, query, table: str, count: int, timeout_s: float = 90.0) -> list[Row]:
    """The memory table's rows once it holds `count` (or what it holds at the timeout); raises if the query failed."""
    rows: list[Row] = []

    def filled() -> bool:
        nonlocal rows
        rows = spark.table(table).collect()
        return len(rows) >= count

    with contextlib.suppress(WaitTimeout):
        wait_until(filled, timeout_s, f"{count} rows in {table}", interval_s=0.5, abort=lambda: plans.failure(query))
    return rows


def run_jvm(spark, bootstrap: str, keys: str = "aaabbc", live_keys: str = "aab", timeout_s: float = 90.0) -> dict:
    """The JVM processor over the same rows in micro-batch mode and in real-time mode; returns both call lists."""
    source = topics.create_topic(bootstrap, topics.unique_name("tws-jvm"), 2)
    sink = topics.create_topic(bootstrap, topics.unique_name("tws-jvm-out"), 1)
    topics.produce_json(bootstrap, source, [{"id": k} for k in keys])
    result: dict = {"rows": len(keys) + len(live_keys)}
    try:
        calls_df = jvm_record_calls(spark, topics.kafka_stream(spark, bootstrap, source))
        query = start_micro_batch(calls_df, tempfile.mkdtemp(prefix="tws-jvm-mb-"), "jvm_calls")
        rows = wait_for_table_rows(spark, query, "jvm_calls", len(set(keys)))
        query.stop()
        result["micro_batch"] = [json.loads(r.value) for r in rows]

        calls_df = jvm_record_calls(spark, topics.kafka_stream(spark, bootstrap, source))
        query = topics.start_real_time_to_kafka(calls_df, bootstrap, sink, BATCH_DURATION)
        calls: list[dict] = []
        sent_live = False

        def all_rows_called() -> bool:
            nonlocal calls, sent_live
            calls = [json.loads(r.value) for r in topics.read_all(bootstrap, sink, expected=10**6, timeout_s=1)]
            if not sent_live and sum(c["rows_in_call"] for c in calls) >= len(keys):
                # Live rows, sent while the real-time batch runs; about 200 ms apart.
                for k in live_keys:
                    topics.produce_json(bootstrap, source, [{"id": k}])
                    time.sleep(0.2)
                sent_live = True
            return query.exception() is not None or sum(c["rows_in_call"] for c in calls) >= result["rows"]

        # What came out by the deadline is the result either way: the test asserts on it.
        with contextlib.suppress(WaitTimeout):
            wait_until(all_rows_called, timeout_s, "a call for every row", interval_s=0)
        result["real_time"] = calls
        result["real_time_error"] = str(query.exception())[:2000] if query.exception() else None
        result["real_time_plan"] = query._jsq.explainInternal(False)
        query.stop()
    finally:
        topics.delete_topic(bootstrap, source)
        topics.delete_topic(bootstrap, sink)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"), help="Kafka bootstrap")
    args = parser.parse_args(argv)
    if not args.bootstrap:
        parser.error('no Kafka: pass --bootstrap or run `eval "$(python scripts/lab.py env)"` first')
    from rtm_lab.snippet_jar import session_jars
    from rtm_lab.spark import spark_session

    # spark.jars is read when the session starts: the snippets jar goes in beside the Kafka connector.
    conf = {**STATE_STORE, "spark.jars": session_jars()}
    print(json.dumps(run_jvm(spark_session("transform-with-state", conf=conf), args.bootstrap)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

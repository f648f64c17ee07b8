"""Checkpoints on object storage (docs/guides/checkpoint-storage.md): real-time queries checkpoint through `s3a://` to
the lab's S3 store (versitygw), survive a SIGKILL of their driver, and, through the delay proxy, show what one batch
boundary asks of the store.

The restart. One `spark-submit` driver (snippets/guides/s3_checkpoints.py) runs two Kafka -> Kafka queries:
`transform` (stateless) and `dedup` (dropDuplicates on id: its state lives in the checkpoint). The test waits until
both have committed every record of a first wave (read back through the S3 API), kills the driver's process group,
produces a second wave while it is down (new ids, and repeats of ids the first wave had), and starts a new driver on
the same checkpoints, this one with the stream-based checkpoint file manager. Asserted: the stateless output holds
every record once; the dedup output holds every id once, so the repeats sent while the driver was down were dropped
by state restored from the store; the store's keys appear in no command line or log, and Spark's event log shows both
S3A key settings redacted (as Spark settings and as Hadoop properties).

The boundary. A real real-time query checkpoints on the store through the delay proxy, every request held DELAY_MS,
and the proxy's log says what one batch boundary asks of the store. The query is the stateless Kafka -> Kafka
passthrough with progress tracking synchronous (async off), the case whose boundary writes both metadata logs while
no record comes out. The request counts are exact: each log write is the same sequence of requests from Hadoop's S3A
connector. The stall is bounded below, not timed against another run.

Both spend most of their time waiting: for a JVM to start, for a batch to end, for a stall at 100 ms per request. So
the boundary's run (`boundary_run`) starts in a thread when the restart test starts, and the restart test ends only
once that run has: the run stays inside a test's turn, where under `-n 2` no `alone` test restarts a service beneath
it. The boundary's test, last in the module, reads the result (run alone, it starts the run itself). The two share
no setting: the restart checkpoints to the store directly, the boundary's run through the proxy. Neither assertion
depends on the machine's load: the restart waits for commits with minutes to spare, and the boundary's stall is
bounded below, which load can only lengthen.
"""

import json
import os
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from rtm_lab import lab as lab_module
from rtm_lab import processes, s3_proxy, s3store, topics
from rtm_lab.apps.s3_checkpointed import S3Driver
from rtm_lab.benchmarks import checkpoint_requests
from rtm_lab.benchmarks import latency_child as latency
from rtm_lab.benchmarks.checkpoint_storage import ASYNC_BY_DEFAULT
from rtm_lab.s3a import STREAM_FILE_MANAGER
from rtm_lab.waiting import wait_until
from snippets.guides import s3_checkpoints

pytestmark = pytest.mark.slow

DELAY_MS = 100
# One metadata log file (offsets/N or commits/N) written through S3A with Spark's default checkpoint file manager:
# write a temporary file, then rename it, and a rename on S3 is a COPY and a DELETE. The HEADs and LISTs are S3A's
# existence checks (the file, its folder, the temporary file), asked again around the write and the rename.
ONE_LOG_WRITE = {"PUT": 1, "COPY": 1, "DELETE": 1, "HEAD": 12, "LIST": 9}
BOUNDARY_TEST = "test_a_synchronous_boundary_waits_for_two_log_writes_of_24_requests_in_a_row"


def _sync_boundary_run(kafka_bootstrap: str, proxy_address: str) -> dict:
    """A stateless real-time query with synchronous progress tracking, its checkpoint on the store through the proxy."""
    # The child sets the delay once the query has started (its start-up makes a hundred requests or more).
    extra = ["--observe-boundaries", "--checkpoint-store", proxy_address, "--store-delay-ms", str(DELAY_MS)]
    extra += ["--spark-conf", f"{ASYNC_BY_DEFAULT}=false"]
    # No warm-up left out: the first boundary after the priming events is then far enough into the production
    # (WINDOW_BEFORE_MS) to count, and 16 s of production reach past it by more than its stall.
    return latency.run_child("realtime", kafka_bootstrap, 200.0, 16.0, 0.0, latency.settings("5 seconds"), None, extra)


def _selected(request: pytest.FixtureRequest, name: str) -> bool:
    return any(item.name == name and item.module is request.module for item in request.session.items)


@pytest.fixture(scope="module")
def boundary_run(lab, s3_store) -> Iterator[Future]:
    """The boundary test's run, in a thread of its own (the delay proxy starts with the store)."""
    proxy = lab_module.status().s3_proxy
    assert proxy.running, "the delay proxy did not start with the store"
    with ThreadPoolExecutor(1, thread_name_prefix="boundary-run") as pool:
        yield pool.submit(_sync_boundary_run, lab.kafka_bootstrap, proxy.address)


@pytest.fixture
def beside_the_boundary_run(request: pytest.FixtureRequest) -> Iterator[None]:
    """For a test that runs while the boundary test's run goes on (when that test is selected): the run starts with
    this test, and this test ends once the run has."""
    if not _selected(request, BOUNDARY_TEST):
        yield
        return
    run = request.getfixturevalue("boundary_run")
    yield
    run.exception()  # waits for the run's end; what it raised, its own test reports


FIRST_WAVE = [*range(0, 200), *range(0, 50)]  # 200 ids, 50 of them twice
SECOND_WAVE = [*range(200, 300), *range(0, 50)]  # 100 new ids, and 50 the first wave had
ONE_SECOND_FLOOR = {"spark.sql.streaming.realTimeMode.minBatchDuration": "1s"}
COMMIT_WAIT_S = 240  # two driver start-ups on a loaded 2-core machine fit well inside this


def produce(bootstrap: str, topic: str, ids: list[int]) -> None:
    events = [{"id": i, "user": f"u{i % 7}", "amount": 1.0, "created_ms": 0} for i in ids]
    topics.produce_json(bootstrap, topic, events)


def topic_ends(bootstrap: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "s3-checkpoint-test"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in (0, 1)}
    finally:
        consumer.close()


def wait_until_committed(driver: S3Driver, ends: dict[int, int]) -> None:
    """Until every query's last commit (read from the store) covers the source up to `ends`."""
    wait_until(
        lambda: all(driver.committed_offsets(name) == ends for name in driver.sinks),
        COMMIT_WAIT_S,
        f"both queries to commit up to {ends} in the s3a checkpoints",
        0.5,
        driver.died,
    )


def ids_in(bootstrap: str, topic: str, expected: int) -> Counter:
    return Counter(json.loads(r.value)["id"] for r in topics.read_all(bootstrap, topic, expected, timeout_s=30))


def test_snippet_settings_match_the_labs(s3_store):
    from rtm_lab import s3a

    keys = s3_store.credentials
    assert s3_checkpoints.s3a_settings(s3_store.endpoint, keys.access_key, keys.secret_key) == s3a.spark_conf(s3_store)


def test_killed_driver_resumes_from_s3a_checkpoints_with_nothing_lost(
    lab, s3_store, kafka_topic, tmp_path, beside_the_boundary_run
):
    bootstrap = lab.kafka_bootstrap
    source = kafka_topic(partitions=2)
    sinks = {"transform": kafka_topic(partitions=2), "dedup": kafka_topic(partitions=2)}
    prefix = f"tests/{uuid.uuid4().hex[:10]}"
    # One-second batches (Spark's floor lowered for the test): each wait for a commit is a second, not five.
    driver = S3Driver(s3_store, bootstrap, source, sinks, prefix, tmp_path, "1 second", spark_conf=ONE_SECOND_FLOOR)
    produce(bootstrap, source, FIRST_WAVE)
    try:
        started = driver.start()
        wait_until_committed(driver, topic_ends(bootstrap, source))
        first_commit_s = time.time() - started
        command_line = " ".join(processes.arguments(driver.pid))
        driver.kill()
        produce(bootstrap, source, SECOND_WAVE)
        # The new driver writes with Spark's stream-based checkpoint file manager (spark-hadoop-cloud 4.1.1 on Spark
        # 4.3.0): a class that failed to load would fail both queries at start.
        driver.file_manager = STREAM_FILE_MANAGER
        restarted = driver.start()
        wait_until_committed(driver, topic_ends(bootstrap, source))
        print(
            f"\nfirst wave committed {first_commit_s:.1f} s after the first start; the second, "
            f"{time.time() - restarted:.1f} s after the restart (each a spark-submit start, then a 1 s batch)"
        )
    finally:
        driver.stop()

    produced = Counter(FIRST_WAVE + SECOND_WAVE)
    assert ids_in(bootstrap, sinks["transform"], len(FIRST_WAVE + SECOND_WAVE)) == produced
    assert ids_in(bootstrap, sinks["dedup"], len(produced)) == Counter(set(produced))
    # The checkpoints, state included, are objects in the store: nothing was written to a local folder.
    for name in sinks:
        keys = driver.checkpoint_keys(name)
        assert {"metadata", "commits/0", "offsets/0"} <= set(keys), keys
    assert any(key.startswith("state/0/") for key in driver.checkpoint_keys("dedup"))
    # S3A's default (fs.s3a.checksum.generation=false) sent no CRC32 trailer with the PUT: the store kept a CRC64NVME
    # of its own (versitygw's POSIX backend keeps an object's checksums in an extended attribute of its file).
    offsets = s3store.data_dir() / s3store.BUCKET / prefix / "transform" / "offsets" / "0"
    checksums = json.loads(os.getxattr(offsets, "user.checksums"))
    assert checksums["Algorithm"] == "CRC64NVME" and checksums["CRC32"] is None, checksums
    # The store's keys reached the driver by environment: not on its command line, nor in its logs. Spark's event log
    # lists both settings, redacted by the default spark.redaction.regex.
    logs = "".join(path.read_text() for path in tmp_path.glob("s3-driver-*.log"))
    events = "".join(path.read_text() for path in driver.event_log_dir.rglob("events_*"))
    for key in (s3_store.credentials.access_key, s3_store.credentials.secret_key):
        assert key not in command_line and key not in logs and key not in events
    for setting in ("fs.s3a.access.key", "fs.s3a.secret.key"):  # as Spark settings, and as Hadoop properties
        assert f'"spark.hadoop.{setting}":"*********(redacted)"' in events
        assert f'"{setting}":"*********(redacted)"' in events


@pytest.mark.timing
def test_a_synchronous_boundary_waits_for_two_log_writes_of_24_requests_in_a_row(boundary_run: Future, s3_store):
    # The run began with the restart test above, when both are selected (see the module's text).
    result = boundary_run.result(timeout=600)
    assert result["engine"] == "MicroBatchExecution"  # async progress tracking off
    assert result["missing"] == 0
    assert result["store_delay_ms"] == DELAY_MS
    # The store's keys reach neither the proxy's log nor the child's command line (it reads them from the lab's file).
    logged = s3_proxy.log_path().read_text()
    assert s3_store.credentials.access_key not in logged and s3_store.credentials.secret_key not in logged
    lo, hi = result["run_span_ms"]
    requests = checkpoint_requests.of_run(
        s3_proxy.read_log(s3_proxy.log_path(), lo, hi + 1), result["checkpoint_folder"]
    )
    boundaries = checkpoint_requests.account(requests, result)["per_boundary"]
    assert boundaries, f"no boundary had records out on both sides: {result['progress']}"
    for b in boundaries:
        # The boundary's cycle: batch k's commit log and batch k + 1's offset log, nothing else.
        assert b["by_area"]["commits"] == ONE_LOG_WRITE
        assert b["by_area"]["offsets"] == ONE_LOG_WRITE
        assert b["by_area"]["state"] == {} and b["by_area"]["metadata"] == {}
        assert b["requests"] == 48
        # All 48 ran inside the stall, one after another: the driver's thread writes the logs in turn.
        assert b["data_path"] == 48
        assert b["critical_path"] == 48
        # In turn: the batch's offset log entry (its end offsets, known once its tasks ended), then its commit log's.
        assert [kind.split(":")[0] for kind in b["critical_path_kinds"]] == ["offsets"] * 24 + ["commits"] * 24
        # Each of them waited DELAY_MS before the store saw it, so the stall holds at least half of that chain.
        assert b["stall_ms"] >= 0.5 * b["critical_path"] * DELAY_MS

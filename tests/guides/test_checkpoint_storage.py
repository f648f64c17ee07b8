"""Checkpoint storage and tail latency (docs/guides/checkpoint-storage.md): a real real-time query checkpoints on the
lab's S3 store through the delay proxy, every request held DELAY_MS, and the proxy's log says what one batch boundary
asks of the store.

The query is the stateless Kafka -> Kafka passthrough with progress tracking synchronous (async off), the case whose
boundary writes both metadata logs while no record comes out. The request counts are exact: each log write is the
same sequence of requests from Hadoop's S3A connector. The stall is bounded below, not timed against another run.
"""

import pytest

from rtm_lab import lab as lab_module
from rtm_lab import s3_proxy
from rtm_lab.benchmarks import checkpoint_requests
from rtm_lab.benchmarks import latency_child as latency
from rtm_lab.benchmarks.checkpoint_storage import ASYNC_BY_DEFAULT

DELAY_MS = 100
# One metadata log file (offsets/N or commits/N) written through S3A with Spark's default checkpoint file manager:
# write a temporary file, then rename it, and a rename on S3 is a COPY and a DELETE. The HEADs and LISTs are S3A's
# existence checks (the file, its folder, the temporary file), asked again around the write and the rename.
ONE_LOG_WRITE = {"PUT": 1, "COPY": 1, "DELETE": 1, "HEAD": 12, "LIST": 9}


@pytest.mark.slow
@pytest.mark.timing
def test_a_synchronous_boundary_waits_for_two_log_writes_of_24_requests_in_a_row(lab, s3_store):
    proxy = lab_module.status().s3_proxy  # started with the store (`lab.py up --with s3`)
    assert proxy.running, "the delay proxy did not start with the store"
    # The child sets the delay once the query has started (its start-up makes a hundred requests or more).
    extra = ["--observe-boundaries", "--checkpoint-store", proxy.address, "--store-delay-ms", str(DELAY_MS)]
    extra += ["--spark-conf", f"{ASYNC_BY_DEFAULT}=false"]
    # No warm-up left out: the first boundary after the priming events is then far enough into the production
    # (WINDOW_BEFORE_MS) to count, and 16 s of production reach past it by more than its stall.
    result = latency.run_child(
        "realtime", lab.kafka_bootstrap, 200.0, 16.0, 0.0, latency.settings("5 seconds"), None, extra
    )
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

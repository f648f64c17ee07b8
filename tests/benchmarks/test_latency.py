"""`scripts/bench.py latency --quick`: the command the benchmarks page is built from runs end to end, every mode
delivers every record, and real-time mode's median is far below micro-batch's with a 500 ms trigger.

Only a ratio is asserted: this suite shares a small machine, absolute times are not stable here.
"""

import contextlib
import json
import subprocess
import sys

import pytest

from rtm_lab.benchmarks.latency_child import (
    AD_MODES,
    AD_RTM_INTERVAL,
    MODES,
    PARTITIONS,
    REAL_TIME_SETTLE_S,
    RTM_INTERVAL,
)
from rtm_lab.paths import PROJECT_ROOT

# On a quiet 2-core machine real-time p50 is single-digit ms and micro-batch's hundreds; 5x holds even when the
# machine is so busy that micro-batch falls seconds behind.
MIN_P50_RATIO = 5


@pytest.mark.timeout(900)
@pytest.mark.slow
def test_quick_run_delivers_everything_and_real_time_is_far_faster(lab, tmp_path):
    out, plot = tmp_path / "latency.json", tmp_path / "latency.png"
    cmd = [sys.executable, "scripts/bench.py", "latency", "--quick", "--json", str(out), "--plot", str(plot)]
    done = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=880)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    result = json.loads(out.read_text())
    assert set(result) >= {"modes", "rate", "versions", "machine", "command", "runs"}
    assert result["command"].startswith("python scripts/bench.py latency --quick")
    assert result["versions"]["spark"] == "4.3.0"
    assert result["machine"]["cores"] >= 1
    assert list(result["modes"]) == list(MODES)
    for mode, m in result["modes"].items():
        assert set(m) >= {"n", "p50_ms", "p95_ms", "p99_ms", "max_ms", "missing"}, mode
        assert m["missing"] == 0 and m["delivered"] == m["sent"] > 0, (mode, m)
        assert m["n"] == m["sent"] - m["warmup_excluded"] > 0, (mode, m)
        assert m["p50_ms"] <= m["p95_ms"] <= m["p99_ms"] <= m["max_ms"], (mode, m)

    modes = result["modes"]
    assert modes["realtime"]["warmup_settled"], (modes["realtime"]["warmup_rule"], modes["realtime"]["warmup_s"])
    ratio = modes["microbatch_500ms"]["p50_ms"] / max(modes["realtime"]["p50_ms"], 1.0)
    assert ratio >= MIN_P50_RATIO, modes

    table = out.with_suffix(".md").read_text()
    assert "real-time mode" in table and result["command"] in table
    # The smoke run uses the default batch duration, so its few seconds hold no boundary, and the table says so.
    assert result["settings"]["rtm_interval"] == RTM_INTERVAL == "5 minutes"
    assert "crosses no batch boundary" in table
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.timeout(900)
@pytest.mark.slow
def test_quick_ad_attribution_run_compares_jvm_real_time_with_both_processors_in_micro_batch(lab, tmp_path):
    out = tmp_path / "ad.json"
    cmd = [sys.executable, "scripts/bench.py", "latency", "--pipeline", "ad_attribution", "--quick", "--json", str(out)]
    done = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=880)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    result = json.loads(out.read_text())
    assert result["pipeline"] == "ad_attribution"
    assert result["settings"]["rtm_interval"] == AD_RTM_INTERVAL  # the default batch duration, even in the smoke run
    modes = result["modes"]
    assert list(modes) == list(AD_MODES)
    for mode, m in modes.items():
        assert m["missing"] == 0 and m["delivered"] == m["expected"] > 0, (mode, m)
        # The slot calculator on the running query: one task per source partition plus the shuffle (state) stage.
        assert m["slots_needed"] == {"source": PARTITIONS, "shuffle": [2], "total": PARTITIONS + 2}, (mode, m)
        assert m["slots_needed"]["total"] <= m["slots"]
    for mode in ("microbatch_500ms_python", "microbatch_500ms"):
        # Micro-batch reports the state at every trigger; the real-time batch of 5 minutes did not end in the run.
        assert modes[mode]["state_rows_max"] > 0, modes[mode]
    assert modes["realtime"]["state_rows"] == []

    assert modes["realtime"]["warmup_settled"], (modes["realtime"]["warmup_rule"], modes["realtime"]["warmup_s"])
    ratio = modes["microbatch_500ms_python"]["p50_ms"] / max(modes["realtime"]["p50_ms"], 1.0)
    assert ratio >= MIN_P50_RATIO, modes
    table = out.with_suffix(".md").read_text()
    assert "real-time mode, JVM processor" in table and "Python processor" in table and result["command"] in table


SHUFFLE_WAIT = "spark.shuffle.streaming.networkBufferMaxWaitTimeMs"
# The two waits are set 400x apart so the effect dwarfs machine noise: at load 3 here, p50 711 ms with a 2 s wait
# against 13 ms with 5 ms (55x). What Spark's 50 ms default costs against 5 ms is a benchmark figure, not a test's.
LONG_WAIT_MS, SHORT_WAIT_MS = "2000", "5"
MIN_SHUFFLE_WAIT_RATIO = 10


@pytest.mark.timing
@pytest.mark.timeout(600)
@pytest.mark.slow
def test_a_shorter_streaming_shuffle_wait_cuts_the_stateful_real_time_median(lab, spark, tmp_path, quiet_machine):
    """Real-time mode's streaming shuffle holds a partly filled buffer up to `SHUFFLE_WAIT` (50 ms by default in
    Spark 4.3.0) before sending it on, so the wait sets the stateful query's median: the JVM ad-attribution query's
    median with a 2 s wait is at least 10x its median with 5 ms.

    The 2 s run goes beside other tests: their load can only lengthen its median, which the ratio's numerator is.
    The 5 ms run, the denominator, runs alone."""
    entry = getattr(getattr(spark._jvm.org.apache.spark.internal.config, "package$"), "MODULE$")
    default = entry.STREAMING_SHUFFLE_NETWORK_BUFFER_MAX_WAIT_TIME_MS()
    assert (default.key(), default.defaultValueString()) == (SHUFFLE_WAIT, "50")

    p50 = {}
    for wait in (LONG_WAIT_MS, SHORT_WAIT_MS):
        out = tmp_path / f"wait-{wait}.json"
        # Measured once the query keeps up (a cold JVM's catch-up is not the wait's doing): the backlog under what the
        # wait holds back by design plus a quarter second, for 2 s.
        settle_s = int(wait) / 1000 + REAL_TIME_SETTLE_S
        cmd = [
            *(
                sys.executable,
                "-m",
                "rtm_lab.benchmarks.latency_child",
                "--mode",
                "realtime",
                "--pipeline",
                "ad_attribution",
            ),
            *("--bootstrap", lab.kafka_bootstrap, "--rate", "1000", "--seconds", "4", "--warmup", "0"),
            *("--settle", f"realtime={settle_s}"),
            *("--batch-duration", AD_RTM_INTERVAL, "--spark-conf", f"{SHUFFLE_WAIT}={wait}", "--out", str(out)),
        ]
        with quiet_machine() if wait == SHORT_WAIT_MS else contextlib.nullcontext():
            done = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=280)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        result = json.loads(out.read_text())
        assert result["missing"] == 0 and result["delivered"] == result["expected"] > 0, result
        if wait == SHORT_WAIT_MS:  # the long wait's backlog only lengthens its median: settled or not, it counts
            assert result["warmup_settled"], (result["warmup_rule"], result["warmup_s"])
        p50[wait] = result["p50_ms"]
    assert p50[LONG_WAIT_MS] / max(p50[SHORT_WAIT_MS], 1.0) >= MIN_SHUFFLE_WAIT_RATIO, p50

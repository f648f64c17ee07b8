"""Every generated results table on the pages (latency, sink, Kafka tuning, sweep, ad attribution, version matrix,
errors, support matrix) matches what its generator renders from the committed results now: a hand edit or a stale
table fails."""

import subprocess
import sys


def test_every_generated_table_is_current():
    result = subprocess.run(
        [sys.executable, "scripts/tables.py", "all", "--check"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for table in (
        "latency.md",
        "sink.md",
        "sink-5s.md",
        "sink-dwell.md",
        "sink-stretch.md",
        "kafka-tuning.md",
        "latency-sweep.md",
        "ad_attribution_latency.md",
        "version-matrix.md",
    ):
        assert f"/docs/results/{table} is up to date" in result.stdout, result.stdout

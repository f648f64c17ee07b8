"""The event generator: exact counts of what it sent, every record stamped with its creation time, and an honest
exit code when the machine can't keep the asked rate."""

import json
import subprocess
import sys

from rtm_lab import topics
from rtm_lab.paths import PROJECT_ROOT


def generate_events(*args: str) -> subprocess.CompletedProcess:
    """Run the generator as a user would: its own process, its exit code, its output."""
    script = PROJECT_ROOT / "scripts" / "generate_events.py"
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=300)


def test_generator_counts_what_it_sent(lab, kafka_topic):
    topic = kafka_topic(partitions=2)
    result = generate_events(
        *("--topic", topic, "--bootstrap", lab.kafka_bootstrap, "--count", "600", "--rate", "3000"),
        *("--duplicate-pct", "10", "--bad-pct", "5", "--payload-bytes", "64", "--json"),
    )
    summary = json.loads(result.stdout)
    assert result.returncode == 0 and summary["reached_rate"] is True, result.stderr
    records = topics.read_all(lab.kafka_bootstrap, topic, expected=600, timeout_s=30)
    assert len(records) == summary["produced"] == 600
    good = []
    for record in records:
        try:
            body = json.loads(record.value)
        except ValueError:
            continue
        if isinstance(body.get("id"), int) and body["id"] >= 0:
            good.append(body)
    assert len({b["id"] for b in good}) == summary["distinct_keys"]
    assert len(good) == summary["distinct_keys"] + summary["duplicates"]
    assert 600 - len(good) == sum(summary["bad"].values())
    assert all(b["created_ms"] > 0 and len(b["payload"]) == 64 for b in good)


def test_generator_says_when_it_could_not_keep_the_rate(lab, kafka_topic):
    topic = kafka_topic(partitions=1)
    result = generate_events("--topic", topic, "--bootstrap", lab.kafka_bootstrap, "--count", "30000", "--rate", "1e7")
    assert result.returncode == 1
    assert "could not keep 10000000 rows/s" in result.stderr

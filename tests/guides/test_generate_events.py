"""The event generator: exact counts of what it sent, every record stamped with its creation time, and an honest
exit code when the machine can't keep the asked rate."""

import json
import sys
from pathlib import Path

from rtm_lab import topics

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import generate_events


def test_generator_counts_what_it_sent(lab, kafka_topic, capsys):
    topic = kafka_topic(partitions=2)
    code = generate_events.main(
        [
            *("--topic", topic, "--bootstrap", lab.kafka_bootstrap, "--count", "600", "--rate", "3000"),
            *("--duplicate-pct", "10", "--bad-pct", "5", "--payload-bytes", "64", "--json"),
        ]
    )
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["reached_rate"] is True
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


def test_generator_says_when_it_could_not_keep_the_rate(lab, kafka_topic, capsys):
    topic = kafka_topic(partitions=1)
    code = generate_events.main(
        ["--topic", topic, "--bootstrap", lab.kafka_bootstrap, "--count", "30000", "--rate", "10000000"]
    )
    assert code == 1
    assert "could not keep 10000000 rows/s" in capsys.readouterr().err

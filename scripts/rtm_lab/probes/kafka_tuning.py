"""Kafka consumer settings under real-time mode, measured: one Kafka -> Spark -> Kafka query per setting.

    python -m rtm_lab.probes.kafka_tuning --rows 200 --rate 50 --out docs/results/kafka-tuning

runs one real-time query per setting on the lab's broker (or KAFKA_BOOTSTRAP_SERVERS), sends the same paced rows to
each, and writes the latencies to OUT.json and a Markdown table to OUT.md (`scripts/tables.py kafka-tuning`
re-renders the table from the JSON). The source is the page's `low_latency_kafka_source`.
"""

import argparse
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from rtm_lab.generated import code_setting, generated_note, markdown_table
from rtm_lab.machine import run_span
from rtm_lab.probes.stamped_rows import LOG_APPEND_TIME, produce_paced, read_latencies
from rtm_lab.waiting import wait_until
from snippets.reference.kafka_tuning import BATCH_DURATION, low_latency_kafka_source
from snippets.reference.latency_metrics import stamped


@dataclass(frozen=True)
class Setting:
    name: str
    options: dict[str, str]


# How the footer shows the batch duration: as the trigger call a reader writes.
REAL_TIME_TEMPLATE = 'realTime="{}"'

# The same paced rows go through each setting. fetch.min.bytes far above one small record makes the broker wait
# for fetch.max.wait.ms: that is the case where the wait is the latency.
SETTINGS = (
    Setting(
        "defaults (min.bytes 1, max.wait 500 ms)", {"kafka.fetch.min.bytes": "1", "kafka.fetch.max.wait.ms": "500"}
    ),
    Setting("max.wait 50 ms", {"kafka.fetch.min.bytes": "1", "kafka.fetch.max.wait.ms": "50"}),
    Setting("min.bytes 1 MB, max.wait 500 ms", {"kafka.fetch.min.bytes": "1048576", "kafka.fetch.max.wait.ms": "500"}),
    Setting("min.bytes 1 MB, max.wait 50 ms", {"kafka.fetch.min.bytes": "1048576", "kafka.fetch.max.wait.ms": "50"}),
)


def measure(spark: SparkSession, bootstrap: str, setting: Setting, rows: int, rate: float) -> dict:
    """Run one real-time query with `setting`, send `rows` paced rows, return latency percentiles (ms)."""
    from rtm_lab import percentiles, topics

    source = topics.create_topic(bootstrap, topics.unique_name("tune-src"), 1, LOG_APPEND_TIME)
    sink = topics.create_topic(bootstrap, topics.unique_name("tune-sink"), 1, LOG_APPEND_TIME)
    raw = low_latency_kafka_source(spark, bootstrap, source, **setting.options)
    query = topics.start_real_time_to_kafka(stamped(raw), bootstrap, sink, BATCH_DURATION)
    try:
        # Warm up: wait until one row made it through, so the measured rows find the query already reading.
        def one_row_through() -> bool:
            produce_paced(bootstrap, source, 1, rate=1, first_id=-1)
            return bool(read_latencies(bootstrap, sink, 1, timeout_s=5))

        wait_until(one_row_through, 120, f"a row through the query for {setting.name!r}", 0, query.exception)
        already = len(read_latencies(bootstrap, sink, 10**6, timeout_s=1))
        produce_paced(bootstrap, source, rows, rate)
        measured = read_latencies(bootstrap, sink, already + rows, timeout_s=60)
        measured = [r for r in measured if json.loads(r["value"])["id"] >= 0]
    finally:
        query.stop()
        topics.delete_topic(bootstrap, source)
        topics.delete_topic(bootstrap, sink)
    return {
        "setting": setting.name,
        "options": setting.options,
        "rows_sent": rows,
        "rows_received": len(measured),
        "source_queuing": percentiles.summarize([r["source_queuing_ms"] for r in measured]),
        "kafka_to_kafka": percentiles.summarize([r["kafka_to_kafka_ms"] for r in measured]),
    }


def median_queuing(result: dict) -> float:
    return result["source_queuing"]["p50_ms"]


def markdown(report: dict) -> str:
    machine = report["machine"]
    header = ["consumer setting", "rows", "source queuing p50 / p95 (ms)", "Kafka to Kafka p50 / p95 / p99 (ms)"]
    rows = [
        [
            r["setting"],
            f"{r['rows_received']}/{r['rows_sent']}",
            f"{r['source_queuing']['p50_ms']:.0f} / {r['source_queuing']['p95_ms']:.0f}",
            f"{r['kafka_to_kafka']['p50_ms']:.0f} / {r['kafka_to_kafka']['p95_ms']:.0f} / {r['kafka_to_kafka']['p99_ms']:.0f}",
        ]
        for r in report["results"]
    ]
    lines = [generated_note("python scripts/tables.py kafka-tuning"), "", markdown_table(header, rows).rstrip("\n")]
    lines += [
        "",
        f"Measured in {run_span(len(report['results']), [report])} with `{report['command']}` on {machine['cores']} cores, "
        f"{machine['memory_gib']} GiB, {machine['cpu_model']}, {machine['os']}; Spark {report['versions']['spark']}, "
        f"Kafka broker {report['versions']['kafka_broker']}, `local[{report['slots']}]`, {code_setting(report, 'real_time_interval', REAL_TIME_TEMPLATE)}, "
        f"{report['rate']} rows/s, 1-partition topics with LogAppendTime; 1-minute load average at start "
        f"{machine.get('load_average_1m_at_start', 'not recorded')}.",
        "",
    ]
    return "\n".join(lines)


def run(spark: SparkSession, bootstrap: str, rows: int, rate: float, settings=SETTINGS, log=print) -> list[dict]:
    results = []
    for setting in settings:
        log(f"measuring {setting.name} ...")
        results.append(measure(spark, bootstrap, setting, rows, rate))
        log(f"  source queuing p50 {median_queuing(results[-1])} ms")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200, help="rows per setting (default 200)")
    parser.add_argument("--rate", type=float, default=50.0, help="rows per second (default 50)")
    parser.add_argument("--slots", type=int, default=4, help="local[N] (default 4)")
    parser.add_argument("--out", type=Path, default=Path("docs/results/kafka-tuning"), help="OUT.json and OUT.md")
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    args = parser.parse_args(argv)
    if not args.bootstrap:
        parser.error('no Kafka: pass --bootstrap or run `eval "$(python scripts/lab.py env)"` first')
    from rtm_lab import machine
    from rtm_lab.spark import spark_session

    # Latency on a busy machine says more about the machine than the setting: record how busy it was.
    load_at_start = round(os.getloadavg()[0], 2)
    began = machine.utc_now()
    spark = spark_session("kafka-tuning", slots=args.slots)
    results = run(spark, args.bootstrap, args.rows, args.rate, log=lambda m: print(m, file=sys.stderr, flush=True))
    spark.stop()
    report = {
        "started": began,
        "timestamp": machine.utc_now(),
        "command": f"python -m rtm_lab.probes.kafka_tuning --rows {args.rows} --rate {args.rate:g} --slots {args.slots}",
        "machine": {**machine.describe(), "load_average_1m_at_start": load_at_start},
        "versions": machine.pinned_versions(),
        "slots": args.slots,
        "real_time_interval": BATCH_DURATION,
        "rate": args.rate,
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(markdown(report))
    print(f"wrote {args.out.with_suffix('.json')} and {args.out.with_suffix('.md')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

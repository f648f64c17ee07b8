#!/usr/bin/env python3
"""The main demo: a steady stream through Kafka -> Spark real-time mode -> Kafka on the local lab, with live
progress and end-to-end latency percentiles measured from Kafka broker timestamps (LogAppendTime topics).

Starts the lab if it is not running (and stops it again at the end if it started it).
"""

import argparse
import sys
import tempfile
import threading
import time

from rtm_lab import lab, latency, loadgen, plans, topics
from rtm_lab.errors import LabError
from rtm_lab.spark import spark_session
from snippets.quickstart.kafka_to_kafka import start_pipeline

LOG_APPEND_TIME = {"message.timestamp.type": "LogAppendTime"}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="demo.py", description=__doc__)
    parser.add_argument("--rate", type=float, default=500, help="events per second (default 500)")
    parser.add_argument("--seconds", type=float, default=20, help="how long to produce (default 20)")
    parser.add_argument("--partitions", type=int, default=2, help="partitions of each topic (default 2)")
    parser.add_argument(
        "--warmup",
        type=float,
        default=6,
        help="seconds of events counted as warm-up (default 6: just over one 5 s real-time batch)",
    )
    args = parser.parse_args(argv)
    if args.rate <= 0 or args.seconds <= 0 or args.partitions < 1:
        parser.error("--rate and --seconds must be positive and --partitions at least 1")
    return args


def wait_until_running(query, timeout_s: float = 90.0) -> None:
    """Wait for the first real-time batch to finish: rows read in it were seen to reach the sink only at its end."""
    deadline = time.monotonic() + timeout_s
    while query.lastProgress is None:
        if query.exception() or time.monotonic() > deadline:
            raise LabError(f"The query did not start: {query.exception()}")
        time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    say = lambda line: print(line, flush=True)  # noqa: E731
    try:
        state, started = lab.up(log=say)
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        bootstrap = state.kafka_bootstrap
        source = topics.create_topic(bootstrap, topics.unique_name("demo-in"), args.partitions, LOG_APPEND_TIME)
        sink = topics.create_topic(bootstrap, topics.unique_name("demo-out"), args.partitions, LOG_APPEND_TIME)
        slots = args.partitions  # a stateless query runs one task per source partition, all at once
        say(f"spark     starting local[{slots}] ...")
        spark = spark_session("rtm-demo", slots=slots)
        query = start_pipeline(spark, bootstrap, source, sink, tempfile.mkdtemp(prefix="rtm-demo-ckpt-"))
        wait_until_running(query)
        say(
            f"query     running in real-time mode ({plans.REAL_TIME_SCAN} in the plan); producing "
            f"{args.rate:.0f} events/s for {args.seconds:.0f}s"
        )
        reader = latency.SinkLatencyReader(bootstrap, sink).start()
        result: dict = {}
        producer = threading.Thread(
            target=lambda: result.update(stats=loadgen.produce_at_rate(bootstrap, source, args.rate, args.seconds)),
            daemon=True,
        )
        producer.start()
        began = time.monotonic()
        while producer.is_alive():
            producer.join(timeout=2)
            recent = [ms for _, ms in reader.samples[-int(args.rate * 2) :]]
            window = latency.summarize(recent)
            say(
                f"  t={time.monotonic() - began:5.1f}s  delivered={len(reader.samples):>7}  "
                f"last 2 s: {latency.format_summary(window)}"
            )
        stats = result["stats"]
        deadline = time.monotonic() + 30
        while len(reader.seen_ids) < stats.sent and time.monotonic() < deadline:
            time.sleep(0.2)
        reader.stop()
        query.stop()
        warmup_ids = int(args.rate * args.warmup)
        steady = latency.summarize([ms for event_id, ms in reader.samples if event_id >= warmup_ids])
        everything = latency.summarize([ms for _, ms in reader.samples])
        missing = stats.sent - len(reader.seen_ids)
        say("")
        say(f"produced   {stats.sent} events at {stats.achieved_rate:.0f}/s (asked {args.rate:.0f}/s)")
        say(f"delivered  {len(reader.seen_ids)}  missing {missing}  duplicates {reader.duplicates}")
        say("end-to-end latency, Kafka in -> Kafka out (broker LogAppendTime stamps):")
        say(f"  after the first {args.warmup:.0f}s  {latency.format_summary(steady)}")
        say(f"  all events        {latency.format_summary(everything)}")
        return 0 if missing == 0 else 1
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        if started:
            lab.down(only=started, log=say)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Produce a steady stream of JSON events into Kafka for the Kafka -> real-time mode -> Postgres pipeline.

Every record carries its creation time (`created_ms`, the producer's clock), so the pipeline's end-to-end latency
can be measured at the sink. Duplicates re-send a recent key with a later `created_ms`; bad records (malformed
JSON, missing or null key, wrong type, oversized) exercise the dead-letter path.

  python scripts/generate_events.py --topic events --rate 2000 --seconds 30 --partitions 4 --duplicate-pct 5

Uses the lab's broker unless KAFKA_BOOTSTRAP_SERVERS or --bootstrap names another. Exits 1 when it could not
keep the asked rate (it says by how much), 2 on a setup error.
"""

import argparse
import json
import sys

from rtm_lab import cli, lab, loadgen, topics


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = cli.parser_from_doc("generate_events.py", __doc__)
    parser.add_argument("--topic", required=True, help="topic to write (created if missing)")
    parser.add_argument("--bootstrap", help="Kafka bootstrap servers (default: the lab's broker)")
    parser.add_argument("--rate", type=cli.positive_float, default=1000, help="records per second (default 1000)")
    amount = parser.add_mutually_exclusive_group()
    amount.add_argument("--seconds", type=cli.positive_float, help="how long to produce (default 10 s)")
    amount.add_argument("--count", type=cli.positive_int, help="how many records to produce, instead of --seconds")
    parser.add_argument(
        "--partitions", type=cli.positive_int, default=2, help="partitions when creating the topic (default 2)"
    )
    parser.add_argument(
        "--key-space", type=cli.positive_int, default=1_000_000_000, help="distinct keys before keys wrap (default 1e9)"
    )
    parser.add_argument("--duplicate-pct", type=cli.percent, default=0.0, help="%% of records re-sending a recent key")
    parser.add_argument("--bad-pct", type=cli.percent, default=0.0, help="%% of records that are bad input")
    parser.add_argument(
        "--payload-bytes", type=cli.non_negative_int, default=100, help="filler bytes per event (default 100)"
    )
    parser.add_argument("--seed", type=int, default=42, help="random seed, for a repeatable stream")
    parser.add_argument(
        "--linger-ms",
        type=cli.non_negative_float,
        default=1,
        help="producer linger (default 1 ms: ~1.6x the rate of 0 here)",
    )
    parser.add_argument("--json", action="store_true", help="print the final summary as JSON")
    args = parser.parse_args(argv)
    if args.seconds is None and args.count is None:
        args.seconds = 10.0
    if args.duplicate_pct + args.bad_pct > 100:
        parser.error("--duplicate-pct and --bad-pct add up to more than 100")
    if not args.topic.strip():
        parser.error("--topic must not be empty")
    return args


def ensure_topic(bootstrap: str, topic: str, partitions: int) -> int:
    """Create the topic unless it exists; return its partition count (an existing topic keeps its own)."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        existing = consumer.partitions_for_topic(topic)
    finally:
        consumer.close()
    if existing:
        return len(existing)
    topics.create_topic(bootstrap, topic, partitions)
    return partitions


def summary(stats: loadgen.LoadStats, mix: loadgen.EventMix, rate: float) -> dict:
    return {
        "produced": stats.sent,
        "asked_rate": rate,
        "achieved_rate": round(stats.achieved_rate, 1),
        "reached_rate": stats.reached(rate),
        "max_behind_s": round(max(stats.behind_s, 0.0), 3),
        "distinct_keys": len(mix.keys),
        "duplicates": mix.duplicates,
        "bad": {kind: mix.counts[kind] for kind in loadgen.BAD_KINDS},
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    bootstrap = lab.answering_broker(args.bootstrap)
    found = ensure_topic(bootstrap, args.topic, args.partitions)
    if found != args.partitions:
        print(f"note: topic {args.topic} already exists with {found} partitions; using it", file=sys.stderr)
    mix = loadgen.EventMix(
        key_space=args.key_space,
        duplicate_pct=args.duplicate_pct,
        bad_pct=args.bad_pct,
        payload_bytes=args.payload_bytes,
        seed=args.seed,
    )

    def progress(stats: loadgen.LoadStats) -> None:
        print(
            f"  sent {stats.sent:>9}/{stats.target}  {stats.achieved_rate:8.0f} rows/s  "
            f"behind {max(stats.behind_s, 0):.2f}s",
            file=sys.stderr,
            flush=True,
        )

    stats = loadgen.produce_at_rate(
        bootstrap,
        args.topic,
        args.rate,
        args.seconds,
        event=mix,
        count=args.count,
        progress=progress,
        linger_ms=args.linger_ms,
    )
    result = summary(stats, mix, args.rate)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"produced {result['produced']} records at {result['achieved_rate']:.0f}/s (asked {args.rate:.0f}/s); "
            f"{result['distinct_keys']} distinct keys, {result['duplicates']} duplicates, "
            f"{sum(result['bad'].values())} bad"
        )
    if not result["reached_rate"]:
        print(
            f"warning: could not keep {args.rate:.0f} rows/s: reached {stats.achieved_rate:.0f}/s and fell up to "
            f"{stats.behind_s:.2f}s behind. The machine is too busy for this rate: lower --rate or run the "
            "generator on another machine.",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(cli.run(main))

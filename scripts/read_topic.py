#!/usr/bin/env python3
"""Print a Kafka topic's records from its first offset, one value a line, and stop once --count have arrived.

  python scripts/read_topic.py events-out --count 5

Uses the lab's broker unless KAFKA_BOOTSTRAP_SERVERS or --bootstrap names another. Waits up to --timeout seconds for
the records (a query may still be starting); exits 1 when fewer arrived (it prints those and says how many), 2 on a
setup error.
"""

import sys

from rtm_lab import cli, kafka, lab, topics
from rtm_lab.errors import LabError


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser_from_doc("read_topic.py", __doc__)
    parser.add_argument("topic", help="the topic to read")
    parser.add_argument("--count", type=cli.positive_int, default=1, help="records to wait for (default 1)")
    parser.add_argument(
        "--timeout", type=cli.positive_float, default=60.0, help="seconds to wait for them (default 60)"
    )
    parser.add_argument("--bootstrap", help="Kafka bootstrap servers (default: the lab's broker)")
    args = parser.parse_args(argv)
    if not args.topic.strip():
        parser.error("the topic must not be empty")
    bootstrap = args.bootstrap or lab.status().kafka_bootstrap
    if not bootstrap:
        raise LabError("No Kafka broker: start the lab (`python scripts/lab.py up`) or pass --bootstrap.")
    # Checked first, with a short deadline: the Kafka client below would retry an unreachable broker for minutes.
    if not kafka.answers(bootstrap):
        raise LabError(
            f"Kafka at {bootstrap} does not answer. Start it (`python scripts/lab.py up`) or fix --bootstrap."
        )
    records = topics.read_all(bootstrap, args.topic, expected=args.count, timeout_s=args.timeout)
    for record in records:
        print(record.value.decode("utf-8", errors="replace"), flush=True)
    if len(records) < args.count:
        print(
            f"{len(records)} of {args.count} records in {args.topic} after {args.timeout:g}s: is the query running?",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(cli.run(main))

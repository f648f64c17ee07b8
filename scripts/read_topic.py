#!/usr/bin/env python3
"""Print a Kafka topic's records from its first offset, one value a line, and stop once --count have arrived.

  python scripts/read_topic.py events-out --count 5
  python scripts/read_topic.py events-out --count 10 --latency-from source_ts_ms

With --latency-from FIELD it prints each record's latency instead of its value: the record's own Kafka timestamp
minus FIELD of its JSON value, in milliseconds (the quick start copies the source record's Kafka timestamp into
`source_ts_ms`). The lines come in the order of that field, so the oldest source record comes first.

Uses the lab's broker unless KAFKA_BOOTSTRAP_SERVERS or --bootstrap names another. Waits up to --timeout seconds for
the records (a query may still be starting); exits 1 when fewer arrived (it prints those and says how many), 2 on a
setup error or a record without the field.
"""

import json
import sys

from rtm_lab import cli, lab, topics
from rtm_lab.errors import LabError


def latency_lines(records: list[topics.Record], field: str) -> list[str]:
    """Each record's Kafka timestamp minus the field of its JSON value, oldest field first."""
    rows = []
    for record in records:
        try:
            since_ms = int(json.loads(record.value)[field])
        except (ValueError, KeyError, TypeError) as error:
            raise LabError(
                f"Record at partition {record.partition} offset {record.offset} has no whole-number {field!r} in a "
                f"JSON object ({type(error).__name__}): pass the field that holds the start time in ms."
            ) from None
        rows.append((since_ms, record.timestamp_ms - since_ms, record.partition, record.offset))
    return [f"{latency} ms  (partition {p}, offset {o})" for _, latency, p, o in sorted(rows)]


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser_from_doc("read_topic.py", __doc__)
    parser.add_argument("topic", help="the topic to read")
    parser.add_argument("--count", type=cli.positive_int, default=1, help="records to wait for (default 1)")
    parser.add_argument(
        "--timeout", type=cli.positive_float, default=60.0, help="seconds to wait for them (default 60)"
    )
    parser.add_argument("--bootstrap", help="Kafka bootstrap servers (default: the lab's broker)")
    parser.add_argument(
        "--latency-from",
        metavar="FIELD",
        help="print each record's Kafka timestamp minus this field of its JSON value (ms), not the value",
    )
    args = parser.parse_args(argv)
    if not args.topic.strip():
        parser.error("the topic must not be empty")
    if args.latency_from is not None and not args.latency_from.strip():
        parser.error("the --latency-from field must not be empty")
    bootstrap = lab.answering_broker(args.bootstrap)
    records = topics.read_all(bootstrap, args.topic, expected=args.count, timeout_s=args.timeout)
    if args.latency_from:
        lines = latency_lines(records, args.latency_from)
    else:
        lines = [record.value.decode("utf-8", errors="replace") for record in records]
    for line in lines:
        print(line, flush=True)
    if len(records) < args.count:
        print(
            f"{len(records)} of {args.count} records in {args.topic} after {args.timeout:g}s: is the query running?",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(cli.run(main))

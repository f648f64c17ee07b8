"""What one engine run wrote, measured against what it was sent: latency per output, loss, and a digest to compare.

Both topics are read back after the run (every record with its partition, offset and broker timestamp). The clock is
the broker's: both topics use LogAppendTime, so a latency is the sink record's append time minus the source record's,
as in `bench.py latency`, and neither the generator nor the reader is timed.

Which source record an output answers, per pipeline:
- transform, enrich, dedup write one record per event they keep, keyed by the event's id. The k-th output of an id
  answers the k-th input of that id (one key stays in one partition on both topics, in order), so a redelivered id is
  paired with its own copy.
- dedup-user (the benchmark's deduplication keyed by user) writes one record per user: the event it kept, paired
  by id.
- count writes a user's new count. An event is answered by the first record of its user whose count reached the
  event's rank among that user's events in arrival order: if an engine folds several events into one update, each of
  them is answered by that update.

The digest is the sha256 of what both engines must agree on (`rtm_lab.engines.output`): the records without the
source timestamp (a broker time, different in every run) for the record pipelines, the last count per user for count.
"""

import hashlib
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from rtm_lab.engines import output
from rtm_lab.topics import Record

# The deduplication keyed by user instead of id: a bounded key space (the keyspace's users), for `bench.py
# dedup-stall`; Spark only (rtm_lab.benchmarks.engine_spark), not one of the guide's pipelines.
DEDUP_BY_USER = "dedup-user"
RECORD_PIPELINES = ("transform", "enrich", "dedup")
# Fields that are a broker time, not content: left out of the digest.
TIME_FIELDS = ("source_ts_ms",)


@dataclass
class Measured:
    """One run's outputs against its inputs: latencies (ms) by the sequence number of the input they answer."""

    latencies: list[tuple[int, int]] = field(default_factory=list)  # (input seq, latency ms)
    expected: int = 0  # outputs the input implies (record pipelines) or keys (count)
    delivered: int = 0
    missing: int = 0
    duplicates: int = 0
    digest: str = ""
    wrong: list[str] = field(default_factory=list)  # what differs from what the input implies, if anything


def _value(record: Record) -> dict:
    return json.loads(record.value)


def _in_order(records: list[Record]) -> list[Record]:
    return sorted(records, key=lambda r: (r.partition, r.offset))


def digest(pipeline: str, sink: list[Record]) -> str:
    if pipeline == "count":
        canonical = sorted((str(k), json.dumps(v, sort_keys=True)) for k, v in output.final_values(sink).items())
    else:
        canonical = sorted(
            (str(r.key), json.dumps({k: v for k, v in _value(r).items() if k not in TIME_FIELDS}, sort_keys=True))
            for r in sink
        )
    return hashlib.sha256(json.dumps(canonical).encode()).hexdigest()


def measure(pipeline: str, source: list[Record], sink: list[Record], seq_of, kept) -> Measured:
    """Pair outputs with inputs. `seq_of(value)` gives an input's sequence number (negative for priming events);
    `kept(value)` says whether the enrichment keeps an event (it drops users without a tier; the deduplication drops
    repeated ids, the transform and the count keep everything)."""
    result = Measured(digest=digest(pipeline, sink), delivered=len(sink))
    if pipeline == "count":
        _measure_count(source, sink, seq_of, result)
    elif pipeline == DEDUP_BY_USER:
        _measure_first_per_user(source, sink, seq_of, result)
    elif pipeline in RECORD_PIPELINES:
        _measure_records(pipeline, source, sink, seq_of, kept, result)
    else:
        raise ValueError(f"unknown pipeline {pipeline!r}")
    return result


def _measure_records(pipeline, source, sink, seq_of, kept, result: Measured) -> None:
    wanted: dict[str, list[tuple[int, int]]] = defaultdict(list)  # id -> [(seq, source ts)] in arrival order
    seen_ids: set = set()
    for record in _in_order(source):
        value = _value(record)
        if pipeline == "dedup":
            if value["id"] in seen_ids:
                continue
            seen_ids.add(value["id"])
        elif pipeline == "enrich" and not kept(value):
            continue
        wanted[str(value["id"])].append((seq_of(value), record.timestamp_ms))
    result.expected = sum(len(v) for v in wanted.values())
    answered: Counter = Counter()
    for record in _in_order(sink):
        key = str(_value(record)["id"])
        k = answered[key]
        answered[key] += 1
        if k >= len(wanted.get(key, ())):
            result.duplicates += 1
            continue
        seq, source_ts = wanted[key][k]
        result.latencies.append((seq, record.timestamp_ms - source_ts))
    result.missing = sum(max(len(v) - answered[key], 0) for key, v in wanted.items())


def _measure_first_per_user(source, sink, seq_of, result: Measured) -> None:
    """The user-keyed deduplication writes one event per user: whichever of the user's events reached its task first.
    A user's events are spread over both partitions, so which one that is depends on arrival across partitions; the
    output is paired with the input it kept (by id, its first copy), and a user with no output is missing."""
    first_copy: dict[str, tuple[int, int]] = {}  # id -> (seq, source ts) of its first copy
    users: set[str] = set()
    for record in sorted(source, key=lambda r: r.timestamp_ms):
        value = _value(record)
        users.add(value["user"])
        first_copy.setdefault(str(value["id"]), (seq_of(value), record.timestamp_ms))
    result.expected = len(users)
    answered: set[str] = set()
    for record in _in_order(sink):
        value = _value(record)
        if value["user"] in answered or str(value["id"]) not in first_copy:
            result.duplicates += 1
            continue
        answered.add(value["user"])
        seq, source_ts = first_copy[str(value["id"])]
        result.latencies.append((seq, record.timestamp_ms - source_ts))
    result.missing = len(users - answered)


def _measure_count(source, sink, seq_of, result: Measured) -> None:
    arrivals: dict[str, list[tuple[int, int]]] = defaultdict(list)  # user -> [(source ts, seq)]
    for record in source:
        value = _value(record)
        arrivals[value["user"]].append((record.timestamp_ms, seq_of(value)))
    for events in arrivals.values():
        events.sort()  # arrival order on the broker's clock, across partitions
    # user -> [(count, sink ts)] in the order the engine wrote them (one key stays in one partition).
    updates: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for record in _in_order(sink):
        value = _value(record)
        updates[value["user"]].append((value["count"], record.timestamp_ms))
    result.expected = len(arrivals)
    finals = {user: counts[-1][0] for user, counts in updates.items()}
    for user, events in arrivals.items():
        if finals.get(user) != len(events):
            result.missing += 1
            result.wrong.append(f"{user}: final count {finals.get(user)}, {len(events)} events")
        cursor = iter(updates.get(user, ()))
        count, ts = 0, None
        for rank, (source_ts, seq) in enumerate(events, start=1):
            while count < rank:
                nxt = next(cursor, None)
                if nxt is None:
                    break
                count, ts = nxt
            if count >= rank and ts is not None:
                result.latencies.append((seq, ts - source_ts))
        result.duplicates += max(len(updates.get(user, ())) - len(events), 0)

"""A steady-rate Kafka producer: events paced against the clock, each stamped with its creation time.

`EventMix` describes the stream the Postgres pipeline is tested and benchmarked with (key space, duplicates re-sent
later, bad records, payload size) and keeps the ground truth a test reconciles against: every key sent and how many
records of each kind went out.
"""

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

# The kinds of bad input the pipeline must dead-letter; the generator sends them in turn.
BAD_KINDS = ("malformed_json", "missing_key", "null_key", "wrong_type", "oversized")


@dataclass
class LoadStats:
    sent: int = 0
    target: int = 0
    started_at: float = 0.0
    finished_at: float = 0.0
    behind_s: float = 0.0  # how far the producer fell behind its schedule at worst
    errors: list[str] = field(default_factory=list)

    @property
    def achieved_rate(self) -> float:
        elapsed = (self.finished_at or time.monotonic()) - self.started_at
        return self.sent / elapsed if elapsed > 0 else 0.0

    def reached(self, rate: float, tolerance: float = 0.05) -> bool:
        """True when the producer kept within `tolerance` of the asked rate and never fell a second behind."""
        return self.achieved_rate >= rate * (1 - tolerance) and self.behind_s < 1.0


def make_event(seq: int) -> dict:
    return {
        "id": seq,
        "user": f"user{seq % 97}",
        "amount": round(seq * 0.01, 2),
        "created_ms": time.time_ns() // 1_000_000,
    }


@dataclass(frozen=True)
class RawRecord:
    """A record sent exactly as given, for input that is not a well-formed event."""

    key: bytes | None
    value: bytes | None


@dataclass
class EventMix:
    """Events for the Postgres pipeline: `duplicate_pct` % re-send a recent key with a later `created_ms`,
    `bad_pct` % are bad input (one of BAD_KINDS in turn), the rest take the next key of `key_space` (keys wrap, so a
    small key space makes hot keys). Not thread-safe: one producer thread calls it."""

    key_space: int = 1_000_000_000
    duplicate_pct: float = 0.0
    bad_pct: float = 0.0
    payload_bytes: int = 100
    oversized_bytes: int = 64 * 1024
    seed: int = 42
    first_key: int = 0  # where new keys start, so two streams into one table can't share keys
    keys: set[int] = field(default_factory=set)
    counts: Counter = field(default_factory=Counter)
    _next_key: int = 0
    _recent: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)
        self._next_key = self.first_key
        # Fixed filler so the size is exact and JSON-safe; varying it would only cost generator time.
        self._payload = "x" * max(0, self.payload_bytes)

    @property
    def valid(self) -> int:
        return self.counts["new"] + self.counts["duplicate"]

    @property
    def duplicates(self) -> int:
        """Valid records whose key was already sent: what deduplication (or an upsert) folds away."""
        return self.valid - len(self.keys)

    @property
    def bad(self) -> int:
        return sum(self.counts[kind] for kind in BAD_KINDS)

    def __call__(self, seq: int) -> dict | RawRecord:
        roll = self._random.random() * 100
        if roll < self.bad_pct:
            return self._bad(seq)
        if roll < self.bad_pct + self.duplicate_pct and self._recent:
            key = self._random.choice(self._recent)
            self.counts["duplicate"] += 1
        else:
            key = self._next_key % self.key_space
            self._next_key += 1
            self.counts["duplicate" if key in self.keys else "new"] += 1
            self._recent.append(key)
            if len(self._recent) > 1000:
                del self._recent[:500]
        self.keys.add(key)
        return {
            "id": key,
            "seq": seq,
            "user": f"user{key % 97}",
            "amount": round((seq % 10_000) * 0.01, 2),
            "payload": self._payload,
            "created_ms": time.time_ns() // 1_000_000,
        }

    def _bad(self, seq: int) -> RawRecord:
        kind = BAD_KINDS[self.bad % len(BAD_KINDS)]
        self.counts[kind] += 1
        now = time.time_ns() // 1_000_000
        key = f"bad-{seq}".encode()
        if kind == "malformed_json":
            value = b'{"id": 1, "user": "trunc'
        elif kind == "missing_key":
            value = json.dumps({"seq": seq, "user": "nobody", "created_ms": now}).encode()
        elif kind == "null_key":
            value = json.dumps({"id": None, "seq": seq, "created_ms": now}).encode()
        elif kind == "wrong_type":
            value = json.dumps({"id": f"not-a-number-{seq}", "seq": seq, "created_ms": now}).encode()
        else:
            value = json.dumps({"id": -seq - 1, "seq": seq, "payload": "y" * self.oversized_bytes}).encode()
        return RawRecord(key, value)


def produce_at_rate(
    bootstrap: str,
    topic: str,
    rate: float,
    seconds: float | None = None,
    event: Callable[[int], dict | RawRecord] = make_event,
    key_field: str = "id",
    stop: threading.Event | None = None,
    count: int | None = None,
    progress: Callable[[LoadStats], None] | None = None,
    progress_every_s: float = 2.0,
    linger_ms: float = 0,
) -> LoadStats:
    """Send `rate` events per second for `seconds` (or `count` events), in 10 ms ticks so the stream is smooth,
    not bursty. `progress` is called every `progress_every_s` seconds from this thread."""
    if (seconds is None) == (count is None):
        raise ValueError("give exactly one of seconds or count")
    from confluent_kafka import Producer

    stats = LoadStats(target=count if count is not None else int(rate * (seconds or 0)))
    failed: list[str] = []

    def delivered(err, _msg) -> None:
        if err is not None:
            failed.append(str(err))

    # librdkafka sends from its own thread and batches whatever queued while a request was in flight, so even with
    # no linger it keeps up with tens of thousands of records per second.
    prod = Producer({"bootstrap.servers": bootstrap, "linger.ms": linger_ms, "acks": 1, "on_delivery": delivered})
    tick = 0.01
    stats.started_at = time.monotonic()
    next_report = stats.started_at + progress_every_s
    try:
        while stats.sent < stats.target and not (stop and stop.is_set()):
            now = time.monotonic()
            due = min(stats.target, int((now - stats.started_at) * rate) + 1)
            stats.behind_s = max(stats.behind_s, (due - stats.sent) / rate - tick)
            while stats.sent < due:
                body = event(stats.sent)
                if isinstance(body, RawRecord):
                    key, value = body.key, body.value
                else:
                    key, value = str(body[key_field]).encode(), json.dumps(body).encode()
                while True:
                    try:
                        prod.produce(topic, key=key, value=value)
                        break
                    except BufferError:  # librdkafka's local queue is full: let it drain
                        prod.poll(0.005)
                stats.sent += 1
            prod.poll(0)
            if progress and now >= next_report:
                progress(stats)
                next_report = now + progress_every_s
            sleep_for = stats.started_at + stats.sent / rate - time.monotonic()
            if sleep_for > 0:
                time.sleep(min(sleep_for, tick))
        # The rate is the pace records were handed to the client (a broker too slow to take them fills the client's
        # queue and slows that pace); the final flush is delivery, and on a short run mostly connection set-up.
        stats.finished_at = time.monotonic()
        remaining = prod.flush(30)
        if remaining:
            failed.append(f"{remaining} records still queued after 30 s")
    finally:
        stats.finished_at = stats.finished_at or time.monotonic()
        stats.errors = failed
    if failed:
        raise RuntimeError(f"Kafka did not take every record: {len(failed)} failures, first: {failed[0]}")
    return stats

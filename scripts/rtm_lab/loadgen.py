"""A steady-rate Kafka producer: events paced against the clock, each stamped with its creation time."""

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rtm_lab.topics import producer


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


def make_event(seq: int) -> dict:
    return {
        "id": seq,
        "user": f"user{seq % 97}",
        "amount": round(seq * 0.01, 2),
        "created_ms": time.time_ns() // 1_000_000,
    }


def produce_at_rate(
    bootstrap: str,
    topic: str,
    rate: float,
    seconds: float,
    event: Callable[[int], dict] = make_event,
    key_field: str = "id",
    stop: threading.Event | None = None,
) -> LoadStats:
    """Send `rate` events per second for `seconds`, in 10 ms ticks so the stream is smooth, not bursty."""
    stats = LoadStats(target=int(rate * seconds))
    prod = producer(bootstrap, linger_ms=0)
    tick = 0.01
    stats.started_at = time.monotonic()
    try:
        while stats.sent < stats.target and not (stop and stop.is_set()):
            now = time.monotonic()
            due = min(stats.target, int((now - stats.started_at) * rate) + 1)
            stats.behind_s = max(stats.behind_s, (due - stats.sent) / rate - tick)
            while stats.sent < due:
                body = event(stats.sent)
                prod.send(topic, key=str(body[key_field]).encode(), value=json.dumps(body).encode())
                stats.sent += 1
            sleep_for = stats.started_at + stats.sent / rate - time.monotonic()
            if sleep_for > 0:
                time.sleep(min(sleep_for, tick))
        prod.flush()
    finally:
        prod.close()
        stats.finished_at = time.monotonic()
    return stats

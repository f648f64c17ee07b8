"""When a freshly started pipeline has warmed up: the backlog (events produced but not yet out) stayed under a bound
for a while, watched with a cap.

A cold JVM runs a new query's code interpreted until the JIT has compiled its hot paths: on a first run the
pipeline falls up to a second behind for 15-20 s, then keeps up. Latency figures meant to describe the pipeline
start where the backlog settled, not after a fixed number of seconds; figures from a run that never settled say so.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class SettleRule:
    """Settled once the backlog stayed under `behind_rows` for `hold_s` seconds straight; give up after `max_s`."""

    behind_rows: int
    hold_s: float
    max_s: float

    def describe(self) -> str:
        return f"behind under {self.behind_rows:,} rows for {self.hold_s:g} s straight"


class Settling:
    """Feed it the backlog as it is observed (`observe(now, behind)`, `now` in seconds on any monotonic clock);
    `settled_at` is the observation at which the rule first held, `gave_up` says the cap passed first."""

    def __init__(self, rule: SettleRule, start: float):
        self.rule, self.start = rule, start
        self.calm_since: float | None = None  # the first observation of the current run of calm ones
        self.settled_at: float | None = None
        self.gave_up = False
        self.worst_behind = 0  # over the whole warm-up
        self.last_behind = 0
        self.last_seen = start

    @property
    def done(self) -> bool:
        return self.settled_at is not None or self.gave_up

    @property
    def seconds(self) -> float:
        """How long the warm-up lasted (so far, or until it settled or gave up)."""
        return (self.settled_at if self.settled_at is not None else self.last_seen) - self.start

    def observe(self, now: float, behind: int) -> bool:
        """Record one observation; True once the warm-up is over (settled, or the cap passed)."""
        if self.done:
            return True
        self.last_seen = now
        self.last_behind = behind
        self.worst_behind = max(self.worst_behind, behind)
        if behind < self.rule.behind_rows:
            # Calm is counted from the first calm observation: the calm began at most one observation earlier,
            # so the rule never holds sooner than it should.
            self.calm_since = now if self.calm_since is None else self.calm_since
        else:
            self.calm_since = None
        if self.calm_since is not None and now - self.calm_since >= self.rule.hold_s:
            self.settled_at = now
        elif now - self.start >= self.rule.max_s:
            self.gave_up = True
        return self.done

    def summary(self) -> str:
        """How long warming up took and why it ended, in one line."""
        if self.settled_at is not None:
            return (
                f"{self.seconds:.1f} s, until {self.rule.describe()} (worst behind before that: "
                f"{self.worst_behind:,} rows; a freshly started JVM runs the query slowly until it has compiled its hot "
                "code)"
            )
        return (
            f"gave up after {self.seconds:.1f} s: {self.rule.describe()} never held (worst behind {self.worst_behind:,} "
            f"rows, last {self.last_behind:,}: a busy machine, or more than it keeps up with); the figures below are "
            "NOT steady state"
        )

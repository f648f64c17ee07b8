"""Read, from a Spark driver's log, who held a partition's output commit when a task failed and was retried.

Spark's driver decides which task attempt may commit a partition (`OutputCommitCoordinator`, first asker wins). A
failed attempt that had been allowed keeps that permission until the DAG scheduler's event loop handles its failure;
a retry that asks before then is denied. The driver logs each step when `log4j2-commits.properties` is its logging
set-up (the fault app's `--commit-log`):

    DEBUG OutputCommitCoordinator: Commit allowed for stage=2.0, partition=1, task attempt 0
    WARN TaskSetManager: ... Lost task 1.0 in stage 2.0 (TID 5) (...): org.apache.spark.api.python.PythonException ...
    DEBUG OutputCommitCoordinator: Authorized committer (attemptNumber=0, stage=2, partition=1) failed; clearing lock
    DEBUG OutputCommitCoordinator: Commit allowed for stage=2.0, partition=1, task attempt 1        (retried)
    DEBUG OutputCommitCoordinator: Commit denied for stage=2.0, partition=1: already committed by TaskIdentifier(0,0)

`trace` turns those lines into a `RetryTrace` for the partition whose first attempt failed.
"""

import re
from dataclasses import dataclass

RETRIED = "retried"
COMMIT_DENIED = "commit-denied"
OUTCOMES = (RETRIED, COMMIT_DENIED)

_LOST = re.compile(r"Lost task (?P<partition>\d+)\.0 in stage (?P<stage>\d+)\.(?P<stage_attempt>\d+) ")


@dataclass(frozen=True)
class RetryTrace:
    """The commit events of one failed partition, by their line number in the log (None: not logged)."""

    partition: int
    stage: int
    first_allowed: int | None  # attempt 0 allowed to commit
    first_lost: int  # attempt 0 reported failed
    released: int | None  # the coordinator freed attempt 0's permission
    retry_allowed: int | None  # attempt 1 allowed to commit
    retry_denied: int | None  # attempt 1 denied: attempt 0 still held the permission

    @property
    def allowed_before_failing(self) -> bool:
        """Attempt 0 held the commit when its failure reached the driver."""
        return self.first_allowed is not None and self.first_allowed < self.first_lost

    @property
    def outcome(self) -> str | None:
        if self.retry_denied is not None:
            return COMMIT_DENIED
        if self.retry_allowed is not None:
            return RETRIED
        return None

    @property
    def released_before_retry_asked(self) -> bool | None:
        """Whether the permission was free again when the retry asked; None when the retry never asked."""
        asked = self.retry_denied if self.retry_denied is not None else self.retry_allowed
        if asked is None:
            return None
        return self.released is not None and self.released < asked


def trace(log_text: str) -> RetryTrace | None:
    """The RetryTrace of the first task whose attempt 0 was lost, or None when no attempt 0 was lost."""
    lines = log_text.splitlines()
    lost = next(((i, m) for i, line in enumerate(lines) if (m := _LOST.search(line))), None)
    if lost is None:
        return None
    first_lost, match = lost
    partition, stage, stage_attempt = (int(match[k]) for k in ("partition", "stage", "stage_attempt"))
    at = f"stage={stage}.{stage_attempt}, partition={partition}"

    def first(text: str) -> int | None:
        return next((i for i, line in enumerate(lines) if text in line), None)

    return RetryTrace(
        partition=partition,
        stage=stage,
        first_allowed=first(f"Commit allowed for {at}, task attempt 0"),
        first_lost=first_lost,
        released=first(f"Authorized committer (attemptNumber=0, stage={stage}, partition={partition}) failed"),
        retry_allowed=first(f"Commit allowed for {at}, task attempt 1"),
        retry_denied=first(f"Commit denied for {at}: already committed by"),
    )

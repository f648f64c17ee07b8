"""rtm_lab.task_commits reads both orders of a retried task from a Spark driver's log: the lines below are the ones
Spark 4.3.0 wrote under the fault app (tests/guides/test_kafka_to_postgres.py runs it), cut to what the reader uses."""

from rtm_lab import task_commits

BEFORE = """\
09:52:20.683 DEBUG OutputCommitCoordinator: Commit allowed for stage=1.0, partition=1, task attempt 0
09:52:26.374 DEBUG OutputCommitCoordinator: Commit allowed for stage=2.0, partition=1, task attempt 0
09:52:26.375 DEBUG OutputCommitCoordinator: Commit allowed for stage=2.0, partition=0, task attempt 0
09:52:26.570 WARN TaskSetManager: [queryId = e5218] [batchId = 2] Lost task 1.0 in stage 2.0 (TID 5) (192.0.2.2 \
executor driver): org.apache.spark.api.python.PythonException: [PYTHON_EXCEPTION] An exception was thrown
"""

RETRIED = (
    BEFORE
    + """\
09:52:26.606 DEBUG OutputCommitCoordinator: Authorized committer (attemptNumber=0, stage=2, partition=1) failed; \
clearing lock
09:52:26.837 DEBUG OutputCommitCoordinator: Commit allowed for stage=2.0, partition=1, task attempt 1
"""
)

DENIED = (
    BEFORE
    + """\
09:56:27.116 DEBUG OutputCommitCoordinator: Commit denied for stage=2.0, partition=1: already committed by \
TaskIdentifier(0,0)
09:56:27.208 DEBUG OutputCommitCoordinator: Authorized committer (attemptNumber=0, stage=2, partition=1) failed; \
clearing lock
09:56:27.274 ERROR TaskSetManager: [queryId = cc8ed] [batchId = 2] Task 1 in stage 2.0 failed 2 times; aborting job
"""
)


def test_a_retry_asking_after_the_release_is_read_as_retried():
    retry = task_commits.trace(RETRIED)
    assert retry is not None and (retry.partition, retry.stage) == (1, 2)
    assert retry.allowed_before_failing  # the stage-2 line, not the stage-1 one, and before the loss
    assert retry.outcome == task_commits.RETRIED and retry.released_before_retry_asked is True


def test_a_retry_denied_before_the_release_is_read_as_commit_denied():
    retry = task_commits.trace(DENIED)
    assert retry is not None and retry.allowed_before_failing
    assert retry.outcome == task_commits.COMMIT_DENIED and retry.released_before_retry_asked is False


def test_a_log_without_a_lost_task_or_without_a_retry_says_so():
    assert task_commits.trace(BEFORE.splitlines()[0]) is None
    retry = task_commits.trace(BEFORE)
    assert retry is not None and retry.outcome is None and retry.released_before_retry_asked is None

"""One exception type for every lab failure a user can fix; the CLI prints its message without a traceback."""


class LabError(RuntimeError):
    """A problem with the local setup, worded as what was wrong and what to do about it."""

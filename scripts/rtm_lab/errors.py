"""One exception type for every lab failure a user can fix; the CLI prints its message without a traceback.

Messages often quote a DSN or a driver's error text, so every message goes through `redact` before anyone sees it.
"""

import re

_SECRETS = [
    # postgresql://user:secret@host
    (re.compile(r"(://[^:/@\s]*:)[^@\s]*@"), r"\1***@"),
    # ?password=secret&... or &password=secret (URL query parameters)
    (re.compile(r"([?&](?:password|sslpassword)=)[^&\s'\"]*", re.IGNORECASE), r"\1***"),
    # password='secret with spaces' or password=secret (libpq key=value strings)
    (re.compile(r"\b((?:password|sslpassword)\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s'&]+)", re.IGNORECASE), r"\1***"),
]


def redact(text: str) -> str:
    """The text with every password in a DSN (URL or key=value form) replaced by ***."""
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


class LabError(RuntimeError):
    """A problem with the local setup, worded as what was wrong and what to do about it (never with a password)."""

    def __str__(self) -> str:
        return redact(super().__str__())

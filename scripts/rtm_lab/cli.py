"""What every command line shares: argument checks that run before any work, and errors as one line with exit 2.

Use `Parser` instead of `argparse.ArgumentParser`, the `type=` checks below for numbers and output paths, and
`sys.exit(run(main))` so a `LabError` (a problem the user can fix) prints one line, never a traceback.
"""

import argparse
import datetime as dt
import math
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from rtm_lab.errors import LabError, redact
from rtm_lab.intervals import MIN_REAL_TIME_INTERVAL_MS, interval_ms

USAGE_ERROR = 2


class Parser(argparse.ArgumentParser):
    """argparse, with a bad argument reported on one line (what was wrong, where to read more), exit 2."""

    def error(self, message: str):
        self.exit(USAGE_ERROR, f"{self.prog}: error: {redact(message)} (see {self.prog} --help)\n")


def parser_from_doc(prog: str, doc: str | None) -> Parser:
    """An entry script's parser: `--help` shows the docstring's first paragraph, the usage, the options, then the rest
    of the docstring as written (examples keep their line breaks)."""
    summary, _, rest = (doc or "").partition("\n\n")
    return Parser(
        prog=prog, description=summary, epilog=rest or None, formatter_class=argparse.RawDescriptionHelpFormatter
    )


Number = TypeVar("Number", int, float)


def _number(text: str, kind: Callable[[str], Number]) -> Number:
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected {'an integer' if kind is int else 'a number'}, got {text!r}"
        ) from None


def positive_float(text: str) -> float:
    """A finite number above 0 (a rate, a duration): NaN, inf, 0 and negatives are refused."""
    value = _number(text, float)
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number above 0, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    value = _number(text, float)
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of at least 0, got {text!r}")
    return value


def percent(text: str) -> float:
    value = _number(text, float)
    if not math.isfinite(value) or not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"must be a percentage from 0 to 100, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An integer of at least 1 (partitions, counts, keys)."""
    value = _number(text, int)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer of at least 1, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    value = _number(text, int)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer of at least 0, got {text!r}")
    return value


def comma_choices(choices: list[str]) -> Callable[[str], list[str]]:
    """A comma-separated list of names, each one of `choices` ("dedup,count"); empty or unknown is refused."""

    def parse(text: str) -> list[str]:
        names = [n.strip() for n in text.split(",") if n.strip()]
        unknown = [n for n in names if n not in choices]
        if unknown or not names:
            raise argparse.ArgumentTypeError(f"{text!r}: choose from {', '.join(choices)}")
        return names

    return parse


def spark_interval(text: str) -> str:
    """A batch duration Spark accepts ("5 seconds", "5 minutes"), kept as the text Spark reads."""
    try:
        ms = interval_ms(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if ms < MIN_REAL_TIME_INTERVAL_MS:
        raise argparse.ArgumentTypeError(f"{text!r} is under the 5 seconds Spark accepts for realTime")
    return text


def json_output(text: str) -> Path:
    """A result file to write: its name ends in .json (tables are written beside it under the same name) and its
    folder exists and is writable, checked before any work starts."""
    return _output_file(text, ".json")


def text_output(text: str) -> Path:
    """A text file to write (a recorded screen): its name ends in .txt and its folder is writable, checked first."""
    return _output_file(text, ".txt")


def _output_file(text: str, suffix: str) -> Path:
    path = Path(text)
    if path.suffix != suffix:
        raise argparse.ArgumentTypeError(f"must be a file name ending in {suffix}, got {text!r}")
    folder = path.parent
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"folder {str(folder)!r} of {text!r} does not exist; create it first")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder; give a file name ending in {suffix}")
    try:
        # Really create a file there: permissions, read-only mounts and quotas all show up now, not after the run.
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise argparse.ArgumentTypeError(
            f"cannot write into {str(folder)!r} ({exc.strerror}); choose another path"
        ) from None
    return path


def existing_dir(text: str) -> Path:
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is not an existing folder")
    return path


def run(main: Callable[[], int]) -> int:
    """Call main(); a LabError becomes one line on stderr and exit 2, Ctrl-C exit 130, both without a traceback."""
    try:
        return main()
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`lab.py env | head -1`): not an error worth a traceback.
        # Python's documented remedy: point stdout at /dev/null so the flush at exit does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def clock_time(text: str) -> dt.datetime:
    """HH:MM, UTC: the next time the clock reads it (tomorrow's when it has passed today, as `at` reads it), so a
    deadline set before midnight for after it works."""
    try:
        when = dt.datetime.strptime(text, "%H:%M").time()
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a UTC time as HH:MM, got {text!r}") from None
    now = dt.datetime.now(dt.UTC)
    deadline = dt.datetime.combine(now.date(), when, tzinfo=dt.UTC)
    return deadline if deadline > now else deadline + dt.timedelta(days=1)

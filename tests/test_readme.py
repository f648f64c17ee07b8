"""README's "The two commands" section stays short: at most 200 words.

Counted as the project's issue asks: every word in the section except the command lines. Prose, tables and code
comments count. The lines of a code block do not, apart from their comments: a `make demo` line is a command, and the
recorded demo screen is that command's output (a generated copy of docs/results/demo-screen.txt). HTML comments (the
generated region's markers) are not shown to readers and do not count either.
"""

import re

from rtm_lab.paths import PROJECT_ROOT

SECTION = "The two commands"
LIMIT = 200
FENCE = re.compile(r"^\s*(?:```|~~~)\s*(\w*)")
SHELL = {"bash", "sh", "shell", "console"}
HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)


def section(markdown: str, title: str) -> str:
    """The text under `## title`, up to the next heading of the same or a higher level."""
    found = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^#{{1,2}} |\Z)", markdown, flags=re.M | re.S)
    assert found, f"no '## {title}' section"
    return found[1]


def counted_text(markdown: str) -> str:
    """What the rule counts: everything outside code blocks, and the comments of shell blocks (a `text` block's lines
    are a program's output, `#` lines included)."""
    kept: list[str] = []
    block = None  # the open code block's language, "" when it names none
    for line in HTML_COMMENT.sub("", markdown).splitlines():
        fence = FENCE.match(line)
        if fence:
            block = fence[1] if block is None else None
        elif block is None:
            kept.append(line)
        elif block in SHELL and "#" in line:
            kept.append(line[line.index("#") + 1 :])  # a shell comment, whole line or after the command
    return "\n".join(kept)


def words(text: str) -> list[str]:
    """Whitespace-separated tokens that hold a letter or a digit: `->` and a table's `|` are not words."""
    return [token for token in text.split() if re.search(r"\w", token)]


def test_the_two_commands_section_has_at_most_200_words():
    text = counted_text(section((PROJECT_ROOT / "README.md").read_text(), SECTION))
    count = len(words(text))
    assert 0 < count <= LIMIT, f"README's '{SECTION}' section has {count} words (at most {LIMIT}):\n{text}"


def test_the_count_takes_prose_tables_and_comments_and_leaves_out_commands_and_their_output():
    sample = """## The two commands

```bash
make demo   # the main demo
```

One sentence, five words.

| a | b c |
| --- | --- |

```text
# Recorded by `python scripts/demo.py --record docs/results/demo-screen.txt`.

produced        62000 events at 2000/s (asked 2000/s)
```

<!-- begin region: generated -->

## Next section

Not counted.
"""
    text = counted_text(section(sample, SECTION))
    assert words(text) == ["the", "main", "demo", "One", "sentence,", "five", "words.", "a", "b", "c"]

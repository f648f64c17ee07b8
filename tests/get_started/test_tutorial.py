"""The get-started tutorial, run as a reader types it: every shell command of "A running query in five minutes", in
page order, in a fresh shell that has only HOME, PATH and what the page itself tells the reader to set.

The commands are the section's fenced `bash` blocks, read from the page, so the page and this test cannot drift. The
page keeps these conventions:

- The blocks run in one terminal, in order: what a block exports (`eval "$(... lab.py env)"`) the next one has.
- A command that runs until Ctrl-C ends with the comment `# runs until Ctrl-C`, alone in its block. It starts in a
  process group of its own, as a terminal's foreground job, and the test waits for its "Ctrl-C stops it" line.
- The blocks after it run in a second terminal (a fresh shell again) while it runs, up to the clean-up block (the
  one with `lab.py down`). Then the whole group gets SIGINT, as Ctrl-C sends it: the command must exit 0 and leave
  no process behind. The clean-up block and any after it run in the first terminal; after it, the lab's broker no
  longer answers.
- A `read_topic.py ... --count N` command in the second terminal prints N JSON lines, each a record the sink topic
  holds; other lines (a producer's summary) may come between them. The one with `--latency-from` prints one latency
  line per sink record.
- Each block sits under a step title `**N. Title.**`; a step's time is the sum of its blocks' (the query's block:
  until its "Ctrl-C stops it" line).

A run with RTM_RECORD_TUTORIAL=1 writes what it saw to docs/results/tutorial-run.txt, which the page includes: each
step's time, one sink record and the latency lines, under a header with the date, the machine, its load and the
commands run. Any other run leaves that tracked file alone and checks the recorded record has this run's fields. The fast
test below checks that the recorded commands are the page's commands as they are now.

The test sets only what its harness needs: RTM_LAB_DIR (a lab folder of its own, so the shared lab is never touched;
`lab.py down --purge` at the end), RTM_JARS_DIR (the jars fetched already), SPARK_LOCAL_IP and SPARK_SUBMIT_OPTS
(drivers on loopback only, C1 only and the class archive: tests/short_lived_jvms.py).
"""

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition

from rtm_lab import kafka, machine, topics
from rtm_lab.paths import PROJECT_ROOT, jars_dir
from rtm_lab.waiting import WaitTimeout, wait_until

PAGE = PROJECT_ROOT / "docs" / "get-started.md"
RECORDED = PROJECT_ROOT / "docs" / "results" / "tutorial-run.txt"
RECORD_ENV = "RTM_RECORD_TUTORIAL"  # set it to rewrite RECORDED from this run
COMMAND_MARK = "# $ "
STEP_TITLE = re.compile(r"\*\*(?P<title>\d+\. [^*]+?)\.?\*\*")
READ_COUNT = re.compile(r"read_topic\.py .*--count (?P<count>\d+)")
CLEAN_UP = "lab.py down"
LATENCY_LINE = re.compile(r"\d+ ms  \(partition \d+, offset \d+\)")
SECTION = "## A running query in five minutes"
SHELLS = {"bash", "sh", "shell"}
FENCE = re.compile(r"^```(?P<info>[^\n]*)\n(?P<code>.*?)^```$", re.MULTILINE | re.DOTALL)
UNTIL_CTRL_C = "# runs until Ctrl-C"
RUNNING_LINE = "Ctrl-C stops it"
QUERY_ARGS = re.compile(r"kafka_to_kafka\.py\s+(?P<source>\S+)\s+(?P<sink>\S+)")
BLOCK_TIMEOUT_S = 240


def tutorial_steps() -> list[tuple[str, str]]:
    """The shell blocks of the tutorial's section, in page order, each with the title of the step it sits under."""
    text = PAGE.read_text(encoding="utf-8")
    assert SECTION in text, f"{PAGE.name} has no '{SECTION}' section"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    steps = []
    for m in FENCE.finditer(section):
        if m["info"].split("{")[0].strip() not in SHELLS:
            continue
        titles = STEP_TITLE.findall(section[: m.start()])
        assert titles, f"a block before any step title '**1. Title.**':\n{m['code']}"
        steps.append((titles[-1], m["code"].strip()))
    assert steps, f"'{SECTION}' has no bash blocks"
    return steps


def tutorial_blocks() -> list[str]:
    """The shell blocks of the tutorial's section, in page order."""
    return [block for _, block in tutorial_steps()]


def runs_until_ctrl_c(block: str) -> bool:
    if UNTIL_CTRL_C not in block:
        return False
    assert len(block.splitlines()) == 1, f"a command that runs until Ctrl-C must be alone in its block:\n{block}"
    return True


def fresh_shell_env(lab_dir: Path) -> dict[str, str]:
    """A new terminal: HOME and PATH (without this project's venv), plus the harness's isolation settings."""
    path = [p for p in os.environ["PATH"].split(os.pathsep) if p and not Path(p).is_relative_to(PROJECT_ROOT)]
    env = {
        "HOME": os.environ["HOME"],
        "PATH": os.pathsep.join(path),
        "RTM_LAB_DIR": str(lab_dir),
        "RTM_JARS_DIR": str(jars_dir()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_SUBMIT_OPTS": os.environ.get("SPARK_SUBMIT_OPTS", ""),
    }
    if os.environ.get("JAVA_HOME"):
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    return env


def timed(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{rest} s"


def write_recording(steps: list[tuple[str, str]], took: list[float], record: str, latency: str, load: float) -> None:
    """docs/results/tutorial-run.txt: what this run saw, in the sections the page includes."""
    spec = machine.describe()
    per_step: dict[str, float] = {}
    for (title, _), seconds in zip(steps, took, strict=True):
        per_step[title] = per_step.get(title, 0.0) + seconds
    table = ["| Step | Took |", "|---|---|"]
    table += [f"| {title} | {timed(seconds)} |" for title, seconds in per_step.items()]
    table.append(f"| All steps | {timed(sum(took))} |")
    when = time.strftime("%Y-%m-%d", time.gmtime())
    lines = [
        f"# Written by tests/get_started/test_tutorial.py on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        f"# Machine: {spec['cores']} cores ({spec['cpu_model']}), {spec['os']}; load average {load:.1f} at the start "
        f"and {os.getloadavg()[0]:.1f} at the end.",
        "# The commands it ran, the page's blocks in order:",
        *(f"{COMMAND_MARK}{line}" for _, block in steps for line in block.splitlines()),
        "",
        "--8<-- [start:timings]",
        *table,
        "",
        f"Measured by the tutorial test on {when}, on {spec['cores']} cores with a load average of {load:.1f} at "
        "the start. The `.venv` and the jars were in place already: on a fresh clone, `make lab-up` first builds "
        "and downloads them.",
        "--8<-- [end:timings]",
        "--8<-- [start:record]",
        record,
        "--8<-- [end:record]",
        "--8<-- [start:latency]",
        latency,
        "--8<-- [end:latency]",
    ]
    RECORDED.write_text("\n".join(lines) + "\n", encoding="utf-8")


def recorded_commands() -> list[str]:
    return [
        line[len(COMMAND_MARK) :]
        for line in RECORDED.read_text(encoding="utf-8").splitlines()
        if line.startswith(COMMAND_MARK)
    ]


def run_block(block: str, env: dict[str, str], state: Path) -> tuple[str, dict[str, str]]:
    """Run one block in `env` from the project folder; return its stdout and the environment it leaves exported."""
    script = f"set -eo pipefail\n{block}\nenv -0 > {state}\n"
    done = subprocess.run(
        ["bash", "-c", script], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S
    )
    assert done.returncode == 0, (
        f"the page's block exited {done.returncode}:\n{block}\n--- stderr ---\n{done.stderr[-3000:]}\n"
        f"--- stdout ---\n{done.stdout[-1500:]}"
    )
    exported = dict(line.split("=", 1) for line in state.read_text().split("\0") if "=" in line)
    return done.stdout, {k: v for k, v in exported.items() if k not in ("_", "SHLVL", "PWD", "OLDPWD")}


def record_count(bootstrap: str, topic: str) -> int:
    """How many records a topic holds (the test's own lab: nothing is ever deleted from it)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        consumer.topics()  # fetches the metadata of every topic
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        return sum(consumer.end_offsets(partitions).values()) if partitions else 0
    finally:
        consumer.close()


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


@pytest.fixture
def lab_dir(tmp_path) -> Iterator[Path]:
    folder = tmp_path / "lab"
    yield folder
    # Whatever the page's last block did: the test's own lab leaves no process and no data behind.
    subprocess.run(
        [str(PROJECT_ROOT / ".venv" / "bin" / "python"), "scripts/lab.py", "down", "--purge"],
        cwd=PROJECT_ROOT,
        env=fresh_shell_env(folder),
        capture_output=True,
        timeout=120,
    )


@pytest.mark.slow  # minutes of set-up, a lab start and a Spark query: out of the fast loop
def test_every_command_of_the_tutorial_runs_as_printed_and_the_events_arrive_transformed(lab_dir, tmp_path):
    load = os.getloadavg()[0]
    steps = tutorial_steps()
    blocks = [block for _, block in steps]
    took: list[float] = []
    long_running = [i for i, block in enumerate(blocks) if runs_until_ctrl_c(block)]
    assert len(long_running) == 1, f"expected one command marked '{UNTIL_CTRL_C}', found {len(long_running)}"
    query_at = long_running[0]
    assert query_at + 1 < len(blocks), "the query's block must be followed by the block that reads its output"
    cleanup_at = next((i for i in range(query_at + 1, len(blocks)) if CLEAN_UP in blocks[i]), len(blocks))
    args = QUERY_ARGS.search(blocks[query_at])
    assert args, f"the long-running command is not the quick-start query: {blocks[query_at]}"

    terminal = fresh_shell_env(lab_dir)
    state = tmp_path / "exported"
    for block in blocks[:query_at]:
        started = time.monotonic()
        _, terminal = run_block(block, terminal, state)
        took.append(time.monotonic() - started)
    bootstrap = terminal.get("KAFKA_BOOTSTRAP_SERVERS")
    assert bootstrap, "after the blocks before the query, the shell has no KAFKA_BOOTSTRAP_SERVERS"

    log = tmp_path / "query.log"
    started = time.monotonic()
    with log.open("w") as out:
        query = subprocess.Popen(
            ["bash", "-c", blocks[query_at]],
            cwd=PROJECT_ROOT,
            env=terminal,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a process group of its own, as a terminal's foreground job
        )
    try:
        try:
            wait_until(lambda: query.poll() is not None or RUNNING_LINE in log.read_text(), BLOCK_TIMEOUT_S, "query")
        except WaitTimeout:
            pytest.fail(f"no '{RUNNING_LINE}' line after {BLOCK_TIMEOUT_S}s:\n{tail(log)}", pytrace=False)
        assert query.poll() is None, f"the query exited {query.returncode} before running:\n{tail(log)}"
        took.append(time.monotonic() - started)

        second_terminal = fresh_shell_env(lab_dir)
        printed: list[tuple[str, str]] = []  # (block, what it printed) in the second terminal
        for block in blocks[query_at + 1 : cleanup_at]:
            started = time.monotonic()
            out, second_terminal = run_block(block, second_terminal, state)
            took.append(time.monotonic() - started)
            printed.append((block, out))
        assert query.poll() is None, f"the query stopped by itself (exit {query.returncode}):\n{tail(log)}"

        os.killpg(query.pid, signal.SIGINT)  # Ctrl-C: the whole foreground group gets it
        query.wait(timeout=120)
        assert query.returncode == 0, f"Ctrl-C ended the query with exit {query.returncode}:\n{tail(log)}"
        assert "Stopped." in log.read_text(), tail(log)
        wait_until(lambda: not group_alive(query.pid), 30, "the query's processes (its JVM) to exit after Ctrl-C")
    finally:
        if group_alive(query.pid):
            os.killpg(query.pid, signal.SIGKILL)
        query.wait(timeout=30)

    # What the reader was told to expect, checked against the topics themselves (before a later block, such as a
    # clean-up step, stops the lab).
    events = topics.read_all(bootstrap, args["source"], expected=record_count(bootstrap, args["source"]))
    assert events, f"no events in {args['source']}"
    outputs = topics.read_all(bootstrap, args["sink"], expected=record_count(bootstrap, args["sink"]))
    expected = []
    for record in events:
        event = json.loads(record.value)
        expected.append(
            {
                "id": event["id"],
                "user": event["user"].upper(),
                "amount_cents": round(event["amount"] * 100),
                "created_ms": event["created_ms"],
                "source_ts_ms": record.timestamp_ms,
            }
        )
    got = [json.loads(record.value) for record in outputs]

    def ordered(rows: list[dict]) -> list[dict]:
        return sorted(rows, key=lambda row: (row["id"], row["created_ms"]))

    assert ordered(got) == ordered(expected)
    samples, latency = [], ""
    for block, out in printed:
        shown = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        asked = READ_COUNT.search(block)
        if asked and "--latency-from" not in block:
            # The records a reading command printed: as many as it asked for, each one the sink holds.
            assert len(shown) == int(asked["count"]), out
            assert all(shown.count(row) <= got.count(row) for row in shown), (shown, got)
            samples += [line for line in out.splitlines() if line.startswith("{")]
        if "--latency-from" in block:
            # One line per sink record: its Kafka timestamp minus the source record's, in ms.
            lines = [line for line in out.splitlines() if LATENCY_LINE.fullmatch(line)]
            assert len(lines) == len(got), out
            latency = "\n".join(lines)
    assert samples, "no block in the second terminal prints the sink's records"
    assert latency, "no block in the second terminal prints the latency (--latency-from)"

    for block in blocks[cleanup_at:]:
        started = time.monotonic()
        _, terminal = run_block(block, terminal, state)
        took.append(time.monotonic() - started)
        if CLEAN_UP in block:
            assert not kafka.answers(bootstrap, timeout_s=2), "the clean-up step left the lab's broker running"

    if os.environ.get(RECORD_ENV):
        write_recording(steps, took, samples[0], latency, load)
    else:
        # A test run leaves the tracked file alone: the page's sample must have the shape this run printed.
        recorded = json.loads(RECORDED.read_text(encoding="utf-8").split("--8<-- [start:record]\n")[1].split("\n")[0])
        assert sorted(recorded) == sorted(json.loads(samples[0])), (recorded, samples[0])


def test_the_recorded_run_ran_the_commands_the_page_shows_now():
    """The sample record, latency lines and step times on the page come from a run of the page's current commands."""
    commands = [line for block in tutorial_blocks() for line in block.splitlines()]
    assert recorded_commands() == commands, (
        "docs/results/tutorial-run.txt was written for other commands: run RTM_RECORD_TUTORIAL=1 pytest "
        "tests/get_started/test_tutorial.py::test_every_command_of_the_tutorial_runs_as_printed_and_the_events_arrive_"
        "transformed to record the page as it is"
    )


@pytest.mark.slow  # a Spark session
def test_the_quick_start_without_a_connector_says_how_to_add_one(tmp_path):
    """The failure a reader without SPARK_CONF_DIR met: one line naming the fix, exit 2, no traceback."""
    env = fresh_shell_env(tmp_path / "lab")
    env["KAFKA_BOOTSTRAP_SERVERS"] = "127.0.0.1:1"  # never contacted: Spark looks for the connector first
    done = subprocess.run(
        [str(PROJECT_ROOT / ".venv" / "bin" / "python"), "snippets/quickstart/kafka_to_kafka.py", "in", "out"],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_S,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    hint = "Spark has no Kafka connector: point SPARK_CONF_DIR at a folder whose spark-defaults.conf adds it."
    assert hint in done.stderr.splitlines(), done.stderr[-2000:]


def test_the_first_python_block_is_the_quick_start_pipeline_within_150_words_of_the_top():
    """A reader sees the whole query before anything else: no more than 150 words (headings and titles included) sit
    between the page's top and its first Python block, which is the quick-start pipeline's include."""
    from rtm_lab import prose

    text = PAGE.read_text(encoding="utf-8")
    first = re.search(r"^```python[^\n]*\n(?P<code>.*?)^```$", text, re.MULTILINE | re.DOTALL)
    assert first, f"{PAGE.name} has no Python block"
    assert first["code"].strip() == '--8<-- "snippets/quickstart/kafka_to_kafka.py:pipeline"', first["code"]
    above = prose.units_of_html(prose.render_markdown(text[: first.start()])).units
    words = sum(prose.word_count(unit.text) for unit in above)
    assert 0 < words <= 150, f"{words} words above the first Python block"

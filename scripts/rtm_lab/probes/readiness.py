"""The readiness check against Spark: every support-matrix case and every error-gallery mistake, checked, then run.

    python -m rtm_lab.probes.readiness            write docs/results/readiness-check.json (and print N/N agreeing)

For each case the checker's verdict (runs, or where it fails and with which error class) is put beside what Spark
did when the case was started for real (`rtm_lab.probes.harness.probe`). The same comparison runs in the test suite inside
tests/reference/test_support_matrix.py::test_case and tests/reference/test_errors.py::test_mistake_fails_as_documented;
this command writes the results file the pages include, with two sample reports from real runs of the CLI.
"""

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from pyspark.sql.streaming import StreamingQuery

from rtm_lab.paths import PROJECT_ROOT
from rtm_lab.probes.harness import Outcome, Probe, probe
from snippets.reference import errors
from snippets.reference.readiness_check import Checked, Report, recording

RESULTS = PROJECT_ROOT / "docs" / "results" / "readiness-check.json"
SLOTS = 4  # the test session's local[4]


def check(start: Callable[[Probe], StreamingQuery], runner: Probe, slots: int = SLOTS) -> Report:
    """The checker's report on the query `start` builds; nothing is started for real."""
    with errors.settings_restored(runner.spark):
        try:
            with recording(slots):
                start(runner)
        except Checked as done:
            return done.report
    raise AssertionError("the case started no real-time query")


def agrees(report: Report, observed: Outcome) -> bool:
    return report.verdict == (observed.kind, observed.error)


def sample(args: list[str], env: dict[str, str], names: dict[str, str]) -> dict:
    """One real run of the CLI: its command (the run's fresh topic names shown as placeholders), exit code, output."""
    cmd = [sys.executable, "scripts/rtm_check.py", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=PROJECT_ROOT, env=env, timeout=300, check=False)
    shown = " ".join(names.get(a, a) for a in cmd[1:])
    return {"command": f"python {shown}", "exit_code": done.returncode, "output": done.stdout.rstrip()}


def agreement_sentence(result: dict) -> str:
    return (
        f"The readiness check (`scripts/rtm_check.py`) predicted what Spark {result['spark']} did, runs or where it "
        f"fails and with which error class, for **{result['agree']}/{result['cases']}** cases: every row of the "
        "support matrix and every mistake of the error gallery (written by `python -m rtm_lab.probes.readiness`)."
    )


def markdown(result: dict) -> str:
    """docs/results/readiness-check.md: the agreement, then the two sample reports as the CLI printed them."""
    from rtm_lab.generated import generated_note, wrapped_command

    lines = [generated_note("python scripts/tables.py readiness-check"), "", agreement_sentence(result), ""]
    for name, title in (("passing", "A query that passes"), ("failing", "A query that fails")):
        run = result["samples"][name]
        command = wrapped_command(run["command"])
        lines += [f"**{title}** (exit code {run['exit_code']}):", "", "```bash", command, "```", ""]
        lines += ["```text", run["output"], "```", ""]
    return "\n".join(lines)


def main() -> int:
    from rtm_lab import lab, topics
    from rtm_lab.probes.mistakes import MISTAKES
    from rtm_lab.probes.support_matrix import CASES
    from rtm_lab.spark import spark_session
    from rtm_lab.versions import SPARK_VERSION

    state, _ = lab.up(log=lambda line: print(line, file=sys.stderr))
    spark = spark_session("readiness", slots=SLOTS, conf={"spark.sql.shuffle.partitions": "2"})
    rows, seen = [], {}
    cases = [(f"support-matrix[{c.id}]", c.start) for c in CASES] + [(f"errors[{m.id}]", m.start) for m in MISTAKES]
    for name, start in cases:
        if start not in seen:  # the Kafka source and Kafka sink rows are one query
            with tempfile.TemporaryDirectory() as work:
                runners = (
                    Probe(spark, state.kafka_bootstrap, Path(work) / "c"),
                    Probe(spark, state.kafka_bootstrap, Path(work) / "p"),
                )
                try:
                    report = check(start, runners[0])
                    with errors.settings_restored(spark):
                        observed = probe(start, runners[1], timeout_s=90)
                finally:
                    for r in runners:
                        r.cleanup()
            seen[start] = report, observed
        report, observed = seen[start]
        row = {"case": name, "checker": list(report.verdict), "spark": [observed.kind, observed.error]}
        rows.append({**row, "agree": agrees(report, observed)})
        print(("agree   " if row["checker"] == row["spark"] else "DISAGREE"), name, row["checker"], file=sys.stderr)
    spark.stop()

    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": state.kafka_bootstrap}
    source, sink = (
        topics.create_topic(state.kafka_bootstrap, topics.unique_name(p), 2) for p in ("sample-src", "sample-out")
    )
    names = {source: "SOURCE_TOPIC", sink: "SINK_TOPIC"}
    try:
        samples = {
            "passing": sample(["--slots", "4", "snippets/reference/kafka_tuning.py", source, sink], env, names),
            "failing": sample(
                ["--slots", "4", "snippets/reference/readiness_check_broken.py", source, sink], env, names
            ),
        }
    finally:
        topics.delete_topic(state.kafka_bootstrap, source)
        topics.delete_topic(state.kafka_bootstrap, sink)
    agreeing = sum(r["agree"] for r in rows)
    result = {"spark": SPARK_VERSION, "agree": agreeing, "cases": len(rows), "rows": rows, "samples": samples}
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"readiness check agrees with Spark on {agreeing}/{len(rows)} cases; wrote {RESULTS.relative_to(PROJECT_ROOT)}"
    )
    return 0 if agreeing == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())

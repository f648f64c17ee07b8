"""The readiness check against Spark: every support-matrix case and every error-gallery mistake, checked, then run.

    python -m rtm_lab.probes.readiness            write docs/results/readiness-check.json (and print N/N agreeing)
    python -m rtm_lab.probes.readiness --public   rerun only the public-example cases (rtm_lab.probes.public_examples) and the two
                                          sample reports in that file
    python -m rtm_lab.probes.readiness --case 'support-matrix[ID]'   rerun only that case (repeatable) and put its
                                          row into that file in case order

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
from typing import Any

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
    sentence = (
        f"The readiness check (`scripts/rtm_check.py`) predicted what Spark {result['spark']} did, runs or where it "
        f"fails and with which error class, for **{result['agree']}/{result['cases']}** cases: every row of the "
        "support matrix and every mistake of the error gallery (written by `python -m rtm_lab.probes.readiness`)."
    )
    public = result.get("public")
    if public:
        agreeing = sum(row["agree"] for row in public)
        sentence += (
            f" On **{agreeing}/{len(public)}** queries written the way public examples write them, its findings "
            "were the same set as every refusal Spark raised as the earlier ones were fixed one by one, and Spark "
            "ran the fixed query."
        )
    return sentence


def public_rows(log) -> list[dict]:
    """The public-example cases (rtm_lab.probes.public_examples), in a session at Spark's default settings."""
    from rtm_lab import lab
    from rtm_lab.probes import public_examples
    from rtm_lab.spark import spark_session

    state, _ = lab.up(log=log)
    spark = spark_session("readiness-public", slots=public_examples.SLOTS)
    rows = []
    with tempfile.TemporaryDirectory(prefix="rtm-public-") as work:
        ws = public_examples.Workspace(spark, state.kafka_bootstrap, Path(work))
        try:
            for case in public_examples.CASES:
                row = public_examples.run_case(ws, case)
                log(f"{'agree   ' if row['agree'] else 'DISAGREE'} public[{case.id}] {row['checker']} {row['spark']}")
                rows.append(row)
        finally:
            ws.cleanup()
    return rows


def public_only() -> int:
    from rtm_lab import lab

    result = json.loads(RESULTS.read_text())
    result["public"] = public_rows(lambda line: print(line, file=sys.stderr))
    result["samples"] = run_samples(lab.up(log=lambda line: print(line, file=sys.stderr))[0].kafka_bootstrap)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    agreeing = sum(row["agree"] for row in result["public"])
    print(f"public examples: {agreeing}/{len(result['public'])} agree; wrote {RESULTS.relative_to(PROJECT_ROOT)}")
    return 0 if agreeing == len(result["public"]) else 1


def public_table(public: list[dict]) -> list[str]:
    """One row per public-example case: Spark's refusals in the order it raised them as each was fixed, the
    checker's findings from one run on the file as written, its warnings, and whether the two are the same set."""

    def said(keys: list[str]) -> str:
        return "<br>".join(f"`{k.replace('STREAMING_REAL_TIME_MODE.', '')}`" for k in keys) or "none"

    lines = [
        "| Query | Spark, fixing one refusal at a time | The check, one run | Warnings | Same set |",
        "|---|---|---|---|---|",
    ]
    for row in public:
        chain = [k for step in row["steps"] for k in step.get("refused", [])]
        spark = said(chain) + ("<br>then runs" if row["spark_runs_when_fixed"] else "<br>**does not run**")
        if row.get("spark_with_allowlist_on"):
            spark += f" (with the check on: {said(row['spark_with_allowlist_on'])})"
        warnings = ", ".join(f"`{w}`" for w in row["checker_warnings"] if w in row["warnings_expected"]) or "-"
        lines.append(
            f"| {row['title']} | {spark} | {said(row['checker'])} | {warnings} | {'yes' if row['agree'] else '**no**'} |"
        )
    return lines


def markdown(result: dict) -> str:
    """docs/results/readiness-check.md: the agreement, the public-example table, then the two sample reports as the
    CLI printed them, each a snippet section (`:agreement`, `:public`, `:samples`) a page can include on its own."""
    from rtm_lab.generated import generated_note, wrapped_command

    def section(name: str, body: list[str]) -> list[str]:
        return [f"<!-- --8<-- [start:{name}] -->", *body, f"<!-- --8<-- [end:{name}] -->", ""]

    lines = [generated_note("python scripts/tables.py readiness-check"), ""]
    lines += section("agreement", [agreement_sentence(result)])
    lines += section("public", public_table(result.get("public") or []))
    samples = []
    for name, title in (("passing", "A query that passes"), ("failing", "A query that fails")):
        run = result["samples"][name]
        samples += [
            f"**{title}** (exit code {run['exit_code']}):",
            "",
            "```bash",
            wrapped_command(run["command"]),
            "```",
            "",
        ]
        samples += ["```text", run["output"], "```", ""]
    lines += section("samples", samples)
    return "\n".join(lines)


def run_samples(bootstrap: str) -> dict:
    """The two sample reports: real runs of the CLI, on fresh topics."""
    from rtm_lab import topics

    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap}
    source, sink = (topics.create_topic(bootstrap, topics.unique_name(p), 2) for p in ("sample-src", "sample-out"))
    names = {source: "SOURCE_TOPIC", sink: "SINK_TOPIC"}
    try:
        return {
            "passing": sample(["--slots", "4", "snippets/reference/kafka_tuning.py", source, sink], env, names),
            "failing": sample(
                ["--slots", "4", "snippets/reference/readiness_check_broken.py", source, sink], env, names
            ),
        }
    finally:
        topics.delete_topic(bootstrap, source)
        topics.delete_topic(bootstrap, sink)


def _all_cases() -> list[tuple[str, Callable[[Probe], StreamingQuery]]]:
    from rtm_lab.probes.mistakes import MISTAKES
    from rtm_lab.probes.support_matrix import CASES

    return [(f"support-matrix[{c.id}]", c.start) for c in CASES] + [(f"errors[{m.id}]", m.start) for m in MISTAKES]


def _case_rows(bootstrap: str, only: set[str] | None = None) -> list[dict]:
    """Check, then run, every case (or only the named ones): one row each, checker beside Spark."""
    from rtm_lab import snippet_jar
    from rtm_lab.spark import spark_session

    # The JVM snippets jar goes on spark.jars for the support-matrix case that registers a Java UDF from it.
    conf = {"spark.sql.shuffle.partitions": "2", "spark.jars": snippet_jar.session_jars()}
    spark = spark_session("readiness", slots=SLOTS, conf=conf)
    rows, seen = [], {}
    for name, start in _all_cases():
        if only is not None and name not in only:
            continue
        if start not in seen:  # the Kafka source and Kafka sink rows are one query
            with tempfile.TemporaryDirectory() as work:
                runners = (Probe(spark, bootstrap, Path(work) / "c"), Probe(spark, bootstrap, Path(work) / "p"))
                try:
                    report = check(start, runners[0])
                    with errors.settings_restored(spark):
                        observed = probe(start, runners[1], timeout_s=90)
                finally:
                    for r in runners:
                        r.cleanup()
            seen[start] = report, observed
        report, observed = seen[start]
        row: dict[str, Any] = {"case": name, "checker": list(report.verdict), "spark": [observed.kind, observed.error]}
        rows.append({**row, "agree": agrees(report, observed)})
        print(("agree   " if row["checker"] == row["spark"] else "DISAGREE"), name, row["checker"], file=sys.stderr)
    spark.stop()
    return rows


def _write(result: dict) -> None:
    result["agree"], result["cases"] = sum(r["agree"] for r in result["rows"]), len(result["rows"])
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"readiness check agrees with Spark on {result['agree']}/{result['cases']} cases; "
        f"wrote {RESULTS.relative_to(PROJECT_ROOT)}"
    )


def main() -> int:
    from rtm_lab import lab
    from rtm_lab.versions import SPARK_VERSION

    state, _ = lab.up(log=lambda line: print(line, file=sys.stderr))
    rows = _case_rows(state.kafka_bootstrap)
    samples = run_samples(state.kafka_bootstrap)
    public = public_rows(lambda line: print(line, file=sys.stderr))
    result = {"spark": SPARK_VERSION, "agree": 0, "cases": 0, "rows": rows, "samples": samples, "public": public}
    _write(result)
    return 0 if result["agree"] == result["cases"] and all(r["agree"] for r in public) else 1


def cases_only(names: list[str]) -> int:
    """Rerun the named cases (a case added or changed) and put their rows into the results file in case order; the
    other rows, the samples and the public examples stay as last run."""
    from rtm_lab import lab

    known = [name for name, _ in _all_cases()]
    unknown = sorted(set(names) - set(known))
    if unknown:
        print(
            f"error: no such case: {', '.join(unknown)} (names look like support-matrix[source-kafka])", file=sys.stderr
        )
        return 2
    result = json.loads(RESULTS.read_text())
    fresh = {
        r["case"]: r
        for r in _case_rows(lab.up(log=lambda line: print(line, file=sys.stderr))[0].kafka_bootstrap, set(names))
    }
    kept = {r["case"]: r for r in result["rows"]}
    result["rows"] = [fresh.get(name) or kept[name] for name in known if name in fresh or name in kept]
    _write(result)
    return 0 if all(r["agree"] for r in fresh.values()) else 1


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m rtm_lab.probes.readiness", description=__doc__.split("\n\n")[0])
    parser.add_argument("--public", action="store_true", help="rerun only the public-example cases")
    parser.add_argument(
        "--case",
        action="append",
        metavar="NAME",
        help="rerun only this case, e.g. support-matrix[source-kafka] (repeatable)",
    )
    args = parser.parse_args()
    sys.exit(public_only() if args.public else cases_only(args.case) if args.case else main())

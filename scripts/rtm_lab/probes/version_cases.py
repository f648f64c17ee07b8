"""The cases the version matrix runs on one PySpark, under that PySpark's own interpreter, with their outcomes as JSON.

    python -m rtm_lab.probes.version_cases --jars A.jar,B.jar --output cases.json [--only CASE_ID ...]

`scripts/version_matrix.py` runs this in a venv per PySpark version (the project's code on PYTHONPATH, Kafka at
KAFKA_BOOTSTRAP_SERVERS); it is not meant to be run by hand. Four groups of cases:

- Quick start: snippets/quickstart/kafka_to_kafka.py as written (the `realTime=` keyword), and the same pipeline with
  the py4j trigger of snippets/reference/setup.py. "runs" means rows fed after the start reached the sink topic.
- Trigger: setup.py's `start_real_time` and py4j route, the trigger rows of the error gallery (probes/mistakes.py),
  and the real-time settings' defaults as the session reports them.
- Support matrix: every case of probes/support_matrix.py. Where PySpark has no `realTime=` keyword (4.1) they run
  with the py4j trigger instead, so the row shows what the engine does, not that the keyword is missing.
- Allowlist check off: a streaming aggregation and `dropDuplicates` with `allowlistCheck=false` (the advice for
  running them on 4.1 and 4.2), output checked, then restarted on their checkpoint (rtm_lab/probes/allowlist_off.py).
"""

import argparse
import datetime as dt
import inspect
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from rtm_lab.intervals import TEST_INTERVAL
from rtm_lab.machine import run_span
from rtm_lab.probes import mistakes, support_matrix
from rtm_lab.probes.harness import AT_CALL, AT_RUN_TIME, AT_START, RUNS, Outcome, Probe, probe
from rtm_lab.versions import SPARK_VERSION

QUICK_START, TRIGGER, SUPPORT = "Quick start", "Trigger", "Support matrix"
ALLOWLIST_OFF = "Allowlist check off"
VALUE = "value"  # a setting's value, not a query's outcome


def has_real_time_keyword() -> bool:
    """Whether this PySpark's `DataStreamWriter.trigger()` takes `realTime=` (added in PySpark 4.2)."""
    return "realTime" in inspect.signature(DataStreamWriter.trigger).parameters


class Py4jProbe(Probe):
    """A probe whose queries get the real-time trigger through py4j (setup.py's route), for PySpark 4.1."""

    def writer(self, df) -> DataStreamWriter:
        from snippets.reference.setup import real_time_trigger

        writer = df.writeStream.option("checkpointLocation", self.checkpoint).outputMode("update")
        return real_time_trigger(writer, self.spark, TEST_INTERVAL)


# ---- The quick start and the trigger cases -----------------------------------------------------------------------


def _quickstart_keyword(p: Probe) -> StreamingQuery:
    from snippets.quickstart.kafka_to_kafka import start_pipeline

    return start_pipeline(p.spark, p.bootstrap, p.source(), p.sink(), p.checkpoint, batch_duration=TEST_INTERVAL)


def _kafka_writer(p: Probe, df) -> DataStreamWriter:
    return (
        df.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", p.bootstrap)
        .option("topic", p.sink())
        .option("checkpointLocation", p.checkpoint)
        .outputMode("update")
    )


def _quickstart_py4j(p: Probe) -> StreamingQuery:
    from snippets.quickstart.kafka_to_kafka import transform
    from snippets.reference.setup import real_time_trigger

    raw = p.kafka()
    return real_time_trigger(_kafka_writer(p, transform(raw)), p.spark, TEST_INTERVAL).start()


def _setup_keyword(p: Probe) -> StreamingQuery:
    from snippets.reference.setup import start_real_time

    return start_real_time(p.kafka().select("key", "value"), p.bootstrap, p.sink(), p.checkpoint, TEST_INTERVAL)


def _setup_py4j(p: Probe) -> StreamingQuery:
    from snippets.reference.setup import real_time_trigger

    return real_time_trigger(_kafka_writer(p, p.kafka().select("key", "value")), p.spark, TEST_INTERVAL).start()


def _py4j_one_second(p: Probe) -> StreamingQuery:
    from snippets.reference.setup import real_time_trigger

    return real_time_trigger(_kafka_writer(p, p.kafka().select("key", "value")), p.spark, "1 second").start()


def _mistake(m: mistakes.Mistake) -> Callable[[Probe], StreamingQuery]:
    def start(p: Probe) -> StreamingQuery:
        return m.start(p)

    return start


@dataclass(frozen=True)
class VersionCase:
    group: str
    id: str
    title: str
    start: Callable[[Probe], StreamingQuery] | None = None  # a query case
    setting: Callable[[SparkSession], str | None] | None = None  # or a value the session reports
    py4j_on_4_1: bool = False  # support-matrix cases: run with the py4j trigger where the keyword is missing
    restart: bool = False  # an rtm_lab.probes.allowlist_off restart case: run twice on one checkpoint, output checked


def _conf(key: str) -> Callable[[SparkSession], str | None]:
    return lambda spark: spark.conf.get(key)


def _default_interval(spark: SparkSession) -> str:
    from snippets.reference.setup import default_batch_duration_ms

    return f"{default_batch_duration_ms(spark)} ms"


def _trigger_cases() -> list[VersionCase]:
    from snippets.reference import setup

    trigger_mistakes = [m for m in mistakes.MISTAKES if m.id in ("boolean_trigger", "one_second_trigger")]
    return [
        VersionCase(QUICK_START, "quickstart-keyword", "kafka_to_kafka.py as written (`realTime=` keyword)",
                    _quickstart_keyword),
        VersionCase(QUICK_START, "quickstart-py4j", "the same pipeline with setup.py's py4j trigger", _quickstart_py4j),
        VersionCase(TRIGGER, "setup-keyword", '`trigger(realTime="5 seconds")` (setup.py `start_real_time`)',
                    _setup_keyword),
        VersionCase(TRIGGER, "setup-py4j", 'py4j `Trigger.RealTime("5 seconds")` (setup.py `real_time_trigger`)',
                    _setup_py4j),
        *[VersionCase(TRIGGER, m.id, f"`{m.title}` (error gallery)", _mistake(m)) for m in trigger_mistakes],
        VersionCase(TRIGGER, "py4j-one-second", 'py4j `Trigger.RealTime("1 second")`', _py4j_one_second),
        VersionCase(TRIGGER, "default-interval", "`Trigger.RealTime()` with no argument (JVM)",
                    setting=_default_interval),
        *[VersionCase(TRIGGER, f"default-{key.split('realTimeMode.')[1]}", f"default of `{key}`", setting=_conf(key))
          for key in (setup.MIN_BATCH_DURATION, setup.ALLOWLIST_CHECK, setup.ASYNC_PROGRESS_BY_DEFAULT)],
    ]  # fmt: skip


def _support_cases() -> list[VersionCase]:
    # The Kafka -> Kafka query is both the "Kafka source" and the "Kafka sink" row of the support matrix: run it once.
    seen, cases = set(), []
    for c in support_matrix.CASES:
        # A case that needs the JVM snippets jar is left out: its jar is built against the pinned PySpark only.
        if c.start in seen or c.needs_snippet_jar:
            continue
        seen.add(c.start)
        title = "Kafka -> Kafka" if c.start is support_matrix._kafka_to_kafka else f"{c.group}: {c.name}"
        cases.append(VersionCase(SUPPORT, c.id, title, c.start, py4j_on_4_1=True))
    return cases


def _allowlist_off_cases() -> list[VersionCase]:
    from rtm_lab.probes.allowlist_off import RESTART_CASES

    return [
        VersionCase(ALLOWLIST_OFF, case_id, title, py4j_on_4_1=True, restart=True)
        for case_id, (title, *_) in RESTART_CASES.items()
    ]


def all_cases() -> list[VersionCase]:
    return [*_trigger_cases(), *_support_cases(), *_allowlist_off_cases()]


# ---- Running them ------------------------------------------------------------------------------------------------


# A running query's failure wraps the real error: "[STREAM_FAILED] Query [id = ..., runId = ...] terminated with
# exception: [THE_REAL_CLASS] ...".
_WRAPPER = re.compile(r"^\[STREAM_FAILED\] Query \[[^\]]*\] terminated with exception: ")
_SPARK_CLASS = re.compile(r"\borg\.apache\.spark\.[\w.$]*\.([A-Z][\w$]*)")


def _first_line(text: str, limit: int = 400) -> str:
    line = _WRAPPER.sub("", next((s.strip() for s in text.splitlines() if s.strip()), ""))
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _named_classes(text: str) -> list[str]:
    """The Spark classes the error's first line names (the operator, sink or source it refuses), short names."""
    line = _WRAPPER.sub("", next((s.strip() for s in text.splitlines() if s.strip()), ""))
    return list(dict.fromkeys(_SPARK_CLASS.findall(line)))


def run_case(case: VersionCase, spark: SparkSession, bootstrap: str, workdir: Path, keyword: bool) -> dict:
    record = {"group": case.group, "id": case.id, "title": case.title}
    if case.setting is not None:
        try:
            return {**record, "kind": VALUE, "value": case.setting(spark)}
        except Exception as exc:
            from snippets.reference.errors import error_class

            return {**record, "kind": "fails", "error": error_class(exc), "message": _first_line(str(exc))}
    py4j = case.py4j_on_4_1 and not keyword
    if case.restart:
        from rtm_lab.probes.allowlist_off import restart_case

        done = restart_case(case.id, spark, bootstrap, workdir, Py4jProbe if py4j else Probe)
        message = done.get("message", "")
        return {
            **record,
            **done,
            "message": _first_line(message),
            "names": _named_classes(message),
            "trigger": "py4j" if py4j else "as written",
        }
    assert case.start is not None  # a case is a setting, a restart case or a query case
    runner = (Py4jProbe if py4j else Probe)(spark, bootstrap, workdir)
    try:
        outcome: Outcome = probe(case.start, runner, timeout_s=90)
    finally:
        runner.cleanup()
    return {
        **record,
        "kind": outcome.kind,
        "error": outcome.error,
        "message": _first_line(outcome.message),
        "names": _named_classes(outcome.message),
        "trigger": "py4j" if py4j else "as written",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rtm_lab.probes.version_cases", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--jars", required=True, help="comma-separated Kafka connector jars for spark.jars")
    parser.add_argument("--output", type=Path, required=True, help="the JSON file to write")
    parser.add_argument("--only", action="append", default=[], metavar="CASE_ID", help="run only these cases")
    parser.add_argument("--spark-log", type=Path, required=True, help="where Spark's warnings and errors go")
    args = parser.parse_args(argv)
    import pyspark

    from rtm_lab.spark import spark_session

    cases = [c for c in all_cases() if not args.only or c.id in args.only]
    bootstrap = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
    keyword = has_real_time_keyword()
    # Spark's warnings and errors (a failing case logs a stack trace) go to a file: stderr keeps the progress lines.
    spark = spark_session("rtm-version-matrix", slots=4, conf={"spark.jars": args.jars}, log_file=args.spark_log)
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="rtm-version-matrix-") as tmp:
            for index, case in enumerate(cases, start=1):
                # Progress on stdout: stderr is where Spark's Python workers talk, and the caller files it away.
                print(f"  [{index}/{len(cases)}] {case.id} ...", end=" ", flush=True)
                result = run_case(case, spark, bootstrap, Path(tmp) / case.id, keyword)
                print(result.get("value") or f"{result['kind']} {result.get('error') or ''}".strip(), flush=True)
                results.append(result)
    finally:
        for query in spark.streams.active:
            query.stop()
        report = {
            "pyspark": pyspark.__version__,
            "spark": spark.version,
            "python": sys.version.split()[0],
            "real_time_keyword": keyword,
            "cases": results,
        }
        spark.stop()
        args.output.write_text(json.dumps(report, indent=1) + "\n")
    return 0


# ---- The table ---------------------------------------------------------------------------------------------------

WHERE = {AT_CALL: "at the call", AT_START: "at `start()`", AT_RUN_TIME: "at run time"}


def cell(result: dict | None) -> str:
    if result is None:
        return "not run"
    if result["kind"] == VALUE:
        return f"`{result['value']}`"
    if result["kind"] == RUNS:
        checks = result.get("checks", [])
        # A restart case that ran but wrote the wrong rows is not a tick: "runs, but" what was wrong.
        mark = "✓ runs" if all(c.endswith(": right") for c in checks) else "⚠ runs, output wrong"
        return mark + (" (py4j)" if result.get("trigger") == "py4j" else "") + "".join(f"; {c}" for c in checks)
    if not result.get("error"):
        return result["kind"]
    if result["error"] == "SQL_CONF_NOT_FOUND":
        return "no such setting (`SQL_CONF_NOT_FOUND`)"
    where = WHERE.get(result["kind"], "")
    text = f"✗ {where}: `{result['error']}`" if where else f"✗ `{result['error']}`"
    if result.get("names"):
        text += f" (names {', '.join(f'`{n}`' for n in result['names'])})"
    # A Python exception (TypeError, ...) carries no error class: its message is what tells one from another.
    if not re.fullmatch(r"[A-Z0-9_.]+", result["error"]) and result.get("message"):
        text += f" ({result['message'].replace('|', '/')})"
    return text


def _against_the_support_matrix_page(pinned: dict[str, dict]) -> str:
    """Whether the pinned version's support-matrix rows are the outcomes the support-matrix page states."""
    differ = [
        c.id
        for c in support_matrix.CASES
        if c.id in pinned and (pinned[c.id]["kind"], pinned[c.id].get("error")) != (c.expected.kind, c.expected.error)
    ]
    if not any(c.id in pinned for c in support_matrix.CASES):
        return ""
    if not differ:
        return f"On {SPARK_VERSION} every support-matrix row above is the outcome the support-matrix page states.\n"
    return f"On {SPARK_VERSION} these rows differ from the support-matrix page: {', '.join(differ)}.\n"


def _as_record(report: dict) -> dict:
    """The matrix's report as a run record: its `timestamp` is when it began, and it ended `elapsed_s` later."""
    began = dt.datetime.fromisoformat(report["timestamp"].replace("Z", "+00:00"))
    ended = began + dt.timedelta(seconds=report["elapsed_s"])
    return {"started": report["timestamp"], "timestamp": ended.strftime("%Y-%m-%dT%H:%M:%SZ")}


def markdown(report: dict) -> str:
    from rtm_lab.generated import generated_note, markdown_table

    versions = report["versions"]
    by_version = {v: {c["id"]: c for c in r["cases"]} for v, r in versions.items()}
    header = ["Case", *[f"PySpark {v}" for v in versions]]
    rows_seen: dict[str, dict] = {}
    for r in versions.values():
        for c in r["cases"]:
            rows_seen.setdefault(c["id"], c)
    parts = [generated_note("python scripts/tables.py version-matrix"), ""]
    for group in (QUICK_START, TRIGGER, SUPPORT, ALLOWLIST_OFF):
        rows = [[c["title"], *[cell(by_version[v].get(i)) for v in versions]]
                for i, c in rows_seen.items() if c["group"] == group]  # fmt: skip
        if rows:
            parts += [f"**{group}**", "", markdown_table(header, rows)]
    machine = report["machine"]
    parts.append(_against_the_support_matrix_page(by_version.get(SPARK_VERSION, {})))
    connectors = "; ".join(
        f"PySpark {v}: Spark {r['spark']}, `realTime=` keyword {'yes' if r['real_time_keyword'] else 'no'}, "
        f"connector {', '.join(r['connector'])}"
        for v, r in versions.items()
    )
    parts.append(
        f"Measured in {run_span(sum(len(r['cases']) for r in versions.values()), [_as_record(report)])} with "
        f"`{report['command']}` on {machine['cores']} "
        f"cores, {machine['memory_gib']} GiB, {machine['cpu_model']}, {machine['os']}, Python {machine['python']}; "
        f"1-minute load average at start {machine['load_average_1m_at_start']}. {connectors}. Kafka broker and "
        'topics: the lab\'s. "runs" means rows fed after the start reached the sink; "(py4j)": run with the py4j '
        "trigger because that PySpark has no `realTime=` keyword. A setting's cell is the value the session reports."
    )
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    sys.exit(main())

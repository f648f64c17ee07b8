"""Sink benchmark: generator -> Kafka -> real-time mode -> foreach -> Postgres, reconciled row by row.

`scripts/bench.py sink` runs `main()` here; `scripts/demo.py` runs one scenario with `run_scenario()`. For each
scenario the query starts on an empty topic, the generator then produces at the asked rate, and once it stops the
run waits for every key to reach Postgres. It reports:

- produced, written (distinct keys in the table), deduplicated (valid records whose key was already sent: dropped
  by dropDuplicates, or folded by the upsert), dead_lettered; lost = keys sent but not in the table;
  duplicate_keys = rows sharing a key (must be 0).
- rows_per_s: rows written per second between the first and the last write; drain_s: how long after the
  generator stopped the last row landed; kept_up: drain_s <= 5 s (drained within 5 s: the tables show whether the
  rate was held instead, rtm_lab.benchmarks.held_rate). A sink that falls behind shows a long drain, and its
  rows_per_s is then its capacity. (The JVM writer's rows wait for no batch end; a Python writer's last rows can
  wait for the end of the real-time batch, so at a long batch duration it does not drain within 5 s.)
- e2e_p50/p95/p99_ms: per row, the time Postgres wrote it (clock_timestamp() in the upsert) minus the time the
  generator created it, both on this machine's clock; rows created in the warm-up are left out.
"""

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass

import psycopg2
from psycopg2 import sql
from pyspark.errors import StreamingQueryException

from rtm_lab import cli, lab, loadgen, machine, percentiles, plans, sink_check, snippet_jar, topics, warmup
from rtm_lab.benchmarks import held_rate
from rtm_lab.errors import LabError
from rtm_lab.generated import SHUFFLE_WAIT_CONF, code_setting, markdown_table, setting, spark_settings
from rtm_lab.intervals import interval_ms
from rtm_lab.waiting import WaitTimeout, wait_until
from snippets.guides.kafka_to_postgres import BATCH_DURATION, FETCH_MAX_WAIT_MS, SESSION_CONF, start_pipeline
from snippets.guides.postgres_jvm_writer import jvm_postgres_writer
from snippets.guides.postgres_sink import PostgresSink, SinkConfig, create_tables

TABLE = "events"
KEPT_UP_DRAIN_S = 5.0
PROGRESS_EVERY_S = 2.0
DEFAULT_DWELL_MS = SinkConfig.max_dwell_ms  # the writer's own default


@dataclass
class Scenario:
    rate: float
    seconds: float
    dedup: bool = False
    partitions: int = 2
    max_rows: int = 1000
    dwell_ms: int = DEFAULT_DWELL_MS
    duplicate_pct: float = 5.0
    bad_pct: float = 0.5
    payload_bytes: int = 100
    warmup_s: float = 5.0
    linger_ms: float = 1.0
    writer: str = "python"  # or "jvm": snippets/jvm/rtmlab/PostgresUpsertWriter.java
    interval: str = BATCH_DURATION

    @property
    def name(self) -> str:
        size = f" {self.payload_bytes // 1000} KB rows" if self.payload_bytes >= 1000 else ""
        dwell = f" dwell {self.dwell_ms} ms" if self.dwell_ms != DEFAULT_DWELL_MS else ""
        return f"{self.writer} {'dedup' if self.dedup else 'direct'} {self.rate:.0f}/s{size}{dwell}"


WRITERS = {
    "python": "Python foreach (PostgresSink, execute_values upsert)",
    "jvm": "JVM ForeachWriter (PostgresUpsertWriter, JDBC batch upsert)",
}
QUICK = [Scenario(rate=1000, seconds=10, warmup_s=3), Scenario(rate=1000, seconds=10, warmup_s=3, writer="jvm")]
# Latency against rate for both writers, then throughput: direct and with dropDuplicates.
FULL = [
    *(Scenario(rate=rate, seconds=60, writer=writer) for writer in WRITERS for rate in (100, 1000, 5000)),
    *(Scenario(rate=20000, seconds=60, writer=writer, dedup=dedup) for writer in WRITERS for dedup in (False, True)),
    # Throughput: the JVM writer only (the Python one's latency is already seconds at 20,000 rows/s: sink-5s).
    Scenario(rate=50000, seconds=60, writer="jvm"),
]


def slots_for(partitions: int, dedup: bool) -> int:
    """Real-time mode runs every stage at once: source tasks, plus shuffle tasks when dropDuplicates adds a stage."""
    return partitions * 2 if dedup else partitions


def _create_schema(dsn: str, prefix: str) -> str:
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    conn.close()
    return name


def _drop_schema(dsn: str, name: str) -> None:
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
    conn.close()


def wait_until_reading(query, timeout_s: float = 120.0) -> None:
    """Wait until the first real-time batch is planned and its tasks read Kafka: not until it ends, which at the
    default batch duration (5 minutes) is minutes away. Rows produced from then on are read as they arrive."""
    try:
        plans.wait_for_real_time_scan(query, timeout_s)
    except Exception as exc:
        raise LabError(f"The query did not start: {exc}") from exc


PRIMING_KEY = 999_999_999  # the last key of the generator's key space: a run never reaches it


def prime(dsn: str, bootstrap: str, topic: str, schema: str, query, timeout_s: float = 180.0) -> None:
    """Send one event and wait until it is in Postgres, then delete it: the measured events find every task of the
    first real-time batch already reading, and the table holds only them. A plan alone does not mean that yet (on a
    busy machine the first poll came seconds after the plan)."""
    loadgen.produce_at_rate(
        bootstrap, topic, 1, count=1, event=loadgen.EventMix(first_key=PRIMING_KEY, bad_pct=0, duplicate_pct=0)
    )
    wait_until(
        lambda: PRIMING_KEY in sink_check.keys(dsn, schema, TABLE),
        timeout_s,
        "a first row in Postgres",
        abort=query.exception,
    )
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute(sql.SQL("DELETE FROM {} WHERE id = %s").format(sql.Identifier(schema, TABLE)), (PRIMING_KEY,))
    conn.close()


def query_failed(exc) -> LabError:
    """The query's own error in one line (its first: Spark's error class and message), for the one-line exit."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return LabError(f"the query failed: {first}")


def dropped_by_spark(query) -> int:
    """Rows dropDuplicates dropped, from the state operator metrics of every finished real-time batch."""
    return sum(
        op.get("customMetrics", {}).get("numDroppedDuplicateRows", 0)
        for progress in query.recentProgress
        for op in progress.get("stateOperators", [])
    )


def run_scenario(
    spark,
    state,
    scenario: Scenario,
    say=print,
    keep_tables: bool = False,
    prefix: str = "bench",
    settle: warmup.SettleRule | None = None,
) -> dict:
    """One scenario, reconciled. Rows created in the first `scenario.warmup_s` seconds are left out of the latency
    figures; with `settle`, rows created before the backlog settled are instead (their figures under "warmup"), and
    `scenario.seconds` is measured from there."""
    dsn, bootstrap = state.postgres_dsn, state.kafka_bootstrap
    schema = _create_schema(dsn, prefix)
    topic = topics.create_topic(bootstrap, topics.unique_name("sink-bench"), scenario.partitions)
    config = SinkConfig(dsn=dsn, schema=schema, table=TABLE, max_rows=scenario.max_rows, max_dwell_ms=scenario.dwell_ms)
    create_tables(config)
    query = None
    checkpoint = tempfile.mkdtemp(prefix="rtm-sink-bench-")
    try:
        writer = jvm_postgres_writer(spark, config) if scenario.writer == "jvm" else PostgresSink(config)
        query = start_pipeline(spark, bootstrap, topic, writer, checkpoint, scenario.dedup, scenario.interval)
        try:
            wait_until_reading(query)
            prime(dsn, bootstrap, topic, schema, query)
        except StreamingQueryException as exc:
            raise query_failed(exc) from None
        events = loadgen.EventMix(
            duplicate_pct=scenario.duplicate_pct, bad_pct=scenario.bad_pct, payload_bytes=scenario.payload_bytes
        )
        result: dict = {}
        stop = threading.Event()
        # With a settle rule the generator runs until the warm-up is over and `seconds` more; it is stopped then.
        produce_s = scenario.seconds + (settle.max_s if settle else 0)
        began_ms = time.time_ns() // 1_000_000
        producer = threading.Thread(
            target=lambda: result.update(
                stats=loadgen.produce_at_rate(
                    bootstrap, topic, scenario.rate, produce_s, event=events, linger_ms=scenario.linger_ms, stop=stop
                )
            ),
            daemon=True,
        )
        producer.start()
        started = time.monotonic()
        settling = warmup.Settling(settle, started) if settle else None
        # Rows created from `cut_ms` on are measured: after a fixed warm-up, or from where the backlog settled.
        cut_ms = began_ms + int(scenario.warmup_s * 1000)
        stop_at = None  # monotonic time the generator is stopped at, once the warm-up is over
        max_lag, next_say = 0, started + PROGRESS_EVERY_S
        with contextlib.closing(sink_check.Landed(dsn, schema, TABLE)) as landed:
            while producer.is_alive():
                # A settle rule is checked every second (progress is printed every two); the stop is timed to the tick.
                step = 1.0 if settling else PROGRESS_EVERY_S
                producer.join(timeout=step if stop_at is None else max(0.01, min(step, stop_at - time.monotonic())))
                if stop_at is not None and time.monotonic() >= stop_at:
                    stop.set()
                    producer.join()
                # What should have landed, read just before the count's snapshot: the backlog at that instant.
                now, sent, expected = time.monotonic(), events.counts.total(), len(events.keys) + events.bad
                rows, dead_letters = landed()
                lag = max(0, expected - rows - dead_letters)
                max_lag = max(max_lag, lag)
                warming = settling is not None and not settling.done
                ended = warming and settling is not None and settling.observe(now, lag)
                if ended:
                    cut_ms, stop_at = time.time_ns() // 1_000_000, now + scenario.seconds
                if now >= next_say or ended or not producer.is_alive():
                    next_say = now + PROGRESS_EVERY_S
                    say(
                        f"  {scenario.name:>14}  t={now - started:5.1f}s  produced {sent:>8}  "
                        f"in Postgres {rows:>8}  dead letters {dead_letters:>5}  behind {lag:>7}"
                        + ("  (warm-up)" if warming else "")
                    )
                if ended:
                    assert settling is not None  # only a settle rule ends the warm-up
                    say(f"  JVM warm-up {settling.summary()}; measuring {scenario.seconds:g} s from here")
        if "stats" not in result:
            raise LabError("The generator failed; see the error above.")
        stats = result["stats"]
        stopped_at = time.time()
        # A Python writer's last rows can wait for the batch end: allow one batch duration on top.
        drain_limit_s = max(60.0, scenario.seconds, interval_ms(scenario.interval) / 1000 + 30)
        found = sink_check.wait_for(
            dsn, schema, TABLE, len(events.keys), events.bad, timeout_s=drain_limit_s, query=query
        )
        if query.exception() is not None:
            raise query_failed(query.exception())
        if scenario.dedup and interval_ms(scenario.interval) <= 15_000:
            # Spark reports dropped rows when a real-time batch ends: worth waiting for only at a short batch duration.
            with contextlib.suppress(WaitTimeout):
                wait_until(lambda: dropped_by_spark(query) >= events.duplicates, 15, "dropped-row metrics")
        samples = sink_check.e2e_latencies_ms(dsn, schema, TABLE, since_created_ms=cut_ms)
        with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
            cur.execute(
                sql.SQL(
                    "SELECT extract(epoch FROM max(written_at) - min(written_at)), "
                    "extract(epoch FROM max(written_at)) FROM {}"
                ).format(sql.Identifier(schema, TABLE))
            )
            span_s, last_epoch = cur.fetchone()
        conn.close()
        drain_s = max(0.0, float(last_epoch or 0) - stopped_at)
        lost = len(events.keys - set(sink_check.keys(dsn, schema, TABLE)))
        summary = percentiles.summarize(samples)
        run = {
            "scenario": asdict(scenario),
            "name": scenario.name,
            "writer": WRITERS[scenario.writer],
            "produced": stats.sent,
            "asked_rate": scenario.rate,
            "produced_rate": round(stats.achieved_rate, 1),
            "generator_reached_rate": stats.reached(scenario.rate),
            "written": found.distinct_keys,
            "deduplicated": events.duplicates,
            "dropped_by_spark": dropped_by_spark(query) if scenario.dedup else None,
            "dead_lettered": found.dead_letters,
            "lost": lost,
            "duplicate_keys": found.duplicate_keys,
            "reconciles": stats.sent == found.distinct_keys + events.duplicates + found.dead_letters and lost == 0,
            "rows_per_s": round(found.rows / float(span_s), 1) if span_s else None,
            "max_behind_rows": max_lag,
            "drain_s": round(drain_s, 2),
            # Whether the last row landed within 5 s of the generator stopping, at any batch duration: a row the JVM
            # writer gets waits for no batch end (a Python writer's can, see the module docstring).
            "kept_up": drain_s <= KEPT_UP_DRAIN_S,
            "e2e_samples": summary.get("n", 0),
            "e2e_p50_ms": summary.get("p50_ms"),
            "e2e_p95_ms": summary.get("p95_ms"),
            "e2e_p99_ms": summary.get("p99_ms"),
            "e2e_max_ms": summary.get("max_ms"),
        }
        if settling is not None:
            warm = percentiles.summarize(sink_check.e2e_latencies_ms(dsn, schema, TABLE, until_created_ms=cut_ms))
            run["warmup"] = {
                "rule": asdict(settling.rule),  # the `settle` rule it was made with
                "settled": settling.settled_at is not None,
                "seconds": round(settling.seconds, 1),
                "worst_behind_rows": settling.worst_behind,
                "summary": settling.summary(),
                "e2e_samples": warm.get("n", 0),
                "e2e_p50_ms": warm.get("p50_ms"),
                "e2e_p95_ms": warm.get("p95_ms"),
                "e2e_p99_ms": warm.get("p99_ms"),
                "e2e_max_ms": warm.get("max_ms"),
            }
        if keep_tables:
            run["schema"] = schema
        return run
    finally:
        if query is not None:
            query.stop()
        shutil.rmtree(checkpoint, ignore_errors=True)  # a run leaves nothing in /tmp
        topics.delete_topic(bootstrap, topic)
        if not keep_tables:
            _drop_schema(dsn, schema)


# Two tables that fit a page, one row per run in each: how fast, then where every row went.
MD_COLUMNS = [
    ("name", "run"),
    ("interval", "batch duration"),
    ("produced_rate", "produced rows/s"),
    ("rows_per_s", "written rows/s"),
    ("e2e_p50_ms", "E2E p50 ms"),
    ("e2e_p95_ms", "E2E p95 ms"),
    ("e2e_p99_ms", "E2E p99 ms"),
    ("drain_s", "drain s"),
    ("held", "held"),
]
MD_COUNT_COLUMNS = [
    ("name", "run"),
    ("produced", "produced"),
    ("written", "written"),
    ("deduplicated", "deduplicated"),
    ("dead_lettered", "dead-lettered"),
    ("lost", "lost"),
    ("duplicate_keys", "duplicate keys"),
]


def _md_table(result: dict, columns: list[tuple[str, str]]) -> list[str]:
    rows = []
    for run in result["runs"]:
        cells = []
        for key, _ in columns:
            if key == "interval":
                value = run_interval(result, run)
            elif key == "held":
                value = _held(run)
            else:
                value = run.get(key)
            if isinstance(value, bool):
                cells.append("yes" if value else "no")
            elif isinstance(value, float):
                cells.append(f"{value:,.1f}")
            elif isinstance(value, int):
                cells.append(f"{value:,}")
            else:
                cells.append("-" if value is None else str(value))
        rows.append(cells)
    return markdown_table([title for _, title in columns], rows).rstrip("\n").split("\n")


def _held(run: dict) -> str:
    return held_rate.verdict(run.get("e2e_p99_ms"), run.get("lost"), run["asked_rate"], run.get("produced_rate"))


def _window(result: dict) -> str:
    """The rows each run's figures cover, from its scenario: those created after a fixed warm-up, or (a run with a
    settle rule, which records "warmup") those created in its `seconds` after the backlog settled."""
    windows = {
        f"in the {s['seconds']:.0f} s after its backlog settled"
        if "warmup" in r
        else f"after its first {s['warmup_s']:.0f} s (of {s['seconds']:.0f} s)"
        for r in result["runs"]
        for s in [r["scenario"]]
    }
    return "the rows each run created " + " or ".join(sorted(windows))


def run_interval(result: dict, run: dict) -> str:
    """The batch duration a run used, as its results file has it (never today's default)."""
    return run["scenario"].get("interval") or setting(result, "real_time_interval")


def _master_code(result: dict) -> str:
    """The master in backticks, a "(recovered)" marker after them, not inside."""
    recorded = result.get("spark_master")
    return f"`{recorded}`" if recorded else code_setting(result, "spark_master")


def _shuffle_wait(result: dict) -> str:
    recorded = result.get("session_conf", {}).get(SHUFFLE_WAIT_CONF)
    if recorded is not None:
        return f"{recorded} ms"
    value = setting(result, "streaming_shuffle_wait_ms")
    return value


def _fetch_wait(result: dict) -> str:
    return setting(result, "kafka_fetch_max_wait_ms", unit=" ms")


def markdown(result: dict) -> str:
    m = result["machine"]
    lines = [
        "<!-- generated by scripts/bench.py sink; do not edit -->",
        *_md_table(result, MD_COLUMNS),
        "",
        held_rate.caption(_window(result), [_held(run) for run in result["runs"]]),
        "",
        "Where the rows went, per run:",
        "",
        *_md_table(result, MD_COUNT_COLUMNS),
        "",
        f"Measured in {machine.run_span(len(result['runs']), [result])} with `{result['command']}` on {m['cores']} cores, {m['memory_gib']} GiB, "
        f"{m['cpu_model']}, {m['os']} (1-minute load average {result['load_average_1m']['start']} at the start, "
        f"{result['load_average_1m']['end']} at the end); Spark {result['versions']['spark']} with the Kafka connector "
        f"{result['versions'].get('spark_kafka_connector', '?')}, Postgres {result['postgres_version']}, "
        f"sink flush at {result['runs'][0]['scenario']['max_rows']} rows or {DEFAULT_DWELL_MS} ms (another dwell is in "
        "the run's name); "
        f"one Spark session for every run, master {_master_code(result)} (sized for the largest scenario: Kafka "
        f"partitions, x2 with dedup); Kafka fetch wait (`kafka.fetch.max.wait.ms`) {_fetch_wait(result)}, "
        f"streaming shuffle wait {_shuffle_wait(result)}"
        + "".join(f", `{k}={v}`" for k, v in result.get("session_conf", {}).items() if k != SHUFFLE_WAIT_CONF)
        + _recovered_note(result)
        + ". Writers: "
        + "; ".join(f"{k} = {v}" for k, v in WRITERS.items())
        + ".",
    ]
    return "\n".join(lines) + "\n"


def _recovered_note(result: dict) -> str:
    recovered = result.get("recovered")
    return f"; values marked (recovered) were {recovered['how']}, see the results file" if recovered else ""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="one short run (1,000 rows/s for 10 s)")
    parser.add_argument(
        "--rate", type=cli.positive_float, help="run one scenario at this many rows/s instead of the full set"
    )
    parser.add_argument("--dedup", action="store_true", help="with --rate: add dropDuplicates on the key")
    parser.add_argument(
        "--writer", choices=tuple(WRITERS), help="only this writer's runs (with --rate: default jvm; else both)"
    )
    parser.add_argument(
        "--batch-duration",
        "--interval",  # its earlier names, kept so recorded commands still run
        "--rtm-interval",
        dest="interval",
        type=cli.spark_interval,
        default=BATCH_DURATION,
        help=f'the real-time batch duration (default "{BATCH_DURATION}", Spark\'s default)',
    )
    parser.add_argument(
        "--seconds", type=cli.positive_float, help="production time per scenario (default 60, quick 10)"
    )
    parser.add_argument(
        "--partitions", type=cli.positive_int, default=2, help="Kafka partitions = sink tasks (default 2)"
    )
    parser.add_argument(
        "--max-rows", type=cli.positive_int, default=1000, help="sink flush at this many rows (1 = simple mode)"
    )
    parser.add_argument(
        "--dwell-ms",
        type=cli.positive_int,
        action="append",
        help=f"sink flush when a row waited this long (default {DEFAULT_DWELL_MS}); with --rate, repeat it to run one "
        "scenario per value",
    )
    parser.add_argument("--payload-bytes", type=cli.non_negative_int, help="filler bytes per event (default 100)")
    parser.add_argument(
        "--json", required=True, type=cli.json_output, help="result file; a Markdown table is written beside it"
    )


def scenarios(args: argparse.Namespace) -> list[Scenario]:
    dwells = args.dwell_ms or [DEFAULT_DWELL_MS]
    if args.rate is not None:
        chosen = [
            Scenario(rate=args.rate, seconds=60, dedup=args.dedup, writer=args.writer or "jvm", dwell_ms=dwell)
            for dwell in dwells
        ]
    elif args.dedup:
        raise LabError("--dedup needs --rate (the full set already includes a dedup run)")
    elif len(dwells) > 1:
        raise LabError("more than one --dwell-ms needs --rate: the dwell sweep runs one rate")
    else:
        chosen = [Scenario(**asdict(s)) for s in (QUICK if args.quick else FULL)]
        chosen = [s for s in chosen if args.writer in (None, s.writer)]
        for s in chosen:
            s.dwell_ms = dwells[0]
    for s in chosen:
        s.partitions, s.max_rows, s.interval = args.partitions, args.max_rows, args.interval
        if args.payload_bytes is not None:
            s.payload_bytes = args.payload_bytes
        if args.seconds is not None:
            s.seconds = args.seconds
        elif args.quick:
            s.seconds, s.warmup_s = 10, 3
    return chosen


def _postgres_version(dsn: str) -> str:
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute("SHOW server_version")
        version = cur.fetchone()[0]
    conn.close()
    return version


def main(args: argparse.Namespace, command: str) -> int:
    from rtm_lab.spark import spark_session

    say = lambda line: print(line, flush=True)  # noqa: E731
    try:
        chosen = scenarios(args)
        state, started = lab.up(log=say)
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 2
    try:
        slots = max(slots_for(s.partitions, s.dedup) for s in chosen)
        say(f"spark     local[{slots}], {len(chosen)} scenario(s)")
        conf = {**SESSION_CONF, "spark.sql.shuffle.partitions": str(args.partitions)}
        if any(s.writer == "jvm" for s in chosen):
            conf["spark.jars"] = snippet_jar.session_jars()  # before the session starts: Spark reads it once
        spark = spark_session("rtm-bench-sink", slots=slots, conf=conf)
        runs = []
        load_at_start = round(os.getloadavg()[0], 2)
        began = machine.utc_now()
        for scenario in chosen:
            say(f"run       {scenario.name} for {scenario.seconds:.0f}s ({scenario.partitions} partitions)")
            runs.append(run_scenario(spark, state, scenario, say))
            r = runs[-1]
            say(
                f"result    {r['name']}: {r['rows_per_s']} rows/s written, E2E p50 {r['e2e_p50_ms']} ms "
                f"p95 {r['e2e_p95_ms']} ms p99 {r['e2e_p99_ms']} ms, lost {r['lost']}, duplicate keys "
                f"{r['duplicate_keys']}"
            )
        result = {
            "benchmark": "sink",
            "command": command,
            "started": began,
            "timestamp": machine.utc_now(),
            "machine": machine.describe(),
            "versions": machine.pinned_versions(),
            "postgres_version": _postgres_version(state.postgres_dsn),
            "session_conf": {k: v for k, v in conf.items() if k != "spark.jars"},
            "spark_master": spark.sparkContext.master,  # one session, sized for the largest scenario, ran them all
            # Every setting the figures depend on, from the run itself: a table never fills them from defaults.
            "settings": spark_settings(spark, kafka_fetch_max_wait_ms=FETCH_MAX_WAIT_MS),
            # Other processes on the machine skew every figure; the load shows whether the run had it to itself.
            "load_average_1m": {"start": load_at_start, "end": round(os.getloadavg()[0], 2)},
            "runs": runs,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
        args.json.with_suffix(".md").write_text(markdown(result))
        say(f"wrote     {args.json} and {args.json.with_suffix('.md')}")
        return 0 if all(r["lost"] == 0 and r["duplicate_keys"] == 0 for r in runs) else 1
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 2
    finally:
        if started:
            lab.down(only=started, log=say)

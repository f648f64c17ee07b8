#!/usr/bin/env python3
"""The main demo on the local lab, with live progress. Two pipelines:

  postgres (default)  generated events -> Kafka -> Spark real-time mode -> dropDuplicates -> foreach -> Postgres,
                      through the low-latency JVM writer (--writer python for the Python one); prints rows/s,
                      end-to-end latency (event creation -> row written), duplicates removed, dead-lettered records
                      and the row count in Postgres (the table is kept: the schema is printed).
  kafka               Kafka -> real-time mode -> Kafka, latency from broker timestamps (LogAppendTime topics).
  --monitor           the kafka demo watched live: the latency monitor (snippets/guides/monitoring.py) exports
                      Prometheus metrics, the lab's Prometheus scrapes them every second, and each progress line
                      adds the p99 PromQL computes; prints the Prometheus URL (kafka is the default pipeline then).

Both run at Spark's default batch duration (5 minutes, --batch-duration to change it): a 30 s demo crosses no
batch boundary, so no row waits for one. Spark's own warnings go to a log file the summary names.
Starts the lab if it is not running (and stops it again at the end if it started it). SPARK_MASTER runs the query
on that cluster instead of local[N].

The latency figures are the pipeline's in steady state: the demo first warms up until the backlog (events produced
but not yet out) has stayed under --settle-rows for --settle-seconds (a freshly started JVM runs the query slowly
until it has compiled it: on a first run it can fall a second behind for 15-20 s), prints how long that took and the warm-up's own figures on a line of
their own, then measures --seconds. If the backlog never settles within --warmup-max, it measures anyway and says the
figures are not steady state.

--record FILE writes the summary the run ends with to FILE (docs/results/demo-screen.txt is the one the README and the
get-started page show), under a header naming the command, the date, how long the run took, the machine and its load.
A run that fails is not recorded.
"""

import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile
import threading
import time

from rtm_lab import cli, demo_screen, lab, loadgen, paths, percentiles, plans, snippet_jar, topics, warmup
from rtm_lab.apps import live_monitor
from rtm_lab.benchmarks import sink as bench_sink
from rtm_lab.errors import LabError
from rtm_lab.paths import PROJECT_ROOT
from rtm_lab.signals import exit_cleanly_on_termination
from rtm_lab.spark import spark_session
from rtm_lab.spark_log import log_line
from snippets.guides.kafka_to_postgres import BATCH_DURATION, SESSION_CONF
from snippets.quickstart.kafka_to_kafka import start_pipeline

LOG_APPEND_TIME = {"message.timestamp.type": "LogAppendTime"}
# The sink benchmark's results, the 5-minute batch duration's first: the demo's summary quotes the other writer from them.
SINK_RESULTS = ("docs/results/sink.json", "docs/results/sink-5s.json")
# AQE does not apply to streaming queries (real-time plans run without it): off from the start, the session says what
# runs. Spark still warns that it turned it off (AQE_OFF below): the demo test shows the setting does not silence it.
NO_AQE = {"spark.sql.adaptive.enabled": "false"}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = cli.parser_from_doc("demo.py", __doc__)
    parser.add_argument(
        "--pipeline", choices=("postgres", "kafka"), help="which demo to run (default postgres; kafka with --monitor)"
    )
    parser.add_argument(
        "--monitor",
        action="store_true",
        help="kafka demo: export the latency monitor's metrics to the lab's Prometheus (started if needed) and print "
        "the live p99 it computes",
    )
    parser.add_argument("--rate", type=cli.positive_float, help="events per second (default 2000 postgres, 500 kafka)")
    parser.add_argument(
        "--seconds",
        type=cli.positive_float,
        metavar="SECONDS",
        help="how long to measure, after the warm-up (default 30 postgres, 20 kafka)",
    )
    parser.add_argument("--partitions", type=cli.positive_int, default=2, help="partitions of each topic (default 2)")
    parser.add_argument("--no-dedup", action="store_true", help="postgres: skip dropDuplicates (upserts fold keys)")
    parser.add_argument(
        "--writer",
        choices=tuple(bench_sink.WRITERS),
        default="jvm",
        help="postgres: the low-latency JVM writer (default) or the Python PostgresSink",
    )
    parser.add_argument(
        "--batch-duration",
        "--interval",  # its earlier name, kept so recorded commands still run
        dest="interval",
        type=cli.spark_interval,
        default=BATCH_DURATION,
        help=f'the real-time batch duration (default "{BATCH_DURATION}", Spark\'s default; 5 seconds is the '
        "minimum: rows wait for no boundary, but each boundary stalls the stream briefly)",
    )
    parser.add_argument(
        "--settle-rows",
        type=cli.positive_int,
        metavar="ROWS",
        help="warm-up: the backlog (events produced, not yet out) counts as settled under this many rows (default a "
        "quarter second of events: 500 at 2000/s)",
    )
    parser.add_argument(
        "--settle-seconds",
        type=cli.positive_float,
        metavar="SECONDS",
        default=10,
        help="warm-up: ... when it stays under --settle-rows this many seconds straight (default 10); the latency "
        "figures are of the --seconds after that",
    )
    parser.add_argument(
        "--warmup-max",
        type=cli.positive_float,
        metavar="SECONDS",
        default=120,
        help="warm-up: give up after this many seconds, measure anyway and say the figures are not steady state "
        "(default 120)",
    )
    parser.add_argument(
        "--record",
        type=cli.text_output,
        metavar="FILE.txt",
        help="write the summary the run ends with to this file, under a header with the date, duration, machine and "
        "load (docs/results/demo-screen.txt is the one the README shows)",
    )
    args = parser.parse_args(argv)
    if args.monitor and args.pipeline == "postgres":
        parser.error("--monitor watches the Kafka -> Kafka demo: drop --pipeline postgres (or give --pipeline kafka)")
    args.pipeline = args.pipeline or ("kafka" if args.monitor else "postgres")
    postgres = args.pipeline == "postgres"
    args.rate = args.rate if args.rate is not None else (2000 if postgres else 500)
    args.seconds = args.seconds if args.seconds is not None else (30 if postgres else 20)
    args.settle_rows = args.settle_rows if args.settle_rows is not None else max(1, round(args.rate / 4))
    if args.warmup_max < args.settle_seconds:
        parser.error(f"--warmup-max ({args.warmup_max:g}) is shorter than --settle-seconds ({args.settle_seconds:g})")
    return args


def settle_rule(args: argparse.Namespace) -> warmup.SettleRule:
    return warmup.SettleRule(behind_rows=args.settle_rows, hold_s=args.settle_seconds, max_s=args.warmup_max)


def figures(summary: dict) -> str:
    """Percentiles as the summary prints them, the sample count opening the note after them."""
    if not summary.get("n"):
        return "no rows  ("
    return (
        f"p50 {summary['p50_ms']:.0f} ms  p95 {summary['p95_ms']:.0f} ms  p99 {summary['p99_ms']:.0f} ms  "
        f"(n={summary['n']} "
    )


def e2e_figures(run: dict) -> dict:
    """The sink benchmark's e2e_* fields as a percentiles.summarize() summary."""
    return {"n": run["e2e_samples"], **{k.removeprefix("e2e_"): v for k, v in run.items() if k.endswith("_ms")}}


def latency_lines(warm_up: dict, warm: dict, steady: dict, seconds: float, what: str, unit: str) -> list[str]:
    """The warm-up (how long, why it ended: `warm_up` holds "settled" and "summary") and its own figures on one line
    each, then the measured figures, named steady state only when the backlog settled."""
    settled = warm_up["settled"]
    return [
        f"JVM warm-up     {warm_up['summary']}",
        f"warm-up figures {figures(warm)}{unit} during the warm-up: what a freshly started query does; left out below)",
        f"end-to-end      {figures(steady)}{unit} in the {seconds:g} s after the warm-up; {what}): "
        + ("steady state" if settled else "NOT steady state, the backlog never settled (see JVM warm-up above)"),
    ]


def started_session(app_name: str, slots: int, conf: dict[str, str], log_file, say):
    """The demo's Spark session, its warnings in `log_file`; says which master it really runs on."""
    spark = spark_session(app_name, slots=slots, conf=conf, log_file=log_file)
    say(f"spark     running on {spark.sparkContext.master} (Spark's log: {log_file})")
    return spark


def other_writer_line(writer: str, rate: float) -> str:
    """One line on what the other writer gave in the newest sink benchmark results on this machine."""
    other = "python" if writer == "jvm" else "jvm"
    for name in SINK_RESULTS:
        path = PROJECT_ROOT / name
        if not path.is_file():
            continue
        result = json.loads(path.read_text())
        runs = [r for r in result["runs"] if r["scenario"]["writer"] == other]
        if runs:
            run = min(runs, key=lambda r: (abs(r["asked_rate"] - rate), r["scenario"]["dedup"]))
            interval = bench_sink.run_interval(result, run)  # as recorded: "not recorded" if the run did not say
            return (
                f'the {other} writer, measured by the sink benchmark ({run["name"]}, realTime="{interval}"): '
                f"E2E p50 {run['e2e_p50_ms']:.0f} ms, p95 {run['e2e_p95_ms']:.0f} ms ({name})"
            )
    return f"the {other} writer: no sink benchmark results yet (python scripts/bench.py sink --help)"


def postgres_demo(state, args, say, log_file) -> int:
    scenario = bench_sink.Scenario(
        rate=args.rate,
        seconds=args.seconds,
        dedup=not args.no_dedup,
        partitions=args.partitions,
        writer=args.writer,
        interval=args.interval,
    )
    slots = bench_sink.slots_for(scenario.partitions, scenario.dedup)
    say(f"spark     starting ({slots} task slots: {scenario.partitions} Kafka partitions, dedup={scenario.dedup}) ...")
    conf = {**SESSION_CONF, **NO_AQE, "spark.sql.shuffle.partitions": str(scenario.partitions)}
    if scenario.writer == "jvm":
        conf["spark.jars"] = snippet_jar.session_jars()
    spark = started_session("rtm-demo-postgres", slots, conf, log_file, say)
    rule = settle_rule(args)
    say(
        f'query     Kafka -> real-time mode (realTime="{args.interval}") -> Postgres via the {args.writer} writer; '
        f"producing {args.rate:.0f} events/s: a warm-up until {rule.describe()} (at most {rule.max_s:g} s), "
        f"then {args.seconds:g} s measured"
    )
    run = bench_sink.run_scenario(spark, state, scenario, say, keep_tables=True, prefix="demo", settle=rule)
    say("")
    say(f"produced        {run['produced']} events at {run['produced_rate']:.0f}/s (asked {args.rate:.0f}/s)")
    say(f"written         {run['rows_per_s']} rows/s (first to last write)")
    steady, warm = e2e_figures(run), e2e_figures(run["warmup"])
    for line in latency_lines(
        run["warmup"], warm, steady, args.seconds, "event created -> row written", "rows created"
    ):
        say(line)
    say(f"other writer    {other_writer_line(args.writer, args.rate)}")
    # Counted at the sink: Spark reports dropDuplicates' own count only when a real-time batch ends.
    removed = run["produced"] - run["written"] - run["dead_lettered"]
    how = "dropDuplicates" if scenario.dedup else "folded by the upsert"
    say(f"duplicates      {removed} removed ({how}; produced - rows written - dead letters)")
    say(f"dead-lettered   {run['dead_lettered']} (in {run['schema']}.dead_letter, with the raw value and reason)")
    say(
        f"rows in Postgres {run['written']} in {run['schema']}.events; lost {run['lost']}, duplicate keys "
        f"{run['duplicate_keys']}"
    )
    return 0 if run["lost"] == 0 and run["duplicate_keys"] == 0 else 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    exit_cleanly_on_termination()
    began, load_at_start = time.monotonic(), os.getloadavg()[0]
    printed: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        printed.append(line)

    code = run_demo(args, say)
    if args.record:
        if code != 0:
            say(f"record          not written: the run failed (exit {code}); {args.record} is unchanged")
            return code
        command = shlex.join(["python", "scripts/demo.py", *(sys.argv[1:] if argv is None else argv)])
        head = demo_screen.header(command, time.monotonic() - began, load_at_start)
        demo_screen.write(args.record, head, demo_screen.summary(printed))
        say(f"record          the summary above, written to {args.record}")
    return code


def run_demo(args: argparse.Namespace, say) -> int:
    """The demo itself: starts the lab if needed, runs the pipeline, prints its summary; the exit code."""
    try:
        state, started = lab.up(log=say, with_services={"prometheus"} if args.monitor else set())
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    made_topics: list[str] = []  # this run's topics and checkpoint are removed at the end, whatever happens
    cleanups: list = []  # the monitor's thread, server and scrape target, when --monitor runs
    checkpoint = tempfile.mkdtemp(prefix="rtm-demo-ckpt-")
    log_file = paths.state_dir() / f"demo-{args.pipeline}-spark.log"
    ended_cleanly = False  # whether the query stopped without an error of its own: Spark's log line depends on it
    try:
        if args.pipeline == "postgres":
            code = postgres_demo(state, args, say, log_file)  # a failed query raises LabError
            ended_cleanly = True
            return code
        bootstrap = state.kafka_bootstrap
        for prefix in ("demo-in", "demo-out"):
            made_topics.append(
                topics.create_topic(bootstrap, topics.unique_name(prefix), args.partitions, LOG_APPEND_TIME)
            )
        source, sink = made_topics
        slots = args.partitions  # a stateless query runs one task per source partition, all at once
        say(f"spark     starting ({slots} task slots) ...")
        spark = started_session("rtm-demo", slots, NO_AQE, log_file, say)
        query = start_pipeline(spark, bootstrap, source, sink, checkpoint, args.interval)
        # Wait until the first real-time batch reads Kafka, not until it ends (minutes away at 5 minutes).
        plans.wait_for_real_time_scan(query, timeout_s=90)
        rule = settle_rule(args)
        say(
            f"query     running in real-time mode ({plans.REAL_TIME_SCAN} in the plan); producing "
            f"{args.rate:.0f} events/s: a warm-up until {rule.describe()} (at most {rule.max_s:g} s), then "
            f"{args.seconds:g} s measured"
        )
        reader = topics.SinkLatencyReader(bootstrap, sink).start()
        if args.monitor:
            watch = live_monitor.start(state, bootstrap, source, sink, say)
            cleanups.append(watch.stop)
        result: dict = {}
        produced = [0]  # events handed to the producer so far; an event's id is its sequence number

        def event(seq: int) -> dict:
            produced[0] = seq + 1
            return loadgen.make_event(seq)

        stop = threading.Event()
        producer = threading.Thread(
            target=lambda: result.update(
                stats=loadgen.produce_at_rate(
                    bootstrap, source, args.rate, args.seconds + rule.max_s, event=event, stop=stop
                )
            ),
            daemon=True,
        )
        producer.start()
        began = time.monotonic()
        settling = warmup.Settling(rule, began)
        cut_id, stop_at, next_say = 0, None, began + 2
        while producer.is_alive():
            # The rule is checked every second (progress printed every two); the stop is timed to the tick.
            producer.join(timeout=1.0 if stop_at is None else max(0.01, min(1.0, stop_at - time.monotonic())))
            if stop_at is not None and time.monotonic() >= stop_at:
                stop.set()
                producer.join()
            delivered = len(reader.samples)
            behind = max(0, produced[0] - delivered)  # read after the delivered count: never less than the truth
            now = time.monotonic()
            warming = not settling.done
            ended = warming and settling.observe(now, behind)
            if ended:
                cut_id, stop_at = produced[0], now + args.seconds
            if now >= next_say or ended or not producer.is_alive():
                next_say = now + 2
                recent = [ms for _, ms in reader.samples[-int(args.rate * 2) :]]
                say(
                    f"  t={now - began:5.1f}s  delivered={delivered:>7}  behind {behind:>6}  "
                    f"last 2 s: {percentiles.format_summary(percentiles.summarize(recent))}"
                    + (f"  {watch.p99_line()}" if args.monitor else "")
                    + ("  (warm-up)" if warming else "")
                )
            if ended:
                say(f"  JVM warm-up {settling.summary()}; measuring {args.seconds:g} s from here")
        if "stats" not in result:
            raise LabError("The generator failed; see the error above.")
        stats = result["stats"]
        deadline = time.monotonic() + 30
        while len(reader.seen_ids) < stats.sent and time.monotonic() < deadline:
            time.sleep(0.2)
        reader.stop()
        query.stop()
        ended_cleanly = query.exception() is None
        warm = percentiles.summarize([ms for event_id, ms in reader.samples if event_id < cut_id])
        steady = percentiles.summarize([ms for event_id, ms in reader.samples if event_id >= cut_id])
        missing = stats.sent - len(reader.seen_ids)
        say("")
        say(f"produced        {stats.sent} events at {stats.achieved_rate:.0f}/s (asked {args.rate:.0f}/s)")
        say(f"delivered       {len(reader.seen_ids)}  missing {missing}  duplicates {reader.duplicates}")
        warm_up = {"settled": settling.settled_at is not None, "summary": settling.summary()}
        what = "Kafka in -> Kafka out, broker LogAppendTime stamps"
        for line in latency_lines(warm_up, warm, steady, args.seconds, what, "events produced"):
            say(line)
        if args.monitor:
            say(watch.summary_line(steady))
        return 0 if missing == 0 else 1
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        for cleanup in cleanups:
            cleanup()
        say(log_line(log_file, ended_cleanly))  # after the query stopped: what Spark logged on the way out counts too
        shutil.rmtree(checkpoint, ignore_errors=True)
        for name in made_topics if "kafka" not in started else []:
            topics.delete_topic(state.kafka_bootstrap, name)
        if started:
            lab.down(only=started, log=say)


if __name__ == "__main__":
    sys.exit(cli.run(main))

"""Settings tried against the boundary stall: the Kafka -> Kafka query at the 5 s worst case, once per setting.

Real-time mode's tail comes from batch boundaries (see the batch duration sweep), and the shortest batch duration has the most of
them, so each setting here is measured where it can matter most: `realTime="5 seconds"`, the headline rate, the same
boundary observer as the sweep. One row per setting, median and spread over `--repeat` runs; the runs of one repeat
follow each other so a load change spreads over the rows instead of hitting one.

    python scripts/bench.py settings --repeat 2 --json docs/results/boundary-settings.json
"""

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rtm_lab import cli
from rtm_lab.benchmarks import interval_sweep
from rtm_lab.benchmarks.run_record import record_lines
from rtm_lab.generated import generated_note, markdown_table
from rtm_lab.intervals import TEST_INTERVAL

ASYNC_BY_DEFAULT = "spark.sql.streaming.realTimeMode.asyncProgressTrackingByDefault.enabled"


@dataclass(frozen=True)
class Setting:
    name: str
    what: str
    spark_conf: dict = field(default_factory=dict)
    fetch_wait_ms: int | None = (
        None  # None: the benchmark's own value (rtm_lab.benchmarks.latency_child.FETCH_MAX_WAIT_MS)
    )


def _gc(flags: str) -> dict:
    # local[N]: the executors are threads of the driver JVM, so the driver's options are the ones that count.
    return {"spark.driver.extraJavaOptions": flags, "spark.executor.extraJavaOptions": flags}


SETTINGS = (
    Setting("defaults", "Spark 4.3 defaults (stateless: asynchronous progress tracking on), G1 GC"),
    Setting("sync_progress", "progress tracking synchronous", {ASYNC_BY_DEFAULT: "false"}),
    Setting("zgc", "Z garbage collector on the driver/executor JVM (`-XX:+UseZGC`)", _gc("-XX:+UseZGC")),
    Setting("parallel_gc", "parallel garbage collector (`-XX:+UseParallelGC`)", _gc("-XX:+UseParallelGC")),
    Setting("fetch_wait_500", "Kafka's default `fetch.max.wait.ms` (500 ms) instead of 10 ms", fetch_wait_ms=500),
)
BY_NAME = {s.name: s for s in SETTINGS}
QUICK = {"rate": 1000.0, "seconds": 12.0, "warmup": 1.0}
FULL = {"rate": 2000.0, "seconds": 60.0, "warmup": 5.0}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="a smoke run for tests: 1000 events/s, 12 s per setting")
    parser.add_argument(
        "--setting",
        action="append",
        choices=list(BY_NAME),
        help="measure only these settings (repeatable; default: all): "
        + "; ".join(f"{s.name}: {s.what}" for s in SETTINGS),
    )
    parser.add_argument("--rate", type=cli.positive_float, help="events per second (default 2000)")
    parser.add_argument("--seconds", type=cli.positive_float, help="seconds of production per run (default 60)")
    parser.add_argument("--repeat", type=cli.positive_int, default=1, help="runs per setting (default 1)")
    parser.add_argument(
        "--json", required=True, type=cli.json_output, help="where to write the result JSON (a .md goes beside it)"
    )


def main(args: argparse.Namespace, command: str) -> int:
    from rtm_lab.benchmarks import latency_child as latency
    from rtm_lab.benchmarks import run_record

    preset = QUICK if args.quick else FULL
    rate, seconds, warmup = args.rate or preset["rate"], args.seconds or preset["seconds"], preset["warmup"]
    chosen = [BY_NAME[n] for n in args.setting] if args.setting else list(SETTINGS)
    with run_record.on_the_lab(command) as (record, state):
        done: list[dict[str, Any]] = []
        total = args.repeat * len(chosen)
        try:
            for i in range(args.repeat):
                for setting in chosen:
                    print(f"({len(done) + 1}/{total}) repeat {i + 1}: {setting.name} ({setting.what}) ...", flush=True)
                    cfg = latency.settings(TEST_INTERVAL, setting.fetch_wait_ms or latency.FETCH_MAX_WAIT_MS)
                    extra = ["--observe-boundaries"]
                    for key, value in setting.spark_conf.items():
                        extra += ["--spark-conf", f"{key}={value}"]
                    result = latency.run_child(
                        "realtime", state.kafka_bootstrap, rate, seconds, warmup, cfg, None, extra
                    )
                    done.append({"repeat": i, "setting": setting.name, "seconds": seconds, "result": result})
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    rows = []
    for setting in chosen:
        row = interval_sweep.row(
            setting.name, "realtime", TEST_INTERVAL, [d for d in done if d["setting"] == setting.name]
        )
        row["what"], row["spark_conf"] = setting.what, setting.spark_conf
        row["fetch_wait_ms"] = setting.fetch_wait_ms or latency.FETCH_MAX_WAIT_MS
        for run in row["runs"]:  # the timeline and CDF are the sweep's; this table needs only the figures
            for bulky in (*interval_sweep.BULKY, "timeline", "boundaries"):
                run.pop(bulky, None)
        rows.append(row)
    result = {
        "benchmark": "boundary-settings",
        "rtm_interval": TEST_INTERVAL,
        "rate": rate,
        "seconds": seconds,
        "warmup_s": warmup,
        "repeat": args.repeat,
        "rows": rows,
        "settings": latency.settings(TEST_INTERVAL),
        **record.record(),
    }
    md = write(result, Path(args.json))
    print(markdown(result))
    print(f"wrote {args.json}, {md}")
    return 0


# Two tables that fit a page: the figures per setting, then what the query ran with (long class names).
SEEN_HEADER = ["setting", "engine", "garbage collectors"]
HEADER = [
    "setting",
    "runs",
    "boundaries",
    "p50 ms",
    "p99 ms",
    "p99.9 ms",
    "stall per boundary ms",
    "batch overrun ms",
]
FIGURES = ("p50_ms", "p99_ms", "p99.9_ms", "stall_median_ms", "overrun_median_ms")


def markdown(result: dict) -> str:
    from rtm_lab.benchmarks.sweep_report import cell

    rows, seen = [], []
    for row in result["rows"]:
        f = row["figures"]
        boundaries = f["boundaries_crossed"]["median"]
        ran = row["runs"][0]
        seen.append([row["what"], f"`{ran.get('engine', '?')}`", " + ".join(ran.get("gc", []))])
        rows.append(
            [row["what"], len(row["runs"]), "-" if boundaries is None else f"{boundaries:g}"]
            + [cell(f[name]) for name in FIGURES]
        )
    s = result["settings"]
    return "\n".join(
        [
            generated_note("python scripts/tables.py boundary-settings"),
            "",
            f'Query: Kafka -> parse JSON, re-encode -> Kafka, `realTime="{result["rtm_interval"]}"`, '
            f"**{result['rate']:,.0f} events/s**, {result['seconds']:.0f} s per run (the first "
            f"{result['warmup_s']:.0f} s left out); median over {result['repeat']} run(s), range in brackets.",
            "",
            markdown_table(HEADER, rows, ["", "right", "right", "right", "right", "right", "right", "right"]),
            "What each run's query ran with (its execution engine and the JVM's garbage collectors, read back):",
            "",
            markdown_table(SEEN_HEADER, seen),
            *record_lines(
                result,
                f"`{s['spark_master']}`, {s['partitions']} partitions per topic, producer `linger.ms=0`",
                runs=sum(len(row["runs"]) for row in result["rows"]),
            ),
            "",
        ]
    )


def write(result: dict, json_path: Path) -> Path:
    import json

    json_path.write_text(json.dumps(result, indent=1) + "\n")
    md = json_path.with_suffix(".md")
    md.write_text(markdown(result))
    return md

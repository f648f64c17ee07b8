"""The latency monitor's cost and its agreement (`scripts/bench.py monitor`): the quick-start query in real-time mode
with and without the monitoring guide's monitor running beside it, the two interleaved, several times.

Each run is the latency benchmark's real-time run (`rtm_lab.benchmarks.latency_child`: same generator, topics, warm-up
and broker-timestamp clock); in the runs "with", snippets/guides/monitoring.py runs as its own process on the run's
topics and the lab's Prometheus scrapes it every second. Published: the pipeline's p50 and p99 with and without (the
median and range of the runs), and for each run with the monitor, PromQL's p50 and p99 over everything it read beside
the same percentiles of the records the benchmark read, and whether each pair falls in one histogram bucket.
"""

import argparse
import json
import sys
from typing import Any

from rtm_lab import cli
from rtm_lab.benchmarks import interval_sweep, run_record
from rtm_lab.benchmarks.latency_child import run_child, settings
from rtm_lab.generated import generated_note

DEFAULTS: dict[str, Any] = {"rate": 2000.0, "seconds": 60.0, "warmup": 5.0, "repeat": 3}
QUICK: dict[str, Any] = {"rate": 500.0, "seconds": 6.0, "warmup": 2.0, "repeat": 1}
FIGURES = ("p50_ms", "p99_ms", "p99.9_ms", "max_ms")
# The cost the monitor was meant to stay within, on the p99.
GOAL_MS = 1.0


def run(bootstrap: str, prom_port: int, rate: float, seconds: float, warmup: float, repeat: int, say) -> dict:
    cfg = settings()
    runs: dict[str, list[dict]] = {"without": [], "with": []}
    total = 2 * repeat
    for i in range(repeat):
        # Interleaved, and the order flipped every repeat, so neither side always runs on a warmer machine.
        order = ("without", "with") if i % 2 == 0 else ("with", "without")
        for side in order:
            say(f"({len(runs['without']) + len(runs['with']) + 1}/{total}) {side} the monitor, repeat {i + 1}")
            extra = ("--monitor-prom-port", str(prom_port)) if side == "with" else ()
            runs[side].append(run_child("realtime", bootstrap, rate, seconds, warmup, cfg, None, extra=extra))
    return {
        "benchmark": "monitor",
        "rate": rate,
        "seconds": seconds,
        "warmup_s": warmup,
        "repeat": repeat,
        "settings": cfg,
        "runs": runs,
        "figures": {
            side: {f: interval_sweep.spread([r.get(f) for r in rs]) for f in FIGURES} for side, rs in runs.items()
        },
    }


def _ms(value) -> str:
    return "-" if value is None else f"{value:,.1f}"


def markdown(result: dict) -> str:
    fig = result["figures"]
    lines = [
        generated_note("python scripts/tables.py monitor-cost"),
        "",
        f'**{result["rate"]:,.0f} events/s**, Kafka -> real-time mode (`realTime="{result["settings"]["rtm_interval"]}"`) '
        f"-> Kafka, {result['seconds']:.0f} s per run after a {result['warmup_s']:.0f} s warm-up, {result['repeat']} "
        "runs each way, interleaved: the median with the range in brackets.",
        "",
        "| latency monitor | " + " | ".join(f.replace("_ms", "") + " ms" for f in FIGURES) + " | missing |",
        "|---|" + "--:|" * (len(FIGURES) + 1),
    ]
    for side in ("without", "with"):
        cells = []
        for f in FIGURES:
            s = fig[side][f]
            cells.append(
                _ms(s["median"]) if s["min"] == s["max"] else f"{_ms(s['median'])} ({_ms(s['min'])}-{_ms(s['max'])})"
            )
        missing = sum(r.get("missing") or 0 for r in result["runs"][side])
        lines.append(f"| {side} | " + " | ".join(cells) + f" | {missing} |")
    lines += ["", *cost_sentences(result), ""]
    lines += [
        "PromQL against the records, each run with the monitor (everything the monitor read, warm-up included):",
        "",
        "| run | records | PromQL p50 ms | records' p50 ms | same bucket | PromQL p99 ms | records' p99 ms | same bucket |",
        "|---|--:|--:|--:|---|--:|--:|---|",
    ]
    for i, r in enumerate(result["runs"]["with"], start=1):
        m = r.get("monitor", {})
        p50, p99 = m.get("p50", {}), m.get("p99", {})
        lines.append(
            f"| {i} | {m.get('records', 0):,} | {_ms(p50.get('promql_ms'))} | {_ms(p50.get('records_ms'))} | "
            f"{'yes' if p50.get('same_bucket') else 'no'} | {_ms(p99.get('promql_ms'))} | {_ms(p99.get('records_ms'))} | "
            f"{'yes' if p99.get('same_bucket') else 'no'} |"
        )
    lines.append("")
    return "\n".join(lines + run_record.record_lines(result, runs=sum(map(len, result["runs"].values())))) + "\n"


def p99_delta(result: dict) -> float:
    return result["figures"]["with"]["p99_ms"]["median"] - result["figures"]["without"]["p99_ms"]["median"]


def resolves_goal(result: dict) -> bool:
    """Whether the runs can tell a p99 moved by GOAL_MS from no move: only when each side's p99s lie within the goal."""
    p99 = result["figures"]
    return all(p99[side]["p99_ms"]["max"] - p99[side]["p99_ms"]["min"] <= GOAL_MS for side in ("without", "with"))


def cost_sentences(result: dict) -> list[str]:
    """What the runs say about the monitor's cost: the p99 difference, whether the runs can resolve the goal, and the
    tail beyond the p99 (p99.9 and max), each from the medians."""
    fig = result["figures"]
    text = f"Median p99 with the monitor minus without: {p99_delta(result):+.1f} ms."
    if not resolves_goal(result):
        widest = max(("without", "with"), key=lambda s: fig[s]["p99_ms"]["max"] - fig[s]["p99_ms"]["min"])
        text += (
            f" These {result['repeat']} runs each way cannot resolve {GOAL_MS:.0f} ms: the p99 of the runs {widest} "
            f"the monitor ranged {_ms(fig[widest]['p99_ms']['min'])}-{_ms(fig[widest]['p99_ms']['max'])} ms."
        )
    tail = [
        f"{name} {_ms(fig['without'][f]['median'])} -> {_ms(fig['with'][f]['median'])} ms"
        for f, name in (("p99.9_ms", "p99.9"), ("max_ms", "max"))
    ]
    return [text + " Further out, median without -> with the monitor: " + "; ".join(tail) + "."]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="a smoke run for tests: 500 events/s, 6 s, once each way")
    parser.add_argument("--rate", type=cli.positive_float, help="events per second (default 2000)")
    parser.add_argument("--seconds", type=cli.positive_float, help="measured seconds per run (default 60)")
    parser.add_argument("--repeat", type=cli.positive_int, help="runs each way (default 3)")
    parser.add_argument("--json", required=True, type=cli.json_output, help="the results file (a .md beside it)")


def main(args: argparse.Namespace, command: str) -> int:
    preset = QUICK if args.quick else DEFAULTS
    say = lambda line: print(line, flush=True)  # noqa: E731
    try:
        with run_record.on_the_lab(command, with_services={"prometheus"}) as (record, state):
            assert state.prometheus.port is not None  # a running lab Prometheus always has its port recorded
            result = run(
                state.kafka_bootstrap,
                state.prometheus.port,
                args.rate or preset["rate"],
                args.seconds or preset["seconds"],
                preset["warmup"],
                args.repeat or preset["repeat"],
                say,
            )
            result.update(record.record())
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    md = args.json.with_suffix(".md")
    md.write_text(markdown(result))
    print(markdown(result))
    print(f"wrote {args.json}, {md}")
    return 0

"""Turn a latency benchmark result (the JSON `scripts/bench.py latency` writes) into a Markdown table and a plot.

Both are generated files: the docs include them, nobody edits them by hand.
"""

import json
from pathlib import Path

from rtm_lab.benchmarks import figures
from rtm_lab.benchmarks.run_record import record_lines
from rtm_lab.generated import markdown_table
from rtm_lab.intervals import interval_ms

# No trigger column: its code wrapped mid-word in a narrow cell. The triggers are a legend under the tables.
TABLE_HEADER = ["mode", "measured", "missing", "p50 ms", "p95 ms", "p99 ms", "max ms"]
TABLE_ALIGN = ["", "right", "right", "right", "right", "right", "right"]

MODE_LABELS = {
    "microbatch_500ms": "micro-batch, 500 ms trigger",
    "microbatch_0": "micro-batch, no trigger interval",
    "microbatch_async": "micro-batch, async progress tracking",
    "realtime": "real-time mode",
    "microbatch_500ms_python": "micro-batch, 500 ms trigger, Python processor",
}
# The ad pipeline runs the JVM processor in every mode but the one named for Python.
AD_MODE_LABELS = {
    mode: label if mode.endswith("_python") else f"{label}, JVM processor" for mode, label in MODE_LABELS.items()
}
# What each mode sets on the query. Tables render this text, not the copy a results JSON recorded when it ran: async
# log purge is on in every mode (Spark's default since 3.4), so an older label that named it for `microbatch_async`
# alone was wrong, and regenerating from the same JSON gives the corrected text.
TRIGGERS = {
    "microbatch_500ms": 'processingTime="500 milliseconds"',
    "microbatch_0": 'processingTime="0 seconds" (no interval)',
    "microbatch_async": 'processingTime="0 seconds", asyncProgressTrackingEnabled',
    "realtime": 'realTime="{rtm_interval}"',
    "microbatch_500ms_python": 'processingTime="500 milliseconds"',
}
PIPELINE_LABELS = {
    "passthrough": "Kafka -> parse JSON, re-encode -> Kafka (the quick-start transformation)",
    "ad_attribution": "Kafka -> ad attribution with transformWithState -> Kafka (latency of each match: request -> "
    "attribution)",
}
STATE_HEADER = ["mode", "slots needed (calculator)", "state rows at batch ends: max", "last", "batch ends"]
STATE_ALIGN = ["", "", "right", "right", "right"]
COLORS = {
    "microbatch_500ms": "#d62728",
    "microbatch_0": "#ff7f0e",
    "microbatch_async": "#9467bd",
    "realtime": "#2ca02c",
    "microbatch_500ms_python": "#8c564b",
}


def trigger_text(mode: str, result: dict) -> str:
    """The trigger a mode runs with, from `TRIGGERS` and the run's batch duration (see `TRIGGERS`)."""
    if mode not in TRIGGERS:
        return result.get("triggers", {}).get(mode, "")
    return TRIGGERS[mode].format(rtm_interval=result.get("settings", {}).get("rtm_interval", "?"))


def _ms(value) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"


def figure(m: dict, name: str):
    """A mode's figure: the median over its repeats when it was repeated, else its one run's value."""
    if "figures" in m and name in m["figures"]:
        return m["figures"][name]["median"]
    return m.get(name)


def spread_cell(m: dict, name: str) -> str:
    """The median with the range over the repeats in brackets (when they differ), or the one run's value."""
    fig = m.get("figures", {}).get(name)
    if fig is None:
        return _ms(m.get(name))
    if fig["median"] is None or fig["min"] == fig["max"]:
        return _ms(fig["median"])
    return f"{_ms(fig['median'])} ({_ms(fig['min'])}–{_ms(fig['max'])})"


def repeats(modes: dict) -> int:
    return max((len(m.get("repeats", [])) for m in modes.values()), default=0) or 1


def tail_line(mode: str, m: dict, label: str) -> str | None:
    """What a mode's slowest records (above each run's p99) were set against, summed over its runs."""
    runs = m.get("repeats") or [m]
    tails = [r["tail"] for r in runs if r.get("tail")]
    if not tails or not all(t.get("gc_logged") for t in tails):
        return None
    total = sum(t["records"] for t in tails)
    gc, lag = (
        sum(t["in_flight_during_gc_pause"] for t in tails),
        sum(t["produced_while_generator_lagged"] for t in tails),
    )
    neither = sum(t["not_attributed"] for t in tails)
    pauses = [r.get("gc_pause_max_ms") for r in runs if r.get("gc_pause_max_ms") is not None]
    lags = [round(r["producer_behind_max_s"] * 1000) for r in runs if "producer_behind_max_s" in r]
    return (
        f"{label}: of the {total:,} records above each run's p99 ({len(tails)} run(s)), {gc:,} were in flight during a "
        f"GC pause of the Spark JVM (longest pause per run: {', '.join(f'{p:,.0f}' for p in pauses)} ms), {lag:,} "
        f"were produced while the generator ran behind its schedule (worst lag per run: "
        f"{', '.join(f'{v:,}' for v in lags)} ms), and {neither:,} match neither: not attributed."
    )


def ratio(modes: dict, slow: str = "microbatch_500ms", fast: str = "realtime") -> float | None:
    """p50 of `slow` over p50 of `fast` (medians over repeats); a median under the broker stamps' 1 ms resolution
    counts as 1 ms."""
    a, b = figure(modes.get(slow, {}), "p50_ms"), figure(modes.get(fast, {}), "p50_ms")
    if a is None or b is None:
        return None
    return a / max(b, 1.0)


def batch_overrun_ms(mode: dict, interval: str) -> float | None:
    """Median of (triggerExecution time - batch duration) over the real-time batches after the first, from the query progress."""
    durations = sorted(b[3] for b in mode.get("batches", []) if b[0] >= 1)
    if not durations:
        return None
    return durations[len(durations) // 2] - interval_ms(interval)


def slots_cell(m: dict) -> str:
    need = m.get("slots_needed")
    if not need:
        return "-"
    parts = " + ".join(str(n) for n in [need["source"], *need["shuffle"]])
    return f"{parts} = {need['total']} (of {m.get('slots', '-')})"


def state_lines(modes: dict, labels: dict, interval: str) -> list[str]:
    """Slots and state size per mode of the ad pipeline: the driver sees the state only at batch ends."""
    rows = [
        [
            labels.get(mode, mode),
            slots_cell(m),
            f"{m['state_rows_max']:,}" if m.get("state_rows_max") is not None else "-",
            f"{m['state_rows_last']:,}" if m.get("state_rows_last") is not None else "-",
            str(len(m.get("state_rows", []))),
        ]
        for mode, m in modes.items()
        if not m.get("error")
    ]
    if not rows:
        return []
    return [
        "",
        f"State (keys with an open {modes_window(modes)} window, all state variables and timers counted) as each "
        f"mode's progress reported it at batch ends; a real-time batch ends every `{interval}`, so a run shorter than "
        "that reports none:",
        "",
        markdown_table(STATE_HEADER, rows, STATE_ALIGN).rstrip("\n"),
    ]


def modes_window(modes: dict) -> str:
    windows = {m.get("window_ms") for m in modes.values() if m.get("window_ms")}
    return f"{windows.pop() / 1000:.0f} s" if len(windows) == 1 else "attribution"


def markdown(result: dict) -> str:
    ad = result.get("pipeline") == "ad_attribution"
    labels = AD_MODE_LABELS if ad else MODE_LABELS
    lines = [
        "<!-- Generated by `scripts/bench.py latency` from the JSON beside this file. Do not edit: rerun it. -->",
        "",
        f"Query: {PIPELINE_LABELS.get(result.get('pipeline', 'passthrough'))}.",
        "",
    ]
    for run in result["runs"]:
        rate, modes = run["rate"], run["modes"]
        n = repeats(modes)
        each = (
            f"{n} runs per mode, the median with the range over the runs in brackets" if n > 1 else "one run per mode"
        )
        lines += [
            f"**{rate:,.0f} events/s**, {result['seconds']:.0f} s per mode, {each}; first {result['warmup_s']:.0f} s "
            "of events left out of the percentiles (end-to-end, Kafka in -> Kafka out, broker LogAppendTime stamps)"
            + "".join(
                f"; {labels.get(mode, mode)} instead warmed up until fewer than {bound:g} s of events were waiting for "
                "2 s straight, then ran the same seconds"
                for mode, bound in result.get("settle_s", {}).items()
                if mode in modes
            )
            + ("; every mode ran in turn in one Spark session" if result.get("one_session") else ""),
            "",
        ]
        rows = []
        for mode, m in modes.items():
            label = labels.get(mode, mode)
            if m.get("error"):
                rows.append([label, f"query failed: `{m['error']}`", "", "", "", "", ""])
                continue
            measured = f"{m.get('n', 0):,}" if n == 1 else f"{sum(r.get('n', 0) for r in m.get('repeats', [m])):,}"
            missing = m.get("missing", "-") if n == 1 else max(r.get("missing") or 0 for r in m.get("repeats", [m]))
            rows.append(
                [label, measured, missing] + [spread_cell(m, key) for key in ("p50_ms", "p95_ms", "p99_ms", "max_ms")]
            )
        lines.append(markdown_table(TABLE_HEADER, rows, TABLE_ALIGN).rstrip("\n"))
        of = f" (medians of {n} runs each)" if n > 1 else ""
        r = ratio(modes)
        if r is not None:
            which = "JVM processor: m" if ad else "M"
            floor = " (the real-time p50 is under the stamps' 1 ms resolution and counts as 1 ms)"
            below = (figure(modes.get("realtime", {}), "p50_ms") or 1.0) < 1.0
            lines += ["", f"{which}icro-batch (500 ms) p50 / real-time p50: **{r:,.0f}x**{of}{floor if below else ''}."]
        r = ratio(modes, slow="microbatch_500ms_python")
        if r is not None:
            lines += [
                "",
                f"Python processor in micro-batch (500 ms) p50 / JVM processor in real-time mode p50: **{r:,.0f}x**{of}.",
            ]
        for mode, m in modes.items():
            label = labels.get(mode, mode)
            line = None if m.get("error") else tail_line(mode, m, label[:1].upper() + label[1:])
            if line:
                lines += ["", line]
        overrun = batch_overrun_ms(modes.get("realtime", {}), result["settings"]["rtm_interval"])
        if overrun is not None:
            lines += [
                "",
                f"Real-time batches ran a median of **{overrun:,.0f} ms** past their "
                f"`realTime=\"{result['settings']['rtm_interval']}\"` interval (one batch's end, its commit and the next batch's start); "
                "records that arrive meanwhile wait for the next batch's tasks.",
            ]
        elif "realtime" in modes and interval_ms(result["settings"]["rtm_interval"]) > 1000 * result["seconds"]:
            lines += [
                "",
                f'The real-time run ends inside its first `realTime="{result["settings"]["rtm_interval"]}"` batch: it '
                "crosses no batch boundary. What a boundary costs the Kafka -> Kafka query, here and at the 5-second minimum, "
                "is in the batch duration sweep.",
            ]
        if ad:
            lines += state_lines(modes, labels, result["settings"]["rtm_interval"])
        lines.append("")
    lines += [trigger_legend(result, labels), ""]
    lines += run_details(result)
    return "\n".join(lines)


def trigger_legend(result: dict, labels: dict) -> str:
    """Each mode of the run and its trigger, as code: the line that stands for a trigger column."""
    modes = dict.fromkeys(mode for run in result["runs"] for mode in run["modes"])
    return "Triggers: " + "; ".join(f"{labels.get(mode, mode)}: `{trigger_text(mode, result)}`" for mode in modes) + "."


def run_details(result: dict) -> list[str]:
    """The footer every latency results table carries: machine, load (when recorded), versions, settings, command."""
    cfg = result["settings"]
    settings = (
        f"`{cfg['spark_master']}`, {cfg['partitions']} partitions per topic, "
        f"`kafka.fetch.max.wait.ms={cfg['kafka_fetch_max_wait_ms']}`, producer `linger.ms={cfg['producer_linger_ms']}`"
        + "".join(f", `{k}={v}`" for k, v in cfg.get("session_conf", {}).items())
    )
    return [*record_lines(result, settings, runs=run_count(result)), ""]


def run_count(result: dict) -> int:
    """How many runs the table's figures come from: the sweep's and the settings run's rows list their runs; a latency
    run's modes each ran once, or once per entry of their `repeats`."""
    if "rows" in result:
        return sum(len(row["runs"]) for row in result["rows"])
    return sum(len(mode.get("repeats") or [mode]) for run in result["runs"] for mode in run["modes"].values())


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = result["runs"]
    fig, axes = plt.subplots(1, len(runs), figsize=(5.5 * len(runs), 4.2), squeeze=False)
    for ax, run in zip(axes[0], runs, strict=True):
        for mode, m in run["modes"].items():
            q = m.get("quantiles_ms") or []
            if not q:
                continue
            # A latency CDF: x is the latency, y the share of records at or below it.
            label = (AD_MODE_LABELS if result.get("pipeline") == "ad_attribution" else MODE_LABELS).get(mode, mode)
            ax.plot([max(v, 0.5) for v in q], range(len(q)), label=label, color=COLORS.get(mode))
        ax.set_xscale("log")
        ax.set_xlabel("end-to-end latency, ms (log scale)")
        ax.set_ylabel("percentile")
        ax.set_ylim(0, 100)
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title(f"{run['rate']:,.0f} events/s")
        ax.legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Kafka -> Spark {result['versions']['spark']} -> Kafka, {result['machine']['cores']} cores")
    fig.tight_layout()
    figures.save(fig, path, dpi=110)
    plt.close(fig)


def write(result: dict, json_path: Path, plot_path: Path | None, render=None, draw=None) -> Path:
    """Write the JSON, the Markdown table beside it (same name, .md) and, if asked, the plot; return the .md path.

    `render` and `draw` make the table and the plot (this module's by default; the batch duration sweep passes its own)."""
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(result, indent=1) + "\n")
    md_path = json_path.with_suffix(".md")
    md_path.write_text((render or markdown)(result))
    if plot_path is not None:
        (draw or plot)(result, plot_path)
    return md_path

"""Turn a batch duration sweep result (the JSON `scripts/bench.py latency --batch-duration ... --batch-duration ...`
writes) into a Markdown table and a plot: latency over time with the batch boundaries marked, one panel per batch
duration, and the latency CDF of every row. Generated files: the docs include them, nobody edits them by hand.
"""

from pathlib import Path

from rtm_lab.benchmarks import figures, latency_report
from rtm_lab.benchmarks.boundaries import MOMENTS, WINDOW_AFTER_MS, WINDOW_BEFORE_MS
from rtm_lab.benchmarks.latency_report import COLORS, MODE_LABELS, PIPELINE_LABELS
from rtm_lab.generated import generated_note, markdown_table
from rtm_lab.machine import run_span
from snippets.quickstart.kafka_to_kafka import BATCH_DURATION

# Two tables that fit a page: the latency of every row, then what the real-time rows' batch boundaries cost. Rows
# carry short labels; the legend under the tables gives each label's trigger as code.
HEADER = ["row", "runs", "p50 ms", "p95 ms", "p99 ms", "p99.9 ms", "max ms"]
ALIGN = ["", "right", "right", "right", "right", "right", "right"]
BOUNDARY_HEADER = ["row", "boundaries", "stall per boundary ms", "batch overrun ms"]
BOUNDARY_ALIGN = ["", "right", "right", "right"]
SHORT_LABELS = {
    "microbatch_500ms": "micro-batch 500 ms",
    "microbatch_0": "micro-batch 0 s",
    "microbatch_async": "micro-batch async",
}
INTERVAL_COLORS = ["#2ca02c", "#17becf", "#1f77b4", "#8c564b", "#e377c2", "#bcbd22"]


def _ms(value) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.1f}"


def cell(figure: dict, fmt=_ms) -> str:
    """The median, with the spread over the repeats in brackets when they differ."""
    if figure["median"] is None:
        return "-"
    if len(figure["values"]) > 1 and figure["min"] != figure["max"]:
        return f"{fmt(figure['median'])} ({fmt(figure['min'])}–{fmt(figure['max'])})"
    return fmt(figure["median"])


def _count(value) -> str:
    return f"{value:g}"


def trigger(row: dict, result: dict) -> str:
    if row["mode"] == "realtime":
        return f'`realTime="{row["rtm_interval"]}"`'
    return f"`{latency_report.trigger_text(row['mode'], result)}`"


def short_label(row: dict) -> str:
    """The row's name in the tables: the mode in a few words, the batch duration as Spark spells it."""
    if row["mode"] == "realtime":
        return f"real-time {row['rtm_interval']}"
    return SHORT_LABELS.get(row["mode"], MODE_LABELS.get(row["mode"], row["mode"]))


def legend(result: dict) -> str:
    """What each short label runs: its trigger, as code (the tables hold none, so no column wraps code mid-word)."""
    parts = []
    for row in result["rows"]:
        if row["mode"] == "realtime":
            continue
        text = latency_report.trigger_text(row["mode"], result)
        code, _, note = text.partition(" (")
        parts.append(f"**{short_label(row)}**: `{code}`" + (f" ({note}" if note else ""))
    # Each real-time row's trigger as Spark spells it, so the table names the exact setting each row ran.
    for row in result["rows"]:
        if row["mode"] == "realtime":
            parts.append(f"**{short_label(row)}**: {trigger(row, result)}")
    return "Rows: " + "; ".join(parts) + "."


def _failed(row: dict) -> str | None:
    errors = [r["error"] for r in row["runs"] if r.get("error")]
    return f"query failed: `{errors[0]}`" if errors else None


def table_rows(result: dict) -> list[list[str]]:
    rows = []
    for row in result["rows"]:
        f, failed = row["figures"], _failed(row)
        if failed:
            rows.append([short_label(row), str(len(row["runs"])), failed] + [""] * 4)
            continue
        rows.append(
            [short_label(row), str(len(row["runs"]))]
            + [cell(f[key]) for key in ("p50_ms", "p95_ms", "p99_ms", "p99.9_ms", "max_ms")]
        )
    return rows


def boundary_rows(result: dict) -> list[list[str]]:
    """The real-time rows' batch boundaries: how many each run crossed, the stall at each, the batch overrun."""
    rows = []
    for row in result["rows"]:
        if row["mode"] != "realtime" or _failed(row):
            continue
        f = row["figures"]
        if row["no_boundary"]:
            rows.append([short_label(row), "none in the run", "-", "-"])
            continue
        overrun = cell(f["overrun_median_ms"]) if f["overrun_median_ms"]["median"] is not None else "first batch only"
        rows.append([short_label(row), cell(f["boundaries_crossed"], _count), cell(f["stall_median_ms"]), overrun])
    return rows


def breakdown_rows(result: dict) -> tuple[list[str], list[list[str]]]:
    """One row per segment of the path from the last record out to the first record after a boundary; one column per
    batch duration: the median over every boundary of every repeat, with the number of boundaries."""
    real = [r for r in result["rows"] if r["mode"] == "realtime" and r["segments"]]
    order = {name: i for i, name in enumerate(MOMENTS)}
    keys = sorted(
        {(s["from"], s["to"], s["what"]) for r in real for s in r["segments"]},
        key=lambda k: (order[k[0]], order[k[1]]),
    )
    header = ["from the last record out to the first after the boundary", *[f"`{r['rtm_interval']}` ms" for r in real]]
    body = []
    for key in keys:
        cells = []
        for r in real:
            seg = next((s for s in r["segments"] if (s["from"], s["to"], s["what"]) == key), None)
            cells.append(f"{_ms(seg['median_ms'])} (n={seg['n']})" if seg else "")
        body.append([key[2], *cells])
    return header, body


def markdown(result: dict) -> str:
    repeats = result["repeat"]
    lines = [
        "<!-- Generated by `scripts/bench.py latency` (batch duration sweep) from the JSON beside this file. "
        "Do not edit: rerun it. -->",
        "",
        f"Query: {PIPELINE_LABELS.get(result['pipeline'], result['pipeline'])}, at **{result['rate']:,.0f} events/s**.",
        "",
        f"Real-time runs produce for max({result['seconds']:.0f} s, batch duration + {result['warmup_s']:.0f} s warm-up "
        f"+ {result['margin_s']:.0f} s), at most {result['max_seconds']:.0f} s; micro-batch runs for "
        f"{result['seconds']:.0f} s. The first {result['warmup_s']:.0f} s of events are left out of the percentiles. "
        + (
            f"{repeats} repeats: each cell is the median over them, with the spread (min–max) in brackets."
            if repeats > 1
            else "One run per row: no spread."
        ),
        "",
        markdown_table(HEADER, table_rows(result), ALIGN).rstrip("\n"),
        "",
        legend(result),
    ]
    boundaries = boundary_rows(result)
    if boundaries:
        lines += [
            "",
            "The real-time rows' batch boundaries:",
            "",
            markdown_table(BOUNDARY_HEADER, boundaries, BOUNDARY_ALIGN).rstrip("\n"),
        ]
    lines += [
        "",
        "- **Stall per boundary**: the longest gap between consecutive records out (sink broker LogAppendTime) that "
        f"starts between {WINDOW_BEFORE_MS / 1000:g} s before and {WINDOW_AFTER_MS / 1000:g} s after the batch's "
        "tasks end, minus the median gap at this rate; the median over the run's boundaries. A boundary counts when "
        "records flow on both sides of it after the warm-up.",
        "- **Batch overrun**: progress `triggerExecution` minus the batch duration, median over the run's batches after the "
        "first (batch 0 also holds the query's start-up). A related figure, not the stall.",
    ]
    header, body = breakdown_rows(result)
    if body:
        lines += [
            "",
            "Where a boundary's time goes (median over every boundary of every repeat; Spark UI REST API task launch "
            "and stage completion times, progress `timestamp` and `durationMs`):",
            "",
            markdown_table(header, body, ["", *["right"] * (len(header) - 1)]).rstrip("\n"),
        ]
    lines += ["", *latency_report.run_details(result)]
    return "\n".join(lines)


def _representative(row: dict) -> dict:
    return row["runs"][row["representative_repeat"]]


def _cdf_points(run: dict) -> list[tuple[float, float]]:
    """(latency ms, percentile) pairs strictly inside (0, 100), for a logit axis."""
    pairs = run.get("cdf_ms") or [[p, v] for p, v in enumerate(run.get("quantiles_ms") or [])]
    return [(max(v, 0.5), p) for p, v in pairs if 0 < p < 100]


def _with_breaks(t: dict) -> tuple[list, list, list]:
    """The timeline with a break (NaN) wherever no record came out for a bucket or more: a stall shows as a hole."""
    xs, p50s, maxes = [], [], []
    for i, x in enumerate(t["t_s"]):
        if i and x - t["t_s"][i - 1] > 1.5 * t["bucket_s"]:
            xs.append(x - t["bucket_s"])
            p50s.append(float("nan"))
            maxes.append(float("nan"))
        xs.append(x)
        p50s.append(max(t["p50_ms"][i], 0.5))
        maxes.append(max(t["max_ms"][i], 0.5))
    return xs, p50s, maxes


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    real = [r for r in result["rows"] if r["mode"] == "realtime"]
    fig, axes = plt.subplots(len(real) + 1, 1, figsize=(10, 2.4 * len(real) + 4.2), squeeze=False)
    color: str | None  # a batch duration's colour here; below, a trigger mode's, which COLORS may not have
    for ax, row, color in zip(axes[:, 0], real, INTERVAL_COLORS * 4, strict=False):
        run, t = _representative(row), _representative(row).get("timeline") or {}
        if t.get("t_s"):
            xs, p50s, maxes = _with_breaks(t)
            ax.plot(xs, maxes, color=color, alpha=0.45, lw=0.8, label="max")
            ax.plot(xs, p50s, color=color, lw=1.2, label="median")
        inside = [at for at in run.get("batch_ends_s") or [] if t.get("t_s") and t["t_s"][0] <= at <= t["t_s"][-1]]
        for i, at in enumerate(inside):
            ax.axvline(at, color="#d62728", ls="--", lw=0.9, label="batch boundary" if i == 0 else None)
        ax.set_yscale("log")
        ax.set_ylabel("latency, ms")
        ax.set_title(
            f'realTime="{row["rtm_interval"]}", repeat {run["repeat"] + 1}: latency per '
            f"{t.get('bucket_s') or 0:g} s of records out",
            fontsize=9,
        )
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper right")
    axes[-2, 0].set_xlabel("seconds after the warm-up")
    ax = axes[-1, 0]
    interval_color = dict(zip((r["key"] for r in real), INTERVAL_COLORS * 4, strict=False))
    for row in result["rows"]:
        points = _cdf_points(_representative(row))
        if not points:
            continue
        if row["mode"] == "realtime":
            label, color = f'real-time, "{row["rtm_interval"]}"', interval_color[row["key"]]
        else:
            label, color = MODE_LABELS.get(row["mode"], row["mode"]), COLORS.get(row["mode"])
        ax.plot([v for v, _ in points], [p / 100 for _, p in points], label=label, color=color)
    ax.set_xscale("log")
    ax.set_yscale("logit")
    ticks = [1, 10, 50, 90, 99, 99.9, 99.99]
    ax.set_yticks([p / 100 for p in ticks], [f"p{p:g}" for p in ticks])
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("end-to-end latency, ms (log scale)")
    ax.set_ylabel("percentile")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title("latency CDF per row (representative repeat)", fontsize=9)
    fig.suptitle(
        f"Kafka -> Spark {result['versions']['spark']} -> Kafka, {result['rate']:,.0f} events/s, "
        f"{result['machine']['cores']} cores",
    )
    fig.tight_layout()
    figures.save(fig, path, dpi=110)
    plt.close(fig)


def _headline_ms(value: float) -> str:
    # Both stamps are the broker's, in whole milliseconds: a difference of 0 is under 1 ms.
    return "under 1 ms" if value < 1 else f"{_ms(value)} ms"


def _headline_rows(result: dict) -> tuple[dict | None, dict | None]:
    """The rows the headline quotes: real-time mode at the default batch duration (5 minutes) and micro-batch 500 ms (None if the
    sweep lacks one, or its run failed)."""
    rows = {row["key"]: row for row in result["rows"] if not _failed(row)}
    return rows.get(f"realtime {BATCH_DURATION}"), rows.get("microbatch_500ms")


def headline(result: dict) -> str:
    """The front page's one-sentence answer: real-time mode at the default batch duration beside micro-batch, with the
    rate, the machine and the Spark version, every figure the median over the repeats from this result."""
    rows = {row["key"]: row for row in result["rows"] if not _failed(row)}
    real, micro = _headline_rows(result)
    if real is None or micro is None:
        raise ValueError(
            f'the sweep has no real-time row at realTime="{BATCH_DURATION}" or no micro-batch 500 ms row: '
            "run it with both (see docs/benchmarks/latency.md)"
        )
    fastest = min(
        (row for row in rows.values() if row["mode"] != "realtime"), key=lambda row: row["figures"]["p50_ms"]["median"]
    )

    def figure(row: dict, name: str) -> str:
        return f"**{_headline_ms(row['figures'][name]['median'])}**"

    m, spark = result["machine"], result["versions"]["spark"]
    p50 = real["figures"]["p50_ms"]["median"]
    text = (
        f"End-to-end latency, Kafka in to Kafka out at {result['rate']:,.0f} events/s: real-time mode at Spark's default "
        f'batch duration (`realTime="{BATCH_DURATION}"`) has a median {"" if p50 < 1 else "of "}{figure(real, "p50_ms")} and '
        f"a p99 of {figure(real, 'p99_ms')}, against {figure(micro, 'p50_ms')} and {figure(micro, 'p99_ms')} for "
        "micro-batch with a 500 ms trigger"
    )
    if fastest is not micro:
        text += (
            f" ({figure(fastest, 'p50_ms')} and {figure(fastest, 'p99_ms')} for the fastest micro-batch mode, "
            f"{MODE_LABELS[fastest['mode']].removeprefix('micro-batch, ')})"
        )
    return (
        f"{text}. Spark {spark} on {m['cores']} cores ({m['cpu_model']}, {m['memory_gib']} GiB, {m['os']}), "
        f"median of {result['repeat']} runs per mode; {run_span(latency_report.run_count(result), [result])}."
    )


def headline_markdown(result: dict) -> str:
    return (
        "<!-- Generated by `scripts/bench.py latency` (batch duration sweep) from latency-sweep.json. Do not edit: rerun it, "
        "or `python scripts/tables.py latency-sweep-headline`. -->\n\n" + headline(result) + "\n"
    )


def plot_cdf(result: dict, path: Path) -> None:
    """The front page's plot: the latency CDF of every row, wide and short enough to sit beside the headline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    real = [r for r in result["rows"] if r["mode"] == "realtime"]
    interval_color = dict(zip((r["key"] for r in real), INTERVAL_COLORS * 4, strict=False))
    fig, ax = plt.subplots(figsize=(10, 3.3))
    for row in result["rows"]:
        points = _cdf_points(_representative(row))
        if not points:
            continue
        color = interval_color.get(row["key"]) or COLORS.get(row["mode"])
        default = row["key"] == f"realtime {BATCH_DURATION}"
        label = short_label(row) + (" (default)" if default else "")
        xs, ys = [v for v, _ in points], [p / 100 for _, p in points]
        ax.plot(xs, ys, label=label, color=color, lw=2.4 if default else 1.3)
    ax.set_xscale("log")
    ax.set_yscale("logit")
    ticks = [1, 10, 50, 90, 99, 99.9]
    ax.set_yticks([p / 100 for p in ticks], [f"p{p:g}" for p in ticks])
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("end-to-end latency, Kafka in to Kafka out, ms (log scale)")
    ax.set_ylabel("percentile")
    ax.grid(True, which="both", alpha=0.3)
    # The front page shows this plot at about 0.7 of its size: 10 points keeps the legend at the axes' text size.
    ax.legend(fontsize=10, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax.set_title(
        f"Every row's latency CDF, {result['rate']:,.0f} events/s, Spark {result['versions']['spark']}, "
        f"{result['machine']['cores']} cores",
        fontsize=10,
    )
    fig.tight_layout()
    figures.save(fig, path, dpi=110)
    plt.close(fig)


def cdf_plot_path(plot_path: Path) -> Path:
    return plot_path.with_name(f"{plot_path.stem}-cdf{plot_path.suffix}")


def write(result: dict, json_path: Path, plot_path: Path | None) -> Path:
    """Write the JSON, the sweep's Markdown table beside it, the front page's headline (when the sweep has the two
    rows it quotes: a sweep of other batch durations, like the test suite's tiny one, has none) and, if asked, the plots
    (the full one and the front page's CDF beside it); return the .md path."""

    def draw(result: dict, path: Path) -> None:
        plot(result, path)
        plot_cdf(result, cdf_plot_path(path))

    md = latency_report.write(result, json_path, plot_path, render=markdown, draw=draw)
    if None not in _headline_rows(result):
        json_path.with_name(f"{json_path.stem}-headline.md").write_text(headline_markdown(result))
    return md


STALL_KEY = "realtime 5 seconds"


def stall_sentence(sweep: dict, settings: dict) -> str:
    """The one figure the pages and the skill give for the stall at a 5-second boundary: the batch duration sweep's (three
    repeats), with its run; the settings table's defaults row (another run) named as such, so two figures for one
    thing never appear without their runs."""
    row = next(r for r in sweep["rows"] if r["key"] == STALL_KEY)
    stall = row["figures"]["stall_median_ms"]
    runs = len(stall["values"])
    defaults = next(r for r in settings["rows"] if r["key"] == "defaults")["figures"]["stall_median_ms"]
    return (
        f"{generated_note('python scripts/tables.py stall-5s')}\n\n"
        f'At `realTime="5 seconds"` a batch boundary stalls the stream for **{_ms(stall["median"])} ms**: the median '
        f"of {runs} runs ({_ms(stall['min'])}–{_ms(stall['max'])} ms) in the batch duration sweep "
        f"({run_span(latency_report.run_count(sweep), [sweep])}; {sweep['machine']['cores']} cores, "
        f"{sweep['machine']['cpu_model']}). The settings run ({run_span(latency_report.run_count(settings), [settings])}) "
        f"measured {_ms(defaults['median'])} ms at its defaults, a figure for comparing settings within that run.\n"
    )

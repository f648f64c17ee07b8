"""The table and the plot of `bench.py dedup-stall`, from its results file (docs/results/dedup-stall.json).

The table has one row per cell: which factors it changes from the base, its runs, the median (and range) of p50 and
p99, how many measured seconds had a p99 over the stall threshold, how many runs stalled at all, the GC pauses in the
measured window, and the busiest thread in the first stalled run's dumps. The plot draws each run's per-second p99
over the run, one panel per cell, the threshold dashed: where in a run the stall came, and whether it came back.
"""

import statistics
from pathlib import Path

from rtm_lab.benchmarks import dedup_cells, engines_report, figures, run_record
from rtm_lab.generated import generated_note, markdown_table

COMMAND = "python scripts/tables.py dedup-stall"
PLOT_SUFFIX = "-p99.png"


def by_cell(result: dict) -> dict[str, list[dict]]:
    """The runs grouped by cell, cells in the plan's order (cells no longer planned after them)."""
    grouped: dict[str, list[dict]] = {}
    for run in result.get("runs", {}).values():
        grouped.setdefault(run["cell"], []).append(run)
    order = {cell.name: i for i, cell in enumerate(dedup_cells.with_unwatched(dedup_cells.plan()))}
    return dict(sorted(grouped.items(), key=lambda kv: order.get(kv[0], len(order))))


def _window_gc(run: dict, name: str):
    return ((run.get("gc") or {}).get("window") or {}).get(name)


def _gc_cell(runs: list[dict]) -> str:
    flat = [{"total": _window_gc(r, "pause_total_ms"), "max": _window_gc(r, "pause_max_ms")} for r in runs]
    total = engines_report.spread_cell(flat, "total")
    longest = max((f["max"] for f in flat if f["max"] is not None), default=None)
    return total if longest is None else f"{total}; longest {engines_report._num(longest)}"


def per_second(run: dict, warmup_s: float, field: str, how=statistics.median) -> float | None:
    """`how` (the median by default) of one per-second `field` over the run's measured seconds (the warm-up left
    out), from its series."""
    fields, series = run.get("series_fields"), run.get("series") or []
    if not fields or not series:
        return None
    t, at = fields.index("second"), fields.index(field)
    values = [row[at] for row in series if row[t] >= warmup_s]
    return float(how(values)) if values else None


def input_cell(runs: list[dict], warmup_s: float) -> str:
    """The input the engine saw, as the broker stamped it: the median second (median over runs) and the busiest
    second of any run. A busiest second far above the rate means the broker appended in bursts."""
    medians = [{"v": per_second(r, warmup_s, "in_per_s")} for r in runs]
    peaks = [p for r in runs if (p := per_second(r, warmup_s, "in_per_s", max)) is not None]
    median = engines_report.spread_cell(medians, "v")
    return median if not peaks else f"{median}; max {engines_report._num(max(peaks))}"


def cores_cell(runs: list[dict]) -> str:
    """Each core's busy share over the run, median over the runs, in per cent. Isolated runs name the engine's core
    and the harness's (broker, generator, reader); shared runs have everything on both."""
    busy: dict[str, list[float]] = {}
    for run in runs:
        for core, share in (run.get("core_busy") or {}).items():
            busy.setdefault(str(core), []).append(share)
    if not busy:
        return "-"
    engine = {str(c) for c in runs[0].get("engine_cores") or []}
    shares = {core: round(100 * statistics.median(v)) for core, v in sorted(busy.items())}
    if runs[0].get("placement") == "isolated" and engine and engine != set(shares):
        named = [f"engine {shares[c]}" for c in shares if c in engine] + [
            f"harness {shares[c]}" for c in shares if c not in engine
        ]
        return ", ".join(named)
    return "both " + " / ".join(str(v) for v in shares.values())


def _busiest(runs: list[dict]) -> str:
    """The busiest thread in the first stalled run's dumps, by name only: its frames stay in the results file and the
    run's dumps (a frame's full name would widen the table past a laptop's window)."""
    for run in runs:
        busiest = (run.get("stall") or {}).get("busiest") or []
        if busiest:
            return f"`{busiest[0]['thread'][:32]}`"
    return "-"


def markdown(result: dict, command: str = COMMAND) -> str:
    lines = [generated_note(command), ""]
    grouped = by_cell(result)
    if not grouped:
        return "\n".join([*lines, "No run yet: `python scripts/bench.py dedup-stall`.", ""])
    threshold = result["settings"]["stall_ms"]
    rows = []
    for name, runs in grouped.items():
        stall = [{"over": (r.get("stall") or {}).get("series_seconds_over")} for r in runs]
        stalled = sum(1 for s in stall if (s["over"] or 0) > 0)
        changed = runs[0].get("changed") or []
        rows.append(
            [
                f"`{name}`",
                ", ".join(changed) or "base",
                len(runs),
                engines_report.spread_cell(runs, "p50_ms"),
                engines_report.spread_cell(runs, "p99_ms"),
                input_cell(runs, result["settings"]["warmup_s"]),
                cores_cell(runs),
                engines_report.spread_cell(stall, "over"),
                f"{stalled} of {len(runs)}",
                _gc_cell(runs),
                _busiest(runs),
            ]
        )
    header = [
        "Cell",
        "Changed from the base",
        "Runs",
        "p50 ms",
        "p99 ms",
        "Input/s",
        "Cores busy %",
        f"Seconds with p99 > {threshold:,.0f} ms",
        "Runs that stalled",
        "GC paused ms (window)",
        "Busiest thread in the stall's dumps",
    ]
    lines.append(
        markdown_table(header, rows, ["", "", "right", "right", "right", "right", "", "right", "right", "right", ""])
    )
    s = result["settings"]
    unwatched = any(not r.get("factors", {}).get("watched", True) for r in result["runs"].values())
    lines += [
        f"Cells are ENGINE/KEYS/WAIT/pSHUFFLE-PARTITIONS/PLACEMENT at {s['rate']:,} events/s"
        + (" (/unwatched: no GC log, live watch or dump)" if unwatched else "")
        + ", "
        f"{s['warmup_s']:.0f} s warm-up then {s['seconds']:.0f} s measured; median (range) over the runs. "
        f"A run stalled when a measured second's p99 passed {threshold:,.0f} ms. "
        "Input/s: the source records the broker appended per measured second, the median "
        "second and the busiest second of any run. Cores busy: each core's busy share over the run, from `/proc/stat`; "
        "isolated runs give the engine's core and the harness's (broker, generator, reader). GC paused: the engine JVM's stop-the-world pauses in the measured window, from its `-Xlog:gc*` log. "
        "The dumps (`jcmd Thread.print`, three a second apart) are taken when the live lag first passes the threshold; "
        "the busiest thread used the most CPU between them (its top frames are in the results file).",
        "",
    ]
    every = list(result["runs"].values())
    lines += run_record.record_lines(every[-1], runs=len(every), records=every)
    return "\n".join(lines) + "\n"


def warm60_markdown(result: dict) -> str:
    """The same table for the intervention with a 60 s warm-up (dedup-stall-warm60.json), named by its own command."""
    return markdown(result, command=f"{COMMAND}-warm60")


def watch_markdown(result: dict) -> str:
    """The same table for the watching's own cost (dedup-stall-watch.json: each cell watched and unwatched)."""
    return markdown(result, command=f"{COMMAND}-watch")


def plot_path(json_path: Path) -> Path:
    return json_path.with_name(json_path.stem + PLOT_SUFFIX)


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grouped = by_cell(result)
    if not grouped:
        return
    threshold = result["settings"]["stall_ms"]
    cols = min(len(grouped), 4)
    rows = (len(grouped) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False, sharey=True)
    for ax, (name, runs) in zip(axes.flat, grouped.items(), strict=False):
        for run in sorted(runs, key=lambda r: r["repeat"]):
            fields = run["series_fields"]
            t, p99 = fields.index("second"), fields.index("p99_ms")
            points = [row for row in run["series"] if row[p99] is not None]
            ax.plot([row[t] for row in points], [max(row[p99], 0.5) for row in points], lw=0.9,
                    label=f"run {run['repeat']}")  # fmt: skip
        ax.axhline(threshold, color="grey", ls="--", lw=0.8)
        ax.set_yscale("log")
        figures.label_panel(ax, name, "second of the run", "p99 ms (log)")
    for ax in list(axes.flat)[len(grouped) :]:
        ax.set_visible(False)
    fig.tight_layout()
    figures.save(fig, path, dpi=100)
    plt.close(fig)


def write(result: dict, json_path: Path) -> Path:
    md = json_path.with_suffix(".md")
    md.write_text(markdown(result))
    plot(result, plot_path(json_path))
    return md

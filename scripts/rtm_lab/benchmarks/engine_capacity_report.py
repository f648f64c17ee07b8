"""The table of `bench.py engine-capacity`, from its results file (docs/results/engine-capacity-PLACEMENT.json).

One table per pipeline, one row per rate either engine ran: each engine's runs at that rate, median p99 (range), the
share of the rate its generator reached, and the step's verdict by the held-rate rule. Under it, each engine's
capacity: the highest rate held below the lowest one not held, how tight that bracket is, and what set the limit (the
engine, or the machine when the ceiling is a step the generator could not offer).
"""

import statistics
from pathlib import Path

from rtm_lab.benchmarks import engines_report, figures, held_rate, per_task_search, run_record
from rtm_lab.generated import generated_note, markdown_table

LABELS = {"spark": "Real-time mode", "flink": "Flink"}
# The searches' pipelines, in the order they take turns: the deduplication runs too, since its stall at 10,000
# events/s on shared cores (bench.py dedup-stall) reads as a capacity limit only if a lower rate holds.
PIPELINES = ("transform", "count", "dedup")


def _step(runs: list[dict], per_step: int) -> list[str]:
    """One engine's four columns at one rate: runs, p99 median (range), generator's share reached, the verdict."""
    if not runs:
        return ["-", "-", "-", "not run"]
    if len(runs) < per_step:  # a step the search has not finished: no figure until it has its runs
        return [str(len(runs)), "-", "-", f"open ({len(runs)} of {per_step} runs)"]
    verdict = per_task_search.step_verdict(runs, held_rate.BOUND_MS, per_step, settle_early=False) or "open"
    reached = statistics.median(r["reached_rate"] / r["rate"] for r in runs) * 100
    return [str(len(runs)), engines_report.spread_cell(runs, "p99_ms"), f"{reached:.1f} %", verdict]


def capacity(runs: list[dict], per_step: int) -> dict:
    """One search's result: the bracket, its width and what set the ceiling (None while open)."""
    verdicts = per_task_search.decided(runs, held_rate.BOUND_MS, per_step, settle_early=False)
    as_not_held = {r: held_rate.NOT_HELD if v == held_rate.GENERATOR_SHORT else v for r, v in verdicts.items()}
    low, high = per_task_search.bracket(as_not_held)
    limit = None
    if high is not None:
        limit = "the machine (generator short)" if verdicts[high] == held_rate.GENERATOR_SHORT else "the engine"
    return {
        "held_rate": low,
        "not_held_rate": high,
        "bracket_pct": round((high / low - 1) * 100, 1) if low and high else None,
        "limited_by": limit,
    }


def markdown(result: dict) -> str:
    lines = [generated_note(f"python scripts/tables.py engine-capacity-{result['settings']['placement']}"), ""]
    if not result["runs"]:
        return "\n".join([*lines, "No run yet: `python scripts/bench.py engine-capacity`.", ""])
    per_step = result["settings"]["runs_per_step"]
    summary = []
    for pipeline in PIPELINES:
        mine = {e: [r for r in result["runs"] if r["pipeline"] == pipeline and r["engine"] == e] for e in LABELS}
        if not any(mine.values()):
            continue
        by_rate = {e: per_task_search.steps(runs, 1) for e, runs in mine.items()}
        rates = sorted({rate for steps in by_rate.values() for rate in steps})
        header = ["Events/s"] + [f"{LABELS[e]}: {c}" for e in LABELS for c in ("runs", "p99 ms", "generator", "step")]
        rows = [
            [f"{rate:,.0f}", *(cell for e in LABELS for cell in _step(by_rate[e].get(rate, []), per_step))]
            for rate in rates
        ]
        lines += [f"**{pipeline}**", "", markdown_table(header, rows, ["right"] * len(header))]
        for engine, runs in mine.items():
            if not runs:
                continue
            got = capacity(runs, per_step)
            if got["not_held_rate"] is None:
                held = got["held_rate"]
                text = "no step decided yet" if held is None else f"{held:,.0f} held so far"
                text += " (search open)"
            else:
                held = "none" if got["held_rate"] is None else f"{got['held_rate']:,.0f}"
                text = (
                    f"{held} held, {got['not_held_rate']:,.0f} not"
                    + (f" ({got['bracket_pct']:.0f} % apart)" if got["bracket_pct"] is not None else "")
                    + f"; limited by {got['limited_by']}"
                )
                if got["bracket_pct"] is not None and got["bracket_pct"] > (per_task_search.BRACKET - 1) * 100:
                    text += " (search open: not yet within 10 %)"
            summary.append(f"- {pipeline}, {LABELS[engine]}: {text}")
    s = result["settings"]
    verdicts = [
        held_rate.verdict(r.get("p99_ms"), r.get("lost"), r["rate"], r.get("reached_rate")) for r in result["runs"]
    ]
    window = f"each run's {s['seconds']:.0f} s after a {s['warmup_s']:.0f} s warm-up"
    lines += [
        "Capacity (events/s):",
        "",
        *summary,
        "",
        held_rate.caption(window, verdicts)
        + f" A step is held when all its {per_step} runs held. Tuned settings; {s['placement']} placement.",
        "",
    ]
    lines += run_record.record_lines(result["runs"][-1], runs=len(result["runs"]), records=result["runs"])
    return "\n".join(lines) + "\n"


def plot_path(json_path: Path) -> Path:
    return json_path.with_suffix(".png")


def plot(result: dict, path: Path) -> None:
    """One panel per pipeline run: each run's p99 against its rate, per engine, the step medians joined, the bound
    dashed. A run whose generator fell short is a cross: its rate was not offered."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pipelines = [p for p in PIPELINES if any(r["pipeline"] == p for r in result["runs"])]
    if not pipelines:
        return
    fig, axes = plt.subplots(1, len(pipelines), figsize=(4.6 * len(pipelines), 3.6), squeeze=False, sharey=True)
    for ax, pipeline in zip(axes[0], pipelines, strict=True):
        for engine, label in LABELS.items():
            runs = [r for r in result["runs"] if r["pipeline"] == pipeline and r["engine"] == engine]
            if not runs:
                continue
            colour = engines_report.COLORS[engine]
            for short in (False, True):
                mine = [r for r in runs if (r["reached_rate"] < held_rate.OFFERED_SHARE * r["rate"]) is short]
                ax.scatter([r["rate"] for r in mine], [max(r["p99_ms"] or 0.5, 0.5) for r in mine], s=18,
                           color=colour, marker="x" if short else "o", alpha=0.7)  # fmt: skip
            medians = sorted(
                (rate, statistics.median(r["p99_ms"] for r in step))
                for rate, step in per_task_search.steps(runs, 1).items()
            )
            ax.plot([m[0] for m in medians], [max(m[1], 0.5) for m in medians], "-", color=colour, lw=1, label=label)
        ax.axhline(held_rate.BOUND_MS, color="grey", ls="--", lw=0.8, label="the bound")
        ax.set_xscale("log")
        rates = sorted({r["rate"] for r in result["runs"] if r["pipeline"] == pipeline})
        ax.set_xticks(rates, [f"{rate / 1000:g}k" for rate in rates], rotation=45)
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        figures.label_panel(ax, pipeline, "events/s (log)", "p99 ms (log)")
    fig.tight_layout()
    figures.save(fig, path, dpi=100)
    plt.close(fig)


def write(result: dict, json_path: Path) -> Path:
    md = json_path.with_suffix(".md")
    md.write_text(markdown(result))
    plot(result, plot_path(json_path))
    return md

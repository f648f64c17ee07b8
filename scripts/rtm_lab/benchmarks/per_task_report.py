"""The per-task capacity table and plot, from the JSON `bench.py per-task` writes (`tables.py per-task-throughput`).

Two tables: each shape's capacity at both bounds (the highest step held, the lowest not held, how close they are),
then every step with the median p99 of its runs and their range. The verdicts are computed here from each run's own
figures by the project's one rule (rtm_lab.benchmarks.held_rate), never read from a stored verdict.
"""

import statistics
from pathlib import Path

from rtm_lab.benchmarks import held_rate, run_record
from rtm_lab.benchmarks import per_task_search as per_task
from rtm_lab.generated import generated_note, markdown_table

COMMAND = "python scripts/tables.py per-task-throughput"
PLOT = "per-task-throughput.png"


AD_WARMUP_COMMAND = "python scripts/tables.py per-task-ad-warmup-180"


def ad_warmup_markdown(result: dict) -> str:
    """The ad processor's search with a longer warm-up, the same tables under its own command."""
    return markdown(result, AD_WARMUP_COMMAND)


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def limiting_core(result: dict, shape: str, bound_ms: int = per_task.BOUNDS_MS[0]) -> str:
    """Which core ran full at the shape's lowest rate not held at `bound_ms`, with the engine and harness cores'
    median busy shares there (per_task_search.core_shares). "—" when no rate above the capacity was decided."""
    rate = result.get("capacity", {}).get(shape, {}).get(str(bound_ms), {}).get("not_held_rate")
    if rate is None:
        return "—"
    runs = [r for r in result["runs"] if r["shape"] == shape and r["rate"] == rate]
    shares = per_task.core_shares(runs, result["settings"].get("pinned"))
    if shares is None:
        return "—"
    full = per_task.full_cores(shares)
    said = " and ".join(full) if full else "neither core"
    return f"{said} ({shares[0]:.0%} / {shares[1]:.0%})"


def _capacity_cell(held: float | None, failed: float | None, bracket_pct: float | None) -> str:
    """One bound's capacity in words: a bracket when both ends are decided; otherwise say which end is missing, so a
    floor (nothing above it decided yet) never reads like a bracket."""
    if held is not None and failed is not None:
        within = f" (within {bracket_pct:g} %)" if bracket_pct is not None else ""
        return f"{_rate(held)} held, {_rate(failed)} not{within}"
    if held is not None:
        return f"{_rate(held)} held (a floor: no rate above it decided)"
    if failed is not None:
        return f"none held, {_rate(failed)} not"
    return "not measured"


def _capacity_rows(result: dict) -> list[list[str]]:
    rows = []
    for shape, entry in result.get("capacity", {}).items():
        row = [shape]
        for bound in per_task.BOUNDS_MS:
            cell = entry[str(bound)]
            held, failed = cell["held_rate"], cell["not_held_rate"]
            row.append(_capacity_cell(held, failed, cell.get("bracket_pct")))
        row.extend(limiting_core(result, shape, bound) for bound in per_task.BOUNDS_MS)
        row.append(_rate(entry.get("rss_peak_mib")))
        rows.append(row)
    return rows


def _step_rows(result: dict) -> list[list[str]]:
    per_step = result["settings"]["runs_per_step"]
    rows = []
    for shape in per_task.SHAPES:
        runs = [r for r in result["runs"] if r["shape"] == shape]
        for rate, step in per_task.steps(runs, 1).items():
            p99s = [r["p99_ms"] for r in step if r.get("p99_ms") is not None]
            median = f"{statistics.median(p99s):,.0f} ({min(p99s):,.0f}–{max(p99s):,.0f})" if p99s else "—"
            verdicts = [per_task.step_verdict(step, b, per_step) or "open" for b in per_task.BOUNDS_MS]
            lost = sum(r.get("lost") or 0 for r in step)
            rows.append([shape, f"{rate:,.0f}", str(len(step)), median, str(lost), *verdicts])
    return rows


def markdown(result: dict, command: str = COMMAND) -> str:
    settings = result["settings"]
    pinned = settings.get("pinned")
    pin = (
        f"engine JVM on core {', '.join(map(str, pinned['engine_cores']))}, the harness, broker and PostgreSQL on "
        f"core {', '.join(map(str, pinned['harness_cores']))}"
        if pinned
        else "not pinned (not for the published table)"
    )
    lines = [
        generated_note(command),
        "",
        "<!-- --8<-- [start:capacity] -->",
        markdown_table(
            [
                "shape",
                "p99 ≤ 100 ms (events/s)",
                "p99 ≤ 1 s (events/s)",
                "full core at the 100 ms limit (engine / harness busy)",
                "at the 1 s limit",
                "engine peak RSS MiB",
            ],
            _capacity_rows(result),
        )
        if result.get("capacity")
        else "No step has all its runs yet: no capacity to show.",
        "",
        held_rate.caption(
            f"{settings['seconds']:g} s after {settings['warmup_s']:g} s of warm-up",
            [],
            "100 ms or 1,000 ms, as the column says,",
        ),
        "",
        f"One source partition and one shuffle partition, {pin}; {settings['runs_per_step']} runs per step. "
        f"A step is held when its {settings['runs_per_step']} runs all held with the generator at the rate; one run "
        "not held settles it as not held. A core at 90 % or more over the runs at the lowest rate not "
        "held was the limit: the harness core for the Postgres writer means PostgreSQL or the generator set it, "
        "not Spark.",
        "<!-- --8<-- [end:capacity] -->",
        "",
        "<!-- --8<-- [start:steps] -->",
        markdown_table(
            ["shape", "rate", "runs", "p99 ms, median (range)", "lost", "at 100 ms", "at 1 s"], _step_rows(result)
        ),
        "<!-- --8<-- [end:steps] -->",
        "",
        "<!-- --8<-- [start:evidence] -->",
        *run_record.record_lines(result, runs=len(result["runs"]), records=result["runs"]),
        "<!-- --8<-- [end:evidence] -->",
    ]
    return "\n".join(lines) + "\n"


def plot(result: dict, path: Path) -> None:
    """p99 against rate per shape (median of each step's runs, the range as an error bar), with both bounds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rtm_lab.benchmarks import figures

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for shape in per_task.SHAPES:
        by_rate = per_task.steps([r for r in result["runs"] if r["shape"] == shape and r.get("p99_ms")], 1)
        if not by_rate:
            continue
        rates = list(by_rate)
        p99s = [[r["p99_ms"] for r in by_rate[rate]] for rate in rates]
        medians = [statistics.median(v) for v in p99s]
        errors = [
            [m - min(v) for m, v in zip(medians, p99s, strict=True)],
            [max(v) - m for m, v in zip(medians, p99s, strict=True)],
        ]
        ax.errorbar(rates, medians, yerr=errors, marker="o", capsize=3, label=shape)
    for bound in per_task.BOUNDS_MS:
        ax.axhline(bound, color="grey", linestyle="--", linewidth=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("events/s into one task")
    ax.set_ylabel("end-to-end p99, ms")
    ax.legend(fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    figures.save(fig, path, dpi=100)
    plt.close(fig)


# The engine capacity searches' pipelines that match a per-task shape: the same query, run whole on both cores.
CEILING_PIPELINES = {"stateless": "transform", "groupby-count": "count", "dedup": "dedup"}


def ceilings_markdown(per_task: dict, engine_capacity: dict) -> str:
    """The per-task figures beside the engine capacity search's whole-query ceilings (`tables.py per-task-ceilings`).

    The engine search held a whole query with two source tasks (and two shuffle tasks for the count) on both cores,
    beside the broker and the generator, at the 2 s bound (docs/results/engine-capacity-shared.json). Two tasks of the
    per-task figure at the 1 s bound are the nearest like-for-like; the per-task figure runs each task on one core of
    its own, so it may read higher."""
    from rtm_lab.benchmarks import engine_capacity_report

    rows = []
    for shape, pipeline in CEILING_PIPELINES.items():
        cell = per_task.get("capacity", {}).get(shape, {}).get("1000", {})
        runs = [r for r in engine_capacity.get("runs", []) if (r["engine"], r["pipeline"]) == ("spark", pipeline)]
        whole = engine_capacity_report.capacity(runs, engine_capacity.get("settings", {}).get("runs_per_step", 3))
        held, above = whole["held_rate"], whole["not_held_rate"]
        per_task_two = 2 * cell["held_rate"] if cell.get("held_rate") else None
        rows.append(
            [
                shape,
                _rate(cell.get("held_rate")),
                _rate(per_task_two),
                pipeline,
                _rate(held),
                _rate(above),
            ]
        )
    table = markdown_table(
        [
            "shape",
            "one task, p99 ≤ 1 s",
            "two tasks (×2)",
            "engine capacity pipeline",
            "whole query held",
            "not held",
        ],
        rows,
    )
    note = held_rate.caption(
        "the measured minute", [], f"1,000 ms for one task, {held_rate.BOUND_MS:,} ms for the whole query,"
    )
    return generated_note("python scripts/tables.py per-task-ceilings") + "\n\n" + table + "\n\n" + note + "\n"

"""The engine comparison's tables and CDF plot, each made from one results file alone.

One row per pipeline, rate, settings profile and engine: the latency percentiles (median of the repeats, with their
range when there are several), CPU seconds per million events, peak resident memory, outputs lost, and whether the
output equals the other engine's at that rate. Under the table: how RTM's p99 compares with Flink's in each cell, and
the record of every run (machine, load, versions, command).

docs/results/engines.json holds the first harness's runs; engines-shared.json and engines-isolated.json the second
harness's, one placement each. Until a placement file exists its table says it has not been run. `old_and_new` puts
the first harness's medians beside the second's, for the note that closes the like-for-like issue.
"""

import statistics
from pathlib import Path

from rtm_lab import machine, versions
from rtm_lab.benchmarks import figures
from rtm_lab.benchmarks.run_record import record_lines
from rtm_lab.generated import generated_note, markdown_table

ENGINE_LABELS = {"spark": "Spark RTM", "flink": "Flink"}
BACKEND_LABELS = {
    "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider": "RocksDB",
    "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider": "HDFS-backed (memory)",
}
COLORS = {"spark": "tab:orange", "flink": "tab:blue"}


def cells(result: dict) -> dict[tuple, list[dict]]:
    """Runs grouped by (pipeline, rate, profile, engine), in the results file's order."""
    grouped: dict[tuple, list[dict]] = {}
    for run in result["runs"].values():
        grouped.setdefault((run["pipeline"], run["rate"], run["profile"], run["engine"]), []).append(run)
    order = {"transform": 0, "count": 1, "enrich": 2, "dedup": 3}
    return dict(
        sorted(
            grouped.items(),
            key=lambda kv: (order.get(kv[0][0], 9), PROFILE_ORDER.get(kv[0][2], 9), kv[0][1], kv[0][3] != "spark"),
        )
    )


PROFILE_ORDER = {"tuned": 0, "tuned-heap": 1, "default": 2}
BEHIND_MS = 1000  # a measured second whose p99 passed this was a second behind


def seconds_over(series: list[list], fields: list[str], threshold_ms: float, from_s: float) -> int:
    """How many seconds of a run's per-second series, from `from_s` on (the warm-up's end), had a p99 above the
    threshold."""
    t, p99 = fields.index("second"), fields.index("p99_ms")
    return sum(1 for row in series if row[t] >= from_s and row[p99] is not None and row[p99] > threshold_ms)


def behind_cell(runs: list[dict], warmup_s: float) -> str:
    """The seconds behind of a cell's runs: the median, with the fewest and most in brackets, in whole seconds."""
    counts = [n for n in (seconds_behind(r, warmup_s) for r in runs) if n is not None]
    if not counts:
        return "-"
    low, high = min(counts), max(counts)
    median = f"{statistics.median(counts):g}"
    return median if low == high else f"{median} ({low}-{high})"


def seconds_behind(run: dict, warmup_s: float) -> int | None:
    """The measured seconds whose p99 passed BEHIND_MS; None for a run without a per-second series."""
    if not run.get("series"):
        return None
    return seconds_over(run["series"], run["series_fields"], BEHIND_MS, warmup_s)


def spread(runs: list[dict], name: str) -> tuple[float | None, float | None, float | None]:
    values = [r[name] for r in runs if r.get(name) is not None]
    if not values:
        return None, None, None
    return statistics.median(values), min(values), max(values)


def _num(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 10 else f"{value:.1f}"


def spread_cell(runs: list[dict], name: str) -> str:
    median, low, high = spread(runs, name)
    if median is None:
        return "-"
    assert low is not None and high is not None  # spread() gives all three or none
    if len(runs) == 1 or low == high:
        return _num(median)
    return f"{_num(median)} ({_num(low)}-{_num(high)})"


def disagreements(result: dict) -> list[str]:
    """Cells where the two engines' outputs differ for the same input (same rate and duration): must be none."""
    digests: dict[tuple[str, float], dict[str, set[str]]] = {}
    for run in result["runs"].values():
        digests.setdefault((run["pipeline"], run["rate"]), {}).setdefault(run["engine"], set()).add(run["digest"])
    return [
        f"{pipeline} @ {rate:.0f}/s"
        for (pipeline, rate), by_engine in digests.items()
        if len(set().union(*by_engine.values())) > 1
    ]


def same_output_cell(result: dict, pipeline: str, rate: float) -> str:
    engines = {r["engine"] for r in result["runs"].values() if r["pipeline"] == pipeline and r["rate"] == rate}
    if len(engines) < 2:
        return "not yet compared"
    return "no" if f"{pipeline} @ {rate:.0f}/s" in disagreements(result) else "yes"


def p99_ratio(result: dict, pipeline: str, rate: float, profile: str) -> float | None:
    """Spark RTM's median p99 over Flink's, in one cell (below 1: RTM's tail is shorter)."""
    grouped = cells(result)
    spark, flink = grouped.get((pipeline, rate, profile, "spark")), grouped.get((pipeline, rate, profile, "flink"))
    if not spark or not flink:
        return None
    s, f = spread(spark, "p99_ms")[0], spread(flink, "p99_ms")[0]
    return round(s / f, 2) if s is not None and f else None


def machine_key(run: dict) -> str:
    """What makes two runs comparable machines: cores, memory, CPU model, kernel (not the Python patch level)."""
    m = run.get("machine", {})
    return f"{m.get('cores')} cores, {m.get('memory_gib')} GiB, {m.get('cpu_model')}, {m.get('os')}"


def machines(result: dict) -> set[str]:
    return {machine_key(r) for r in result["runs"].values()}


PLACEMENT_TEXT = {
    "shared": "the engine, the broker, the generator and the reader share every core",
    "isolated": "the engine is pinned to core 0, and the broker, the generator and the reader to core 1",
}


def placement(result: dict) -> str | None:
    """The second harness's placement the runs share (None for the first harness's runs); refuses a mix."""
    found = {r.get("placement") for r in result["runs"].values()}
    if len(found) > 1:
        raise ValueError(f"the runs come from {len(found)} placements: {', '.join(sorted(map(str, found)))}")
    return found.pop() if found else None


def table_name(result: dict) -> str:
    """The `scripts/tables.py` name that renders this file's table again."""
    where = placement(result)
    return f"engines-{where}" if where else "engines"


def not_run_yet(where: str) -> str:
    """What a placement's table says before its results file exists: how to make it, and nothing else."""
    return "\n".join(
        [
            generated_note(f"python scripts/tables.py engines-{where}"),
            "",
            f"Not run yet: the second harness's matrix with `--placement {where}` has no results file. In this "
            f"placement, {PLACEMENT_TEXT[where]}. `python scripts/bench.py engines --placement {where} --list` lists "
            "its runs and their time.",
            "",
        ]
    )


def markdown(result: dict) -> str:
    """The table; it refuses a results file whose runs come from more than one machine or placement."""
    if len(machines(result)) > 1:
        raise ValueError(f"the runs come from {len(machines(result))} machines: {'; '.join(sorted(machines(result)))}")
    where = placement(result)
    # The second harness's tables trade the max (in the JSON and the per-second plot) for the seconds behind.
    columns = ("p50_ms", "p99_ms", "behind" if where else "max_ms")
    header = (
        f"| Pipeline | Events/s | Settings | Engine | Runs | p50 ms | p99 ms | {'s behind' if where else 'max ms'} "
        "| CPU s / M ev. | RSS MiB | Lost | Same output |"
    )
    warmup = result.get("settings", {}).get("warmup_s", 0)
    lines = [generated_note(f"python scripts/tables.py {table_name(result)}"), ""]
    if where:
        lines += [f"The second harness, placement `{where}`: {PLACEMENT_TEXT[where]}.", ""]
    lines += [header, "|" + "---|" * 12]
    for (pipeline, rate, profile, engine), runs in cells(result).items():
        lost = sum(r.get("missing") or 0 for r in runs)
        lines.append(
            f"| {pipeline} | {rate:,.0f} | {profile} | {ENGINE_LABELS[engine]} | {len(runs)} | "
            + " | ".join(behind_cell(runs, warmup) if name == "behind" else spread_cell(runs, name) for name in columns)
            + f" | {spread_cell(runs, 'cpu_s_per_m_events')} | {spread_cell(runs, 'rss_peak_mib')} | {lost} | "
            + f"{same_output_cell(result, pipeline, rate)} |"
        )
    lines += [
        "",
        "Several runs: the median, with the lowest and highest in brackets. "
        + (f"s behind: the measured seconds whose p99 passed {BEHIND_MS / 1000:.0f} s. " if where else "")
        + "CPU s / M ev.: CPU seconds per million events; RSS: the peak resident memory of the engine's process "
        "tree; same output: equal to the other engine's at that rate.",
        "",
    ]
    ratios = []
    for pipeline, rate, profile in sorted({k[:3] for k in cells(result)}, key=lambda k: (k[0], k[2], k[1])):
        ratio = p99_ratio(result, pipeline, rate, profile)
        if ratio is not None:
            ratios.append(f"{pipeline} at {rate:,.0f}/s ({profile}): {ratio:.2f}")
    if ratios and not where:  # the second harness's tables give the seconds behind instead
        lines += ["Spark RTM's p99 over Flink's (below 1: RTM's tail is shorter): " + "; ".join(ratios) + ".", ""]
    lines += readback_lines(result)
    lines += run_lines(result)
    return "\n".join(lines) + "\n"


def _median_busy(runs: list[dict]) -> str:
    busy = [r["core_busy"] for r in runs if r.get("core_busy")]
    if not busy:
        return "-"
    cores = sorted({int(c) for b in busy for c in b})
    return ", ".join(f"{c}: {statistics.median(b.get(str(c), b.get(c, 0)) for b in busy):.0%}" for c in cores)


def _shares(shares: list[float] | None) -> str:
    return "-" if not shares else " / ".join(f"{s:.0%}" for s in shares)


def readback_lines(result: dict) -> list[str]:
    """Per cell, what the engines really ran with (read back, harness 2 on): the state store or backend and the
    checkpoint mode, the garbage collectors, each task's share of the keyed work, and each core's busy share."""
    rows = []
    for (pipeline, rate, profile, engine), runs in cells(result).items():
        first = runs[0]
        back = first.get("readback")
        if not back:
            continue
        if engine == "spark":
            state = BACKEND_LABELS.get(back.get("state_store", ""), back.get("state_store", "-"))
            checkpoint = "each batch's end"
        else:
            state = back.get("state_backend") or "-"
            checkpoint = back.get("checkpoint_mode") or "-"
        if "rocksdb_library_loaded" in back:
            state += ", RocksDB loaded" if back["rocksdb_library_loaded"] else ", RocksDB not loaded"
        shares = (first.get("task_shares") or {}).get(engine)
        rows.append(
            f"| {pipeline} | {rate:,.0f} | {profile} | {ENGINE_LABELS[engine]} | {state} | {checkpoint} | "
            f"{', '.join(back.get('gc_selected') or back.get('gc', [])) or '-'} | {_shares(shares)} | {_median_busy(runs)} |"
        )
    if not rows:
        return []
    first = next(iter(result["runs"].values()))
    keys = first.get("key_space", {})
    matched = sorted({r["enrichment_match_share"] for r in result["runs"].values() if r.get("enrichment_match_share")})
    share = ""
    if matched:
        low, high = f"{matched[0]:.1%}", f"{matched[-1]:.1%}"
        share = f"; {low if low == high else f'{low} to {high}'} of the events match it"
    return [
        f"Read back from the running engines. Key space: {keys.get('keys', 0):,} users, Zipf exponent "
        f"{keys.get('zipf_exponent')}, seed {keys.get('seed')}; the enrichment table holds "
        f"{keys.get('enrichment_rows', 0):,} of them{share}. Task shares: each task's share of the keyed work by the "
        "engine's own partitioner (without an exchange, each source partition's). Core busy: each core's busy "
        "share over the measured window as `/proc/stat` counts it, the median of the runs; a rough figure, since on a "
        "virtual machine it can count less than the engine's own CPU time.",
        "",
        "| Pipeline | Events/s | Settings | Engine | State | Checkpoint | GC | Task shares | Core busy |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]


def _cell(value, unit: str = "") -> str:
    return "-" if value is None else f"{_num(value)}{unit}"


def _runs_record(runs: dict, setting: str | None = None, flink: dict | None = None) -> list[str]:
    """The footer of a table made of many runs, each with its own record: the load range over them, the latest one's
    machine and versions, every command, and the run count with the first start and last end over all of them."""
    loads = [r["load_average"]["start"][0] for r in runs.values()]
    latest = max(runs.values(), key=lambda r: r["timestamp"])
    commands = sorted({r["command"] for r in runs.values()})
    *record, span = record_lines(latest, setting, runs=len(runs), records=list(runs.values()))
    return [
        f"- 1-minute load average at the runs' starts {min(loads):.2f}-{max(loads):.2f}; each run has its own record "
        "in the JSON",
        f"- Flink {(flink or {}).get('version', versions.FLINK_VERSION)} with `flink-sql-connector-kafka` "
        f"{(flink or {}).get('kafka_connector', versions.FLINK_KAFKA_CONNECTOR_VERSION)}",
        *(line for line in record if not line.startswith(("- Load average", "- Command:"))),
        f"- {'Commands' if len(commands) > 1 else 'Command'}: {', '.join(f'`{c}`' for c in commands)}",
        span,
    ]


def recovery_markdown(result: dict) -> str:
    """One row per recovery run (`bench.py engines --recovery`): what a SIGKILL and a restart cost each engine."""
    runs = result.get("recovery", {})
    lines = [generated_note("python scripts/tables.py engines-recovery"), ""]
    if not runs:
        return "\n".join([*lines, "No recovery run yet: `python scripts/bench.py engines --recovery`.", ""])
    first = next(iter(runs.values()))
    lines += [
        f"{first['rate']:,} events/s; both engines checkpoint every {first['checkpoint_interval_s']} s; the engine's "
        f"process group killed (SIGKILL) {first['kill_at_s']} s into the run and started again at once on its "
        "checkpoint.",
        "",
        "| Pipeline | Engine | Run | Resume s | Downtime s | Real time again s | Replayed | Lost |",
        "|---|---|--:|--:|--:|--:|--:|--:|",
    ]
    order = {"transform": 0, "count": 1}
    for key, r in sorted(
        runs.items(), key=lambda kv: (order.get(kv[1]["pipeline"], 9), kv[1]["engine"] != "spark", kv[0])
    ):
        lines.append(
            f"| {r['pipeline']} | {ENGINE_LABELS[r['engine']]} | {key.rsplit('/', 1)[1]} | {_cell(r['resume_s'])} | "
            f"{_cell(r['downtime_s'])} | {_cell(r['back_to_real_time_s'])} | {r['replayed']:,} | {r['lost']} |"
        )
    lines += [
        "",
        "Resume: from the restart to its first output; downtime: the same from the kill; real time again: from the "
        "restart to the first output under 100 ms; replayed: outputs written a second time (the count: an update a "
        "user already had).",
        "",
        *_runs_record(runs),
    ]
    return "\n".join(lines) + "\n"


def run_lines(result: dict) -> list[str]:
    s = result.get("settings", {})
    if not result["runs"]:
        return []
    spark, flink = s.get("spark", {}), s.get("flink", {})
    setting = (
        f"{s.get('warmup_s', 0):.0f} s warm-up then {s.get('seconds', 0):.0f} s per run, {s.get('partitions')} "
        f"partitions, LogAppendTime on both topics; Spark {spark.get('version')} `{spark.get('master')}`, "
        f'`realTime="{spark.get("real_time_interval")}"`; Flink {flink.get("version")}, parallelism '
        f"{flink.get('parallelism')}, checkpoints every {flink.get('checkpoint_interval')}; tuned = "
        + ", ".join(f"`{k}={v}`" for conf in s.get("profiles", {}).get("tuned", {}).values() for k, v in conf.items())
        + "; default = "
        + (
            ", ".join(
                f"`{k}={v}`" for conf in s.get("profiles", {}).get("default", {}).values() for k, v in conf.items()
            )
            or "neither set"
        )
    )
    return _runs_record(result["runs"], setting, flink)


def _old_and_new_cell(runs: list[dict] | None) -> str:
    if not runs:
        return "-"
    return f"{spread_cell(runs, 'p50_ms')} / {spread_cell(runs, 'p99_ms')}, {len(runs)} run{'s' * (len(runs) > 1)}"


def old_and_new(old: dict, new: dict[str, dict | None]) -> str:
    """The first harness's medians (engines.json) beside the second harness's (`new`: placement -> its results file,
    None while not run), one row per pipeline, rate, settings profile and engine. Each file refuses a mix of machines
    on its own (`markdown`); the line under the table names each file's machine, since they may differ."""
    sources = {"first harness": old, **{f"{where}": result for where, result in new.items()}}
    grouped = {name: cells(result) if result else {} for name, result in sources.items()}
    keys: list[tuple] = []
    for by_cell in grouped.values():
        keys += [k for k in by_cell if k not in keys]
    order = {"transform": 0, "count": 1, "enrich": 2, "dedup": 3}
    profiles = {"tuned": 0, "tuned-heap": 1, "default": 2}
    keys.sort(key=lambda k: (order.get(k[0], 9), profiles.get(k[2], 9), k[1], k[3] != "spark"))
    header = ["Pipeline", "Events/s", "Settings", "Engine", *(name.capitalize() for name in sources)]
    rows = [
        [pipeline, f"{rate:,.0f}", profile, ENGINE_LABELS[engine]]
        + [_old_and_new_cell(grouped[name].get((pipeline, rate, profile, engine))) for name in sources]
        for pipeline, rate, profile, engine in keys
    ]
    lines = [generated_note("python scripts/tables.py engines-old-new"), "", markdown_table(header, rows)]
    lines.append(
        "Each cell: p50 ms / p99 ms, the median of the runs with the lowest and highest in brackets, then the number "
        "of runs. The first harness ran four users on shared cores; the second, 10,000 Zipf-skewed users, with the "
        "placement its column names."
    )
    lines.append("")
    for name, result in sources.items():
        if not result or not result["runs"]:
            lines.append(f"- {name.capitalize()}: not run yet")
            continue
        if len(machines(result)) > 1:
            raise ValueError(f"the {name} runs come from {len(machines(result))} machines")
        span = machine.run_span(len(result["runs"]), list(result["runs"].values()))
        lines.append(f"- {name.capitalize()}: on {machines(result).pop()}; {span}")
    return "\n".join(lines) + "\n"


def plot_path(json_path: Path) -> Path:
    return json_path.with_name(json_path.stem + "-cdf.png")


def series_plot_path(json_path: Path) -> Path:
    return json_path.with_name(json_path.stem + "-series.png")


def plot_series(result: dict, path: Path) -> None:
    """Per second, each engine's p99 and max (tuned, the run whose p99 is the cell's median), one panel per pipeline
    and rate, with its records in and out per second on a second axis: where in a run the tail came from."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grouped = {k: v for k, v in cells(result).items() if k[2] == "tuned" and any(r.get("series") for r in v)}
    panels = sorted(
        {(k[0], k[1]) for k in grouped}, key=lambda k: (["transform", "count", "enrich", "dedup"].index(k[0]), k[1])
    )
    if not panels:
        return
    cols = min(len(panels), 4)
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.6 * rows), squeeze=False)
    for ax, (pipeline, rate) in zip(axes.flat, panels, strict=False):
        rates_ax = ax.twinx()
        for (p, r, _, engine), runs in grouped.items():
            if (p, r) != (pipeline, rate):
                continue
            median = spread(runs, "p99_ms")[0] or 0
            rep = min(runs, key=lambda run: abs((run.get("p99_ms") or 0) - median))
            fields = rep["series_fields"]
            t, p99, top = (fields.index(name) for name in ("second", "p99_ms", "max_ms"))
            points = [row for row in rep["series"] if row[p99] is not None]
            ax.plot([row[t] for row in points], [max(row[p99], 0.5) for row in points], "-", color=COLORS[engine],
                    label=f"{ENGINE_LABELS[engine]} p99")  # fmt: skip
            ax.plot([row[t] for row in points], [max(row[top], 0.5) for row in points], ":", color=COLORS[engine],
                    label=f"{ENGINE_LABELS[engine]} max")  # fmt: skip
            ins, outs = fields.index("in_per_s"), fields.index("out_per_s")
            seconds = [row[t] for row in rep["series"]]
            rates_ax.plot(seconds, [row[ins] for row in rep["series"]], "-", color="grey", lw=0.6, alpha=0.6)
            rates_ax.plot(seconds, [row[outs] for row in rep["series"]], "--", color=COLORS[engine], lw=0.6, alpha=0.6)
        rates_ax.set_ylabel("records/s: in (grey), out (dashed)", fontsize=7)
        rates_ax.tick_params(labelsize=7)
        ax.set_yscale("log")
        ax.set_xlabel("second of the run (warm-up included)")
        ax.set_ylabel("latency, ms (log)")
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title(f"{pipeline}, {rate:,.0f} events/s")
        ax.legend(fontsize=7, loc="upper right")
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    fig.tight_layout()
    figures.save(fig, path, dpi=100)
    plt.close(fig)


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grouped = cells(result)
    panels = sorted(
        {(k[0], k[1]) for k in grouped}, key=lambda k: (["transform", "count", "enrich", "dedup"].index(k[0]), k[1])
    )
    if not panels:
        return
    cols = min(len(panels), 4)
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.8 * rows), squeeze=False)
    for ax, (pipeline, rate) in zip(axes.flat, panels, strict=False):
        for (p, r, profile, engine), runs in grouped.items():
            if (p, r) != (pipeline, rate):
                continue
            # The run whose p99 is the median's (or nearest it) stands for the cell.
            median = spread(runs, "p99_ms")[0] or 0
            rep = min(runs, key=lambda run: abs((run.get("p99_ms") or 0) - median))
            q = rep.get("quantiles_ms") or []
            if q:
                style = "-" if profile == "tuned" else "--"
                label = f"{ENGINE_LABELS[engine]}, {profile}"
                ax.plot([max(v, 0.5) for v in q], range(len(q)), style, color=COLORS[engine], label=label)
        ax.set_xscale("log")
        ax.set_xlabel("end-to-end latency, ms (log)")
        ax.set_ylabel("percentile")
        ax.set_ylim(0, 100)
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title(f"{pipeline}, {rate:,.0f} events/s")
        ax.legend(fontsize=7, loc="lower right")
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    fig.tight_layout()
    figures.save(fig, path, dpi=100)
    plt.close(fig)


def write(result: dict, json_path: Path) -> Path:
    """The table (.md beside the JSON) and the plot; the JSON is written run by run by the benchmark itself."""
    md = json_path.with_suffix(".md")
    md.write_text(markdown(result))
    if result.get("recovery"):
        json_path.with_name(json_path.stem + "-recovery.md").write_text(recovery_markdown(result))
    plot(result, plot_path(json_path))
    plot_series(result, series_plot_path(json_path))
    return md

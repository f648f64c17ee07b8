"""The results plots drawn again from the JSON the benchmarks left, without a run (scripts/plots.py)."""

import json
from collections.abc import Callable
from pathlib import Path

from rtm_lab.benchmarks import (
    checkpoint_storage,
    engine_capacity_report,
    engines_report,
    latency_report,
    per_task_report,
    sweep_report,
)


def redraw(results: Path) -> list[Path]:
    """Every plot under `results`, drawn again from the JSON beside it (no benchmark runs); the paths written."""

    def sweep(result: dict, path: Path) -> None:
        sweep_report.plot(result, path)
        sweep_report.plot_cdf(result, sweep_report.cdf_plot_path(path))

    plots: list[tuple[str, str, Callable[[dict, Path], None]]] = [
        ("latency.json", "latency.png", latency_report.plot),
        ("latency-sweep.json", "latency-sweep.png", sweep),
        ("engines.json", engines_report.plot_path(Path("engines.json")).name, engines_report.plot),
        *(
            (f"engines-{where}.json", name(Path(f"engines-{where}.json")).name, draw)
            for where in ("shared", "isolated")
            for name, draw in (
                (engines_report.plot_path, engines_report.plot),
                (engines_report.series_plot_path, engines_report.plot_series),
            )
        ),
        *(
            (f"engine-capacity-{where}.json", f"engine-capacity-{where}.png", engine_capacity_report.plot)
            for where in ("shared", "isolated")
        ),
        ("per-task-throughput.json", per_task_report.PLOT, per_task_report.plot),
        ("checkpoint-storage.json", "checkpoint-storage.png", checkpoint_storage.plot),
    ]
    written = []
    for json_name, png_name, draw in plots:
        source = results / json_name
        if not source.is_file():
            continue
        draw(json.loads(source.read_text()), results / png_name)
        written.append(results / png_name)
        if draw is sweep:
            written.append(sweep_report.cdf_plot_path(results / png_name))
    return written

#!/usr/bin/env python3
"""Write every generated results table under docs/results, or check that each is current.

  python scripts/tables.py support-matrix        the support matrix, from the cases its test runs (and the
                                                 readiness check's agreement, from readiness-check.json)
  python scripts/tables.py allowlist-off         the support matrix's allowlist-off table, from the cases its test runs
  python scripts/tables.py readiness-check       the readiness check's agreement and sample reports, from its JSON
  python scripts/tables.py errors                the errors table, from the mistakes its test runs
  python scripts/tables.py latency               latency.md from the latency benchmark's JSON
  python scripts/tables.py latency-sweep-headline the front page's headline sentence, from the batch duration sweep's JSON
  python scripts/tables.py can-i                 the front page's "Can I ...?" table, from SKILL.md's source of it
                                                 (scripts/rtm_lab/skillgen/templates/can-i.md) and the version matrix
  python scripts/tables.py when-to-use           the front page's micro-batch or real-time table, from the table in
                                                 Setup's "When to use it, and when not"
  python scripts/tables.py ad-attribution-latency, kafka-tuning, sink, sink-5s, sink-dwell, sink-stretch, recovery, boundary-settings, engines, checkpoint-storage, checkpoint-storage-flink   likewise, from their JSON
  python scripts/tables.py retry-outcomes        likewise, from retry-outcomes.json
  python scripts/tables.py per-task-throughput   the per-task capacity table, from per-task-throughput.json; skipped
                                                 while that file does not exist (nothing is shown before a run)
  python scripts/tables.py per-task-ceilings     those capacities beside the engine capacity runs' whole-query
                                                 ceilings (engine-capacity-shared.json); skipped likewise
  python scripts/tables.py per-task-ad-warmup-180   the ad-attribution steps run with a 180 s warm-up, from
                                                 per-task-ad-warmup-180.json; skipped likewise
  python scripts/tables.py engines-shared, engines-isolated   the second engine harness's table per placement, from
                                                 engines-PLACEMENT.json; until that file exists, a line saying so
  python scripts/tables.py engines-old-new       the first harness's medians (engines.json) beside the second's, for the
                                                 like-for-like issue's closing note; skipped until a placement file exists
  python scripts/tables.py dedup-stall           the deduplication stall's factorial, from dedup-stall.json; skipped
                                                 while that file does not exist
  python scripts/tables.py dedup-stall-warm60    the same for the base and Flink with a 60 s warm-up, from
                                                 dedup-stall-warm60.json; skipped likewise
  python scripts/tables.py dedup-stall-watch     the same for a cell watched and unwatched, from dedup-stall-watch.json;
                                                 skipped likewise
  python scripts/tables.py engine-capacity-shared, engine-capacity-isolated   each engine's searched capacity, from
                                                 engine-capacity-PLACEMENT.json; skipped likewise
  python scripts/tables.py plan-check            the planner's predictions beside runs, from plan-check.json; skipped
                                                 while that file does not exist
  python scripts/tables.py version-matrix        the PySpark version matrix, from scripts/version_matrix.py's JSON
  python scripts/tables.py stall-5s              the one stall figure for the 5 s boundary, from the sweep's JSON
  python scripts/tables.py readme-demo-screen    README's copy of make demo's recorded screen, docs/results/demo-screen.txt
  python scripts/tables.py diagram-timeline, diagram-timeline-narrow, diagram-slots   the concept diagrams (SVG,
                                                 into docs/diagrams/), from rtm_lab.diagrams: no results needed
  python scripts/tables.py glossary              the glossary's entries, from scripts/rtm_lab/glossary.yml
  python scripts/tables.py all --check           exit 1 naming each table that is stale or missing

The benchmarks write their own table when they run; this command re-renders it from the JSON they left.
"""

import importlib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rtm_lab import cli
from rtm_lab.diagrams import slots, timeline
from rtm_lab.generated import MissingRegion, generated_note, markdown_table, replace_region, write_or_check
from rtm_lab.paths import PROJECT_ROOT
from rtm_lab.skillgen.markdown import RenderError

RESULTS = PROJECT_ROOT / "docs" / "results"
DIAGRAMS = PROJECT_ROOT / "docs" / "diagrams"


@dataclass(frozen=True)
class Table:
    output: str  # file name in the results folder
    render: Callable[[Path], str]  # the results folder -> the table's text
    folder: Path | None = None  # where it is written, when not the results folder
    # The results file this table needs only once measured: until it exists the table is skipped, not an error.
    # Several: skipped until any of them exists.
    once_measured: str | tuple[str, ...] | None = None

    def not_measured_yet(self, results: Path) -> bool:
        if self.once_measured is None:
            return False
        needed = (self.once_measured,) if isinstance(self.once_measured, str) else self.once_measured
        return not any((results / name).is_file() for name in needed)


def _cases_table(name: str, rows: Callable) -> Callable[[Path], str]:
    def render(results: Path) -> str:
        header, body = rows()
        return generated_note(f"python scripts/tables.py {name}") + "\n\n" + markdown_table(header, body)

    return render


def _support_matrix_rows():
    from rtm_lab.probes.support_matrix import table_rows

    return table_rows()


def _support_matrix(results: Path) -> str:
    """The matrix, then how often the readiness check predicted it (from readiness-check.json)."""
    from rtm_lab.probes.readiness import agreement_sentence

    path = results / "readiness-check.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: run `python -m rtm_lab.probes.readiness` first.")
    table = _cases_table("support-matrix", _support_matrix_rows)(results)
    return table + "\n" + agreement_sentence(json.loads(path.read_text())) + "\n"


def _allowlist_off_rows():
    from rtm_lab.probes.allowlist_off import table_rows

    return table_rows()


def _mistakes_rows():
    from rtm_lab.probes.mistakes import table_rows

    return table_rows()


def _from_json(json_name: str, module: str, function: str = "markdown") -> Callable[[Path], str]:
    """A table its benchmark wrote beside a JSON file, rendered again from that JSON by `module.function`."""

    def render(results: Path) -> str:
        path = results / json_name
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist: run its benchmark first (see docs/benchmarks/).")
        # Imported here: a table's module may need Spark or the lab, and `tables.py errors` needs neither.
        return getattr(importlib.import_module(module), function)(json.loads(path.read_text()))

    return render


def _stall_5s(results: Path) -> str:
    """The one stall figure for the 5 s boundary, from the sweep's JSON (and the settings run's, named apart)."""
    from rtm_lab.benchmarks.sweep_report import stall_sentence

    return stall_sentence(*(json.loads((results / name).read_text()) for name in STALL_SOURCES))


STALL_SOURCES = ("latency-sweep.json", "boundary-settings.json")


def _per_task_ceilings(results: Path) -> str:
    """The per-task capacities beside the engine capacity runs' whole-query ceilings."""
    from rtm_lab.benchmarks.per_task_report import ceilings_markdown

    return ceilings_markdown(*(json.loads((results / name).read_text()) for name in CEILING_SOURCES))


CEILING_SOURCES = ("per-task-throughput.json", "engine-capacity-shared.json")


def _checkpoint_storage(results: Path) -> str:
    """The checkpoint-storage tables, or a line saying how to measure them: the page includes the file either way."""
    from rtm_lab.benchmarks import checkpoint_storage

    path = results / "checkpoint-storage.json"
    if not path.is_file():
        return checkpoint_storage.placeholder()
    return checkpoint_storage.markdown(json.loads(path.read_text()))


def _engines_placement(where: str) -> Callable[[Path], str]:
    """The second harness's table for one placement, or a line saying it has not been run: the file exists either
    way, so a page may include it before the matrix runs."""

    def render(results: Path) -> str:
        from rtm_lab.benchmarks import engines_report

        path = results / f"engines-{where}.json"
        if not path.is_file():
            return engines_report.not_run_yet(where)
        result = json.loads(path.read_text())
        try:  # a file of several machines or placements is refused in one line, not a traceback
            found = engines_report.placement(result)
            if result.get("runs") and found != where:
                raise ValueError(f"the runs are not of the {where} placement but {found or 'the first harness'}'s")
            return engines_report.markdown(result)
        except ValueError as exc:
            raise RenderError(f"{path}: {exc}") from exc

    return render


ENGINE_PLACEMENTS = ("shared", "isolated")


def _engines_old_and_new(results: Path) -> str:
    """The first harness's table beside the second's, for the like-for-like issue's closing note."""
    from rtm_lab.benchmarks import engines_report

    def read(name: str) -> dict | None:
        path = results / name
        return json.loads(path.read_text()) if path.is_file() else None

    old = read("engines.json")
    if old is None:
        raise FileNotFoundError(f"{results / 'engines.json'} does not exist: the first harness's runs are needed.")
    try:
        return engines_report.old_and_new(old, {where: read(f"engines-{where}.json") for where in ENGINE_PLACEMENTS})
    except ValueError as exc:
        raise RenderError(f"engines-old-new: {exc}") from exc


def _checkpoint_storage_flink(results: Path) -> str:
    """Flink's checkpoint-storage tables, or a line saying how to measure them: the page includes the file either way."""
    from rtm_lab.benchmarks import checkpoint_flink_report

    path = results / "checkpoint-storage-flink.json"
    if not path.is_file():
        return checkpoint_flink_report.placeholder()
    return checkpoint_flink_report.markdown(json.loads(path.read_text()))


def _glossary(results: Path) -> str:
    """The glossary page's entries, from the one file the term check reads too."""
    from rtm_lab import terms

    return terms.glossary_markdown(terms.load())


def _front_page(function: str) -> Callable[[Path], str]:
    """A front-page table rendered from the docs and the skill's sources (rtm_lab.skillgen.front_page)."""

    def render(results: Path) -> str:
        from rtm_lab.skillgen import front_page

        return getattr(front_page, function)()

    return render


TABLES = {
    "support-matrix": Table("support-matrix.md", _support_matrix),
    "allowlist-off": Table("allowlist-off.md", _cases_table("allowlist-off", _allowlist_off_rows)),
    "readiness-check": Table("readiness-check.md", _from_json("readiness-check.json", "rtm_lab.probes.readiness")),
    "errors": Table("errors.md", _cases_table("errors", _mistakes_rows)),
    "latency": Table("latency.md", _from_json("latency.json", "rtm_lab.benchmarks.latency_report")),
    "ad-attribution-latency": Table(
        "ad_attribution_latency.md", _from_json("ad_attribution_latency.json", "rtm_lab.benchmarks.latency_report")
    ),
    "latency-sweep": Table("latency-sweep.md", _from_json("latency-sweep.json", "rtm_lab.benchmarks.sweep_report")),
    "latency-sweep-headline": Table(
        "latency-sweep-headline.md",
        _from_json("latency-sweep.json", "rtm_lab.benchmarks.sweep_report", "headline_markdown"),
    ),
    "can-i": Table("can-i.md", _front_page("can_i_markdown")),
    "when-to-use": Table("when-to-use.md", _front_page("when_to_use_markdown")),
    "kafka-tuning": Table("kafka-tuning.md", _from_json("kafka-tuning.json", "rtm_lab.probes.kafka_tuning")),
    "sink": Table("sink.md", _from_json("sink.json", "rtm_lab.benchmarks.sink")),
    "sink-5s": Table("sink-5s.md", _from_json("sink-5s.json", "rtm_lab.benchmarks.sink")),
    "sink-dwell": Table("sink-dwell.md", _from_json("sink-dwell.json", "rtm_lab.benchmarks.sink")),
    "sink-stretch": Table("sink-stretch.md", _from_json("sink-stretch.json", "rtm_lab.benchmarks.sink")),
    "recovery": Table("recovery.md", _from_json("recovery.json", "rtm_lab.benchmarks.recovery")),
    "retry-outcomes": Table(
        "retry-outcomes.md", _from_json("retry-outcomes.json", "rtm_lab.benchmarks.retry_outcomes")
    ),
    "boundary-settings": Table(
        "boundary-settings.md", _from_json("boundary-settings.json", "rtm_lab.benchmarks.boundary_settings")
    ),
    "stall-5s": Table("stall-5s.md", _stall_5s),
    "checkpoint-storage": Table("checkpoint-storage.md", _checkpoint_storage),
    "checkpoint-storage-flink": Table("checkpoint-storage-flink.md", _checkpoint_storage_flink),
    "engines": Table("engines.md", _from_json("engines.json", "rtm_lab.benchmarks.engines_report")),
    "engines-recovery": Table(
        "engines-recovery.md", _from_json("engines.json", "rtm_lab.benchmarks.engines_report", "recovery_markdown")
    ),
    "engines-shared": Table("engines-shared.md", _engines_placement("shared")),
    "engines-isolated": Table("engines-isolated.md", _engines_placement("isolated")),
    "engines-old-new": Table(
        "engines-old-new.md", _engines_old_and_new, once_measured=tuple(f"engines-{w}.json" for w in ENGINE_PLACEMENTS)
    ),
    "dedup-stall": Table(
        "dedup-stall.md",
        _from_json("dedup-stall.json", "rtm_lab.benchmarks.dedup_stall_report"),
        once_measured="dedup-stall.json",
    ),
    "dedup-stall-warm60": Table(
        "dedup-stall-warm60.md",
        _from_json("dedup-stall-warm60.json", "rtm_lab.benchmarks.dedup_stall_report", "warm60_markdown"),
        once_measured="dedup-stall-warm60.json",
    ),
    "dedup-stall-watch": Table(
        "dedup-stall-watch.md",
        _from_json("dedup-stall-watch.json", "rtm_lab.benchmarks.dedup_stall_report", "watch_markdown"),
        once_measured="dedup-stall-watch.json",
    ),
    "engine-capacity-shared": Table(
        "engine-capacity-shared.md",
        _from_json("engine-capacity-shared.json", "rtm_lab.benchmarks.engine_capacity_report"),
        once_measured="engine-capacity-shared.json",
    ),
    "engine-capacity-isolated": Table(
        "engine-capacity-isolated.md",
        _from_json("engine-capacity-isolated.json", "rtm_lab.benchmarks.engine_capacity_report"),
        once_measured="engine-capacity-isolated.json",
    ),
    "monitor-cost": Table("monitor-cost.md", _from_json("monitor-cost.json", "rtm_lab.benchmarks.monitor_cost")),
    "per-task-throughput": Table(
        "per-task-throughput.md",
        _from_json("per-task-throughput.json", "rtm_lab.benchmarks.per_task_report"),
        once_measured="per-task-throughput.json",
    ),
    "per-task-ceilings": Table("per-task-ceilings.md", _per_task_ceilings, once_measured="per-task-throughput.json"),
    "per-task-ad-warmup-180": Table(
        "per-task-ad-warmup-180.md",
        _from_json("per-task-ad-warmup-180.json", "rtm_lab.benchmarks.per_task_report", "ad_warmup_markdown"),
        once_measured="per-task-ad-warmup-180.json",
    ),
    "plan-check": Table(
        "plan-check.md", _from_json("plan-check.json", "rtm_lab.benchmarks.plan_check"), once_measured="plan-check.json"
    ),
    "glossary": Table("glossary.md", _glossary),
    "version-matrix": Table("version-matrix.md", _from_json("version-matrix.json", "rtm_lab.probes.version_cases")),
    # Drawn from code alone (no results file): the pages include what `--check` keeps in step with the drawing.
    "diagram-timeline": Table("timeline.svg", lambda _: timeline.render(timeline.WIDE), DIAGRAMS),
    "diagram-timeline-narrow": Table("timeline-narrow.svg", lambda _: timeline.render(timeline.NARROW), DIAGRAMS),
    "diagram-slots": Table("slots.svg", lambda _: slots.render(), DIAGRAMS),
}


@dataclass(frozen=True)
class Region:
    """A generated block inside a hand-written file: README cannot include files as the docs site does."""

    file: Path
    name: str  # in the markers that open and close it
    render: Callable[[Path], str]  # the results folder -> the block's text


def _demo_screen_block(results: Path) -> str:
    path = results / "demo-screen.txt"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: run `python scripts/demo.py --record {path}` first.")
    return "```text\n" + path.read_text() + "```\n"


REGIONS = {"readme-demo-screen": Region(PROJECT_ROOT / "README.md", "demo-screen", _demo_screen_block)}


def _render_region(name: str, results: Path) -> str:
    region = REGIONS[name]
    command = f"python scripts/tables.py {name}"
    return replace_region(region.file.read_text(), region.name, region.render(results), command)


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser_from_doc("tables.py", __doc__)
    parser.add_argument("name", choices=[*TABLES, *REGIONS, "all"], help="which table")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if the file is stale or missing")
    parser.add_argument("--results", type=Path, default=RESULTS, help="the results folder (%(default)s)")
    args = parser.parse_args(argv)
    names = [*TABLES, *REGIONS] if args.name == "all" else [args.name]
    failed = 0
    for name in names:
        try:
            if name in REGIONS:
                text, output = _render_region(name, args.results), REGIONS[name].file
            else:
                table = TABLES[name]
                if table.not_measured_yet(args.results):
                    continue
                text, output = table.render(args.results), (table.folder or args.results) / table.output
        except (FileNotFoundError, MissingRegion, RenderError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        failed |= write_or_check(text, output, args.check, f"python scripts/tables.py {name}")
    return failed


if __name__ == "__main__":
    sys.exit(main())

"""Checkpoints on object storage: what each batch boundary of a real-time query costs when every storage request waits.

Four query shapes (Kafka -> Kafka): stateless with asynchronous progress tracking (the 4.3 default) and without it,
`dropDuplicates`, and a `groupBy` count. Each runs with its checkpoint on local disk, and on the lab's S3 store through
the delay proxy at a set delay per request: 0, 30 and 100 ms fit the model, 10 ms and the 30 s batch duration (at
30 ms) are held out. Per run: p50, p99 and max latency, the stall at each boundary and its split (planning, offset
log, commit log, state upload), the requests per boundary by kind, and the critical path (rtm_lab.benchmarks.
checkpoint_requests). Per shape, the model stall = fixed + critical-path requests x request latency, fitted and
checked on the held-out points (rtm_lab.benchmarks.checkpoint_model).

The long cell runs each shape once at the 5-minute batch duration, at 30 ms per request: production crosses exactly
one boundary, after five minutes of state (1,000 new keys a second), with about 20 s of records after it. It is
neither fit nor held out: the model is checked against it, and its row gives the state upload at that boundary. The
same 5-minute cell on disk gives the capacity planner the stall at its default batch duration (`planner` part).

The runs of a repeat follow each other, so a load change spreads over the cells. The results file is written after
every run, and a rerun with the same file skips the runs it holds (resumable); `--until HH:MM` (UTC) starts no run
that could not end by then.

    python scripts/bench.py checkpoint-storage --json docs/results/checkpoint-storage.json
    python scripts/bench.py checkpoint-storage --shapes dedup --delays 100 --runs 1 --json /tmp/smoke.json
    python scripts/bench.py checkpoint-storage --delays 30 --durations '5 minutes' \\
        --json docs/results/checkpoint-storage.json
"""

import argparse
import datetime as dt
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rtm_lab import cli, s3a
from rtm_lab.benchmarks import checkpoint_model, checkpoint_requests
from rtm_lab.benchmarks.median_range import ms_cell, spread
from rtm_lab.generated import generated_note, markdown_table

ASYNC_BY_DEFAULT = "spark.sql.streaming.realTimeMode.asyncProgressTrackingByDefault.enabled"
CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
FILE_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"
BATCH_DURATION = "5 seconds"
HELD_OUT_BATCH_DURATION = "30 seconds"
LONG_BATCH_DURATION = "5 minutes"
FIT_DELAYS_MS = (0, 30, 100)
HELD_OUT_DELAY_MS = 10
HELD_OUT_INTERVAL_DELAY_MS = 30
LONG_DELAY_MS = 30  # in the range of a small request to S3 Standard in its region
LONG_RUNS = 1
VARIANT_DELAY_MS = 100
DISK = "disk"
RATE = 1000.0
WARMUP_S = 5.0
# Production per run: about seven boundaries after the warm-up at 5 s, three at 30 s. At 5 minutes, one: production
# starts once the priming records are out (4-7 s after the query, whose first batch the boundary ends), so it is
# crossed about 295 s in, with 20 s and more of records after it and the next boundary 300 s away.
SECONDS = {BATCH_DURATION: 40.0, HELD_OUT_BATCH_DURATION: 100.0, LONG_BATCH_DURATION: 320.0}
# What a run costs beyond its production (a Spark session's start, the priming batch, the drain): for --until.
OVERHEAD_S = 45.0


@dataclass(frozen=True)
class Shape:
    name: str
    pipeline: str  # rtm_lab.benchmarks.latency_child's pipeline
    what: str
    spark_conf: dict = field(default_factory=dict)

    @property
    def stateful(self) -> bool:
        return self.pipeline != "passthrough"


SHAPES = (
    Shape("stateless_async", "passthrough", "stateless, async progress tracking on (the 4.3 default)"),
    Shape("stateless_sync", "passthrough", "stateless, async progress tracking off", {ASYNC_BY_DEFAULT: "false"}),
    Shape("dedup", "dedup", "dropDuplicates on the event id"),
    Shape("count", "count", "groupBy count, keyed by the event id"),
)
BY_NAME = {s.name: s for s in SHAPES}
# Optional cells, at VARIANT_DELAY_MS: a setting that may remove requests from the boundary.
VARIANTS = {
    "changelog_off": ("RocksDB changelog checkpointing off (a snapshot upload per batch)", {CHANGELOG: "false"}),
    "file_manager": (
        "the stream-based checkpoint file manager of spark-hadoop-cloud",
        {FILE_MANAGER: s3a.STREAM_FILE_MANAGER},
    ),
}


@dataclass(frozen=True)
class Cell:
    shape: str
    storage: str  # DISK, or the delay per request in ms on the store
    batch_duration: str = BATCH_DURATION
    variant: str = ""

    @property
    def key(self) -> str:
        where = self.storage if self.storage == DISK else f"s3 {self.storage} ms"
        return " / ".join(filter(None, [self.shape, where, self.batch_duration, self.variant]))

    @property
    def delay_ms(self) -> float | None:
        return None if self.storage == DISK else float(self.storage)

    @property
    def role(self) -> str:
        """fit, held-out, long, baseline (disk) or variant: how the model uses the cell."""
        if self.variant:
            return "variant"
        if self.storage == DISK:
            return "baseline"
        if self.batch_duration == LONG_BATCH_DURATION:
            return "long"
        if self.batch_duration == BATCH_DURATION and float(self.storage) in FIT_DELAYS_MS:
            return "fit"
        return "held-out"


def plan(shapes: list[str], delays: list[str], durations: list[str], variants: list[str]) -> list[Cell]:
    """The cells in the order one repeat runs them."""
    cells = []
    for shape in shapes:
        if BATCH_DURATION in durations:
            cells += [Cell(shape, d) for d in delays]
        if HELD_OUT_BATCH_DURATION in durations and str(HELD_OUT_INTERVAL_DELAY_MS) in delays:
            cells.append(Cell(shape, str(HELD_OUT_INTERVAL_DELAY_MS), HELD_OUT_BATCH_DURATION))
        if LONG_BATCH_DURATION in durations:
            # On disk too: the capacity planner's default batch duration is 5 minutes, and the stall it prints for
            # it is the disk one (it has no storage input).
            cells += [Cell(shape, d, LONG_BATCH_DURATION) for d in (DISK, str(LONG_DELAY_MS)) if d in delays]
        for variant in variants:
            if variant == "changelog_off" and not BY_NAME[shape].stateful:
                continue  # no state store: the setting changes nothing
            cells.append(Cell(shape, str(VARIANT_DELAY_MS), BATCH_DURATION, variant))
    return cells


def _delay(text: str) -> str:
    if text == DISK:
        return text
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is neither 'disk' nor a delay in ms (0 or more)")
    return f"{value:g}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--shapes",
        type=cli.comma_choices(list(BY_NAME)),
        default=list(BY_NAME),
        help="comma-separated shapes (default all): " + "; ".join(f"{s.name}: {s.what}" for s in SHAPES),
    )
    parser.add_argument(
        "--delays",
        type=lambda text: [_delay(d.strip()) for d in text.split(",")],
        default=[DISK, *(str(d) for d in FIT_DELAYS_MS), str(HELD_OUT_DELAY_MS)],
        help="comma-separated storage cells: 'disk' or a delay per request in ms on the store "
        f"(default disk,{','.join(map(str, FIT_DELAYS_MS))},{HELD_OUT_DELAY_MS})",
    )
    parser.add_argument(
        "--durations",
        type=cli.comma_choices(list(SECONDS)),
        default=list(SECONDS),
        help=f"comma-separated batch durations (default all three): '{BATCH_DURATION}' for every delay; "
        f"'{HELD_OUT_BATCH_DURATION}' at {HELD_OUT_INTERVAL_DELAY_MS} ms only (held out); '{LONG_BATCH_DURATION}' on "
        f"disk and at {LONG_DELAY_MS} ms only, in the range of a small request to S3 Standard in its region (the long cell: "
        f"{SECONDS[LONG_BATCH_DURATION]:g} s of production cross one boundary after five minutes of state; about "
        "six minutes a run)",
    )
    parser.add_argument(
        "--variants",
        type=cli.comma_choices(list(VARIANTS)),
        default=[],
        help=f"comma-separated optional cells at {VARIANT_DELAY_MS} ms (default none): "
        + "; ".join(f"{k}: {what}" for k, (what, _) in VARIANTS.items()),
    )
    parser.add_argument("--runs", type=cli.positive_int, default=3, help="runs per cell (default 3)")
    parser.add_argument(
        "--long-runs",
        type=cli.positive_int,
        default=LONG_RUNS,
        help=f"runs of each {LONG_BATCH_DURATION} cell on the store (default {LONG_RUNS}: one boundary per run, minutes "
        "each; on disk it runs --runs times)",
    )
    parser.add_argument("--rate", type=cli.positive_float, default=RATE, help=f"events per second (default {RATE:g})")
    parser.add_argument(
        "--seconds",
        type=cli.positive_float,
        help="production seconds per run (default 40; 100 at 30 s; 320 at 5 minutes)",
    )
    parser.add_argument("--until", type=cli.clock_time, help="start no run that could not end by this UTC time (HH:MM)")
    parser.add_argument(
        "--json", required=True, type=cli.json_output, help="results file (resumed when it exists; a .md goes beside)"
    )


# ---------------------------------------------------------------- one run


def run_cell(cell: Cell, state: Any, rate: float, seconds: float) -> dict:
    """One run of a cell in its own Spark session (rtm_lab.benchmarks.latency_child), its requests accounted."""
    from rtm_lab import s3_proxy
    from rtm_lab.benchmarks import latency_child as latency

    shape = BY_NAME[cell.shape]
    conf = {**shape.spark_conf, **(VARIANTS[cell.variant][1] if cell.variant else {})}
    extra = ["--observe-boundaries"]
    if cell.delay_ms is not None:
        # Through the proxy, which holds each request for the cell's delay before it forwards it to the store.
        extra += ["--checkpoint-store", state.s3_proxy.address, "--store-delay-ms", f"{cell.delay_ms:g}"]
        s3_proxy.set_delay(s3_proxy.control_path(), 0)
    for key, value in conf.items():
        extra += ["--spark-conf", f"{key}={value}"]
    cfg = latency.settings(cell.batch_duration, pipeline=shape.pipeline)
    result = latency.run_child("realtime", state.kafka_bootstrap, rate, seconds, WARMUP_S, cfg, None, extra)
    if cell.delay_ms is not None:
        lo, hi = result["run_span_ms"]
        requests = checkpoint_requests.of_run(
            s3_proxy.read_log(s3_proxy.log_path(), lo, hi + 1), result["checkpoint_folder"]
        )
        accounted = checkpoint_requests.account(requests, result)
        by_batch = {b["batch"]: b for b in accounted.pop("per_boundary")}
        for boundary in result["boundaries"]:
            boundary["storage"] = by_batch.get(boundary["batch"])
        result["storage"] = accounted
    for boundary in result["boundaries"]:
        storage = boundary.get("storage") or {}
        commit = (result.get("state_commit_ms") or {}).get(str(boundary["batch"]))
        boundary["split"] = checkpoint_requests.stall_split({**boundary, **storage, "state_commit_ms": commit})
    return slim(result)


BULKY = ("timeline", "cdf_ms", "quantiles_ms", "batches", "generator_lag_ms", "ui_jobs", "tail")


def slim(result: dict) -> dict:
    """A run's record without the per-record series the tables do not use (kept small for a results file)."""
    return {k: v for k, v in result.items() if k not in BULKY}


# ---------------------------------------------------------------- figures over runs


SPLIT_PARTS = ("planning_ms", "offset_log_ms", "commit_log_ms", "state_upload_ms", "state_commit_ms")


def _split_medians(result: dict) -> dict[str, float | None]:
    """The median of each split part over a run's boundaries."""
    return {
        part: spread([b["split"].get(part) for b in result.get("boundaries", []) if b.get("split")])["median"]
        for part in SPLIT_PARTS
    }


def _first_boundary(result: dict) -> dict:
    """What the long cell reports of the one boundary its run crosses: the stall, and the state upload (requests to
    the state area and the bytes they sent) counted by the proxy in that boundary's cycle."""
    boundaries = result.get("boundaries") or []
    if not boundaries:
        return {"stall_ms": None, "state_requests": None, "state_bytes": None, "critical_path": None}
    first = boundaries[0]
    storage = first.get("storage") or {}
    by_area = storage.get("by_area") or {}
    sent = storage.get("bytes_in_by_area") or {}
    return {
        "stall_ms": first.get("stall_ms"),
        "state_requests": sum(by_area["state"].values()) if "state" in by_area else None,
        "state_bytes": sent.get("state"),
        "critical_path": storage.get("critical_path"),
    }


def long_part(results: list[dict]) -> dict:
    """The long cell's figures at its boundary, over its runs."""
    firsts = [_first_boundary(r) for r in results]
    return {
        "boundaries_per_run": [r.get("boundaries_crossed") or 0 for r in results],
        **{name: spread([f[name] for f in firsts]) for name in ("stall_ms", "state_requests", "state_bytes")},
        "critical_path": spread([f["critical_path"] for f in firsts]),
    }


def cell_row(cell: Cell, runs: list[dict]) -> dict:
    results = [r["result"] for r in runs]
    storage = [r.get("storage") or {} for r in results]
    kinds = sorted({k for s in storage for k in (s.get("requests_per_boundary_by_kind") or {})})
    # Only the long cell has the key: the rows of the other cells stay as they were before it existed.
    extra = {"long": long_part(results)} if cell.role == "long" else {}
    return {
        "key": cell.key,
        "shape": cell.shape,
        "storage": cell.storage,
        "batch_duration": cell.batch_duration,
        "variant": cell.variant,
        "role": cell.role,
        "runs": len(runs),
        "p50_ms": spread([r.get("p50_ms") for r in results]),
        "p99_ms": spread([r.get("p99_ms") for r in results]),
        "max_ms": spread([r.get("max_ms") for r in results]),
        "stall_ms": spread([r.get("stall_median_ms") for r in results]),
        "boundaries": sum(r.get("boundaries_crossed") or 0 for r in results),
        "missing": sum(r.get("missing") or 0 for r in results),
        "split_ms": {part: spread([_split_medians(r)[part] for r in results])["median"] for part in SPLIT_PARTS},
        "requests_per_boundary": spread([s.get("requests_per_boundary") for s in storage]),
        "requests_by_kind": {
            k: spread([(s.get("requests_per_boundary_by_kind") or {}).get(k, 0) for s in storage if s])["median"]
            for k in kinds
        },
        "data_path": spread([s.get("data_path_median") for s in storage]),
        "critical_path": spread([s.get("critical_path_median") for s in storage]),
        **extra,
    }


def models(rows: list[dict], done: list[dict]) -> list[dict]:
    """Per shape: the fit on its fit cells' runs (one point per run), the counted critical path, the held-out rows."""
    found = []
    for shape in dict.fromkeys(r["shape"] for r in rows):
        points = [
            (float(d["cell"]["storage"]), d["result"]["stall_median_ms"])
            for d in done
            if d["cell"]["shape"] == shape
            and Cell(**d["cell"]).role == "fit"
            and d["result"].get("stall_median_ms") is not None
        ]
        entry: dict[str, Any] = {"shape": shape, "fit_points": len(points)}
        try:
            model = checkpoint_model.fit(points)
        except ValueError as exc:
            found.append({**entry, "error": str(exc)})
            continue
        held = [
            r for r in rows if r["shape"] == shape and r["role"] == "held-out" and r["stall_ms"]["median"] is not None
        ]
        checks = checkpoint_model.held_out(model, [(float(r["storage"]), r["stall_ms"]["median"]) for r in held])
        counted = [r["critical_path"]["median"] for r in rows if r["shape"] == shape and r["role"] == "fit"]
        long = [r for r in rows if r["shape"] == shape and r["role"] == "long" and r["stall_ms"]["median"] is not None]
        # The long cell is checked like a held-out one but kept apart: its boundary follows five minutes of state,
        # not five seconds, so its error says how far the 5 s model carries, not whether the model holds.
        checked = checkpoint_model.held_out(model, [(float(r["storage"]), r["stall_ms"]["median"]) for r in long])
        found.append(
            {
                **entry,
                "fixed_ms": round(model.fixed_ms, 1),
                "slope": round(model.per_request_latency, 2),
                "critical_path_counted": max((c for c in counted if c is not None), default=None),
                "held_out": [{**c, "cell": r["key"]} for c, r in zip(checks, held, strict=True)],
                **({"long": [{**c, "cell": r["key"]} for c, r in zip(checked, long, strict=True)]} if long else {}),
            }
        )
    return found


def assemble(done: list[dict], cells: list[Cell]) -> list[dict]:
    """A row per cell that has runs, in plan order."""
    rows = []
    for cell in cells:
        runs = [d for d in done if Cell(**d["cell"]) == cell]
        if runs:
            rows.append(cell_row(cell, runs))
    return rows


# ---------------------------------------------------------------- the results file and its table


def _n(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _where(row: dict) -> str:
    where = "local disk" if row["storage"] == DISK else f"S3, {row['storage']} ms/request"
    extra = [] if row["batch_duration"] == BATCH_DURATION else [row["batch_duration"]]
    extra += [row["variant"]] if row["variant"] else []
    return where + (f" ({', '.join(extra)})" if extra else "")


LATENCY_HEADER = ["shape", "storage", "runs", "p50 ms", "p99 ms", "max ms", "stall per boundary ms", "critical path"]
SPLIT_HEADER = [
    "shape",
    "storage",
    "planning ms",
    "offset log ms",
    "commit log ms",
    "state upload ms",
    "state commit ms (summed over tasks)",
]
KINDS = ("PUT", "GET", "HEAD", "LIST", "COPY", "DELETE", "MULTIPART")
LONG_HEADER = [
    "shape",
    "runs",
    "stall ms",
    "model predicts ms",
    "error",
    "state requests",
    "state MB sent",
    "critical path",
    "p99 ms",
    "max ms",
]
MODEL_HEADER = [
    "shape",
    "fixed ms",
    "stall ms per ms of latency",
    "critical path counted",
    "held-out cell",
    "predicted ms",
    "measured ms",
    "error",
]


def markdown(result: dict) -> str:
    from rtm_lab.benchmarks.run_record import record_lines

    rows = result["rows"]
    latency = [
        [
            r["shape"],
            _where(r),
            r["runs"],
            ms_cell(r["p50_ms"]),
            ms_cell(r["p99_ms"]),
            ms_cell(r["max_ms"]),
            ms_cell(r["stall_ms"]),
            _n(r["critical_path"]["median"]),
        ]
        for r in rows
    ]
    split = [
        [r["shape"], _where(r), *(_n(None if v is None else round(v)) for v in r["split_ms"].values())] for r in rows
    ]
    # A cell whose runs crossed no boundary inside the window (a batch longer than the run) counted no request:
    # a dash, not a zero.
    kinds = [
        [
            r["shape"],
            _where(r),
            *(_n(r["requests_by_kind"].get(k, 0) if r["boundaries"] else None) for k in KINDS),
            _n(r["data_path"]["median"]),
        ]
        for r in rows
        if r["storage"] != DISK
    ]
    model_rows = []
    for m in result["models"]:
        if "error" in m:
            model_rows.append([m["shape"], "-", "-", "-", m["error"], "-", "-", "-"])
            continue
        for h in m["held_out"] or [
            {"cell": "(none measured)", "predicted_ms": None, "measured_ms": None, "error": None}
        ]:
            error = "-" if h["error"] is None else f"{h['error']:.0%}" + (" ✓" if h.get("within_target") else " ✗")
            model_rows.append(
                [
                    m["shape"],
                    _n(m["fixed_ms"]),
                    _n(m["slope"]),
                    _n(m["critical_path_counted"]),
                    h["cell"],
                    _n(h["predicted_ms"]),
                    _n(None if h["measured_ms"] is None else round(h["measured_ms"])),
                    error,
                ]
            )
    right = ["", ""] + ["right"] * 6
    long_rows = [r for r in rows if r["role"] == "long"]
    sections = {
        "latency": [
            f"Kafka -> Kafka at **{result['rate']:,.0f} events/s**, real-time mode; {result['seconds']:g} s of "
            f"production per run at the {BATCH_DURATION} batch duration (the first {result['warmup_s']:g} s left out); "
            "median over the runs, range in brackets. Stall: the longest gap in records out at a boundary, minus the "
            "normal gap.",
            "",
            markdown_table(LATENCY_HEADER, latency, right),
        ],
        "split": [
            "Where the stall goes (median per boundary; the state upload is the time a state request ran inside the "
            "stall):",
            "",
            markdown_table(SPLIT_HEADER, split, ["", ""] + ["right"] * 5),
        ],
        "requests": [
            "Requests per boundary by kind (median), and how many of them overlapped the stall (data path):",
            "",
            markdown_table(["shape", "storage", *KINDS, "data path"], kinds, ["", ""] + ["right"] * 8),
        ],
        # The plot `write` draws beside the results file; the page that includes this section sits in docs/guides/.
        "plot": [
            "![Stall per boundary against the delay per storage request, per shape](../results/checkpoint-storage.png)"
        ]
        if rows
        else [],
        "model": [
            f"The model, fitted per shape on the runs at {', '.join(map(str, FIT_DELAYS_MS))} ms per request; "
            f"held-out error against the {checkpoint_model.TARGET_ERROR:.0%} target:",
            "",
            markdown_table(MODEL_HEADER, model_rows, ["", "right", "right", "right", "", "right", "right", "right"]),
        ],
        "long": _long_section(long_rows, result["models"], result["rate"]) if long_rows else [],
        "evidence": record_lines(
            result,
            "`local[2]` stateless, `local[4]` stateful; 2 partitions per topic",
            runs=len(result["done"]),
            records=result.get("sessions") or None,
        ),
    }
    return _document(sections)


def _mb(figure: dict) -> str:
    if figure["median"] is None:
        return "-"
    mb = {k: figure[k] / 1e6 for k in ("median", "min", "max")}
    text = f"{mb['median']:,.1f}"
    if figure["n"] > 1 and figure["min"] != figure["max"]:
        text += f" ({mb['min']:,.1f}–{mb['max']:,.1f})"
    return text


def _long_section(rows: list[dict], found: list[dict], rate: float) -> list[str]:
    """The long cell: one boundary after five minutes of state, against the model fitted at 5 s."""
    from rtm_lab.intervals import interval_ms

    checks = {c["cell"]: c for m in found for c in m.get("long", [])}
    lines = []
    for r in rows:
        check = checks.get(r["key"], {})
        error = check.get("error")
        lines.append(
            [
                r["shape"],
                r["runs"],
                ms_cell(r["long"]["stall_ms"]),
                _n(check.get("predicted_ms")),
                "-" if error is None else f"{error:.0%}" + (" ✓" if check.get("within_target") else " ✗"),
                ms_cell(r["long"]["state_requests"]),
                _mb(r["long"]["state_bytes"]),
                ms_cell(r["long"]["critical_path"]),
                ms_cell(r["p99_ms"]),
                ms_cell(r["max_ms"]),
            ]
        )
    keys = rate * interval_ms(LONG_BATCH_DURATION) / 1000
    return [
        f"One boundary after five minutes: the {LONG_BATCH_DURATION} batch duration at {LONG_DELAY_MS} ms per "
        f"request, {SECONDS[LONG_BATCH_DURATION]:g} s of production per run. The state holds about {keys:,.0f} keys "
        "at that boundary. The model is the one fitted at the 5 s batch duration. State requests and MB sent count "
        "the state folder's requests in that boundary's cycle. The p99 and max cover the whole run.",
        "",
        markdown_table(LONG_HEADER, lines, ["", *["right"] * 9]),
    ]


SECTIONS = ("latency", "plot", "split", "requests", "model", "long", "evidence")


def _document(sections: dict[str, list[str]]) -> str:
    """The generated file: each section between snippet markers, so the page includes them by name."""
    lines = [generated_note("python scripts/tables.py checkpoint-storage"), ""]
    for name in SECTIONS:
        lines += [f"--8<-- [start:{name}]", *sections[name], f"--8<-- [end:{name}]"]
    return "\n".join(lines) + "\n"


def placeholder() -> str:
    """The file before the benchmark has run: every section the page includes, the first saying how to measure it."""
    return _document({name: [PLACEHOLDER] if name == "latency" else [] for name in SECTIONS})


PLACEHOLDER = (
    "Not measured yet: `python scripts/bench.py checkpoint-storage` measures it, 76 runs of one to six minutes "
    "each on a quiet machine."
)


def plot(result: dict, path: Path) -> None:
    """Stall per boundary against request latency, a line per shape with its fitted model dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rtm_lab.benchmarks.figures import save

    fig, ax = plt.subplots(figsize=(7, 4.2))
    by_shape = {m["shape"]: m for m in result["models"]}
    for i, shape in enumerate(dict.fromkeys(r["shape"] for r in result["rows"])):
        color = f"C{i}"
        cells = [
            r
            for r in result["rows"]
            if r["shape"] == shape
            and r["storage"] != DISK
            and r["batch_duration"] == BATCH_DURATION
            and not r["variant"]
        ]
        cells.sort(key=lambda r: float(r["storage"]))
        xs = [float(r["storage"]) for r in cells if r["stall_ms"]["median"] is not None]
        ys = [r["stall_ms"]["median"] for r in cells if r["stall_ms"]["median"] is not None]
        ax.plot(xs, ys, "o-", color=color, label=shape)
        model = by_shape.get(shape, {})
        if "fixed_ms" in model and xs:
            ax.plot(
                [0, max(xs)],
                [model["fixed_ms"], model["fixed_ms"] + model["slope"] * max(xs)],
                "--",
                color=color,
                alpha=0.6,
            )
    ax.set_xlabel("delay per storage request (ms)")
    ax.set_ylabel("stall per boundary (ms, median)")
    ax.set_title("Batch-boundary stall vs checkpoint storage latency (dashed: fitted model)")
    ax.legend()
    ax.grid(alpha=0.3)
    save(fig, path, dpi=100)
    plt.close(fig)


def write(result: dict, json_path: Path) -> Path:
    json_path.write_text(json.dumps(result, indent=1) + "\n")
    md = json_path.with_suffix(".md")
    md.write_text(markdown(result))
    if result["rows"]:
        plot(result, json_path.with_suffix(".png"))
    return md


# ---------------------------------------------------------------- the command


def main(args: argparse.Namespace, command: str) -> int:
    from rtm_lab.benchmarks import run_record

    cells = plan(args.shapes, args.delays, args.durations, args.variants)
    if not cells:
        print("error: no cell matches --shapes, --delays, --durations and --variants", file=sys.stderr)
        return 2
    path = Path(args.json)
    previous = json.loads(path.read_text()) if path.is_file() else {}
    if previous.get("done") and previous.get("rate") != args.rate:
        print(f"error: {path} holds runs at {previous.get('rate')} events/s, not {args.rate:g}", file=sys.stderr)
        return 2
    done: list[dict] = list(previous.get("done", []))
    # The 5-minute cell on disk is a baseline the planner publishes, so it gets the full runs, not --long-runs.
    runs_of = {cell: args.long_runs if cell.role == "long" else args.runs for cell in cells}
    todo = [
        (i, cell)
        for i in range(max(runs_of.values()))
        for cell in cells
        if i < runs_of[cell] and not any(Cell(**d["cell"]) == cell and d["run"] == i for d in done)
    ]
    planned = sum(runs_of.values())
    print(f"{len(cells)} cells, {planned} runs: {len(todo)} to run, {planned - len(todo)} in {path}")
    needs_store = any(cell.delay_ms is not None for _, cell in todo)
    with run_record.on_the_lab(command, {"s3"} if needs_store else set()) as (record, state):
        for n, (i, cell) in enumerate(todo, 1):
            seconds = args.seconds or SECONDS[cell.batch_duration]
            if args.until and dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds + OVERHEAD_S) > args.until:
                print(f"stopping: the next run could not end by {args.until:%H:%M} UTC; rerun to resume", flush=True)
                break
            print(f"({n}/{len(todo)}) run {i + 1}: {cell.key} ...", flush=True)
            began = time.monotonic()
            try:
                result = run_cell(cell, state, args.rate, seconds)
            except RuntimeError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 1
            done.append({"cell": vars(cell), "run": i, "seconds": seconds, "result": result})
            stall = result.get("stall_median_ms")
            print(
                f"  stall per boundary {'-' if stall is None else f'{stall:.0f} ms'}, p99 {result.get('p99_ms')} ms, "
                f"critical path {(result.get('storage') or {}).get('critical_path_median', '-')}, "
                f"{time.monotonic() - began:.0f} s",
                flush=True,
            )
            report = build(done, args, record.record(), previous, ran=True)
            write(report, path)
    report = build(done, args, record.record(), previous, ran=len(done) > len(previous.get("done", [])))
    md = write(report, path)
    print(markdown(report))
    print(f"wrote {path}, {md}")
    return 0


# The capacity planner's shape names (snippets/guides/capacity_plan.py SHAPES) for the shapes measured here.
PLANNER_SHAPES = {"stateless_async": "stateless", "dedup": "dedup", "count": "groupby-count"}


def planner_part(rows: list[dict]) -> dict[str, dict[str, float]]:
    """What the capacity planner reads (`--stalls`): per planner shape, the median stall per boundary with the
    checkpoint on local disk, keyed by the batch duration in seconds ("300" from the 5-minute cell on disk). The long
    cell on the store is not here: the planner has no storage input, so it would pass an S3 stall for a disk one."""
    from rtm_lab.intervals import interval_ms

    part: dict[str, dict[str, float]] = {}
    for r in rows:
        if r["storage"] == DISK and not r["variant"] and r["shape"] in PLANNER_SHAPES and r["stall_ms"]["median"]:
            seconds = f"{interval_ms(r['batch_duration']) / 1000:g}"
            part.setdefault(PLANNER_SHAPES[r["shape"]], {})[seconds] = round(r["stall_ms"]["median"], 1)
    return part


def build(done: list[dict], args: argparse.Namespace, record: dict, previous: dict, ran: bool) -> dict:
    """The results file: every run, a row per cell, the models; the record of the session that ran the last runs,
    and one entry per session that ran any (a resumed file spans several: the footer gives the first start and the
    last end over them)."""
    every = plan(
        list(BY_NAME),
        [DISK, *sorted({*(str(d) for d in FIT_DELAYS_MS), str(HELD_OUT_DELAY_MS)}, key=float)],
        list(SECONDS),
        list(VARIANTS),
    )
    rows = assemble(done, every)
    return {
        "benchmark": "checkpoint-storage",
        "rate": args.rate,
        "seconds": args.seconds or SECONDS[BATCH_DURATION],
        "warmup_s": WARMUP_S,
        "rows": rows,
        "models": models(rows, done),
        "planner": planner_part(rows),
        "done": done,
        **record,
        "sessions": [
            *previous.get("sessions", []),
            *([{k: record[k] for k in ("command", "started", "timestamp", "load_average")}] if ran else []),
        ],
    }

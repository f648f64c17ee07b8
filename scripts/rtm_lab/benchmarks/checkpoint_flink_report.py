"""The Flink checkpoint-storage results file and its tables: a row per cell (shape x storage) over its runs, each
figure the median with its range, and the generated Markdown the checkpoint-storage page includes by section.

Pure: it reads runs as rtm_lab.benchmarks.checkpoint_flink records them, so it is tested without Flink.
"""

from rtm_lab.benchmarks.median_range import ms_cell, spread
from rtm_lab.generated import generated_note, markdown_table

DISK = "disk"
SECTIONS = ("latency", "checkpoints", "requests", "evidence")
KINDS = ("PUT", "GET", "HEAD", "LIST", "COPY", "DELETE", "MULTIPART")
PLACEHOLDER = (
    "Not measured yet: `python scripts/bench.py checkpoint-storage-flink` measures it, runs of about a minute each "
    "on a quiet machine."
)


def cell_key(shape: str, storage: str) -> str:
    return f"{shape} / {storage if storage == DISK else f's3 {storage} ms'}"


FIGURES = (
    "p50_ms",
    "p99_ms",
    "max_ms",
    "end_to_end_ms",
    "sync_ms",
    "async_ms",
    "state_size",
    "checkpointed_size",
    "gap_during_ms",
    "gap_between_ms",
    "requests_per_checkpoint",
    "chain",
)


def cell_row(shape: str, storage: str, runs: list[dict]) -> dict:
    """One cell's row: each figure's median (range) over its runs."""
    results = [r["result"] for r in runs]
    kinds = sorted({k for r in results for k in (r.get("requests_by_kind") or {})})
    return {
        "key": cell_key(shape, storage),
        "shape": shape,
        "storage": storage,
        "runs": len(runs),
        **{name: spread([r.get(name) for r in results]) for name in FIGURES},
        "p99_during_ms": spread([r["during_checkpoints"].get("p99_ms") for r in results]),
        "p99_between_ms": spread([r["between_checkpoints"].get("p99_ms") for r in results]),
        "checkpoints": sum(r.get("checkpoints_counted") or 0 for r in results),
        "missing": sum(r.get("missing") or 0 for r in results),
        "requests_by_kind": {
            k: spread([(r.get("requests_by_kind") or {}).get(k, 0) for r in results])["median"] for k in kinds
        },
    }


def assemble(done: list[dict], shapes: list[str], storages: list[str]) -> list[dict]:
    """A row per cell that has runs, shapes in `shapes` order, storage cells in `storages` order."""
    rows = []
    for shape in shapes:
        for storage in storages:
            runs = [d for d in done if d["cell"] == {"shape": shape, "storage": storage}]
            if runs:
                rows.append(cell_row(shape, storage, runs))
    return rows


def _kib(figure: dict) -> str:
    return "-" if figure["median"] is None else f"{figure['median'] / 1024:,.0f}"


def _where(row: dict) -> str:
    return "local disk" if row["storage"] == DISK else f"S3, {row['storage']} ms/request"


def readback_line(done: list[dict]) -> str:
    """What every run read back from Flink's REST API, each distinct value once."""
    fields = ("state_backend", "checkpoint_mode", "checkpoint_interval_ms", "incremental", "state_ttl")
    seen: dict[str, list[str]] = {f: [] for f in fields}
    storage: list[str] = []
    for d in done:
        back = d["result"].get("readback") or {}
        for f in fields:
            value = str(back.get(f))
            if value not in seen[f]:
                seen[f].append(value)
        scheme = str(back.get("checkpoint_dir") or "").partition("://")[0] or "?"
        kind = f"{back.get('checkpoint_storage')} ({scheme}://)"
        if kind not in storage:
            storage.append(kind)
    parts = [f"{f.replace('_', ' ')} {' / '.join(v)}" for f, v in seen.items()]
    return "read back over Flink's REST API: " + "; ".join([*parts, f"checkpoint storage {' / '.join(storage)}"])


def flink_versions(result: dict) -> dict[str, str]:
    """The versions these runs ran on: Flink, its S3 file system plugin (2.2.0: Maven Central has no 2.2.1), its Kafka connector, the
    broker and the lab's S3 store. Files from before runs recorded them carry the Spark record's versions; Flink's
    own then come from `flink_version`, the connector from the pins of that commit, which are today's."""
    from rtm_lab import versions

    recorded = result.get("versions", {})
    if "flink" in recorded:
        return recorded
    return {
        "flink": result["flink_version"],
        "flink_s3_fs_hadoop": versions.FLINK_S3_FS_VERSION,
        "flink_kafka_connector": versions.FLINK_KAFKA_CONNECTOR_VERSION,
        "kafka_broker": recorded.get("kafka_broker", versions.KAFKA_BROKER_VERSION),
        "versitygw": versions.VERSITYGW_VERSION,
    }


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
            ms_cell(r["p99_during_ms"]),
            ms_cell(r["p99_between_ms"]),
            ms_cell(r["gap_during_ms"]),
            ms_cell(r["gap_between_ms"]),
        ]
        for r in rows
    ]
    checkpoints = [
        [
            r["shape"],
            _where(r),
            r["checkpoints"],
            ms_cell(r["end_to_end_ms"]),
            ms_cell(r["sync_ms"]),
            ms_cell(r["async_ms"]),
            _kib(r["state_size"]),
            _kib(r["checkpointed_size"]),
            ms_cell(r["requests_per_checkpoint"]),
            ms_cell(r["chain"]),
        ]
        for r in rows
    ]
    kinds = [
        [r["shape"], _where(r), *(f"{r['requests_by_kind'].get(k, 0):g}" for k in KINDS)]
        for r in rows
        if r["storage"] != DISK
    ]
    sections = {
        "latency": [
            f"Flink {result.get('flink_version', '')}, Kafka -> Kafka at **{result['rate']:,.0f} events/s**, a "
            f"checkpoint every {result['checkpoint_interval']}; {result['seconds']:g} s of production per run (the "
            f"first {result['warmup_s']:g} s left out); median over the runs, range in brackets. During: records that "
            "came in while a checkpoint ran. Gap: the longest time without a record out, during a checkpoint and "
            "between two.",
            "",
            markdown_table(
                [
                    "shape",
                    "storage",
                    "runs",
                    "p50 ms",
                    "p99 ms",
                    "max ms",
                    "p99 during ms",
                    "p99 between ms",
                    "gap during ms",
                    "gap between ms",
                ],
                latency,
                ["", ""] + ["right"] * 8,
            ),
        ],
        "checkpoints": [
            "Per checkpoint (median): Flink's own figures from its REST API, the slowest subtask's synchronous and "
            "asynchronous parts, and the store's requests from one trigger to the next:",
            "",
            markdown_table(
                [
                    "shape",
                    "storage",
                    "checkpoints",
                    "end to end ms",
                    "sync ms",
                    "async ms",
                    "state KiB",
                    "uploaded KiB",
                    "requests",
                    "chain",
                ],
                checkpoints,
                ["", ""] + ["right"] * 8,
            ),
        ],
        "requests": [
            "Requests per checkpoint by kind (median):",
            "",
            markdown_table(["shape", "storage", *KINDS], kinds, ["", ""] + ["right"] * 7),
        ]
        if kinds
        else [],
        "evidence": record_lines(
            {**result, "versions": flink_versions(result)},
            f"parallelism 2 (2 partitions per topic); {readback_line(result['done'])}",
            runs=len(result["done"]),
            records=result.get("sessions") or None,
        ),
    }
    return document(sections)


def document(sections: dict[str, list[str]]) -> str:
    """The generated file: each section between snippet markers, so the page includes them by name."""
    lines = [generated_note("python scripts/tables.py checkpoint-storage-flink"), ""]
    for name in SECTIONS:
        lines += [f"--8<-- [start:{name}]", *sections[name], f"--8<-- [end:{name}]"]
    return "\n".join(lines) + "\n"


def placeholder() -> str:
    """The file before the benchmark has run: every section the page includes, the first saying how to measure it."""
    return document({name: [PLACEHOLDER] if name == "latency" else [] for name in SECTIONS})

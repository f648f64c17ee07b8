"""The cells of `bench.py dedup-stall`: which settings of real-time deduplication at 10,000 events/s are run, and in
what order. Pure: no services.

Four factors, from issue 49:

| Factor | Levels | Why |
|---|---|---|
| key space | `id` (unbounded: every event's id, state grows all run) / `user` (bounded: the key space's 10,000 users) | state growth |
| streaming-shuffle wait | 5 / 20 / 50 ms (`spark.shuffle.streaming.networkBufferMaxWaitTimeMs`) | the skill's advice |
| shuffle partitions | 2 / 4 | tasks per stage |
| placement | shared / isolated (rtm_lab.cpu_pinning) | contention with the harness |

The full factorial is 24 Spark cells. The plan runs a fraction of it: the base (the published stall: id, 5 ms, 2,
shared), each factor changed alone from the base, and each other factor crossed with the wait at its two ends (5 and
50 ms), because the wait is the setting whose advice is in question and the issue saw the stall change with it. That
is 9 Spark cells, each factor varied at least twice from a base it shares with the others. Flink's deduplication on
RocksDB runs beside them in both placements (2 cells), the yardstick the issue compares with.

The bounded key space changes more than the state's growth: keyed by user, the deduplication keeps each user's
first event only, so its outputs fall from about 9,000 a second to a few a second within a minute (9,998 of the
10,000 users have appeared by 65 s at 10,000 events/s). Its per-second latency is measured on those few outputs. If
the stall goes with the user key, state growth and output volume are both candidates; the running count of the engine
comparison (a bounded state and one output per event, through the same shuffle) tells them apart.

A fifth factor is the watching itself: every run keeps a GC log and, when the live lag first passes the threshold,
takes three thread dumps (each `jcmd` a JVM of its own) on the cores the engine shares. `--watch both` runs each
chosen cell also unwatched (no GC log, no live watch, no dump), its name ending in `/unwatched`, so the instruments'
own cost is a factor changed alone like the others. The plan's cells are the watched ones.

Each cell runs RUNS times. The runs go repeat by repeat through the cells, the order reversed on every other repeat,
so a drift in the machine's load over the hours spreads over all cells instead of landing on the last ones.
"""

import fnmatch
from dataclasses import dataclass, replace

RATE = 10_000
RUNS = 3
KEY_SPACES = ("id", "user")
WAITS_MS = (5, 20, 50)
SHUFFLE_PARTITIONS = (2, 4)
PLACEMENTS = ("shared", "isolated")
WAIT_SETTING = "spark.shuffle.streaming.networkBufferMaxWaitTimeMs"


@dataclass(frozen=True)
class Cell:
    engine: str  # spark or flink
    keys: str  # id (unbounded) or user (bounded)
    wait_ms: int  # Spark's streaming-shuffle wait; Flink runs its tuned 5 ms buffer timeout
    partitions: int  # Spark's shuffle partitions; Flink's parallelism stays 2
    placement: str
    watched: bool = True  # the GC log, the live watch and its thread dumps

    @property
    def name(self) -> str:
        name = f"{self.engine}/{self.keys}/{self.wait_ms}ms/p{self.partitions}/{self.placement}"
        return name if self.watched else f"{name}/unwatched"

    @property
    def pipeline(self) -> str:
        """The engine_run pipeline: the guide's deduplication by id, or the benchmark's own keyed by user."""
        return "dedup" if self.keys == "id" else "dedup-user"

    def changed(self) -> list[str]:
        """The factors this cell sets away from the base ("engine" for Flink's cells, "watch" when unwatched)."""
        unwatched = [] if self.watched else ["watch"]
        if self.engine != "spark":
            return ["engine"] + (["placement"] if self.placement != BASE.placement else []) + unwatched
        names = ("keys", "wait_ms", "partitions", "placement")
        return [n for n in names if getattr(self, n) != getattr(BASE, n)] + unwatched


BASE = Cell("spark", "id", 5, 2, "shared")


def plan() -> list[Cell]:
    """The cells, base first, then each factor alone, then the wait's crossings, then Flink."""
    cells = [BASE]
    cells += [Cell("spark", "id", wait, 2, "shared") for wait in WAITS_MS if wait != BASE.wait_ms]
    others = [("keys", "user"), ("partitions", 4), ("placement", "isolated")]
    for wait in (min(WAITS_MS), max(WAITS_MS)):
        for factor, level in others:
            fields = {"engine": "spark", "keys": "id", "wait_ms": wait, "partitions": 2, "placement": "shared"}
            fields[factor] = level
            cells.append(Cell(**fields))  # type: ignore[arg-type]
    cells += [Cell("flink", "id", 5, 2, placement) for placement in PLACEMENTS]
    return list(dict.fromkeys(cells))


def with_unwatched(cells: list[Cell]) -> list[Cell]:
    """Each cell, then its unwatched twin (`--watch both`): runs() then alternates them within every repeat."""
    return [twin for cell in cells for twin in (cell, replace(cell, watched=False))]


def full_factorial_size() -> int:
    return len(KEY_SPACES) * len(WAITS_MS) * len(SHUFFLE_PARTITIONS) * len(PLACEMENTS)


def run_id(cell: Cell, repeat: int) -> str:
    return f"{cell.name}/{repeat}"


def runs(cells: list[Cell], repeats: int = RUNS) -> list[tuple[Cell, int]]:
    """Every (cell, repeat) in the order they are made: repeat by repeat, every other repeat in reverse."""
    order = []
    for repeat in range(1, repeats + 1):
        order += [(cell, repeat) for cell in (cells if repeat % 2 else cells[::-1])]
    return order


def selected(cell: Cell, repeat: int, only: list[str]) -> bool:
    """`--only` patterns name runs by ENGINE/KEYS/WAITms/pPARTITIONS/PLACEMENT[/REPEAT], each part a glob; the
    repeat is matched against the last part, so a pattern picks a cell's unwatched twin's runs as well."""
    if not only:
        return True
    parts = [*cell.name.split("/")[:5], str(repeat)]
    return any(
        all(fnmatch.fnmatch(part, want) for part, want in zip(parts, pattern.split("/"), strict=False))
        for pattern in only
    )


def spark_conf(cell: Cell) -> dict[str, str]:
    """The Spark settings a cell adds to the tuned profile (which sets the wait to 5 ms and the RocksDB store)."""
    return {WAIT_SETTING: str(cell.wait_ms)} if cell.engine == "spark" else {}

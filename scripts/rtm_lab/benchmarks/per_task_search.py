"""The per-task capacity search (`bench.py per-task`), as pure functions of the runs so far: which rate to run next,
whether a step held at a bound, and the capacity part of the results file the planner reads.

A step's rate is held at a bound when 3 runs all held by the project's rule (rtm_lab.benchmarks.held_rate) at that
bound; it is not held as soon as one run was not, so a failed step costs one run. The search doubles the rate until a step is not held at 100 ms, then narrows the bracket geometrically
until the lowest rate not held is within 10 % of the highest held; then the same for 1 s, from the steps already run.
A step the generator could not offer ends the shape's search.

The engine capacity search (`bench.py engine-capacity`) reuses this bracketing with its own choices: one bound
(held_rate.BOUND_MS), every step run `runs_per_step` times whatever its first runs showed (`settle_early=False`), and a
step the generator could not offer taken as the search's ceiling rather than its end (`short_ends_search=False`), so
the bracket narrows below it and the summary can say the machine, not the engine, set the limit.
"""

import math
import statistics

from rtm_lab.benchmarks import held_rate

BOUNDS_MS = (100, 1000)
RUNS_PER_STEP = 3
BRACKET = 1.10  # the search stops when the lowest rate not held is within 10 % of the highest held
MIN_RATE = 50.0  # below this a shape is not worth a capacity figure: the search says so and stops
SHAPES = ("stateless", "groupby-count", "dedup", "postgres-jvm", "ad-attribution")
SEARCH_DONE, GENERATOR_LIMIT, TOO_SLOW = "bracketed", "generator short", "below the lowest rate"
# A core this busy over the measured minute was the limit: the engine's core (the task) or the harness core (the
# generator, the broker, PostgreSQL). Both or neither: the results say so rather than pick one.
SATURATED = 0.9
ENGINE_CORE, HARNESS_CORE = "engine core", "harness core"


def run_verdict(run: dict, bound_ms: float) -> str:
    return held_rate.verdict(run.get("p99_ms"), run.get("lost"), run["rate"], run.get("reached_rate"), bound_ms)


def steps(runs: list[dict], runs_per_step: int) -> dict[float, list[dict]]:
    """The runs by rate, for the rates with at least `runs_per_step` runs."""
    by_rate: dict[float, list[dict]] = {}
    for run in runs:
        by_rate.setdefault(float(run["rate"]), []).append(run)
    return {rate: done for rate, done in sorted(by_rate.items()) if len(done) >= runs_per_step}


def step_verdict(runs: list[dict], bound_ms: float, runs_per_step: int = 1, settle_early: bool = True) -> str | None:
    """A step is held at a bound when `runs_per_step` runs all held; not held as soon as one run was not (more runs
    cannot make it held); None while it is neither. A short generator voids the step. With `settle_early` False a
    step has no verdict before its `runs_per_step` runs, whatever the first ones showed."""
    verdicts = [run_verdict(run, bound_ms) for run in runs]
    if not settle_early and len(verdicts) < runs_per_step:
        return None
    if held_rate.GENERATOR_SHORT in verdicts:
        return held_rate.GENERATOR_SHORT
    if any(v != held_rate.HELD for v in verdicts):
        return held_rate.NOT_HELD
    return held_rate.HELD if len(verdicts) >= runs_per_step else None


def decided(runs: list[dict], bound_ms: float, runs_per_step: int, settle_early: bool = True) -> dict[float, str]:
    """Each step's verdict at a bound, for the steps it is known for."""
    out = {}
    for rate, step in steps(runs, 1).items():
        verdict = step_verdict(step, bound_ms, runs_per_step, settle_early)
        if verdict is not None:
            out[rate] = verdict
    return out


def bracket(verdicts: dict[float, str]) -> tuple[float | None, float | None]:
    """(highest held rate below the lowest one not held, lowest not held), from decided steps. A held step above a
    failed one is noise and does not raise the capacity."""
    ceiling = min((rate for rate, v in verdicts.items() if v == held_rate.NOT_HELD), default=None)
    held = [rate for rate, v in verdicts.items() if v == held_rate.HELD and (ceiling is None or rate < ceiling)]
    return max(held, default=None), ceiling


def _round(rate: float) -> float:
    """Three significant figures: rates a table can print."""
    digits = 2 - math.floor(math.log10(rate))
    return float(round(rate, digits))


def next_rate(
    runs: list[dict],
    start: float,
    runs_per_step: int = RUNS_PER_STEP,
    bounds: tuple[float, ...] = BOUNDS_MS,
    settle_early: bool = True,
    short_ends_search: bool = True,
) -> tuple[float | None, str]:
    """The rate of the next run, or (None, why the search ended). A step gets more runs only while its verdict at
    the bound being searched is open: one run not held settles it (with `settle_early`), a held step takes
    `runs_per_step` runs. A step the generator could not offer ends the search, or with `short_ends_search` False
    bounds it from above like a step not held."""
    if not runs:
        return start, "first step"
    first = decided(runs, bounds[0], runs_per_step, settle_early)
    if short_ends_search and any(v == held_rate.GENERATOR_SHORT for v in first.values()):
        return None, GENERATOR_LIMIT
    for bound in bounds:
        verdicts = decided(runs, bound, runs_per_step, settle_early)
        if not short_ends_search:
            verdicts = {r: held_rate.NOT_HELD if v == held_rate.GENERATOR_SHORT else v for r, v in verdicts.items()}
        open_steps = [rate for rate in steps(runs, 1) if rate not in verdicts]
        if open_steps:
            return min(open_steps), f"more runs for {bound} ms"
        low, high = bracket(verdicts)
        if high is None:
            return _round(max(verdicts) * 2), f"doubling for {bound} ms"
        if low is None:
            if high / 2 < MIN_RATE:
                if bound == bounds[-1]:
                    return None, TOO_SLOW
                continue
            return _round(min(verdicts) / 2), f"halving for {bound} ms"
        if high / low > BRACKET:
            middle = _round(math.sqrt(low * high))
            if middle in verdicts:  # rounding met a step already run: the bracket is as tight as rounding allows
                continue
            return middle, f"narrowing {low:g}..{high:g} for {bound} ms"
    return None, SEARCH_DONE


def core_shares(runs: list[dict], pinned: dict | None) -> tuple[float, float] | None:
    """The median busy share of the engine core and of the harness core over `runs`: over the measured minute where a
    run recorded it (core_busy_measured), else over the whole run. None without pinning or core figures."""
    runs = [r for r in runs if r.get("core_busy_measured") or r.get("core_busy")]
    if not runs or not pinned:
        return None

    def busy(cores: list[int]) -> float:
        def share(run: dict, core: int) -> float:
            shares = run.get("core_busy_measured") or run["core_busy"]
            return shares.get(str(core), shares.get(core, 0.0))

        return statistics.median(max(share(r, c) for c in cores) for r in runs)

    return busy(pinned["engine_cores"]), busy(pinned["harness_cores"])


def full_cores(shares: tuple[float, float]) -> list[str]:
    """The cores at SATURATED or more: what set the limit."""
    return [name for name, share in zip((ENGINE_CORE, HARNESS_CORE), shares, strict=True) if share >= SATURATED]


def capacity(runs: list[dict], runs_per_step: int = RUNS_PER_STEP, pinned: dict | None = None) -> dict:
    """Each shape's capacity at each bound, from its decided steps: the part of the results the planner reads. With
    the pinning, each bound also names the cores that ran full at its lowest rate not held (`full_cores`): the
    harness core alone means the machine, not the task, set the limit."""
    out: dict[str, dict] = {}
    for shape in SHAPES:
        mine = [r for r in runs if r["shape"] == shape]
        if not mine:
            continue
        by_rate = steps(mine, 1)
        entry: dict = {}
        for bound in BOUNDS_MS:
            low, high = bracket(decided(mine, bound, runs_per_step))
            entry[str(bound)] = {
                "held_rate": low,
                "not_held_rate": high,
                "bracket_pct": round((high / low - 1) * 100, 1) if low and high else None,
                "runs_at_held_rate": len(by_rate[low]) if low else None,
            }
            shares = core_shares(by_rate.get(high, []), pinned) if high else None
            if shares is not None:
                entry[str(bound)]["full_cores"] = full_cores(shares)
        held_runs = [r for r in by_rate.get(entry["100"]["held_rate"] or -1.0, []) if r.get("rss_peak_mib")]
        if held_runs:
            entry["rss_peak_mib"] = statistics.median(r["rss_peak_mib"] for r in held_runs)
        out[shape] = entry
    return out

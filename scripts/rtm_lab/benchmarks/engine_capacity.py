"""The highest rate each engine keeps up with (`bench.py engines --capacity`), by stepping the rate up.

Each step is one latency run of rtm_lab.benchmarks.engine_run (tuned profile, STEP_SECONDS after a STEP_WARMUP_S
warm-up). An engine keeps up with a rate when the generator reached at least 98 % of it and the events of the step's
last 10 seconds were answered within BOUNDED_LAG_MS for at least 98 % of them (an unanswered event counts as late):
an engine that falls behind answers its last events later and later. Stepping stops at the first rate an engine does
not keep up with, or at which the generator itself falls short (then the machine, not the engine, is the limit).
"""

from rtm_lab.benchmarks import engine_run, run_record

PIPELINES = ("transform", "count")  # the pipelines 1 and 2
STEPS = (5000, 10000, 20000, 40000, 80000)
STEP_SECONDS = 30.0
STEP_WARMUP_S = 5.0
BOUNDED_LAG_MS = 2000
KEPT_SHARE = 0.98


def verdict(step: dict) -> str:
    """'kept up', 'fell behind', or 'generator short' (the generator did not reach 98 % of the rate)."""
    if step["achieved_rate"] < KEPT_SHARE * step["rate"]:
        return "generator short"
    p98 = step.get("tail_p98_ms")
    return "kept up" if p98 is not None and p98 <= BOUNDED_LAG_MS else "fell behind"


def highest_kept(steps: list[dict]) -> float | None:
    kept = [s["rate"] for s in steps if verdict(s) == "kept up"]
    return max(kept, default=None)


def step_keys(engine: str, pipeline: str) -> list[str]:
    return [f"{engine}/{pipeline}/{rate}" for rate in STEPS]


def run_steps(engine: str, pipeline: str, bootstrap: str, done: dict, save, command: str, say=print) -> None:
    """Step `engine` on `pipeline` up through STEPS, skipping steps `done` holds; `save(key, figures)` keeps each
    step, with its run record, as soon as it ends. Stops after the first step that is not 'kept up'."""
    for key, rate in zip(step_keys(engine, pipeline), STEPS, strict=True):
        if key not in done:
            say(f"capacity {key}")
            record = run_record.Run(command)
            figures = engine_run.run(engine, pipeline, rate, STEP_SECONDS, STEP_WARMUP_S, "tuned", bootstrap, say=say)
            figures["verdict"] = verdict(figures)
            say(f"  {figures['verdict']}: last {figures['tail_s']:.0f} s p98 {figures['tail_p98_ms']} ms")
            save(key, {**figures, **record.record()})
        if done[key]["verdict"] != "kept up":
            return

"""The highest rate each engine holds (`bench.py engines --capacity`), by stepping the rate up.

Each step is one latency run of rtm_lab.benchmarks.engine_run (tuned profile, STEP_SECONDS after a STEP_WARMUP_S
warm-up). A step's rate is held by the project's one rule (rtm_lab.benchmarks.held_rate): the p99 end-to-end latency
over the step's measured seconds stayed under the bound, with nothing lost. Stepping stops at the first rate an engine
does not hold, or at which the generator itself falls short (then the machine, not the engine, is the limit). Each
step also records the p98 of its last 10 seconds (`tail_p98_ms`, an unanswered event counting as late): an engine that
falls behind answers its last events later and later.
"""

from rtm_lab.benchmarks import engine_run, held_rate, run_record

PIPELINES = ("transform", "count")  # the pipelines 1 and 2
STEPS = (5000, 10000, 20000, 40000, 80000)
STEP_SECONDS = 30.0
STEP_WARMUP_S = 5.0
WINDOW = f"the step's {STEP_SECONDS:.0f} s after a {STEP_WARMUP_S:.0f} s warm-up"


def verdict(step: dict) -> str:
    """'held', 'not held', 'generator short' or 'no p99 recorded', from the step's own figures (never a stored
    verdict: steps measured under an earlier rule are judged by this one)."""
    return held_rate.verdict(step.get("p99_ms"), step.get("missing"), step["rate"], step["achieved_rate"])


def highest_held(steps: list[dict]) -> float | None:
    held = [s["rate"] for s in steps if verdict(s) == held_rate.HELD]
    return max(held, default=None)


def step_keys(engine: str, pipeline: str) -> list[str]:
    return [f"{engine}/{pipeline}/{rate}" for rate in STEPS]


def run_steps(engine: str, pipeline: str, bootstrap: str, done: dict, save, command: str, say=print) -> None:
    """Step `engine` on `pipeline` up through STEPS, skipping steps `done` holds; `save(key, figures)` keeps each
    step, with its run record, as soon as it ends. Stops after the first step whose rate is not held."""
    for key, rate in zip(step_keys(engine, pipeline), STEPS, strict=True):
        if key not in done:
            say(f"capacity {key}")
            record = run_record.Run(command)
            figures = engine_run.run(engine, pipeline, rate, STEP_SECONDS, STEP_WARMUP_S, "tuned", bootstrap, say=say)
            say(
                f"  {verdict(figures)}: p99 {figures['p99_ms']} ms, last {figures['tail_s']:.0f} s p98 "
                f"{figures['tail_p98_ms']} ms"
            )
            save(key, {**figures, **record.record()})
        if verdict(done[key]) != held_rate.HELD:
            return

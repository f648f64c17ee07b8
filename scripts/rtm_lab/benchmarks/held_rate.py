"""A held rate: the one rule every results table uses to say a run took its rate (docs/glossary.md#held-rate).

A rate is held when the p99 end-to-end latency stays under a stated bound over the measured window, with nothing
lost. Tables compute it here from the figures their results file recorded, and say the bound and the window in their
caption. A run whose generator fell short of the rate asked did not offer that rate: it is neither held nor not held.
"""

# One bound for every table, so that "held" means the same thing on every page.
BOUND_MS = 2000
# The glossary entry, as a link from a results table (the pages that include the tables sit one folder below docs/).
GLOSSARY_LINK = "../glossary.md#held-rate"
# A generator below this share of the asked rate did not offer it.
OFFERED_SHARE = 0.98

HELD, NOT_HELD, GENERATOR_SHORT, NO_P99 = "held", "not held", "generator short", "no p99 recorded"


def verdict(
    p99_ms: float | None, lost: int | None, asked_rate: float, reached_rate: float | None, bound_ms: float = BOUND_MS
) -> str:
    """'held', 'not held', 'generator short', or 'no p99 recorded' for one run. `bound_ms` other than BOUND_MS is for
    a table that states its own bound (the per-task capacity, at 100 ms and 1 s)."""
    if reached_rate is not None and reached_rate < OFFERED_SHARE * asked_rate:
        return GENERATOR_SHORT
    if p99_ms is None or lost is None:
        return NO_P99
    return HELD if p99_ms < bound_ms and lost == 0 else NOT_HELD


def caption(window: str, verdicts: list[str], bound: str = f"{BOUND_MS:,} ms") -> str:
    """The sentence under a table that says what its "held" column means: the rule, its bound and its window, and
    the other `verdicts` the table shows. `bound` for a table with its own (e.g. "the column's bound")."""
    text = f"[Held]({GLOSSARY_LINK}): the end-to-end p99 stayed under {bound} over {window}, and nothing was lost."
    if GENERATOR_SHORT in verdicts:
        text += (
            f" Generator short: the generator reached less than {OFFERED_SHARE * 100:.0f} % of the rate, so the rate "
            "was not offered."
        )
    if NO_P99 in verdicts:
        text += " No p99 recorded: the results file lacks the figure the rule needs."
    return text

"""A figure over repeated runs as the results tables print it: the median, with the range in brackets.

Shared by the checkpoint-storage tables of both engines (rtm_lab.benchmarks.checkpoint_storage,
checkpoint_flink_report), so a reader sees one format for one idea."""

import statistics


def spread(values: list) -> dict:
    """Median, min, max and count of the known values (None is a run that did not measure it)."""
    known = [v for v in values if v is not None]
    if not known:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": statistics.median(known), "min": min(known), "max": max(known), "n": len(known)}


def ms_cell(figure: dict) -> str:
    """'1,234 (1,100–1,400)'; the range only when runs differ; '-' when no run measured it."""
    if figure["median"] is None:
        return "-"
    text = f"{figure['median']:,.0f}"
    if figure["n"] > 1 and figure["min"] != figure["max"]:
        text += f" ({figure['min']:,.0f}–{figure['max']:,.0f})"
    return text

"""Latency summaries: percentiles over samples in milliseconds, with the sample count beside them."""

import numpy as np

PERCENTILES = (50, 95, 99, 99.9)


def summarize(samples_ms: list[float]) -> dict[str, float | int]:
    if not samples_ms:
        return {"n": 0}
    values = np.asarray(samples_ms, dtype=float)
    summary: dict[str, float | int] = {"n": int(values.size)}
    for p in PERCENTILES:
        summary[f"p{p}_ms"] = round(float(np.percentile(values, p)), 2)
    summary["max_ms"] = round(float(values.max()), 2)
    return summary


def quantiles(samples_ms: list[float]) -> list[float]:
    """Percentiles 0 to 100 in steps of 1 (101 values): a latency CDF small enough to keep in a results file."""
    if not samples_ms:
        return []
    return [round(float(v), 2) for v in np.percentile(np.asarray(samples_ms, dtype=float), range(101))]


def format_summary(summary: dict[str, float | int]) -> str:
    if not summary.get("n"):
        return "no samples"
    return (
        f"n={summary['n']}  p50={summary['p50_ms']:.1f} ms  p95={summary['p95_ms']:.1f} ms  "
        f"p99={summary['p99_ms']:.1f} ms  max={summary['max_ms']:.1f} ms"
    )

"""The model of a boundary's stall on object storage: stall = fixed part + (critical-path requests) x (request latency).

Fitted per query shape by least squares on the fit points (stall per boundary at 0, 30 and 100 ms per request), then
asked to predict the held-out points (10 ms per request; the 30 s batch duration). The slope is the number of request
latencies the stall holds; the critical-path count from the proxy's log is the same figure counted, so the two are
reported side by side. The target: every held-out point predicted within 20 %.
"""

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

TARGET_ERROR = 0.20
SECONDS_PER_DAY = 86_400


@dataclass(frozen=True)
class Fit:
    fixed_ms: float
    per_request_latency: float  # the slope: ms of stall per ms of request latency (a request count)
    points: int

    def predict(self, latency_ms: float) -> float:
        return self.fixed_ms + self.per_request_latency * latency_ms


def fit(points: Sequence[tuple[float, float]]) -> Fit:
    """Least squares over (request latency ms, stall ms) points; at least two distinct latencies are needed."""
    if len({x for x, _ in points}) < 2:
        raise ValueError("the fit needs stalls measured at two request latencies at least")
    mean_x = statistics.fmean(x for x, _ in points)
    mean_y = statistics.fmean(y for _, y in points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _ in points)
    return Fit(fixed_ms=mean_y - slope * mean_x, per_request_latency=slope, points=len(points))


def relative_error(predicted: float, measured: float) -> float | None:
    """|predicted - measured| / measured; None when the measured stall is not positive (no error can be stated)."""
    if measured <= 0:
        return None
    return abs(predicted - measured) / measured


def held_out(model: Fit, points: Sequence[tuple[float, float]]) -> list[dict]:
    """Each held-out (latency, measured stall) with the model's prediction and whether it is within the target."""
    rows = []
    for latency, measured in points:
        predicted = model.predict(latency)
        error = relative_error(predicted, measured)
        rows.append(
            {
                "latency_ms": latency,
                "measured_ms": measured,
                "predicted_ms": round(predicted, 1),
                "error": None if error is None else round(error, 3),
                "within_target": error is not None and error <= TARGET_ERROR,
            }
        )
    return rows


def stall_for(fixed_ms: float, critical_path: float, latency_ms: float) -> float:
    """The reader's arithmetic: the stall a boundary costs on a store answering in `latency_ms` per request."""
    return fixed_ms + critical_path * latency_ms


def requests_per_day(requests_per_boundary: float, batch_duration_s: float) -> float:
    """Storage requests a day at one boundary per batch duration (a real-time batch ends every batch duration)."""
    return requests_per_boundary * SECONDS_PER_DAY / batch_duration_s

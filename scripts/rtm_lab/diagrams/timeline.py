"""Micro-batch and real-time mode on one time axis: short tasks per trigger against long-running tasks, the commit
at each batch's end, and the boundary stall between two real-time batches.

Two layouts from one drawing: `WIDE` for a laptop's content column, `NARROW` for a phone's (the page shows one or
the other by CSS), so the words stay at the theme's text size instead of shrinking with the picture.
"""

from dataclasses import dataclass

from rtm_lab.diagrams import svg

TITLE = "Micro-batch and real-time mode on one timeline"
DESC = (
    "Two lanes on one time axis, not to scale. Micro-batch: at each trigger Spark plans a batch, runs its source "
    "tasks, then its shuffle tasks, and commits; a record that arrives after a trigger waits for the next one, so "
    "its latency is the wait for the trigger plus the batch time. Real-time mode: the source tasks and the shuffle "
    "tasks of a batch start together and run for the whole batch duration, 5 minutes by default, passing "
    "each record on as it arrives. At the batch's end the tasks finish, Spark commits the offsets, and the next "
    "batch's tasks start; records that arrive in that gap, the boundary stall, wait for the new tasks."
)

LABEL_X = 8
ROW_H = 16
ARRIVAL_STEP = 14  # px between two records on the "records in" rows: a steady stream


@dataclass(frozen=True)
class Layout:
    ident: str
    command: str  # the `scripts/tables.py` command that writes this layout's file
    width: int
    triggers: int  # micro-batch batches drawn
    batch_share: float  # of the time axis, the first real-time batch
    stall: int  # px of the boundary stall (exaggerated: it is a fraction of a second in a 5-minute batch)
    batch_label: str
    latency_label: tuple[str, ...]  # one line each


WIDE = Layout(
    ident="rtm-timeline-wide",
    command="python scripts/tables.py diagram-timeline",
    width=760,
    triggers=5,
    batch_share=0.66,
    stall=56,
    batch_label="batch duration (5 minutes by default)",
    latency_label=("latency = wait for the trigger + batch time",),
)
NARROW = Layout(
    ident="rtm-timeline-narrow",
    command="python scripts/tables.py diagram-timeline-narrow",
    width=390,
    triggers=3,
    batch_share=0.55,
    stall=40,
    batch_label="batch duration (5 minutes)",
    latency_label=("latency = wait for the trigger", "+ batch time"),
)


def render(layout: Layout) -> str:
    x0, x1 = 96.0, layout.width - 12.0
    body: list[str] = []
    y = _micro_batch_lane(body, layout, x0, x1, top=0.0)
    y = _real_time_lane(body, layout, x0, x1, top=y + 18)
    y = _time_axis(body, x0, x1, y + 14)
    return svg.document(layout.ident, layout.width, y + 8, TITLE, DESC, body, layout.command)


def _row_labels(body: list[str], y_records: float, y_source: float, y_shuffle: float) -> None:
    body.append(svg.text(LABEL_X, y_records + 4, "records in", "muted"))
    body.append(svg.text(LABEL_X, y_source + ROW_H - 4, "source task"))
    body.append(svg.text(LABEL_X, y_shuffle + ROW_H - 4, "shuffle task"))


def _arrivals(x0: float, x1: float) -> list[float]:
    count = int((x1 - x0) // ARRIVAL_STEP)
    return [x0 + 6 + i * ARRIVAL_STEP for i in range(count)]


def _micro_batch_lane(body: list[str], layout: Layout, x0: float, x1: float, top: float) -> float:
    body.append(svg.text(LABEL_X, top + 16, "Micro-batch: a short batch at each trigger", "heading"))
    y_label, y_records = top + 36, top + 48
    y_source, y_shuffle = y_records + 10, y_records + 10 + ROW_H + 6
    y_bottom = y_shuffle + ROW_H
    _row_labels(body, y_records, y_source, y_shuffle)
    period = (x1 - x0) / layout.triggers
    for x in _arrivals(x0, x1):
        body.append(svg.circle(x, y_records, 2.5, "record"))
    for k in range(layout.triggers):
        start = x0 + k * period
        # Planning, the source stage, then the shuffle stage: one stage after the other, then the commit.
        source_end, shuffle_end = start + 0.06 * period + 0.2 * period, start + 0.06 * period + 0.42 * period
        body.append(svg.line(start, y_label + 4, start, y_bottom + 4, "thin"))
        body.append(svg.rect(start + 0.06 * period, y_source, 0.2 * period, ROW_H, "source"))
        body.append(svg.rect(source_end, y_shuffle, shuffle_end - source_end, ROW_H, "shuffle"))
        body.append(svg.line(shuffle_end + 3, y_source - 2, shuffle_end + 3, y_bottom + 2, "commit"))
        if k == 0:
            body.append(svg.text(start, y_label, "trigger", "muted", "middle" if start > x0 + 20 else "start"))
            body.append(svg.text(shuffle_end + 3, y_bottom + 16, "commit", anchor="middle"))
    # One record that arrives just after a trigger: it waits for the next trigger, then for that batch to end.
    k = 1 if layout.triggers > 3 else 0
    arrival = x0 + k * period + 0.12 * period
    batch_end = x0 + (k + 1) * period + 0.48 * period + 3
    y_bracket = y_bottom + 26
    body.append(svg.circle(arrival, y_records, 4.5, "record"))
    body.append(svg.line(arrival, y_records + 5, arrival, y_bracket, "thin"))
    body.append(svg.line(batch_end, y_bottom + 4, batch_end, y_bracket, "thin"))
    body.append(svg.line(arrival, y_bracket, batch_end, y_bracket, "line", arrow=True))
    for i, words in enumerate(layout.latency_label):
        body.append(svg.text(arrival, y_bracket + 16 + 16 * i, words))
    return y_bracket + 16 * len(layout.latency_label)


def _real_time_lane(body: list[str], layout: Layout, x0: float, x1: float, top: float) -> float:
    body.append(svg.text(LABEL_X, top + 16, "Real-time mode: long-running tasks", "heading"))
    y_brace = top + 40
    y_records = y_brace + 14
    y_source, y_shuffle = y_records + 10, y_records + 10 + ROW_H + 6
    y_bottom = y_shuffle + ROW_H
    _row_labels(body, y_records, y_source, y_shuffle)
    batch_end = x0 + layout.batch_share * (x1 - x0)
    resume = batch_end + layout.stall
    # The batch duration, as a bracket over the first batch.
    body.append(svg.line(x0, y_brace - 4, x0, y_brace + 4, "line"))
    body.append(svg.line(batch_end, y_brace - 4, batch_end, y_brace + 4, "line"))
    body.append(svg.line(x0, y_brace, batch_end, y_brace, "line"))
    body.append(svg.text((x0 + batch_end) / 2, y_brace - 7, layout.batch_label, anchor="middle"))
    # Both stages' tasks start together and stay up: a record goes through the source task and the streaming
    # shuffle as soon as it arrives.
    body.append(svg.rect(batch_end, y_records - 8, layout.stall, y_bottom - y_records + 12, "stall", rx=0))
    for start, end in ((x0, batch_end), (resume, x1)):
        body.append(svg.rect(start, y_source, end - start, ROW_H, "source"))
        body.append(svg.rect(start, y_shuffle, end - start, ROW_H, "shuffle"))
    # Records that arrive during the stall have no task to read them: they wait for the next batch's tasks.
    for i, x in enumerate(_arrivals(x0, x1)):
        body.append(svg.circle(x, y_records, 2.5, "record"))
        if i % 3 == 0 and (x < batch_end - 2 or x > resume + 2):
            body.append(svg.line(x, y_records + 3, x, y_bottom - 2, "thin"))
    body.append(svg.line(batch_end, y_source - 3, batch_end, y_bottom + 3, "commit"))
    body.append(svg.text(batch_end - 4, y_bottom + 18, "commit", anchor="end"))
    body.append(svg.text(batch_end + 4, y_bottom + 18, "boundary stall", "stall-label"))
    return y_bottom + 18


def _time_axis(body: list[str], x0: float, x1: float, y: float) -> float:
    body.append(svg.line(x0, y, x1, y, "line", arrow=True))
    body.append(svg.text(x0, y + 18, "time (not to scale)", "muted"))
    return y + 18

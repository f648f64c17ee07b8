"""The task slots a real-time query holds: every source task and every shuffle task of a batch, all at once.

Drawn for the slot-sizing page's tested example (an aggregation reading 2 Kafka partitions into 2 shuffle
partitions: 4 slots, runs on local[4], fails on local[3]), with the default of 200 shuffle partitions as the trap.
One layout, narrow enough for a phone's column at the theme's text size.
"""

from rtm_lab.diagrams import svg

IDENT = "rtm-slots"
WIDTH = 390
TITLE = "Task slots a real-time query holds"
DESC = (
    "A Kafka topic with 2 partitions feeds 2 source tasks. A streaming shuffle sends their rows to 2 shuffle tasks, "
    "which write to the sink. Each task holds a task slot, and all 4 run at once for the whole batch: slots needed "
    "= source partitions + shuffle partitions. With 4 slots (local[4]) the query runs; with 3 (local[3]) it fails "
    "with CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT. Left at the default of 200 shuffle partitions, the same query "
    "needs 202 task slots."
)

COLUMNS = (70.0, 190.0)  # the centres of the two partitions' columns
BOX_W, BOX_H = 104.0, 26.0
SLOT_PAD = 5.0  # the dashed task slot drawn around each task
NOTE_X = 262.0  # where the words beside the columns start


def render() -> str:
    body: list[str] = [svg.text(8, 16, "Slots = source tasks + shuffle tasks", "heading")]
    y = 40.0
    body.append(svg.text(8, y, "Kafka topic, 2 partitions", "muted"))
    y = _row(body, y + 8, "partition", "thin")
    y = _arrows(body, y, y + 22, crossing=False)
    y = _tasks(body, y, "source task", "source")
    legend_y = y - BOX_H / 2 - SLOT_PAD
    body.append(svg.rect(NOTE_X, legend_y - 8, 16, 16, "slot", rx=2))
    body.append(svg.text(NOTE_X + 22, legend_y + 4, "task slot"))
    y_cross = y + SLOT_PAD
    y = _arrows(body, y_cross, y_cross + 40, crossing=True)
    body.append(svg.text(NOTE_X, y_cross + 24, "streaming shuffle"))
    y = _tasks(body, y, "shuffle task", "shuffle")
    y = _arrows(body, y + SLOT_PAD, y + SLOT_PAD + 22, crossing=False)
    sink_left, sink_right = COLUMNS[0] - BOX_W / 2, COLUMNS[1] + BOX_W / 2
    body.append(svg.rect(sink_left, y, sink_right - sink_left, BOX_H, "thin"))
    body.append(svg.text((sink_left + sink_right) / 2, y + BOX_H / 2 + 4, "sink", anchor="middle"))
    y += BOX_H + 28
    body += [
        svg.text(8, y, "4 task slots = 2 source + 2 shuffle partitions", "heading"),
        svg.text(8, y + 18, "All held at once, for the whole batch."),
        svg.text(8, y + 40, "local[4]: runs. local[3]: fails with"),
        svg.text(8, y + 58, "CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT", "code"),
    ]
    y += 76
    # The trap: an aggregation's shuffle takes spark.sql.shuffle.partitions tasks, and AQE, which would coalesce
    # them, is off in real-time mode.
    body.append(svg.rect(4, y, WIDTH - 8, 46, "warn"))
    body.append(svg.text(12, y + 19, "spark.sql.shuffle.partitions", "code"))
    body.append(svg.text(218, y + 19, "defaults to 200:"))
    body.append(svg.text(12, y + 37, "2 + 200 = 202 task slots", "stall-label"))
    return svg.document(IDENT, WIDTH, y + 50, TITLE, DESC, body, "python scripts/tables.py diagram-slots")


def _row(body: list[str], y: float, name: str, cls: str) -> float:
    for i, centre in enumerate(COLUMNS):
        body.append(svg.rect(centre - BOX_W / 2, y, BOX_W, BOX_H, cls))
        body.append(svg.text(centre, y + BOX_H / 2 + 4, f"{name} {i}", anchor="middle"))
    return y + BOX_H


def _tasks(body: list[str], y: float, name: str, cls: str) -> float:
    """A row of tasks, each inside the dashed outline of the task slot it holds."""
    top = y + SLOT_PAD
    for centre in COLUMNS:
        body.append(
            svg.rect(centre - BOX_W / 2 - SLOT_PAD, top - SLOT_PAD, BOX_W + 2 * SLOT_PAD, BOX_H + 2 * SLOT_PAD, "slot")
        )
    return _row(body, top, name, cls)


def _arrows(body: list[str], y_from: float, y_to: float, crossing: bool) -> float:
    """Straight down, or from every task to every task of the next row (a shuffle sends each row by its key)."""
    for i, start in enumerate(COLUMNS):
        for j, end in enumerate(COLUMNS):
            if crossing or i == j:
                shift = (j - i) * 12.0 if crossing else 0.0
                body.append(svg.line(start + shift, y_from + 2, end - shift, y_to - 2, "line", arrow=True))
    return y_to

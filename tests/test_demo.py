"""`make demo`'s program, short: the seed pipeline at the default batch duration through the JVM writer, nothing lost,
the master it really ran on named, a warm-up until the backlog settled with the latency figures measured after it,
and Spark's log summed up with no warning or error left unexplained. Its summary keeps the shape of the recorded one the
README and the get-started page show (docs/results/demo-screen.txt).

The errors the summary explains are what Spark 4.3 logs when a real-time query with a shuffle (here dropDuplicates)
is stopped mid-batch; the query itself ends without an error, or the demo would have failed. The warning is
Spark's notice that it turned AQE off, logged for every real-time query even though the demo turns AQE off itself
(on a busy machine Spark can also warn that a state store took over 2 s to open; the summary names that too).
"""

import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psycopg2
import pytest

from rtm_lab import demo_screen
from rtm_lab.paths import PROJECT_ROOT
from rtm_lab.spark_log import log_line
from rtm_lab.warmup import SettleRule, Settling
from snippets.guides.kafka_to_postgres import BATCH_DURATION

SETTLE_ROWS, SETTLE_S, MEASURE_S = 150, 2, 5
NUMBER = r"([\d,.]+)"
FIGURES = r"p50 (\d+) ms  p95 (\d+) ms  p99 (\d+) ms  \(n=(\d+) "
RECORDED = PROJECT_ROOT / "docs" / "results" / "demo-screen.txt"
RECORD_COMMAND = "python scripts/demo.py --record docs/results/demo-screen.txt"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_demo_delivers_everything_at_the_default_batch_duration_and_explains_every_spark_error(lab, tmp_path):
    record = tmp_path / "screen.txt"
    cmd = [sys.executable, "scripts/demo.py", "--rate", "500", "--seconds", str(MEASURE_S)]
    cmd += ["--settle-rows", str(SETTLE_ROWS), "--settle-seconds", str(SETTLE_S), "--warmup-max", "90"]
    done = subprocess.run(
        [*cmd, "--record", str(record)], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=280
    )
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]

    # --record wrote this run's summary under its header. The summary has the shape of the recorded one the pages show:
    # a label or line changed in the demo fails here until docs/results/demo-screen.txt is recorded again.
    head, screen = demo_screen.read(record)
    assert screen == demo_screen.summary(out.splitlines()) and screen[0].startswith("produced "), out
    assert head[0].startswith("# Recorded by `python scripts/demo.py --rate 500 "), head
    drift = demo_screen.drift(screen, demo_screen.read(RECORDED)[1])
    assert not drift, "\n".join([*drift, f"the demo's summary changed: record it again with `{RECORD_COMMAND}`"])

    assert f'realTime="{BATCH_DURATION}"' in out and "via the jvm writer" in out
    assert re.search(r"spark +running on local\[4\]", out), out  # 2 partitions + 2 shuffle partitions, named as run
    assert re.search(r"lost 0, duplicate keys 0", out), out
    assert re.search(r"other writer +the python writer", out), out
    # The summary's counts the page lists: rows per second written, duplicates removed, records dead-lettered (the
    # generator sends 5 % duplicates and 0.5 % bad records, so a run has both).
    written = re.search(r"written +([\d.]+) rows/s", out)
    removed = re.search(r"duplicates +(\d+) removed \(dropDuplicates", out)
    dead = re.search(r"dead-lettered +(\d+) \(in ", out)
    assert written and removed and dead, out
    assert float(written[1]) > 0 and int(removed[1]) > 0 and int(dead[1]) > 0, out

    # The warm-up rule ran: it ended when the backlog had stayed under the bound for the hold time, and every
    # progress line in that last stretch shows it under the bound.
    warm = re.search(rf"JVM warm-up +{NUMBER} s, until behind under {NUMBER} rows for {NUMBER} s straight", out)
    assert warm, out
    settled_s = float(warm[1])
    assert (int(warm[2].replace(",", "")), float(warm[3])) == (SETTLE_ROWS, SETTLE_S)
    assert SETTLE_S <= settled_s < 90, out
    progress = [(float(t), int(b)) for t, b in re.findall(r"t= *([\d.]+)s .* behind +(\d+)  \(warm-up\)", out)]
    assert progress and max(t for t, _ in progress) == settled_s, out  # the observation it settled at is printed
    assert all(behind < SETTLE_ROWS for t, behind in progress if t > settled_s - SETTLE_S + 0.1), out

    # The printed figures exclude the warm-up: recomputed from the rows the demo kept in Postgres, ordered by creation,
    # the warm-up's are the first n and the steady state's the rest, which start where the backlog settled.
    warm_fig = re.search(rf"warm-up figures +{FIGURES}rows created during the warm-up", out)
    steady = re.search(
        rf"end-to-end +{FIGURES}rows created in the {MEASURE_S} s after the warm-up.*: steady state", out
    )
    kept = re.search(r"rows in Postgres (\d+) in (\w+)\.events", out)
    assert warm_fig and steady and kept, out
    n_warm, n_steady = int(warm_fig[4]), int(steady[4])
    with psycopg2.connect(lab.postgres_dsn) as conn, conn.cursor() as cur:
        cur.execute(
            f"SELECT created_ms, extract(epoch FROM written_at) * 1000 - created_ms FROM {kept[2]}.events "
            "ORDER BY created_ms"
        )
        rows = [(int(c), float(ms)) for c, ms in cur.fetchall()]
        cur.execute(f"DROP SCHEMA {kept[2]} CASCADE")
    conn.close()
    assert n_warm + n_steady == len(rows) == int(kept[1])
    for printed, part in ((warm_fig, rows[:n_warm]), (steady, rows[n_warm:])):
        expected = np.percentile([ms for _, ms in part], (50, 95, 99))
        assert all(abs(int(printed[i + 1]) - e) <= 1 for i, e in enumerate(expected)), (printed[0], expected)
    first, cut, last = rows[0][0], rows[n_warm][0], rows[-1][0]
    assert abs((cut - first) / 1000 - settled_s) < 1, (cut - first, settled_s)  # measured from the settle point
    assert abs((last - cut) / 1000 - MEASURE_S) < 1.5, (last - cut, MEASURE_S)  # ... for --seconds

    log = re.search(r"Spark's log +(\S+): (\d+) warnings?(.*?), (\d+) errors?(?: \((\d+) of them from stopping)?", out)
    assert log, out
    warnings, errors, explained = int(log[2]), int(log[4]), int(log[5] or 0)
    aqe_off = re.search(r"(\d+) of them Spark's notice that real-time mode runs without AQE", log[3])
    slow_store = re.search(r"(\d+) of them a state store that took over 2 s to open", log[3])  # a busy machine
    text = Path(log[1]).read_text()
    assert aqe_off and int(aqe_off[1]) == 1, text[-3000:]
    assert warnings == 1 + int(slow_store[1] if slow_store else 0), text[-3000:]
    assert errors == explained, text[-3000:]
    # What the summary promises of the file: Spark's AQE notice is there, logged although the demo set
    # spark.sql.adaptive.enabled=false before the query started; any other warning is a slow state store; every
    # error is the stop-time notice it names.
    assert text.count(" WARN ") == warnings
    assert text.count("WARN MicroBatchExecution: Disabling AQE since AQE is not supported for Real-time Mode") == 1
    assert text.count("WARN StateStore: Loaded state store provider in loadTimeMs=") == warnings - 1
    assert text.count(" ERROR ") == errors
    assert len(re.findall(r"Connection to streaming shuffle writer \d+ closed before termination", text)) >= errors
    # SESSION_CONF's shuffle buffer holds the largest dead letter: the streaming shuffle has no row to warn about.
    assert "is larger than the block size" not in text


def test_the_recorded_screen_is_a_passing_runs_summary_with_the_conditions_it_ran_under():
    """docs/results/demo-screen.txt, which the README and the get-started page show: written by --record (when, how
    long, on what, under which load), from a run that settled, lost nothing and explained Spark's log."""
    head, screen = demo_screen.read(RECORDED)
    assert head[0].startswith(f"# Recorded by `{RECORD_COMMAND}` on 20"), head
    assert re.fullmatch(r"# The whole run took \d+ min \d\d s \(.*\)\.", head[1]), head
    assert re.match(r"# Machine: \d+ cores \(.+\).*; load average [\d.]+ at the start and [\d.]+ at the end", head[2])
    labels = ["produced ", "written ", "JVM warm-up ", "warm-up figures ", "end-to-end ", "other writer "]
    labels += ["duplicates ", "dead-lettered ", "rows in Postgres ", "Spark's log "]
    assert len(screen) == len(labels) and all(map(str.startswith, screen, labels)), screen
    assert screen[4].endswith(": steady state") and re.search(r"; lost 0, duplicate keys 0$", screen[8]), screen
    errors = re.search(r", (\d+) errors?(?: \((\d+) of them from stopping the query mid-batch)?", screen[9])
    assert errors and int(errors[1]) == int(errors[2] or 0), screen[9]  # every error Spark logged is explained


def test_a_shape_leaves_out_what_changes_between_runs_and_keeps_every_label_and_word():
    run = [
        "written         1987 rows/s (first to last write)",
        "rows in Postgres 61234 in demo_0a1b2c3d.events; lost 0, duplicate keys 0",
        "Spark's log     /work/labs/a/demo-postgres-spark.log: 1 warning (1 of them Spark's notice), 3 errors (3 of them "
        "from stopping the query mid-batch)",
    ]
    other_run = [
        "written         498.5 rows/s (first to last write)",
        "rows in Postgres 2571 in demo_ffee0099.events; lost 0, duplicate keys 0",
        "Spark's log     /home/me/rtm/.lab/demo-postgres-spark.log: 2 warnings (1 of them Spark's notice; 1 of them a "
        "state store that took over 2 s to open), 1 error (1 of them from stopping the query mid-batch)",
    ]
    assert demo_screen.drift(other_run, run) == []
    relabelled = ["written rows    1987 rows/s (first to last write)", *run[1:]]
    assert "+written rows # rows/s (first to last write)" in demo_screen.drift(relabelled, run)
    assert demo_screen.drift(run[:2], run)  # a line gone is drift too


def test_a_record_path_is_checked_before_any_work():
    for path, why in (
        ("screen.json", "must be a file name ending in .txt"),
        ("/no/such/folder/s.txt", "does not exist"),
    ):
        done = subprocess.run(
            [sys.executable, "scripts/demo.py", "--record", path], cwd=PROJECT_ROOT, capture_output=True, text=True
        )
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert why in done.stderr.strip().splitlines()[-1], done.stderr


def test_the_warm_up_settles_only_after_the_backlog_stayed_under_the_bound_and_gives_up_at_the_cap():
    """The rule the demo warms up with, on given backlogs: a spike restarts the hold, and a backlog that never calms
    ends the warm-up at the cap with figures labelled not steady state."""
    rule = SettleRule(behind_rows=100, hold_s=3, max_s=10)
    settling = Settling(rule, start=0)
    for t, behind in [(1, 900), (2, 50), (3, 60), (4, 400), (5, 90), (6, 80), (7, 70)]:
        assert not settling.observe(t, behind), t  # calm from 5 s on, for 2 s only
    assert settling.observe(8, 99) and settling.settled_at == 8 and settling.seconds == 8
    assert settling.summary().startswith("8.0 s, until behind under 100 rows for 3 s straight (worst behind before")
    assert "900 rows" in settling.summary()

    busy = Settling(rule, start=0)
    assert not any(busy.observe(t, 100 + t) for t in range(1, 10))  # 100 is not under 100
    assert busy.observe(10, 50) and busy.gave_up and busy.settled_at is None
    assert busy.summary().startswith("gave up after 10.0 s: behind under 100 rows for 3 s straight never held")
    assert busy.summary().endswith("NOT steady state")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_monitor_prints_the_prometheus_url_and_the_live_p99_it_computes(lab):
    """`demo.py --monitor`: the Kafka demo with the latency monitor scraped by the lab's Prometheus; the progress
    lines carry PromQL's p99 once records flow, and the summary sets PromQL's p99 beside the records' own."""
    cmd = [sys.executable, "scripts/demo.py", "--monitor", "--rate", "200", "--seconds", "6"]
    cmd += ["--settle-rows", "100", "--settle-seconds", "2", "--warmup-max", "60"]
    done = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=280)
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    assert re.search(r"p99 graph: http://127\.0\.0\.1:\d+/graph\?g0\.expr=histogram_quantile", out), out
    live = [int(ms) for ms in re.findall(r"PromQL p99 \(30 s\): (\d+) ms", out)]
    assert live and all(ms >= 0 for ms in live), out
    summary = re.search(r"prometheus +p99 (\d+) ms by PromQL over the whole run.*measured p99 (\d+) ms", out)
    assert summary, out
    assert "missing 0" in out


def test_monitor_with_the_postgres_pipeline_is_one_line_and_exit_2():
    done = subprocess.run(
        [sys.executable, "scripts/demo.py", "--monitor", "--pipeline", "postgres"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--monitor watches the Kafka -> Kafka demo" in done.stderr.strip().splitlines()[-1]


def test_the_log_line_counts_a_stop_time_record_logged_just_after_it_was_asked_for(tmp_path):
    """Spark's shuffle readers log their stop-time records from network threads, the last one a moment after stop()
    returns (a fresh-clone run read the log between two of them): the summary waits for the log to go quiet."""
    record = (
        "04:06:27 ERROR ErrorNotifier: A fatal error has occurred.\n"
        "org.apache.spark.SparkException: Connection to streaming shuffle writer {} closed before termination; "
        "the writer task likely failed.\n"
    )
    log = tmp_path / "spark.log"
    log.write_text(record.format(1))

    def late() -> None:
        time.sleep(1.0)
        with log.open("a") as out:
            out.write(record.format(0))

    writer = threading.Thread(target=late)
    writer.start()
    line = log_line(log, query_ended_cleanly=True)
    writer.join()
    assert ", 2 errors (2 of them from stopping the query mid-batch" in line, line

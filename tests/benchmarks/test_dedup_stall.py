"""`bench.py dedup-stall` without services: its cell plan, the user-keyed deduplication's expected outputs, the live
lag, the GC-log and thread-dump summaries, a row assembled from a recorded smoke run, and `--help` and `--list`.

The recorded run (fixtures/dedup_stall/) is a `--quick` smoke of the base cell on the lab: its row as the results file
kept it, the engine JVM's GC log and the thread dumps the stall watch took. No timing is asserted: the row's figures
are whatever that smoke measured, and the tests check only how the row is derived from them.
"""

import gzip
import json
from dataclasses import replace
from pathlib import Path

from bench_help import bench_help

from rtm_lab import cli, machine
from rtm_lab.benchmarks import (
    dedup_cells,
    dedup_stall,
    dedup_stall_report,
    engine_output,
    engine_run,
    gc_log,
    stall_watch,
    thread_dumps,
)
from rtm_lab.keyspace import user_of
from rtm_lab.topics import Record

FIXTURE = Path(__file__).parent / "fixtures" / "dedup_stall"


# ---------------------------------------------------------------- the plan


def test_the_plan_is_the_base_each_factor_alone_the_wait_crossed_with_each_other_factor_and_flink():
    cells = dedup_cells.plan()
    spark = [c for c in cells if c.engine == "spark"]
    assert cells[0] == dedup_cells.BASE and dedup_cells.BASE.name == "spark/id/5ms/p2/shared"
    assert len(spark) == 9 and dedup_cells.full_factorial_size() == 24
    alone = {c.changed()[0] for c in spark if len(c.changed()) == 1}
    assert alone == {"keys", "wait_ms", "partitions", "placement"}
    crossed = [c for c in spark if len(c.changed()) == 2]
    assert all("wait_ms" in c.changed() and c.wait_ms == 50 for c in crossed)
    assert {tuple(c.changed()) for c in crossed} == {("keys", "wait_ms"), ("wait_ms", "partitions"),
                                                      ("wait_ms", "placement")}  # fmt: skip
    assert not [c for c in spark if len(c.changed()) > 2]
    assert [c.name for c in cells if c.engine == "flink"] == ["flink/id/5ms/p2/shared", "flink/id/5ms/p2/isolated"]
    assert len(set(cells)) == len(cells)


def test_runs_go_repeat_by_repeat_every_other_repeat_reversed_and_only_picks_by_glob():
    cells = dedup_cells.plan()
    order = dedup_cells.runs(cells, 3)
    assert len(order) == 33
    assert [c for c, r in order if r == 1] == cells and [c for c, r in order if r == 2] == cells[::-1]
    picked = [dedup_cells.run_id(c, r) for c, r in order if dedup_cells.selected(c, r, ["spark/user/*"])]
    assert sorted(picked) == sorted(f"spark/user/{w}ms/p2/shared/{r}" for w in (5, 50) for r in (1, 2, 3))
    assert [dedup_cells.run_id(c, r) for c, r in order if dedup_cells.selected(c, r, ["*/*/20ms/*/*/2"])] == [
        "spark/id/20ms/p2/shared/2"
    ]


def test_watch_both_runs_each_cell_unwatched_too_alternating_and_only_picks_both_twins():
    base, flink = dedup_cells.BASE, dedup_cells.Cell("flink", "id", 5, 2, "shared")
    cells = dedup_cells.with_unwatched([base, flink])
    assert [c.name for c in cells] == [
        "spark/id/5ms/p2/shared",
        "spark/id/5ms/p2/shared/unwatched",
        "flink/id/5ms/p2/shared",
        "flink/id/5ms/p2/shared/unwatched",
    ]
    assert cells[1].changed() == ["watch"] and cells[3].changed() == ["engine", "watch"] and base.changed() == []
    # Watched and unwatched alternate, and which goes first swaps from repeat to repeat.
    order = dedup_cells.runs(cells[:2], 3)
    assert [(c.watched, r) for c, r in order] == [(True, 1), (False, 1), (False, 2), (True, 2), (True, 3), (False, 3)]
    assert [dedup_cells.run_id(c, r) for c, r in order if dedup_cells.selected(c, r, ["spark/id/5ms/p2/shared"])] == [
        dedup_cells.run_id(c, r) for c, r in order
    ]
    assert [dedup_cells.run_id(c, r) for c, r in order if dedup_cells.selected(c, r, ["*/*/*/*/*/2"])] == [
        "spark/id/5ms/p2/shared/unwatched/2",
        "spark/id/5ms/p2/shared/2",
    ]


def test_an_unwatched_row_has_no_gc_log_no_dump_and_says_so():
    kept, figures, _ = recorded()
    settings = json.loads((FIXTURE / "settings.json").read_text())
    bare = {k: v for k, v in figures.items() if k != "watch"}
    got = dedup_stall.row(replace(dedup_cells.BASE, watched=False), 1, bare, {}, settings, None)
    assert got["cell"] == "spark/id/5ms/p2/shared/unwatched" and got["changed"] == ["watch"]
    assert got["factors"]["watched"] is False and got["artefacts"] is None
    assert got["gc"]["window"] is None and got["stall"]["dumps_taken"] == 0 and got["stall"]["busiest"] == []
    assert got["stall"]["series_seconds_over"] == kept["stall"]["series_seconds_over"]  # read off the series alone
    result = {"benchmark": "dedup-stall", "settings": settings, "runs": {"a": kept, "b": {**kept, **got}}}
    text = dedup_stall_report.watch_markdown(result)
    assert "| `spark/id/5ms/p2/shared/unwatched` | watch | 1 |" in text and "(/unwatched: no GC log" in text
    assert text.index("| `spark/id/5ms/p2/shared` |") < text.index("| `spark/id/5ms/p2/shared/unwatched` |")
    assert "python scripts/tables.py dedup-stall-watch" in text


def test_a_cell_sets_its_wait_on_spark_and_keys_the_deduplication_by_id_or_user():
    cell = dedup_cells.Cell("spark", "user", 20, 4, "isolated")
    assert dedup_cells.spark_conf(cell) == {dedup_cells.WAIT_SETTING: "20"}
    assert cell.pipeline == "dedup-user" and dedup_cells.BASE.pipeline == "dedup"
    assert dedup_cells.spark_conf(dedup_cells.Cell("flink", "id", 5, 2, "shared")) == {}


# ---------------------------------------------------------------- the user-keyed deduplication


def test_the_user_keyed_deduplication_answers_each_users_first_event_and_each_priming_event():
    sent = 3000
    answers = engine_run.answering_seqs("dedup-user", sent)
    firsts, seen = [], set()
    for seq in range(sent):
        name = user_of(engine_run.engine_event(seq)["id"])
        if name not in seen:
            seen.add(name)
            firsts.append(seq)
    assert answers == firsts and len(answers) < sent
    assert engine_run.expected_outputs("dedup-user", sent) == engine_run.PRIMING + len(firsts)
    priming = {engine_run.priming_event(i, "dedup-user")["user"] for i in range(engine_run.PRIMING)}
    assert len(priming) == engine_run.PRIMING and not priming & seen
    assert engine_run.answering_seqs("dedup", 20) == [s for s in range(20) if s % 10 != 9]


def test_measure_pairs_the_user_keyed_deduplication_with_the_event_it_kept():
    def rec(value: dict, ts: int, offset: int) -> Record:
        return Record(str(value["id"]).encode(), json.dumps(value).encode(), 0, offset, ts, 1)

    source = [
        rec({"id": 1, "user": "a"}, 100, 0),
        rec({"id": 2, "user": "a"}, 110, 1),
        rec({"id": 3, "user": "b"}, 120, 2),
    ]
    sink = [rec({"id": 1, "user": "a"}, 130, 0), rec({"id": 3, "user": "b"}, 125, 1)]
    measured = engine_output.measure("dedup-user", source, sink, lambda v: v["id"], lambda v: True)
    assert measured.latencies == [(1, 30), (3, 5)]
    assert (measured.expected, measured.missing, measured.duplicates) == (2, 0, 0)
    # A user's events arrive in both partitions: the engine may keep a later one; it is paired by the id it kept.
    # A second output for a user is a duplicate, a user with none is missing.
    kept_later = [rec({"id": 2, "user": "a"}, 140, 0), rec({"id": 1, "user": "a"}, 150, 1)]
    measured = engine_output.measure("dedup-user", source, kept_later, lambda v: v["id"], lambda v: True)
    assert measured.latencies == [(2, 30)]
    assert (measured.expected, measured.missing, measured.duplicates) == (2, 1, 1)


# ---------------------------------------------------------------- the live lag, the GC log, the dumps


def test_the_live_lag_is_the_age_of_the_oldest_unanswered_event():
    answers = [0, 10, 20, 30]  # events that get an output; 10 events/s: event n is due at n / 10 s
    assert stall_watch.lag_ms(answers, 1, 10.0, 1000.0, 1003.5) == 2500.0  # event 10 due at 1001 s
    assert stall_watch.lag_ms(answers, 3, 10.0, 1000.0, 1002.0) == 0.0  # event 30 not due before 1003 s
    assert stall_watch.lag_ms(answers, 4, 10.0, 1000.0, 1009.0) == 0.0  # every output out


GC_TEXT = """\
[0.011s][info][gc,init] Version: 17.0.13+11 (release)
[0.012s][info][gc     ] Using G1
[5.101s][info][gc,start    ] GC(0) Pause Young (Normal) (G1 Evacuation Pause)
[5.109s][info][gc          ] GC(0) Pause Young (Normal) (G1 Evacuation Pause) 24M->4M(256M) 8.123ms
[12.0s][info][gc          ] GC(1) Pause Young (Concurrent Start) (G1 Humongous Allocation) 90M->60M(256M) 150.500ms
[12.2s][info][gc          ] GC(2) Concurrent Mark Cycle 210.000ms
[12.3s][info][gc          ] GC(2) Pause Remark 70M->70M(256M) 2.000ms
"""


def test_the_gc_summary_sums_the_stop_the_world_pauses_and_leaves_out_concurrent_phases():
    whole = gc_log.summarize(GC_TEXT)
    assert whole["pauses"] == 3 and whole["pause_total_ms"] == 160.6
    assert whole["pause_max_ms"] == 150.5 and whole["pause_max_at_uptime_s"] == 12.0
    assert whole["pauses_over_100ms"] == 1 and whole["by_kind"] == {"Pause Young": 2, "Pause Remark": 1}
    window = gc_log.summarize(GC_TEXT, since_s=10.0, until_s=12.1)
    assert window["pauses"] == 1 and window["pause_total_ms"] == 150.5
    assert gc_log.option(Path("/r")) == "-Xlog:gc*:file=/r/gc-%p.log:uptime,level,tags"


def dump(cpu_worker: float, cpu_main: float) -> str:
    return f"""12345:
Full thread dump OpenJDK 64-Bit Server VM (17.0.13+11 mixed mode, sharing):

"main" #1 prio=5 os_prio=0 cpu={cpu_main}ms elapsed=20.00s tid=0x00007f0001 nid=0x10 waiting on condition  [0x0]
   java.lang.Thread.State: TIMED_WAITING (sleeping)
\tat java.lang.Thread.sleep(java.base@17.0.13/Native Method)
\tat org.example.Main.run(Main.java:10)

"Executor task launch worker for task 1.0 in stage 3.0 (TID 7)" #60 daemon prio=5 os_prio=0 cpu={cpu_worker}ms elapsed=9.00s tid=0x00007f0002 nid=0x20 runnable  [0x0]
   java.lang.Thread.State: RUNNABLE
\tat org.rocksdb.RocksDB.get(Native Method)
\t- locked <0x1> (a java.lang.Object)
\tat org.apache.spark.sql.execution.streaming.state.RocksDB.get(RocksDB.scala:1)
\tat org.apache.spark.Other.call(Other.scala:2)

"G1 Young RemSet Sampling" os_prio=0 cpu=500.00ms elapsed=20.00s tid=0x00007f0003 nid=0x30 runnable
"""


def test_the_dump_summary_ranks_threads_by_cpu_used_between_dumps_with_their_top_frames():
    summary = thread_dumps.summarize([dump(1000.0, 900.0), dump(1800.0, 905.0)])
    top = summary["busiest"][0]
    assert top["thread"].startswith("Executor task launch worker") and top["cpu_ms"] == 800.0
    assert top["state"] == "RUNNABLE" and top["top_frames"][0] == "org.rocksdb.RocksDB.get(Native Method)"
    assert [t["thread"] for t in summary["busiest"]][1:] == ["main", "G1 Young RemSet Sampling"]
    assert summary["runnable_threads"] == 1 and summary["dumps"] == 2
    # One dump: CPU since each thread started.
    assert thread_dumps.summarize([dump(100.0, 900.0)])["busiest"][0]["thread"] == "main"


# ---------------------------------------------------------------- a recorded run


def recorded() -> tuple[dict, dict, dict[str, str]]:
    """The smoke's row as kept, the engine figures inside it, and its GC logs by pid."""
    kept = json.loads((FIXTURE / "row.json").read_text())
    derived = {"cell", "repeat", "factors", "changed", "gc", "stall", "artefacts", "versions", "machine",
               "load_average", "command", "started", "timestamp", "elapsed_s"}  # fmt: skip
    figures = {k: v for k, v in kept.items() if k not in derived}
    texts = {
        p.name.split("-")[1].split(".")[0]: gzip.decompress(p.read_bytes()).decode() for p in FIXTURE.glob("gc-*.gz")
    }
    return kept, figures, texts


def test_a_row_is_assembled_from_the_recorded_runs_figures_gc_log_and_dumps():
    kept, figures, texts = recorded()
    settings = json.loads((FIXTURE / "settings.json").read_text())
    got = dedup_stall.row(dedup_cells.BASE, 1, figures, texts, settings, kept["artefacts"])
    assert got["gc"] == kept["gc"] and got["stall"] == kept["stall"]
    # The stall read off the per-second series, by hand.
    fields, threshold = figures["series_fields"], settings["stall_ms"]
    t, p99 = fields.index("second"), fields.index("p99_ms")
    over = [r[t] for r in figures["series"] if r[t] >= settings["warmup_s"] and (r[p99] or 0) > threshold]
    assert got["stall"]["series_seconds_over"] == len(over)
    assert got["stall"]["series_first_over_s"] == (over[0] if over else None)
    # The GC window's total is the sum of the pauses the log records inside it.
    ((pid, text),) = texts.items()
    start = figures["watch"]["uptime_at_start_s"][pid] + settings["warmup_s"]
    inside = [ms for up, _, ms in gc_log.pauses(text) if start <= up <= start + settings["seconds"]]
    assert got["gc"]["window"]["pause_total_ms"] == round(sum(inside), 1) and got["gc"]["window"]["pauses"] == len(
        inside
    )
    assert gc_log.pauses(text), "the recorded GC log has pauses"
    # The watch dumped the JVM when the live lag passed the threshold, and the row keeps the busiest threads.
    assert figures["watch"]["first_over_s"] is not None and got["stall"]["dumps_taken"] == stall_watch.DUMPS
    assert got["stall"]["busiest"] and all(b["thread"] for b in got["stall"]["busiest"])


def test_the_table_has_a_row_per_cell_with_the_stall_and_gc_columns(tmp_path):
    kept, _, _ = recorded()
    settings = json.loads((FIXTURE / "settings.json").read_text())
    result = {"benchmark": "dedup-stall", "settings": settings, "runs": {"spark/id/5ms/p2/shared/1": kept}}
    text = dedup_stall_report.markdown(result)
    assert "| `spark/id/5ms/p2/shared` | base | 1 |" in text
    assert f"Seconds with p99 > {settings['stall_ms']:,.0f} ms" in text and "- Command: `" in text


def test_the_table_shows_each_cores_load_and_the_input_the_broker_appended():
    """An isolated run names the engine's core and the harness's; its input's busiest second shows bursts."""
    fields = ["second", "p50_ms", "p99_ms", "max_ms", "in_per_s", "out_per_s"]
    series = [[t, 10, 20, 30, 40_000 if t == 9 else 4_000, 4_000] for t in range(12)]
    isolated = [
        {
            "placement": "isolated",
            "engine_cores": [0],
            "core_busy": {"0": b, "1": 1.0},
            "series_fields": fields,
            "series": series,
        }
        for b in (0.84, 0.57, 0.72)
    ]
    assert dedup_stall_report.cores_cell(isolated) == "engine 72, harness 100"
    assert dedup_stall_report.input_cell(isolated, warmup_s=5) == "4,000; max 40,000"
    shared = [{**isolated[0], "placement": "shared", "engine_cores": [0, 1], "core_busy": {"0": 0.99, "1": 0.97}}]
    assert dedup_stall_report.cores_cell(shared) == "both 99 / 97"
    # the warm-up's seconds are left out
    assert dedup_stall_report.input_cell(isolated, warmup_s=10) == "4,000; max 4,000"


# ---------------------------------------------------------------- the command


def listed(argv: list[str], capsys) -> tuple[int, str, str]:
    """`bench.py dedup-stall ARGV` in this process (no interpreter start): exit code, stdout, stderr."""
    parser = cli.Parser(prog="dedup-stall")
    dedup_stall.add_arguments(parser)
    code = dedup_stall.main(parser.parse_args(argv), "python scripts/bench.py dedup-stall")
    out = capsys.readouterr()
    return code, out.out, out.err


def test_help_names_the_factors_and_the_list_shows_the_runs_left_and_their_time(tmp_path, capsys):
    shown = bench_help("dedup-stall", capsys)
    assert "--until HH:MM" in shown and "--stall-ms" in shown
    out = tmp_path / "ds.json"
    code, text, _ = listed(["--list", "--json", str(out)], capsys)
    assert code == 0 and "33 of 33 runs left (11 cells; the full factorial has 24 Spark cells), about" in text
    # One run made: --list marks it and counts one fewer.
    kept, _, _ = recorded()
    kept["machine"] = machine.describe()
    settings = {"rate": dedup_cells.RATE, "seconds": 60.0, "warmup_s": 5.0, "stall_ms": dedup_stall.STALL_MS}
    result = {"benchmark": "dedup-stall", "settings": settings, "runs": {"spark/id/5ms/p2/shared/1": kept}}
    out.write_text(json.dumps(result))
    code, text, _ = listed(["--list", "--json", str(out)], capsys)
    assert "spark/id/5ms/p2/shared/1           base   (in the results file)" in text
    assert "32 of 33 runs left" in text
    code, _, err = listed(["--list", "--json", str(out), "--seconds", "30"], capsys)
    assert code == 2 and err.startswith("error: ") and "holds runs made with" in err
    code, text, _ = listed(
        ["--list", "--json", str(tmp_path / "w.json"), "--watch", "both", "--only", "spark/id/5ms/p2/shared"], capsys
    )
    assert code == 0 and "spark/id/5ms/p2/shared/unwatched/1 watch" in text and "6 of 6 runs left" in text
    code, _, err = listed(["--only", "nothing/*"], capsys)
    assert code == 2 and err.startswith("error: no run matches --only")

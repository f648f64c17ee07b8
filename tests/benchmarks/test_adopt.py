"""`bench.py adopt`: a results file made in a scratch folder comes into docs/results with the commands a reader types."""

import json
import runpy

from bench_help import bench_help

from rtm_lab.benchmarks import adopt
from rtm_lab.paths import PROJECT_ROOT


def test_the_command_points_at_the_published_files_and_drops_until():
    typed = adopt.published_command(
        "python scripts/bench.py dedup-stall --only 'spark/*' --warmup 60 --json /tmp/x/a.json "
        "--artefacts=/tmp/x/a-runs --until 19:50",
        "docs/results/a.json",
        "docs/results/a-runs",
    )
    assert typed == (
        "python scripts/bench.py dedup-stall --only 'spark/*' --warmup 60 --json docs/results/a.json "
        "--artefacts docs/results/a-runs"
    )
    assert adopt.published_command("python scripts/bench.py engines", "docs/results/e.json", None) == (
        "python scripts/bench.py engines"
    )


def test_adopt_copies_the_file_and_its_run_folders_and_rewrites_every_command(tmp_path, monkeypatch):
    scratch = tmp_path / "scratch"
    (scratch / "w-runs" / "run_1").mkdir(parents=True)
    (scratch / "w-runs" / "run_1" / "gc.log.gz").write_bytes(b"gc")
    command = f"python scripts/bench.py dedup-stall --json {scratch}/w.json --artefacts {scratch}/w-runs --until 05:00"
    source = scratch / "w.json"
    run = {"p99_ms": 707.0, "artefacts": f"{scratch}/w-runs/run_1", "command": command}
    source.write_text(
        json.dumps({"benchmark": "dedup-stall", "runs": {"a/1": run}, "invocations": [{"command": command}]})
    )
    target = tmp_path / "results"
    monkeypatch.setattr(adopt, "PROJECT_ROOT", tmp_path)
    dest = adopt.adopt(source, "dedup-stall-watch.json", None, results=target)
    got = json.loads(dest.read_text())
    typed = "python scripts/bench.py dedup-stall --json results/dedup-stall-watch.json --artefacts results/dedup-stall-watch-runs"
    assert got["invocations"][0]["command"] == typed and got["runs"]["a/1"]["command"] == typed
    assert got["runs"]["a/1"]["artefacts"] == "results/dedup-stall-watch-runs/run_1"
    assert got["runs"]["a/1"]["p99_ms"] == 707.0  # the figures untouched
    assert (target / "dedup-stall-watch-runs" / "run_1" / "gc.log.gz").read_bytes() == b"gc"
    assert source.is_file() and (scratch / "w-runs").is_dir()  # nothing lost: the scratch copy stays


def test_adopt_refuses_a_missing_file_in_one_line(tmp_path, capsys):
    assert "scratch folder" in bench_help("adopt", capsys)
    bench = runpy.run_path(str(PROJECT_ROOT / "scripts" / "bench.py"))
    assert bench["main"](["adopt", str(tmp_path / "none.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1

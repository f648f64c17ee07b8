"""Every command line refuses bad input before doing any work: one line saying what was wrong, exit 2, no traceback,
no password, nothing started or written. Each CLI runs as a subprocess, as a user would run it."""

import argparse
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rtm_lab import cli
from rtm_lab.paths import PROJECT_ROOT, jars_dir

SCRIPTS = PROJECT_ROOT / "scripts"
SECRET = "not-the-password-8c1f"


def run(script: str, *args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPTS / script), *args], env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("KAFKA_BOOTSTRAP_SERVERS", "POSTGRES_DSN")}
    clean.update(RTM_LAB_DIR=str(tmp_path / "lab"), RTM_JARS_DIR=str(jars_dir()))
    return clean


@pytest.fixture
def silent_listener() -> Iterator[str]:
    """An address that accepts TCP connections and never answers: the slowest way for Kafka to be unreachable."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"127.0.0.1:{sock.getsockname()[1]}"


def assert_refused(result: subprocess.CompletedProcess, *expected: str) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    for text in expected:
        assert text in lines[0]
    return lines[0]


BAD_NUMBERS = [
    ("--rate", "nan", "finite number above 0"),
    ("--rate", "inf", "finite number above 0"),
    ("--rate", "-5", "finite number above 0"),
    ("--rate", "0", "finite number above 0"),
    ("--rate", "fast", "expected a number"),
    ("--seconds", "0", "finite number above 0"),
    ("--seconds", "-inf", "finite number above 0"),
    ("--partitions", "0", "integer of at least 1"),
]


@pytest.mark.parametrize(("flag", "value", "why"), BAD_NUMBERS, ids=[f"{f}={v}" for f, v, _ in BAD_NUMBERS])
def test_generate_events_refuses_bad_numbers(env, flag, value, why):
    # flag=value: argparse would read a lone "-inf" as an option of its own.
    result = run("generate_events.py", "--topic", "t", "--bootstrap", "127.0.0.1:1", f"{flag}={value}", env=env)
    assert_refused(result, f"argument {flag}", why, "generate_events.py --help")


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--count", "0"], "integer of at least 1"),
        (["--duplicate-pct", "101"], "percentage from 0 to 100"),
        (["--duplicate-pct", "60", "--bad-pct", "50"], "add up to more than 100"),
        (["--payload-bytes", "-1"], "integer of at least 0"),
    ],
)
def test_generate_events_refuses_bad_mixes(env, args, why):
    assert_refused(run("generate_events.py", "--topic", "t", *args, env=env), why)


@pytest.mark.parametrize(
    ("flag", "value"), [("--rate", "nan"), ("--seconds", "inf"), ("--partitions", "0"), ("--warmup", "-1")]
)
def test_demo_refuses_bad_numbers_before_starting_anything(env, flag, value):
    assert_refused(run("demo.py", f"{flag}={value}", env=env), f"argument {flag}")
    assert not Path(env["RTM_LAB_DIR"]).exists()


BENCH_BAD = [
    ("sink", "--rate", "nan", "finite number above 0"),
    ("sink", "--seconds", "-1", "finite number above 0"),
    ("sink", "--partitions", "0", "integer of at least 1"),
    ("sink", "--json", "results.txt", "ending in .json"),
    ("latency", "--rate", "inf", "finite number above 0"),
    ("latency", "--seconds", "0", "finite number above 0"),
    ("latency", "--json", "results.md", "ending in .json"),
]


@pytest.mark.parametrize(("bench", "flag", "value", "why"), BENCH_BAD, ids=[f"{b}{f}={v}" for b, f, v, _ in BENCH_BAD])
def test_bench_refuses_bad_input_before_starting_anything(env, tmp_path, bench, flag, value, why):
    args = [bench, f"{flag}={value}"] + ([] if flag == "--json" else ["--json", str(tmp_path / "r.json")])
    assert_refused(run("bench.py", *args, env=env), f"argument {flag}", why)
    assert not Path(env["RTM_LAB_DIR"]).exists()
    assert not list(tmp_path.glob("r.*"))


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["events-out", "--count", "0"], "integer of at least 1"),
        (["events-out", "--timeout", "nan"], "finite number above 0"),
        ([" "], "the topic must not be empty"),
        (["events-out", "--latency-from", " "], "the --latency-from field must not be empty"),
    ],
)
def test_read_topic_refuses_bad_input(env, args, why):
    assert_refused(run("read_topic.py", "--bootstrap", "127.0.0.1:1", *args, env=env), why, "read_topic.py --help")


def test_skills_refuses_a_missing_root(env, tmp_path):
    assert_refused(run("skills.py", "--root", str(tmp_path / "nowhere"), "validate", env=env), "not an existing folder")


@pytest.mark.parametrize("value", ["abc", "0", "70000"])
def test_lab_refuses_a_bad_port_setting_before_creating_anything(env, value):
    env["RTM_LAB_KAFKA_PORT"] = value
    assert_refused(run("lab.py", "up", env=env), f"RTM_LAB_KAFKA_PORT={value!r} is not a port number")
    assert not Path(env["RTM_LAB_DIR"]).exists()


def test_lab_refuses_a_bad_object_store_setting_before_creating_anything(env):
    env["RTM_LAB_S3_PORT"] = "abc"
    assert_refused(run("lab.py", "up", "--with", "s3", env=env), "RTM_LAB_S3_PORT='abc' is not a port number")
    assert not Path(env["RTM_LAB_DIR"]).exists()


def test_lab_refuses_a_versitygw_binary_that_is_not_one(env, lab, tmp_path):
    env |= {"KAFKA_BOOTSTRAP_SERVERS": lab.kafka_bootstrap, "POSTGRES_DSN": lab.postgres_dsn}
    env["RTM_VERSITYGW_BIN"] = str(tmp_path / "no-such-versitygw")
    assert_refused(run("lab.py", "up", "--with", "s3", env=env), "RTM_VERSITYGW_BIN=", "is not an executable file")


@pytest.mark.parametrize("form", ["url", "key-value"])
def test_a_wrong_postgres_password_is_named_and_never_printed(env, lab, form):
    port = lab.postgres.port
    env["KAFKA_BOOTSTRAP_SERVERS"] = lab.kafka_bootstrap
    env["POSTGRES_DSN"] = (
        f"postgresql://rtm:{SECRET}@127.0.0.1:{port}/rtm"
        if form == "url"
        else f"host=127.0.0.1 port={port} user=rtm password={SECRET} dbname=rtm"
    )
    line = assert_refused(run("lab.py", "up", env=env), "password authentication failed")
    assert SECRET not in line
    assert not Path(env["RTM_LAB_DIR"]).exists()  # nothing started, nothing written


def test_unreachable_kafka_is_reported_within_10s_by_lab(env, silent_listener):
    env["KAFKA_BOOTSTRAP_SERVERS"] = silent_listener
    began = time.monotonic()
    result = run("lab.py", "up", env=env)
    assert time.monotonic() - began < 10
    assert_refused(result, f"KAFKA_BOOTSTRAP_SERVERS={silent_listener} does not answer")
    assert not Path(env["RTM_LAB_DIR"]).exists()


def test_unreachable_kafka_is_reported_within_10s_by_the_generator(env, silent_listener):
    began = time.monotonic()
    result = run("generate_events.py", "--topic", "t", "--bootstrap", silent_listener, "--count", "5", env=env)
    assert time.monotonic() - began < 10
    assert_refused(result, f"Kafka at {silent_listener} does not answer")


def json_arg(value: str) -> Path:
    parser = cli.Parser(prog="bench.py")
    parser.add_argument("--json", type=cli.json_output)
    return parser.parse_args(["--json", value]).json


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("results/latency.md", "must be a file name ending in .json"),
        ("results", "must be a file name ending in .json"),
        ("missing/latency.json", "does not exist; create it first"),
        ("/proc/latency.json", "cannot write into '/proc'"),
    ],
)
def test_json_output_paths_are_checked_before_any_work(tmp_path, capsys, monkeypatch, value, why):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results").mkdir()
    with pytest.raises(SystemExit) as exited:
        json_arg(value)
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and why in err[0], err
    assert list((tmp_path / "results").iterdir()) == []


def test_a_writable_json_path_is_accepted_and_nothing_is_written_by_the_check(tmp_path):
    path = json_arg(str(tmp_path / "latency.json"))
    assert path == tmp_path / "latency.json"
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(argparse.ArgumentTypeError, match="integer of at least 1"):
        cli.positive_int("0")


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--dedup"], "--dedup needs --rate"),
        (["--dwell-ms", "10", "--dwell-ms", "20"], "more than one --dwell-ms needs --rate"),
        (["--dwell-ms", "0"], "integer of at least 1"),
    ],
)
def test_sink_bench_refuses_options_that_need_a_rate_before_starting_anything(env, tmp_path, args, why):
    assert_refused(run("bench.py", "sink", *args, "--json", str(tmp_path / "r.json"), env=env), why)
    assert not Path(env["RTM_LAB_DIR"]).exists()


def test_an_until_time_already_passed_today_means_tomorrow_and_a_bad_one_is_refused():
    """A benchmark started at 23:55 with --until 01:50 runs until 01:50 the next day, as `at` reads a time."""
    import datetime as dt

    now = dt.datetime.now(dt.UTC)
    earlier = (now - dt.timedelta(minutes=5)).strftime("%H:%M")
    later = (now + dt.timedelta(minutes=5)).strftime("%H:%M")
    assert dt.timedelta(hours=23) < cli.clock_time(earlier) - now <= dt.timedelta(hours=24)
    assert dt.timedelta(0) < cli.clock_time(later) - now <= dt.timedelta(minutes=5)
    with pytest.raises(argparse.ArgumentTypeError, match="must be a UTC time as HH:MM"):
        cli.clock_time("25:99")

#!/usr/bin/env python3
"""Run the quick start, the trigger, support-matrix and allowlist-off cases on each PySpark version a reader may use.

  python scripts/version_matrix.py     every version (4.1.4, 4.2.1, 4.3.0), one after the other, into docs/results
  python scripts/version_matrix.py --pyspark 4.1.4 --only quickstart-keyword --output /tmp/vm.json     a trial

Each version gets a venv of its own under the lab folder (RTM_LAB_DIR/version-matrix/pyspark-VERSION, built once from
PyPI with the project's other pinned packages, reused afterwards; the project's .venv is never touched) and the Kafka
connector jars jars.lock.json pins for it. The project's own code runs there from the working tree (PYTHONPATH), as
`python -m rtm_lab.probes.version_cases`, against the lab's Kafka (started if it is down, and stopped again). The results go
to --output (docs/results/version-matrix.json) and a generated table beside it; `scripts/tables.py version-matrix`
renders the table again from the JSON. Heavy: several minutes per version on 2 cores. `make test-versions` runs it.
"""

import datetime as dt
import json
import os
import shlex
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from rtm_lab import cli
from rtm_lab.errors import LabError
from rtm_lab.paths import PROJECT_ROOT, state_dir
from rtm_lab.versions import VERSION_MATRIX_CONNECTORS

DEFAULT_OUTPUT = PROJECT_ROOT / "docs" / "results" / "version-matrix.json"
# Not needed by any case, and the largest wheel after PySpark's own.
NOT_INSTALLED = ("pyspark", "matplotlib")


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def requirements(version: str) -> list[str]:
    """PySpark VERSION plus the project's other pinned runtime packages (pandas, pyarrow, Kafka clients, ...)."""
    pinned = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    others = [r for r in pinned if r.split("==")[0].strip().lower() not in NOT_INSTALLED]
    return [f"pyspark=={version}", *others]


def ensure_venv(version: str, folder: Path) -> Path:
    """The venv for one PySpark version, built unless one with the same requirements is already there."""
    venv = folder / f"pyspark-{version}"
    python, marker = venv / "bin" / "python", venv / "rtm-requirements.txt"
    wanted = "\n".join(requirements(version)) + "\n"
    if python.is_file() and marker.is_file() and marker.read_text() == wanted:
        say(f"PySpark {version}: reusing {venv}")
        return python
    say(f"PySpark {version}: building {venv} (pip, a few minutes the first time) ...")
    marker.unlink(missing_ok=True)
    # The project's interpreter makes the venv; `venv` bases it on the real Python behind .venv, not on .venv.
    steps = [
        [sys.executable, "-m", "venv", "--clear", str(venv)],
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *wanted.split()],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise LabError(f"building the PySpark {version} venv failed at `{shlex.join(step[:4])}`: {last}")
    marker.write_text(wanted)
    return python


def child_env(bootstrap: str) -> dict[str, str]:
    """The environment of the cases' process: the project's code from this working tree, nothing of this venv."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "SPARK_HOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
    }
    env["PYTHONPATH"] = os.pathsep.join([str(PROJECT_ROOT / "scripts"), str(PROJECT_ROOT)])
    env["KAFKA_BOOTSTRAP_SERVERS"] = bootstrap
    return env


def run_version(version: str, python: Path, bootstrap: str, only: list[str], spark_log: Path) -> dict:
    from rtm_lab import jars

    group = VERSION_MATRIX_CONNECTORS[version]
    connector = jars.ensure(group, quiet=True)
    say(f"PySpark {version}: running the cases with {', '.join(p.name for p in connector)}; Spark's log: {spark_log}")
    spark_log.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="rtm-version-matrix-") as tmp:
        out = Path(tmp) / "cases.json"
        command = [str(python), "-m", "rtm_lab.probes.version_cases", "--jars", ",".join(map(str, connector))]
        command += ["--output", str(out), "--spark-log", str(spark_log)]
        command += [arg for case in only for arg in ("--only", case)]
        # stdout has the progress lines; stderr (Spark's Python workers' chatter, a crash's traceback) goes to a file.
        stderr_log = spark_log.with_suffix(".stderr.log")
        with stderr_log.open("w") as chatter:
            done = subprocess.run(command, env=child_env(bootstrap), cwd=tmp, stderr=chatter, check=False)
        if done.returncode != 0 or not out.is_file():
            raise LabError(f"the cases under PySpark {version} stopped with exit {done.returncode}; see {stderr_log}")
        report = json.loads(out.read_text())
    report["connector"] = [f"{j.artifact}:{j.version}" for j in jars.locked(group)]
    return report


def parse_args(argv: list[str] | None):
    from rtm_lab.probes.version_cases import all_cases

    case_ids = [c.id for c in all_cases()]
    parser = cli.parser_from_doc("version_matrix.py", __doc__)
    parser.add_argument(
        "--pyspark",
        action="append",
        choices=list(VERSION_MATRIX_CONNECTORS),
        metavar="VERSION",
        help=f"a version to run (repeatable; default all: {', '.join(VERSION_MATRIX_CONNECTORS)})",
    )
    parser.add_argument(
        "--only", action="append", default=[], metavar="CASE_ID", help="run only this case (repeatable; for trials)"
    )
    parser.add_argument(
        "--output",
        type=cli.json_output,
        default=None,
        help=f"results JSON; the table goes beside it as .md (default {DEFAULT_OUTPUT.relative_to(PROJECT_ROOT)})",
    )
    parser.add_argument(
        "--venvs", type=Path, default=None, help="where the venvs live (default: RTM_LAB_DIR/version-matrix)"
    )
    args = parser.parse_args(argv)
    unknown = [c for c in args.only if c not in case_ids]
    if unknown:
        parser.error(f"unknown case {unknown[0]!r}; known: {', '.join(case_ids)}")
    if (args.only or args.pyspark) and args.output is None:
        parser.error("a partial run (--only, --pyspark) needs --output: it would replace the committed full matrix")
    args.output = args.output or DEFAULT_OUTPUT
    if args.venvs is not None and args.venvs.exists() and not args.venvs.is_dir():
        parser.error(f"--venvs {str(args.venvs)!r} exists and is not a folder")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from rtm_lab import lab, machine
    from rtm_lab.generated import write_or_check
    from rtm_lab.probes.version_cases import markdown

    versions = args.pyspark or list(VERSION_MATRIX_CONNECTORS)
    folder = args.venvs or state_dir() / "version-matrix"
    folder.mkdir(parents=True, exist_ok=True)
    command = shlex.join(["python", "scripts/version_matrix.py", *(sys.argv[1:] if argv is None else argv)])
    load_at_start = round(os.getloadavg()[0], 2)
    began = dt.datetime.now(dt.UTC)
    state, started = lab.up(log=say)
    try:
        results = {}
        for version in versions:
            python = ensure_venv(version, folder)
            spark_log = folder / f"spark-{version}.log"
            results[version] = run_version(version, python, state.kafka_bootstrap, args.only, spark_log)
    finally:
        if started:
            lab.down(only=started, log=say)
    report = {
        "timestamp": began.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": command,
        "machine": {**machine.describe(), "load_average_1m_at_start": load_at_start},
        "elapsed_s": round((dt.datetime.now(dt.UTC) - began).total_seconds()),
        "versions": results,
    }
    args.output.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    say(f"wrote {args.output}")
    return write_or_check(markdown(report), args.output.with_suffix(".md"), False, "python scripts/tables.py")


if __name__ == "__main__":
    sys.exit(cli.run(main))

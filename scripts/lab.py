#!/usr/bin/env python3
"""Run the local lab: a real Kafka broker and PostgreSQL server for the snippets, tests and benchmarks.

  python scripts/lab.py up       start what is not running, wait until each answers
  python scripts/lab.py up --with prometheus   ... and a Prometheus server (scrapes every 1 s, loopback)
  python scripts/lab.py up --with s3   ... and an S3-compatible object store (versitygw, loopback; built on first use)
  python scripts/lab.py status   what runs where, checked now
  python scripts/lab.py env      shell exports: eval "$(python scripts/lab.py env)" (the services' addresses, and
                                 SPARK_CONF_DIR: a spark-defaults.conf with the pinned Kafka connector on spark.jars)
  python scripts/lab.py down     stop everything the lab started
  python scripts/lab.py setup    check Java, install PostgreSQL if missing (root), fetch the pinned jars
                                 (--prometheus: also unpack Debian's prometheus package into the lab folder;
                                 --jvm-snippets: build the JVM snippets' jar; --flink: the PyFlink venv;
                                 --spark-archive: the test suite's class archive; --s3: build the object store and
                                 fetch the s3a:// jars; `make setup` does all five)

Set KAFKA_BOOTSTRAP_SERVERS or POSTGRES_DSN to use your own service instead; the lab then starts nothing for it.
"""

import os
import sys
import time
from pathlib import Path

from rtm_lab import cli, jars, lab, postgres, s3store, snippet_jar, spark_class_archive, spark_conf
from rtm_lab.engines import flink
from rtm_lab.errors import LabError
from rtm_lab.java import check_java
from rtm_lab.monitoring import prometheus
from rtm_lab.paths import jars_dir
from rtm_lab.signals import exit_cleanly_on_termination


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser_from_doc("lab.py", __doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start Kafka and PostgreSQL (idempotent)")
    up.add_argument(
        "--with",
        dest="with_services",
        action="append",
        choices=lab.OPTIONAL_SERVICES,
        default=[],
        help="also start this optional service (repeatable): prometheus, s3 (an S3-compatible object store)",
    )
    down = sub.add_parser("down", help="stop what the lab started; leaves no process behind")
    down.add_argument(
        "--purge", action="store_true", help="also delete the services' data (Kafka log, PostgreSQL cluster)"
    )
    sub.add_parser("status", help="say what runs where")
    sub.add_parser(
        "env", help="print the connection settings, and SPARK_CONF_DIR with the Kafka connector, as shell exports"
    )
    setup = sub.add_parser(
        "setup", help="check Java, install PostgreSQL if missing (as root), download the pinned jars"
    )
    setup.add_argument(
        "--prometheus",
        action="store_true",
        help="also unpack Debian's prometheus package into the lab folder if missing (`up --with prometheus` "
        "otherwise does it on first use)",
    )
    setup.add_argument(
        "--jvm-snippets",
        action="store_true",
        help="also build the jar of the JVM snippets (snippets/jvm; needs a JDK) that the test sessions load, so a "
        "test run does not pay for the build",
    )
    setup.add_argument(
        "--flink",
        action="store_true",
        help="also build the pinned PyFlink venv (.venv-flink) the engine comparison runs Flink in, so a test run "
        "does not pay for the install",
    )
    setup.add_argument(
        "--spark-archive",
        action="store_true",
        help="also write the class-data archive the test suite's Spark drivers start from (about 30 s, once per JDK "
        "and PySpark install)",
    )
    setup.add_argument(
        "--s3",
        action="store_true",
        help="also build the lab's object store (versitygw, a few minutes of CPU, once) and fetch the jars Spark "
        "needs for s3a:// checkpoints (hadoop-aws and AWS SDK modules, 13 MB), so `up --with s3` starts at once",
    )
    args = parser.parse_args(argv)
    exit_cleanly_on_termination()  # a `lab.py up` stopped by SIGTERM stops what it had started, as on Ctrl-C
    if args.command == "up":
        began = time.monotonic()
        state, _ = lab.up(
            log=lambda line: print(line, file=sys.stderr, flush=True), with_services=set(args.with_services)
        )
        print(lab.describe(state))
        print(f"lab up in {time.monotonic() - began:.1f}s", file=sys.stderr)
    elif args.command == "down":
        lab.down(log=lambda line: print(line, file=sys.stderr, flush=True), purge=args.purge)
        print(lab.describe(lab.status()))
    elif args.command == "status":
        state = lab.status()
        print(lab.describe(state))
        return 0 if state.kafka.running and state.postgres.running else 3
    elif args.command == "env":
        lab.make_lab_dir()
        try:
            conf: Path | None = spark_conf.write()
        except LabError as error:
            # The services' exports still print: eval keeps them, and this line shows in the terminal.
            print(f"SPARK_CONF_DIR not exported: {error}", file=sys.stderr)
            conf = None
        print(lab.env_exports(lab.status(), spark_conf=conf))
    elif args.command == "setup":
        java, major = check_java()
        print(f"java      {major} at {java}", file=sys.stderr)
        if not os.environ.get(lab.POSTGRES_ENV):
            postgres.install_if_root()
            print(f"postgres  binaries in {postgres.find_bin_dir()}", file=sys.stderr)
        jars.ensure_all()
        print(f"jars      ready in {jars_dir()}", file=sys.stderr)
        if args.prometheus:
            try:
                binaries = prometheus.ensure_binaries(log=lambda line: print(line, file=sys.stderr, flush=True))
                print(f"prometheus binaries in {binaries}", file=sys.stderr)
            except LabError as error:
                # Only `up --with prometheus` and the monitoring tests need it: say so, and let the rest of setup stand.
                print(f"prometheus not available (needed by `up --with prometheus` only): {error}", file=sys.stderr)
        if args.jvm_snippets:
            print(f"snippets  JVM jar at {snippet_jar.build()}", file=sys.stderr)
        if args.flink:
            python = flink.ensure_venv(log=lambda line: print(line, file=sys.stderr, flush=True))
            print(f"flink     PyFlink venv at {python.parent.parent}", file=sys.stderr)
        if args.s3:
            program = s3store.binary(log=lambda line: print(line, file=sys.stderr, flush=True))
            print(f"s3        versitygw at {program}", file=sys.stderr)
            jars.ensure("s3a")
            jars.ensure("spark-hadoop-cloud")
            print(f"s3        s3a jars ready in {jars_dir()}", file=sys.stderr)
        if args.spark_archive:
            archive = spark_class_archive.ensure(log=lambda line: print(line, file=sys.stderr, flush=True))
            print(f"spark     class archive at {archive}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(cli.run(main))

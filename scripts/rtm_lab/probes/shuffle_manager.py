"""What a real-time session does with a `spark.shuffle.manager` class name copied from a published set-up.

Spark reads `spark.shuffle.manager` once, when the SparkContext starts, so each class needs a session of its own,
and this process must have none yet: tests/reference/test_advice_checked.py runs this module as a child program

    python -m rtm_lab.probes.shuffle_manager --bootstrap HOST:PORT --workdir DIR CLASS [CLASS ...]

which starts a session with each class in turn, runs a `dropDuplicates` query in real-time mode (it shuffles, so the
streaming shuffle is used) when the session starts, stops the session, and prints one JSON line per class.
"""

import argparse
import json
import sys
from pathlib import Path

from pyspark.sql.streaming import StreamingQuery

from rtm_lab.probes.harness import Probe, probe
from rtm_lab.probes.support_matrix import parsed
from rtm_lab.spark import spark_session
from snippets.reference.errors import error_class

SHUFFLE_MANAGER = "spark.shuffle.manager"


def _deduplicated(p: Probe) -> StreamingQuery:
    return p.to_kafka(parsed(p.kafka()).dropDuplicates(["id"]).select("id"))


def outcome(class_name: str, bootstrap: str, workdir: Path) -> dict:
    """The session's start (`started` or the error class and message), and the query's outcome when it started."""
    try:
        spark = spark_session("rtm-shuffle-manager", slots=4, conf={SHUFFLE_MANAGER: class_name})
    except Exception as exc:
        # The SparkContext's constructor fails in the JVM: py4j hands over the Java exception unconverted.
        java = getattr(exc, "java_exception", None)
        error = java.getClass().getSimpleName() if java is not None else error_class(exc)
        message = java.getMessage() if java is not None else str(exc)
        return {"class": class_name, "session": "fails", "error": error, "message": message}
    runner = Probe(spark, bootstrap, workdir)
    try:
        seen = spark.sparkContext.getConf().get(SHUFFLE_MANAGER)
        query = probe(_deduplicated, runner, timeout_s=120)
        return {"class": class_name, "session": "starts", "conf": seen, "query": query.kind, "error": query.error}
    finally:
        runner.cleanup()
        spark.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True, help="the Kafka broker, host:port")
    parser.add_argument("--workdir", required=True, type=Path, help="a folder for checkpoints")
    parser.add_argument("classes", nargs="+", help="shuffle manager class names, one session each")
    args = parser.parse_args(argv)
    for index, class_name in enumerate(args.classes):
        print(json.dumps(outcome(class_name, args.bootstrap, args.workdir / str(index))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Plan a cluster for a real-time query from its input rate: task slots, the busiest task's rate against the measured
per-task capacity, cores, executors, memory, headroom, catch-up time after a restart and the boundary stall.

  python scripts/rtm_plan.py --rate 100000 --source-partitions 64 --shape groupby-count --shuffle-partitions 32
  python scripts/rtm_plan.py --rate 100000 --source-partitions 64 --shape groupby-count --query my_query.py [ARGS ...]

The planner itself is snippets/guides/capacity_plan.py (the skill ships it under this same name, scripts/rtm_plan.py,
with the measured capacities beside it); `python scripts/rtm_check.py --plan ...` runs the same. This entry point only
hands the planner, for --query, the readiness check (snippets/reference/readiness_check.py) and the lab's way of
running a JVM (the pinned Kafka connector, quiet logs, loopback).
"""

import sys

from rtm_lab import cli
from snippets.guides.capacity_plan import main


def lab_launcher() -> tuple[str, dict[str, str]]:
    """The Kafka connector's jars and the launcher settings the readiness check's session gets (--query only)."""
    from rtm_lab.spark import LOG4J_CONFIG, check_java, keep_on_loopback, session_jars

    check_java()
    keep_on_loopback()
    log4j = f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG}"
    return session_jars(), {"spark.driver.extraJavaOptions": log4j, "spark.ui.enabled": "false"}


def run(argv: list[str]) -> int:
    if "--query" not in argv:  # pure arithmetic: no JVM, no lab
        return main(argv)
    import os

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from snippets.reference import readiness_check

    jars, launcher = lab_launcher()
    return main(argv, jars=jars, launcher_conf=launcher, check=readiness_check)


if __name__ == "__main__":
    # cli.run: Ctrl-C and a closed pipe (`plan.py ... | head`) end without a traceback.
    sys.exit(cli.run(lambda: run(sys.argv[1:])))

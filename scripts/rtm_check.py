#!/usr/bin/env python3
"""Check a real-time query before starting it: what Spark will refuse, the task slots it needs, and each fix.

  python scripts/rtm_check.py --slots 8 [--conf K=V ...] path/to/query.py [the file's arguments ...]
  python scripts/rtm_check.py --plan --rate R --source-partitions P --shape S ...   the capacity planner (plan.py)

The checker itself is snippets/reference/readiness_check.py (the skill ships it as scripts/rtm_check.py); this entry
point only hands spark-submit the lab's way of running a JVM (the pinned Kafka connector, quiet logs, loopback). It
starts no session of its own: the file's getOrCreate() builds the one the check judges, from Spark's defaults,
spark-defaults.conf, --conf and the file's own settings, as spark-submit would.
"""

import os
import sys

from snippets.reference.readiness_check import main, parse_args

if __name__ == "__main__":
    if sys.argv[1:2] == ["--plan"]:  # the capacity planner, which counts a query file's slots with this check
        from rtm_plan import run

        from rtm_lab import cli

        sys.exit(cli.run(lambda: run(sys.argv[2:])))
    # Bad arguments are answered before a JVM starts.
    args = parse_args(sys.argv[1:])
    if isinstance(args, int):
        sys.exit(args)
    from rtm_lab.spark import LOG4J_CONFIG, check_java, keep_on_loopback, session_jars

    check_java()
    keep_on_loopback()
    # Workers run this interpreter (and venv), as the lab's sessions do: the file's Python UDFs are checked, not run.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    log4j = f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG}"
    # None of these is a query setting: the connector's jars, where Spark logs, and no UI port for a moment's run.
    launcher = {"spark.driver.extraJavaOptions": log4j, "spark.ui.enabled": "false"}
    sys.exit(main(sys.argv[1:], jars=session_jars(), launcher_conf=launcher))

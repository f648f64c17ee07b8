#!/usr/bin/env python3
"""Check a real-time query before starting it: what Spark will refuse, the task slots it needs, and each fix.

  python scripts/rtm_check.py --slots 8 path/to/query.py [the file's arguments ...]

The checker itself is snippets/reference/readiness_check.py (the skill ships it as scripts/rtm_check.py); this entry
point only starts its Spark session the lab's way (the pinned Kafka connector, quiet logs).
"""

import sys

from snippets.reference.readiness_check import main, parse_args

if __name__ == "__main__":
    # Bad arguments are answered before a JVM starts.
    args = parse_args(sys.argv[1:])
    if isinstance(args, int):
        sys.exit(args)
    from rtm_lab.spark import spark_session

    # The lab's session: the pinned Kafka connector, and Spark's start-up chatter kept off the terminal.
    spark_session("rtm-check", slots=2)
    sys.exit(main(sys.argv[1:]))

"""A real-time query from a Kafka topic to the console sink, for the test of when the console prints.

`python -m rtm_lab.apps.console_sink --bootstrap B --topic T --checkpoint C` prints `READY` once the real-time scan is
planned, then whatever the console sink prints, until stdin closes (or --timeout passes).
"""

import argparse
import sys
import threading

from pyspark.sql import functions as F

from rtm_lab.intervals import TEST_INTERVAL


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("--bootstrap", "--topic", "--checkpoint"):
        parser.add_argument(name, required=True)
    parser.add_argument("--batch-duration", dest="interval", default=TEST_INTERVAL, help="the real-time batch duration")
    parser.add_argument("--timeout", type=float, default=120.0, help="stop after this many seconds")
    args = parser.parse_args()

    from rtm_lab import plans
    from rtm_lab.spark import spark_session

    spark = spark_session("rtm-console", slots=2)
    rows = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.topic)
        .option("startingOffsets", "latest")
        .load()
        .select(F.col("value").cast("string").alias("value"))
    )
    query = (
        rows.writeStream.format("console")
        .option("checkpointLocation", args.checkpoint)
        .option("truncate", "false")
        .outputMode("update")
        .trigger(realTime=args.interval)
        .start()
    )
    plans.wait_for_real_time_scan(query, timeout_s=90)
    print("READY", flush=True)
    closed = threading.Event()

    def close_on_eof() -> None:
        sys.stdin.read()
        closed.set()

    threading.Thread(target=close_on_eof, daemon=True).start()
    closed.wait(args.timeout)
    query.stop()
    spark.stop()


if __name__ == "__main__":
    main()

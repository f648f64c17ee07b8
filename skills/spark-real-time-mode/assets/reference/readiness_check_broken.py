"""A query with four things real-time mode refuses, for the readiness check to find
before it is started.

    python rtm_check.py --slots 4 readiness_check_broken.py SOURCE_TOPIC SINK_TOPIC

(on KAFKA_BOOTSTRAP_SERVERS). Started for real, Spark would stop at the first one, at
start(): the trigger.
"""

import os
import sys
import tempfile

# --8<-- [start:broken]
from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def start_broken(
    spark: SparkSession, bootstrap: str, source: str, sink: str, checkpoint: str
):
    events = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .load()
    )
    shout = F.udf(lambda b: b.decode().upper(), "string")  # 1. a Python UDF
    out = events.repartition(8).select(
        shout("value").alias("value")
    )  # 2. 8 more tasks at once
    return (
        out.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .trigger(
            realTime="1 second"
        )  # 3. under the 5-second default minimum; 4. no outputMode("update")
        .start()
    )


# --8<-- [end:broken]

if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    spark = SparkSession.builder.appName("broken").getOrCreate()
    with tempfile.TemporaryDirectory(prefix="rtm-checkpoint-") as checkpoint:
        start_broken(
            spark, os.environ["KAFKA_BOOTSTRAP_SERVERS"], *sys.argv[1:3], checkpoint
        ).awaitTermination()

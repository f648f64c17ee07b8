#!/bin/sh
# Submit the Kafka -> real-time mode -> Postgres pipeline to a Spark standalone cluster,
# with the JVM writer. Run it in the folder holding the guide's files:
# kafka_to_postgres.py, postgres_sink.py, postgres_jvm_writer.py, submit_pipeline.py and
# postgres-upsert-writer.jar (built by build_writer.sh). Set:
#   MASTER      the master URL, e.g. spark://127.0.0.1:7077
#   TOPIC       the Kafka topic (2 partitions here: with --dedup and 2 shuffle
#               partitions the query needs 4 slots)
#   CHECKPOINT  a folder every node can reach (here one machine; on a real cluster
#               HDFS, S3, a shared mount)
#   SCHEMA      the Postgres schema of the table and the dead letters (default public)
#   KAFKA_BOOTSTRAP_SERVERS, POSTGRES_DSN  as for every page
# Every node runs the executors' Python from the same path: the venv of "Set up your
# own project".
# minRegisteredResourcesRatio=1.0: wait for all 4 cores before the first job; real-time
# mode counts free slots then.
set -eu
PYTHON=${PYTHON:-$(command -v python3)}
FIND_PYSPARK='import os, pyspark; print(os.path.dirname(pyspark.__file__))'
SPARK_HOME=${SPARK_HOME:-$("$PYTHON" -c "$FIND_PYSPARK")}
# The Kafka connector as "Set up your own project" gives it, plus PgJDBC for the JVM
# writer, from Maven Central.
KAFKA=org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0
PGJDBC=org.postgresql:postgresql:42.7.14
PACKAGES=$KAFKA,$PGJDBC
exec "$SPARK_HOME/bin/spark-submit" \
  --master "$MASTER" \
  --total-executor-cores 4 --executor-cores 2 --executor-memory 1g \
  --conf spark.scheduler.minRegisteredResourcesRatio=1.0 \
  --conf spark.sql.shuffle.partitions=2 \
  --conf spark.pyspark.python="$PYTHON" \
  --packages "$PACKAGES" \
  --jars postgres-upsert-writer.jar \
  --py-files kafka_to_postgres.py,postgres_sink.py,postgres_jvm_writer.py \
  submit_pipeline.py --topic "$TOPIC" --table events --schema "${SCHEMA:-public}" \
  --checkpoint "$CHECKPOINT" --dedup --writer jvm

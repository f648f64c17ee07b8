#!/bin/sh
# Build the JVM writer's jar: compile the sources under rtmlab/ against PySpark's own
# jars, then pack them.
# Run it from the folder that holds rtmlab/PostgresUpsertWriter.java; needs a JDK 17+
# (javac, jar) and the Python environment that has pyspark. PgJDBC is not needed to
# compile (the writer uses java.sql only):
# it goes on spark.jars beside the writer's jar at run time.
#   OUT     the jar to write (default: postgres-upsert-writer.jar)
#   PYTHON  the Python that has pyspark (default: python3)
set -eu
OUT=${OUT:-postgres-upsert-writer.jar}
FIND_PYSPARK='import os, pyspark; print(os.path.dirname(pyspark.__file__))'
SPARK_JARS=$("${PYTHON:-python3}" -c "$FIND_PYSPARK")/jars
CLASSES=$(mktemp -d)
trap 'rm -rf "$CLASSES"' EXIT
"${JAVAC:-javac}" -nowarn --release 17 -cp "$SPARK_JARS/*" -d "$CLASSES" rtmlab/*.java
"${JAR:-jar}" cf "$OUT" -C "$CLASSES" .
echo "$OUT"

"""Code the support-matrix page shows: a JVM scalar UDF in a real-time query.

Real-time mode runs it where it refuses a Python UDF. The class,
snippets/jvm/rtmlab/ShoutUdf.java, is compiled into the JVM snippets jar by the
recipe snippets/jvm/build_writer.sh; the jar goes on `spark.jars` before the
session starts.
"""

# --8<-- [start:jvm_udf]
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F


def shout_in_the_jvm(spark: SparkSession, events: DataFrame) -> DataFrame:
    # The class comes from a jar on spark.jars. Spark calls it inside the JVM,
    # so no Python worker runs and the plan keeps a plain projection.
    spark.udf.registerJavaFunction("shout", "rtmlab.ShoutUdf", "string")
    return events.select("id", F.expr("shout(k)").alias("k"))


# --8<-- [end:jvm_udf]

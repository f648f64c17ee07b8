package rtmlab;

import org.apache.spark.sql.api.java.UDF1;

/**
 * A JVM scalar UDF: the same upper-case-and-bang as the support matrix's Python UDF
 * cases. Spark calls it inside the JVM, in the projection, so real-time mode runs it
 * where it refuses a Python UDF. Register it from PySpark with {@code
 * spark.udf.registerJavaFunction("shout", "rtmlab.ShoutUdf", "string")}.
 */
public class ShoutUdf implements UDF1<String, String> {
  @Override
  public String call(String value) {
    // Kafka rows can carry a null field; a UDF sees it as null, not as an empty string.
    return value == null ? null : value.toUpperCase() + "!";
  }
}

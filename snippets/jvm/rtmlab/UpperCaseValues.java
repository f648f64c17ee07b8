package rtmlab;

import java.util.Iterator;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;

/**
 * The JVM {@code Dataset.mapPartitions}, the operator SPARK-55720 proposed to take off
 * real-time mode's allowlist: each Kafka value, as a string, upper-cased. Use it from
 * PySpark with {@code DataFrame(spark._jvm.rtmlab.UpperCaseValues.apply(df._jdf), spark)}
 * on a frame whose first column is a string.
 */
public final class UpperCaseValues {
  private UpperCaseValues() {}

  public static Dataset<String> apply(Dataset<Row> values) {
    MapPartitionsFunction<Row, String> upper = UpperCaseValues::upperCased;
    return values.mapPartitions(upper, Encoders.STRING());
  }

  // A real-time task reads its partition until the batch ends: map each row as it comes
  // rather than collecting the partition first.
  private static Iterator<String> upperCased(Iterator<Row> rows) {
    return new Iterator<String>() {
      @Override
      public boolean hasNext() {
        return rows.hasNext();
      }

      @Override
      public String next() {
        return rows.next().getString(0).toUpperCase();
      }
    };
  }
}

package rtmlab;

import java.util.List;
import org.apache.spark.api.java.function.MapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The JVM twin of the Python CallRecorder: one output row per handleInputRows call,
 * saying how many input rows the call received, so the output shows how Spark grouped
 * rows into calls. Unlike the Python API, the JVM operator is allowed in OSS real-time
 * mode (Spark 4.3). Use it from PySpark with {@code
 * DataFrame(spark._jvm.rtmlab.CallRecorderProcessor.apply(kafka_df._jdf), spark)}.
 */
public class CallRecorderProcessor extends StatefulProcessor<String, Row, String> {
  private transient ValueState<Long> rowsSoFar;

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    // A TTL bounds the state of keys that stop arriving (it needs a time mode other
    // than None).
    TTLConfig ttl = TTLConfig.apply(java.time.Duration.ofHours(1));
    rowsSoFar = getHandle().getValueState("rows_so_far", Encoders.LONG(), ttl);
  }

  @Override
  public scala.collection.Iterator<String> handleInputRows(
      String key, scala.collection.Iterator<Row> rows, TimerValues timerValues) {
    long count = 0;
    while (rows.hasNext()) {
      rows.next();
      count++;
    }
    long total = (rowsSoFar.exists() ? rowsSoFar.get() : 0L) + count;
    rowsSoFar.update(total);
    String out = String.format(
        "{\"key\":\"%s\",\"rows_in_call\":%d,\"rows_so_far\":%d,\"called_ms\":%d}",
        key, count, total, System.currentTimeMillis());
    return CollectionConverters.asScala(List.of(out).iterator());
  }

  /** Kafka rows (key, value, ...) -> one JSON string per call, in a column "value". */
  public static Dataset<Row> apply(Dataset<Row> kafkaRows) {
    return kafkaRows
        .selectExpr("CAST(key AS STRING) AS key")
        .groupByKey(
            (MapFunction<Row, String>) row -> row.getString(0), Encoders.STRING())
        .transformWithState(
            new CallRecorderProcessor(),
            TimeMode.ProcessingTime(),
            OutputMode.Update(),
            Encoders.STRING())
        .toDF("value");
  }
}

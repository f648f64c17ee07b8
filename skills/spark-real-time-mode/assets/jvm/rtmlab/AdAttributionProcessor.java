package rtmlab;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.api.java.function.MapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoder;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.ListState;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import org.apache.spark.sql.types.StructType;
import scala.Tuple2;
import scala.Tuple4;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Ad attribution: ad requests matched to their impressions ("acks") per (session,
 * campaign), in either order.
 *
 * <p>A value state holds the key's request, a list state the acks that came before it,
 * and one processing-time timer per key closes the attribution window: orphan acks and
 * unacknowledged requests are reported, then the key's state is cleared, so the state
 * store holds only keys whose window is open. Unlike Python transformWithState, this
 * JVM operator runs in OSS real-time mode (Spark 4.3). From PySpark:
 * {@code DataFrame(spark._jvm.rtmlab.AdAttributionProcessor.attribute(events._jdf,
 * window_ms), spark)}.
 */
public class AdAttributionProcessor
    extends StatefulProcessor<Tuple2<String, String>, Row, Row> {

  /** What it emits; one row per match, orphan ack or unacknowledged request. */
  public static final StructType OUTPUT = StructType.fromDDL(
      "session_id STRING, campaign_id STRING, outcome STRING, id BIGINT,"
          + " request_id BIGINT, ad_id STRING, source_ts_ms BIGINT");

  // request_id, ad_id, source_ts_ms (Kafka timestamp), acks matched so far
  private static final Encoder<Tuple4<Long, String, Long, Long>> REQUEST =
      Encoders.tuple(
          Encoders.LONG(), Encoders.STRING(), Encoders.LONG(), Encoders.LONG());
  // ack_id, source_ts_ms
  private static final Encoder<Tuple2<Long, Long>> ACK =
      Encoders.tuple(Encoders.LONG(), Encoders.LONG());

  private final long windowMs;
  private transient ValueState<Tuple4<Long, String, Long, Long>> request;
  private transient ListState<Tuple2<Long, Long>> earlyAcks;

  public AdAttributionProcessor(long windowMs) {
    this.windowMs = windowMs;
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    // The timer is what bounds the state; no TTL, so the state operator's row count is
    // exactly the open keys.
    request = getHandle().getValueState("request", REQUEST, TTLConfig.NONE());
    earlyAcks = getHandle().getListState("early_acks", ACK, TTLConfig.NONE());
  }

  @Override
  public scala.collection.Iterator<Row> handleInputRows(
      Tuple2<String, String> key,
      scala.collection.Iterator<Row> rows,
      TimerValues timerValues) {
    if (!getHandle().listTimers().hasNext()) {
      // One timer per key, from its first event: the attribution window.
      getHandle().registerTimer(timerValues.getCurrentProcessingTimeInMs() + windowMs);
    }
    List<Row> out = new ArrayList<>();
    while (rows.hasNext()) {
      Row row = rows.next();
      String kind = row.getAs("kind");
      Long eventId = row.getAs("event_id");
      if (eventId == null || !("request".equals(kind) || "ack".equals(kind))) {
        // Not an ad event (e.g. JSON that did not parse): nothing to attribute.
        continue;
      }
      long ts = row.<Long>getAs("source_ts_ms");
      if ("request".equals(kind)) {
        if (request.exists()) {
          continue; // a replayed or repeated request: the first one stands
        }
        long acks = 0;
        // A late request: every ack that came first is attributed now.
        scala.collection.Iterator<Tuple2<Long, Long>> waiting = earlyAcks.get();
        while (waiting.hasNext()) {
          Tuple2<Long, Long> ack = waiting.next();
          long at = Math.max(ack._2(), ts);
          out.add(matched(key, ack._1(), eventId, row.getAs("ad_id"), at));
          acks++;
        }
        earlyAcks.clear();
        request.update(new Tuple4<>(eventId, row.getAs("ad_id"), ts, acks));
      } else if (request.exists()) {
        Tuple4<Long, String, Long, Long> r = request.get();
        out.add(matched(key, eventId, r._1(), r._2(), Math.max(ts, r._3())));
        request.update(new Tuple4<>(r._1(), r._2(), r._3(), r._4() + 1));
      } else {
        earlyAcks.appendValue(new Tuple2<>(eventId, ts));
      }
    }
    return CollectionConverters.asScala(out.iterator());
  }

  @Override
  public scala.collection.Iterator<Row> handleExpiredTimer(
      Tuple2<String, String> key,
      TimerValues timerValues,
      ExpiredTimerInfo expiredTimerInfo) {
    List<Row> out = new ArrayList<>();
    if (request.exists() && request.get()._4() == 0) {
      Tuple4<Long, String, Long, Long> r = request.get();
      out.add(RowFactory.create(
          key._1(), key._2(), "unacked_request", r._1(), r._1(), r._2(), r._3()));
    }
    scala.collection.Iterator<Tuple2<Long, Long>> waiting = earlyAcks.get();
    while (waiting.hasNext()) {
      Tuple2<Long, Long> ack = waiting.next();
      out.add(RowFactory.create(
          key._1(), key._2(), "orphan_ack", ack._1(), null, null, ack._2()));
    }
    // The window is over: nothing of this key stays in the state store.
    request.clear();
    earlyAcks.clear();
    return CollectionConverters.asScala(out.iterator());
  }

  private static Row matched(
      Tuple2<String, String> key, long ackId, long requestId, String adId, long ts) {
    // source_ts_ms: the Kafka timestamp of the later of the two events, the one that
    // completed the match.
    return RowFactory.create(key._1(), key._2(), "matched", ackId, requestId, adId, ts);
  }

  /**
   * Events with columns session_id, campaign_id, kind (request | ack), event_id, ad_id,
   * source_ts_ms -> one row per outcome (columns of OUTPUT), grouped by the composite
   * key (session_id, campaign_id).
   */
  public static Dataset<Row> attribute(Dataset<Row> events, long windowMs) {
    return events
        .groupByKey(
            (MapFunction<Row, Tuple2<String, String>>)
                row -> new Tuple2<>(row.getAs("session_id"), row.getAs("campaign_id")),
            Encoders.tuple(Encoders.STRING(), Encoders.STRING()))
        .transformWithState(
            new AdAttributionProcessor(windowMs),
            TimeMode.ProcessingTime(),
            OutputMode.Update(),
            Encoders.row(OUTPUT));
  }
}

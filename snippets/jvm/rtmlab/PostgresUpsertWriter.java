package rtmlab;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.spark.sql.ForeachWriter;
import org.apache.spark.sql.Row;

// --8<-- [start:writer]
/**
 * The JVM twin of the Python PostgresSink: rows reach process() as the source reads them (a Python writer gets
 * them in growing pickled batches), so in OSS real-time mode this is the low-latency way into Postgres.
 *
 * Same contract: upsert on the key keeping the newest created_ms, dead letters to their own table, flush at
 * maxRows rows or when the oldest buffered row waited maxDwellMs (a timer thread covers the case where rows stop),
 * reconnect with backoff keeping the buffer, never log the password. Attach from PySpark with
 * {@code w._jwrite = w._jwrite.foreach(spark._jvm.rtmlab.PostgresUpsertWriter(...))}.
 */
public class PostgresUpsertWriter extends ForeachWriter<Row> {
  private final String url;
  private final String user;
  private final String password;
  private final String upsertSql;
  private final String deadLetterSql;
  private final int maxRows;
  private final long maxDwellMs;
  private final long reconnectForMs;

  private transient Connection conn;
  private transient Map<Long, Row> rows; // key -> newest row: duplicates fold before they are sent
  private transient List<Row> dead;
  private transient long oldestAtNanos;
  private transient ScheduledExecutorService timer;
  private transient volatile Exception timerFailure;
  private transient long partitionId;

  public PostgresUpsertWriter(
      String url, String user, String password, String schema, String table, String deadLetterTable,
      int maxRows, int maxDwellMs) {
    this.url = url;
    this.user = user;
    this.password = password;
    this.maxRows = Math.max(1, maxRows);
    this.maxDwellMs = maxDwellMs;
    this.reconnectForMs = 60_000;
    String target = quote(schema) + "." + quote(table);
    this.upsertSql = "INSERT INTO " + target + " AS cur (id, user_name, amount, payload, created_ms) "
        + "VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET user_name = EXCLUDED.user_name, "
        + "amount = EXCLUDED.amount, payload = EXCLUDED.payload, created_ms = EXCLUDED.created_ms, "
        + "written_at = clock_timestamp() WHERE cur.created_ms IS NULL OR cur.created_ms <= EXCLUDED.created_ms";
    this.deadLetterSql = "INSERT INTO " + quote(schema) + "." + quote(deadLetterTable)
        + " (kafka_topic, kafka_partition, kafka_offset, raw_value, reason) VALUES (?, ?, ?, ?, ?) "
        + "ON CONFLICT DO NOTHING";
  }

  /** An identifier as Postgres quotes it: a table name can't end the statement and start another. */
  static String quote(String identifier) {
    return "\"" + identifier.replace("\"", "\"\"") + "\"";
  }

  @Override
  public boolean open(long partitionId, long epochId) {
    this.partitionId = partitionId;
    rows = new LinkedHashMap<>();
    dead = new ArrayList<>();
    oldestAtNanos = 0;
    timerFailure = null;
    connect();
    if (maxRows > 1) {
      timer = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "pg-flush-" + partitionId);
        t.setDaemon(true);
        return t;
      });
      long period = Math.max(1, maxDwellMs / 4);
      timer.scheduleAtFixedRate(this::flushOnTime, period, period, TimeUnit.MILLISECONDS);
    }
    return true;
  }

  @Override
  public synchronized void process(Row row) {
    if (timerFailure != null) {
      throw new RuntimeException("a timed flush failed", timerFailure);
    }
    if (oldestAtNanos == 0) {
      oldestAtNanos = System.nanoTime();
    }
    if (row.getAs("dlq_reason") != null) {
      dead.add(row);
    } else {
      Long key = row.getAs("id");
      Row held = rows.get(key);
      if (held == null || (Long) held.getAs("created_ms") <= (Long) row.getAs("created_ms")) {
        rows.put(key, row);
      }
    }
    if (rows.size() + dead.size() >= maxRows || dwellExceeded()) {
      flush();
    }
  }

  @Override
  public void close(Throwable error) {
    if (timer != null) {
      timer.shutdownNow();
    }
    try {
      // After an error Spark replays the task's rows: drop the buffer rather than write it twice.
      if (error == null && timerFailure == null) {
        synchronized (this) {
          flush();
        }
      }
    } finally {
      dropConnection();
    }
    if (error == null && timerFailure != null) {
      throw new RuntimeException("a timed flush failed", timerFailure);
    }
  }

  private boolean dwellExceeded() {
    return oldestAtNanos != 0 && System.nanoTime() - oldestAtNanos >= maxDwellMs * 1_000_000L;
  }

  private synchronized void flushOnTime() {
    try {
      if (dwellExceeded()) {
        flush();
      }
    } catch (RuntimeException e) {
      timerFailure = e;
      timer.shutdown();
    }
  }

  /** Write and commit the buffer; on a lost connection reconnect with backoff and write it again. */
  private void flush() {
    if (rows.isEmpty() && dead.isEmpty()) {
      oldestAtNanos = 0;
      return;
    }
    long deadline = System.currentTimeMillis() + reconnectForMs;
    for (int attempt = 1; ; attempt++) {
      try {
        if (conn == null || conn.isClosed()) {
          connect();
        }
        write();
        break;
      } catch (SQLException e) {
        dropConnection();
        if (!isConnectionError(e) || System.currentTimeMillis() > deadline) {
          throw new RuntimeException("Postgres write failed: " + e.getMessage(), e);
        }
        sleepBackoff(attempt, "write", e);
      }
    }
    rows.clear();
    dead.clear();
    oldestAtNanos = 0;
  }

  private void write() throws SQLException {
    if (!rows.isEmpty()) {
      try (PreparedStatement st = conn.prepareStatement(upsertSql)) {
        for (Row r : rows.values()) {
          st.setLong(1, r.<Long>getAs("id"));
          st.setString(2, r.<String>getAs("user_name"));
          Double amount = r.getAs("amount");
          if (amount == null) {
            st.setNull(3, java.sql.Types.DOUBLE);
          } else {
            st.setDouble(3, amount);
          }
          st.setString(4, r.<String>getAs("payload"));
          Long created = r.getAs("created_ms");
          if (created == null) {
            st.setNull(5, java.sql.Types.BIGINT);
          } else {
            st.setLong(5, created);
          }
          st.addBatch();
        }
        st.executeBatch();
      }
    }
    if (!dead.isEmpty()) {
      try (PreparedStatement st = conn.prepareStatement(deadLetterSql)) {
        for (Row r : dead) {
          st.setString(1, r.<String>getAs("kafka_topic"));
          st.setInt(2, r.<Integer>getAs("kafka_partition"));
          st.setLong(3, r.<Long>getAs("kafka_offset"));
          st.setString(4, r.<String>getAs("raw_value"));
          st.setString(5, r.<String>getAs("dlq_reason"));
          st.addBatch();
        }
        st.executeBatch();
      }
    }
    conn.commit();
  }

  private void connect() {
    long deadline = System.currentTimeMillis() + reconnectForMs;
    for (int attempt = 1; ; attempt++) {
      try {
        java.util.Properties props = new java.util.Properties();
        props.setProperty("user", user);
        props.setProperty("password", password);
        props.setProperty("ApplicationName", "rtm-postgres-jvm-writer");
        props.setProperty("reWriteBatchedInserts", "true"); // one multi-row INSERT per batch, ON CONFLICT kept
        conn = DriverManager.getConnection(url, props);
        conn.setAutoCommit(false);
        return;
      } catch (SQLException e) {
        if (System.currentTimeMillis() > deadline) {
          throw new RuntimeException("could not connect to " + url + " as " + user + ": " + e.getMessage(), e);
        }
        sleepBackoff(attempt, "connect", e);
      }
    }
  }

  private static boolean isConnectionError(SQLException e) {
    String state = e.getSQLState();
    // Class 08 = connection exception; 57P01-03 = the server is shutting down or restarting.
    return state == null || state.startsWith("08") || state.startsWith("57P");
  }

  private void sleepBackoff(int attempt, String what, SQLException e) {
    long pause = Math.min(5000, 50L << Math.min(attempt, 7));
    // The URL carries no password (it is passed as a property), so this line can't leak it.
    System.err.printf("partition %d: %s to %s failed (%s); retry %d in %d ms%n",
        partitionId, what, url, e.getMessage(), attempt, pause);
    try {
      Thread.sleep(pause);
    } catch (InterruptedException ie) {
      Thread.currentThread().interrupt();
      throw new RuntimeException("interrupted while reconnecting", ie);
    }
  }

  private void dropConnection() {
    if (conn != null) {
      try {
        conn.close();
      } catch (SQLException ignored) {
        // already gone
      }
      conn = null;
    }
  }
}
// --8<-- [end:writer]

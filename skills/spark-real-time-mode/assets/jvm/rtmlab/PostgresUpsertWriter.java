package rtmlab;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.spark.sql.ForeachWriter;
import org.apache.spark.sql.Row;

/**
 * The JVM twin of the Python PostgresSink: rows reach process() as the source reads
 * them (a Python writer gets them in growing pickled batches), so in OSS real-time mode
 * this is the low-latency way into Postgres.
 *
 * <p>Same contract and the same options, by the same names (the Python SinkConfig's
 * fields, passed as strings): upsert on the key columns keeping the newest version,
 * dead letters (input the query flagged, and rows Postgres refuses) to their own table
 * with the raw bytes, flush at max_rows rows or when the oldest buffered row waited
 * max_dwell_ms (a timer thread covers the case where rows stop), retry transient
 * SQLSTATEs only, I/O timeouts, a password re-read on every (re)connect, never log the
 * password. Attach from PySpark with {@code w._jwrite =
 * w._jwrite.foreach(spark._jvm.rtmlab.PostgresUpsertWriter(url, user, password,
 * options))}.
 */
public class PostgresUpsertWriter extends ForeachWriter<Row> {
  private final String url;
  private final String user;
  private final String dsnPassword;
  private final String[] columns;
  private final int[] keyIdx;
  private final int versionIdx; // -1: no version column
  private final boolean deadLetters;
  private final String reasonColumn;
  private final String rawColumn;
  private final String[] deadLetterColumns;
  private final String[] transientStates;
  private final String passwordFile;
  private final String passwordCommand;
  private final String applicationName;
  private final String upsertSql;
  private final String deadLetterSql;
  private final int maxRows;
  private final long maxDwellMs;
  private final long reconnectForMs;
  private final int connectTimeoutS;
  private final int ioTimeoutS;
  private final int statementTimeoutMs;

  /**
   * A buffered row: the values bound to the upsert, and the row itself in case Postgres
   * refuses them.
   */
  private static final class Pending {
    final Object[] values;
    final Row row;

    Pending(Object[] values, Row row) {
      this.values = values;
      this.row = row;
    }
  }

  private transient Connection conn;
  // By key, sorted: every task locks keys in the same order.
  private transient TreeMap<List<Object>, Pending> rows;
  private transient List<Object[]> dead;
  private transient long oldestAtNanos;
  private transient ScheduledExecutorService timer;
  private transient volatile Exception timerFailure;
  private transient volatile boolean closing;
  private transient long partitionId;

  public PostgresUpsertWriter(
      String url, String user, String password, Map<String, String> options) {
    this.url = url;
    this.user = user;
    this.dsnPassword = password;
    String schema = required(options, "schema");
    String table = required(options, "table");
    this.columns = list(required(options, "columns"));
    String[] keys = list(required(options, "key_columns"));
    this.keyIdx = new int[keys.length];
    for (int i = 0; i < keys.length; i++) {
      keyIdx[i] = indexOf(columns, keys[i]);
    }
    String version = options.get("version_column");
    this.versionIdx = version == null ? -1 : indexOf(columns, version);
    String deadLetterTable = options.get("dead_letter_table");
    this.deadLetters = deadLetterTable != null;
    this.reasonColumn = required(options, "reason_column");
    this.rawColumn = required(options, "raw_column");
    this.deadLetterColumns = list(required(options, "dead_letter_columns"));
    this.transientStates = list(required(options, "transient_sqlstates"));
    this.passwordFile = options.get("password_file");
    this.passwordCommand = options.get("password_command");
    this.applicationName = required(options, "application_name");
    this.maxRows = Math.max(1, Integer.parseInt(required(options, "max_rows")));
    this.maxDwellMs = Long.parseLong(required(options, "max_dwell_ms"));
    this.reconnectForMs =
        (long) (Double.parseDouble(required(options, "reconnect_for_s")) * 1000);
    this.connectTimeoutS = Integer.parseInt(required(options, "connect_timeout_s"));
    this.ioTimeoutS = Integer.parseInt(required(options, "io_timeout_s"));
    this.statementTimeoutMs =
        Integer.parseInt(required(options, "statement_timeout_ms"));

    List<String> updates = new ArrayList<>();
    for (String c : columns) {
      if (!Arrays.asList(keys).contains(c)) {
        updates.add(quote(c) + " = EXCLUDED." + quote(c));
      }
    }
    updates.add("written_at = clock_timestamp()");
    String v = version == null ? null : quote(version);
    String newer = v == null ? ""
        : " WHERE cur." + v + " IS NULL OR cur." + v + " <= EXCLUDED." + v;
    this.upsertSql = "INSERT INTO " + quote(schema) + "." + quote(table)
        + " AS cur (" + quoted(columns) + ") VALUES (" + marks(columns.length)
        + ") ON CONFLICT (" + quoted(keys) + ") DO UPDATE SET "
        + String.join(", ", updates) + newer;
    String[] dlColumns = Arrays.copyOf(deadLetterColumns, deadLetterColumns.length + 2);
    dlColumns[dlColumns.length - 2] = "raw_value";
    dlColumns[dlColumns.length - 1] = "reason";
    this.deadLetterSql = deadLetterTable == null ? null
        : "INSERT INTO " + quote(schema) + "." + quote(deadLetterTable)
            + " (" + quoted(dlColumns) + ") VALUES (" + marks(dlColumns.length)
            + ") ON CONFLICT DO NOTHING";
  }

  private static String required(Map<String, String> options, String name) {
    String value = options.get(name);
    if (value == null) {
      throw new IllegalArgumentException(
          "PostgresUpsertWriter: option '" + name + "' is missing");
    }
    return value;
  }

  private static String[] list(String value) {
    return value.isEmpty() ? new String[0] : value.split(",");
  }

  private static int indexOf(String[] columns, String name) {
    int i = Arrays.asList(columns).indexOf(name);
    if (i < 0) {
      throw new IllegalArgumentException(
          "PostgresUpsertWriter: '" + name + "' is not one of the columns");
    }
    return i;
  }

  /**
   * An identifier as Postgres quotes it: a table name can't end the statement and start
   * another.
   */
  static String quote(String identifier) {
    return "\"" + identifier.replace("\"", "\"\"") + "\"";
  }

  private static String quoted(String[] names) {
    List<String> out = new ArrayList<>();
    for (String n : names) {
      out.add(quote(n));
    }
    return String.join(", ", out);
  }

  private static String marks(int n) {
    return String.join(", ", java.util.Collections.nCopies(n, "?"));
  }

  @SuppressWarnings({"unchecked", "rawtypes"})
  private static final Comparator<List<Object>> KEY_ORDER = (a, b) -> {
    for (int i = 0; i < a.size(); i++) {
      int c = ((Comparable) a.get(i)).compareTo(b.get(i));
      if (c != 0) {
        return c;
      }
    }
    return 0;
  };

  @Override
  public boolean open(long partitionId, long epochId) {
    this.partitionId = partitionId;
    rows = new TreeMap<>(KEY_ORDER);
    dead = new ArrayList<>();
    oldestAtNanos = 0;
    timerFailure = null;
    closing = false;
    connectWithRetry();
    if (maxRows > 1) {
      timer = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "pg-flush-" + partitionId);
        t.setDaemon(true);
        return t;
      });
      long period = Math.max(1, maxDwellMs / 4);
      timer.scheduleAtFixedRate(
          this::flushOnTime, period, period, TimeUnit.MILLISECONDS);
    }
    return true;
  }

  @Override
  @SuppressWarnings("unchecked")
  public synchronized void process(Row row) {
    if (timerFailure != null) {
      throw new RuntimeException("a timed flush failed", timerFailure);
    }
    if (oldestAtNanos == 0) {
      oldestAtNanos = System.nanoTime();
    }
    Object[] values = new Object[columns.length];
    for (int i = 0; i < columns.length; i++) {
      values[i] = row.getAs(columns[i]);
    }
    String reason = deadLetters ? row.<String>getAs(reasonColumn) : null;
    if (reason == null) {
      reason = poison(values);
    }
    if (reason != null) {
      dead.add(deadLetter(row, reason));
    } else {
      List<Object> key = new ArrayList<>(keyIdx.length);
      for (int i : keyIdx) {
        key.add(values[i]);
      }
      Pending held = rows.get(key);
      if (held == null || versionIdx < 0
          || ((Comparable<Object>) held.values[versionIdx])
                  .compareTo(values[versionIdx]) <= 0) {
        rows.put(key, new Pending(values, row));
      }
    }
    if (rows.size() + dead.size() >= maxRows || dwellExceeded()) {
      flush();
    }
  }

  @Override
  public void close(Throwable error) {
    closing = true; // the timer starts no flush from now on
    try {
      // The monitor waits out a timed flush in progress instead of interrupting it (no
      // shutdownNow): an interrupted flush would fail the task for nothing.
      synchronized (this) {
        try {
          // After an error Spark replays the task's rows: drop the buffer rather than
          // write it twice.
          if (error == null && timerFailure == null) {
            flush();
          }
        } finally {
          dropConnection();
        }
      }
    } finally {
      if (timer != null) {
        timer.shutdown();
      }
    }
    if (error == null && timerFailure != null) {
      throw new RuntimeException("a timed flush failed", timerFailure);
    }
  }

  // ---- poison rows: each one is dead-lettered with its reason, so a replay can't fail
  // on it again
  private String poison(Object[] values) {
    for (int i : keyIdx) {
      if (values[i] == null) {
        return "null_key";
      }
    }
    if (versionIdx >= 0 && values[versionIdx] == null) {
      return "null_version";
    }
    for (Object v : values) {
      if (v instanceof String && ((String) v).indexOf('\u0000') >= 0) {
        return "nul_character"; // Postgres text can't hold NUL
      }
    }
    return null;
  }

  private Object[] deadLetter(Row row, String reason) {
    if (!deadLetters) {
      throw new IllegalStateException(
          "row refused (" + reason + ") and no dead_letter_table is configured");
    }
    Object[] out = new Object[deadLetterColumns.length + 2];
    for (int i = 0; i < deadLetterColumns.length; i++) {
      out[i] = field(row, deadLetterColumns[i]);
    }
    Object raw = field(row, rawColumn);
    // A parsed row Postgres refused has no raw value: keep the row itself, as JSON.
    out[out.length - 2] =
        raw != null ? raw : row.json().getBytes(StandardCharsets.UTF_8);
    String text = reason.replace("\u0000", "");
    out[out.length - 1] = text.length() > 1000 ? text.substring(0, 1000) : text;
    return out;
  }

  private static Object field(Row row, String name) {
    scala.Option<Object> index = row.schema().getFieldIndex(name);
    return index.isDefined() ? row.get((Integer) index.get()) : null;
  }

  // ---- buffering
  private boolean dwellExceeded() {
    return oldestAtNanos != 0
        && System.nanoTime() - oldestAtNanos >= maxDwellMs * 1_000_000L;
  }

  private synchronized void flushOnTime() {
    if (closing || timerFailure != null) {
      return;
    }
    try {
      if (dwellExceeded()) {
        flush();
      }
    } catch (RuntimeException e) {
      timerFailure = e; // surfaced by the next process() or close()
    }
  }

  /**
   * Write and commit the buffer; on a transient error reconnect with backoff and write
   * it again.
   */
  private void flush() {
    if (rows.isEmpty() && dead.isEmpty()) {
      oldestAtNanos = 0;
      return;
    }
    List<Pending> pending = new ArrayList<>(rows.values()); // in key order
    long deadline = System.currentTimeMillis() + reconnectForMs;
    for (int attempt = 1; ; attempt++) {
      try {
        if (conn == null) {
          connect();
        }
        write(pending);
        break;
      } catch (SQLException e) {
        dropConnection();
        if (!isTransient(e) || System.currentTimeMillis() > deadline) {
          throw new RuntimeException("Postgres write failed: " + e.getMessage(), e);
        }
        sleepBackoff(attempt, "write", e);
      }
    }
    rows.clear();
    dead.clear();
    oldestAtNanos = 0;
  }

  private void write(List<Pending> pending) throws SQLException {
    try {
      if (!pending.isEmpty()) {
        try (PreparedStatement st = conn.prepareStatement(upsertSql)) {
          for (Pending p : pending) {
            bind(st, p.values);
            st.addBatch();
          }
          st.executeBatch();
        }
      }
      insertDeadLetters(dead);
      conn.commit();
    } catch (SQLException e) {
      if (isTransient(e)) {
        throw e;
      }
      // A row Postgres refuses (a constraint, a changed table, bad data): find it,
      // dead-letter it.
      conn.rollback();
      writeRowByRow(pending);
    }
  }

  private void writeRowByRow(List<Pending> pending) throws SQLException {
    List<Object[]> letters = new ArrayList<>(dead);
    int refused = 0;
    try (PreparedStatement st = conn.prepareStatement(upsertSql)) {
      for (Pending p : pending) {
        Savepoint sp = conn.setSavepoint();
        try {
          bind(st, p.values);
          st.executeUpdate();
          conn.releaseSavepoint(sp);
        } catch (SQLException e) {
          if (isTransient(e)) {
            throw e;
          }
          conn.rollback(sp);
          letters.add(deadLetter(p.row, stateOf(e) + ": " + firstLine(e.getMessage())));
          refused++;
        }
      }
    }
    insertDeadLetters(letters);
    conn.commit();
    System.err.printf(
        "partition %d: %d row(s) refused by Postgres, dead-lettered%n",
        partitionId, refused);
  }

  private void insertDeadLetters(List<Object[]> letters) throws SQLException {
    if (letters.isEmpty()) {
      return;
    }
    try (PreparedStatement st = conn.prepareStatement(deadLetterSql)) {
      for (Object[] letter : letters) {
        bind(st, letter);
        st.addBatch();
      }
      st.executeBatch();
    }
  }

  private static void bind(PreparedStatement st, Object[] values) throws SQLException {
    for (int i = 0; i < values.length; i++) {
      // null, Long, Double, String, byte[] (bytea), Timestamp
      st.setObject(i + 1, values[i]);
    }
  }

  // ---- the retry rule both writers share: the SQLSTATEs in transient_sqlstates, never
  // an authentication failure
  private boolean isTransient(SQLException e) {
    String state = stateOf(e);
    if (state == null) {
      return false;
    }
    for (String prefix : transientStates) {
      if (state.startsWith(prefix)) {
        return true;
      }
    }
    return false;
  }

  /**
   * The first SQLSTATE in the chain: a failed batch reports the statement's error as
   * its next exception.
   */
  private static String stateOf(SQLException e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (t instanceof SQLException) {
        SQLException s = (SQLException) t;
        if (s.getSQLState() != null) {
          return s.getSQLState();
        }
        SQLException next = s.getNextException();
        if (next != null && next.getSQLState() != null) {
          return next.getSQLState();
        }
      }
    }
    return null;
  }

  private static String firstLine(String message) {
    if (message == null) {
      return "";
    }
    int nl = message.indexOf('\n');
    return nl < 0 ? message : message.substring(0, nl);
  }

  // ---- connection
  private void connectWithRetry() {
    long deadline = System.currentTimeMillis() + reconnectForMs;
    for (int attempt = 1; ; attempt++) {
      try {
        connect();
        return;
      } catch (SQLException e) {
        if (!isTransient(e) || System.currentTimeMillis() > deadline) {
          // The URL carries no password (it is a property), and PgJDBC's messages never
          // include it.
          throw new RuntimeException(
              "could not connect to " + url + " as " + user + ": " + e.getMessage(), e);
        }
        sleepBackoff(attempt, "connect", e);
      }
    }
  }

  private void connect() throws SQLException {
    Properties props = new Properties();
    props.setProperty("user", user);
    // Every (re)connect: a rotated password or a fresh token is picked up.
    String password = currentPassword();
    if (password != null) {
      props.setProperty("password", password);
    }
    props.setProperty("ApplicationName", applicationName);
    // One multi-row INSERT per batch, ON CONFLICT kept.
    props.setProperty("reWriteBatchedInserts", "true");
    props.setProperty("connectTimeout", String.valueOf(connectTimeoutS));
    // A dead peer can't hold a flush forever.
    props.setProperty("socketTimeout", String.valueOf(ioTimeoutS));
    props.setProperty("tcpKeepAlive", "true");
    conn = DriverManager.getConnection(url, props);
    try (Statement st = conn.createStatement()) {
      st.execute("SET statement_timeout = " + statementTimeoutMs);
    }
    conn.setAutoCommit(false);
  }

  private String currentPassword() throws SQLException {
    try {
      if (passwordFile != null) {
        byte[] bytes = Files.readAllBytes(Paths.get(passwordFile));
        return new String(bytes, StandardCharsets.UTF_8).trim();
      }
      if (passwordCommand != null) {
        Process p = new ProcessBuilder("sh", "-c", passwordCommand)
            .redirectError(ProcessBuilder.Redirect.INHERIT).start();
        byte[] bytes = p.getInputStream().readAllBytes();
        String out = new String(bytes, StandardCharsets.UTF_8).trim();
        if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
          // Its output may hold a secret: report the failure only. SQLSTATE 28000: not
          // retried.
          throw new SQLException("password_command failed", "28000");
        }
        return out;
      }
    } catch (IOException | InterruptedException e) {
      throw new SQLException(
          "reading the password failed: " + e.getClass().getSimpleName(), "28000", e);
    }
    return dsnPassword;
  }

  private void sleepBackoff(int attempt, String what, SQLException e) {
    long pause = Math.min(5000, 50L << Math.min(attempt, 7));
    // The URL carries no password (it is passed as a property), so this line can't leak
    // it.
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

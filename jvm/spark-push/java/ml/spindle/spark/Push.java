package ml.spindle.spark;

import java.io.ByteArrayInputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.locks.LockSupport;

import org.apache.arrow.flight.FlightCallHeaders;
import org.apache.arrow.flight.FlightClient;
import org.apache.arrow.flight.FlightDescriptor;
import org.apache.arrow.flight.FlightRuntimeException;
import org.apache.arrow.flight.FlightStatusCode;
import org.apache.arrow.flight.HeaderCallOption;
import org.apache.arrow.flight.Location;
import org.apache.arrow.flight.PutResult;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.types.DateUnit;
import org.apache.arrow.vector.types.FloatingPointPrecision;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.FieldType;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.spark.api.java.function.Function2;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.execution.arrow.ArrowWriter;

/**
 * Pushes a DataFrame's rows into a Spindle job's pushed input from the Spark tasks that compute
 * them, without a Python worker: each task turns its partition's internal rows into Arrow
 * batches with Spark's own ArrowWriter and DoPuts them to the job's Flight endpoint as the
 * producer {@code PREFIX/part-N}.
 *
 * <p>It is the same protocol as the Python pusher (python/spindle/spark.py): a retried task first
 * asks the job how many of its rows it took (GetFlightInfo) and skips them, and the job's flow
 * control holds a task whose batches the ranks have not read yet. spindle.spark.push calls
 * {@link #push} through Py4J when this jar is on the Spark session's classpath.
 */
public final class Push {
  private Push() {}

  /**
   * Pushes every partition of df and returns how many of its rows the job has: every row, once,
   * also when tasks were retried.
   *
   * @param spec the job's schema as spindle.flight.put.schema declares it ({@code name:type,...}),
   *     in df's column order
   * @param caPem the PEM of the CA to verify a {@code grpc+tls://} endpoint with, or null
   * @param batchRows rows per Arrow batch
   */
  public static long push(Dataset<?> df, String endpoint, String token, String caPem, String spec,
      String prefix, int batchRows) {
    if (batchRows <= 0) {
      throw new IllegalArgumentException("batchRows must be positive, got " + batchRows);
    }
    Schema schema = schemaOf(spec);
    PartitionPusher pusher = new PartitionPusher(endpoint, token, caPem, schema.toJson(), prefix, batchRows);
    List<Long> rows = df.queryExecution().toRdd().toJavaRDD().mapPartitionsWithIndex(pusher, false).collect();
    long total = 0;
    for (long n : rows) {
      total += n;
    }
    return total;
  }

  /** The Arrow schema of a spindle.flight.put.schema spec; every column nullable, as the job declares it. */
  static Schema schemaOf(String spec) {
    List<Field> fields = new ArrayList<>();
    for (String column : spec.split(",")) {
      int colon = column.lastIndexOf(':');
      if (colon <= 0) {
        throw new IllegalArgumentException("schema column " + column + ": want name:type");
      }
      String name = column.substring(0, colon);
      fields.add(new Field(name, FieldType.nullable(typeOf(name, column.substring(colon + 1))), null));
    }
    return new Schema(fields);
  }

  private static ArrowType typeOf(String column, String type) {
    switch (type) {
      case "bool": return ArrowType.Bool.INSTANCE;
      case "int8": return new ArrowType.Int(8, true);
      case "int16": return new ArrowType.Int(16, true);
      case "int32": return new ArrowType.Int(32, true);
      case "int64": return new ArrowType.Int(64, true);
      case "float32": return new ArrowType.FloatingPoint(FloatingPointPrecision.SINGLE);
      case "float64": return new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE);
      case "string": return ArrowType.Utf8.INSTANCE;
      case "binary": return ArrowType.Binary.INSTANCE;
      case "date32": return new ArrowType.Date(DateUnit.DAY);
      default:
        throw new IllegalArgumentException("schema column " + column + ": type " + type + " cannot be pushed");
    }
  }

  /** The function each Spark task runs: push partition N as producer PREFIX/part-N, return its row count. */
  static final class PartitionPusher implements Function2<Integer, Iterator<InternalRow>, Iterator<Long>> {
    private static final long serialVersionUID = 1L;
    // How long a retried task waits for the job to let go of its killed predecessor's stream.
    private static final long TAKEN_WAIT_MILLIS = 60_000;
    // How long a finished task waits for gRPC to release its last batch.
    private static final long RELEASE_WAIT_NANOS = 10_000_000_000L;
    private static BufferAllocator root;

    /** The executor JVM's allocator that each task's allocator is a child of. */
    private static synchronized BufferAllocator root() {
      if (root == null) {
        root = new RootAllocator();
      }
      return root;
    }

    private final String endpoint;
    private final String token;
    private final String caPem;
    private final String schemaJson;
    private final String prefix;
    private final int batchRows;

    PartitionPusher(String endpoint, String token, String caPem, String schemaJson, String prefix, int batchRows) {
      this.endpoint = endpoint;
      this.token = token;
      this.caPem = caPem;
      this.schemaJson = schemaJson;
      this.prefix = prefix;
      this.batchRows = batchRows;
    }

    @Override
    public Iterator<Long> call(Integer partition, Iterator<InternalRow> rows) throws Exception {
      Schema schema = Schema.fromJSON(schemaJson);
      List<String> path = new ArrayList<>(List.of(prefix.split("/")));
      path.add("part-" + partition);
      FlightDescriptor descriptor = FlightDescriptor.path(path);
      FlightCallHeaders headers = new FlightCallHeaders();
      headers.insert("authorization", "Bearer " + token);
      HeaderCallOption auth = new HeaderCallOption(headers);
      BufferAllocator allocator = root().newChildAllocator("spindle-push-part-" + partition, 0, Long.MAX_VALUE);
      try {
        try (FlightClient client = connect(allocator)) {
          long skip = taken(client, descriptor, auth);
          // The partition's rows the job has: those an earlier attempt pushed, and this one's.
          long had = skip + send(client, allocator, schema, descriptor, auth, rows, skip);
          return Collections.singletonList(had).iterator();
        }
      } finally {
        closeWhenReleased(allocator);
      }
    }

    /**
     * Closes a task's allocator once gRPC has let go of the last batch it sent. Netty releases a
     * written message after the call returns; closing before would fail a task whose rows the
     * job already has, and its retry would then push nothing.
     */
    private static void closeWhenReleased(BufferAllocator allocator) {
      long deadline = System.nanoTime() + RELEASE_WAIT_NANOS;
      while (allocator.getAllocatedMemory() > 0 && System.nanoTime() < deadline) {
        LockSupport.parkNanos(1_000_000);
        if (Thread.currentThread().isInterrupted()) {
          break;  // a cancelled task: its own error, not this wait, is what it reports
        }
      }
      if (allocator.getAllocatedMemory() == 0) {
        allocator.close();
      }
      // Otherwise left open: a few buffers held by a stuck channel, not a failed task.
    }

    private FlightClient connect(BufferAllocator allocator) throws java.net.URISyntaxException {
      FlightClient.Builder builder = FlightClient.builder(allocator, new Location(endpoint));
      if (caPem != null) {
        builder.trustedCertificates(new ByteArrayInputStream(caPem.getBytes(StandardCharsets.US_ASCII)));
      }
      return builder.build();
    }

    /** Rows the job already took from this producer, waiting while a killed run's stream is still open. */
    private static long taken(FlightClient client, FlightDescriptor descriptor, HeaderCallOption auth)
        throws InterruptedException {
      long deadline = System.currentTimeMillis() + TAKEN_WAIT_MILLIS;
      while (true) {
        try {
          return Math.max(client.getInfo(descriptor, auth).getRecords(), 0);
        } catch (FlightRuntimeException e) {
          if (e.status().code() != FlightStatusCode.UNAVAILABLE || System.currentTimeMillis() > deadline) {
            throw e;
          }
          Thread.sleep(100);
        }
      }
    }

    /**
     * DoPuts rows, less the first skip, in batches of batchRows. Spark's ArrowWriter fills a
     * working root; each full batch's buffers are moved to the root the stream sends, so a batch
     * still queued in gRPC is never overwritten by the next one.
     */
    private long send(FlightClient client, BufferAllocator allocator, Schema schema, FlightDescriptor descriptor,
        HeaderCallOption auth, Iterator<InternalRow> rows, long skip) throws InterruptedException {
      long pushed = 0;
      try (VectorSchemaRoot working = VectorSchemaRoot.create(schema, allocator);
           VectorSchemaRoot sending = VectorSchemaRoot.create(schema, allocator)) {
        ArrowWriter writer = ArrowWriter.create(working);
        Stream stream = new Stream();
        FlightClient.ClientStreamListener put = client.startPut(descriptor, sending, stream, auth);
        try {
          int n = 0;
          while (rows.hasNext()) {
            InternalRow row = rows.next();
            if (skip > 0) {
              skip--;
              continue;
            }
            writer.write(row);
            if (++n == batchRows) {
              sendBatch(put, stream, writer, working, sending, n);
              pushed += n;
              n = 0;
            }
          }
          if (n > 0) {
            sendBatch(put, stream, writer, working, sending, n);
            pushed += n;
          }
        } catch (Throwable t) {
          // Computing the partition failed (or the task was killed): end the stream now, so the
          // retried task's GetFlightInfo gets this one's count instead of waiting for it.
          put.error(t);
          throw t;
        }
        put.completed();
        put.getResult();
      }
      return pushed;
    }

    private static void sendBatch(FlightClient.ClientStreamListener put, Stream stream, ArrowWriter writer,
        VectorSchemaRoot working, VectorSchemaRoot sending, int rows) throws InterruptedException {
      writer.finish();
      stream.awaitReady(put);
      for (int i = 0; i < working.getFieldVectors().size(); i++) {
        FieldVector from = working.getVector(i);
        from.makeTransferPair(sending.getVector(i)).transfer();
      }
      sending.setRowCount(rows);
      put.putNext();
      writer.reset();
    }
  }

  /** A DoPut's acknowledgements and its end; the job's flow control holds a writer in awaitReady. */
  static final class Stream implements FlightClient.PutListener {
    // How long a writer held by flow control sleeps between looks: Flight's client stream takes
    // no readiness callback once the call has started.
    private static final long READY_POLL_NANOS = 50_000;

    private volatile Throwable failure;
    private volatile boolean done;

    /** Waits until gRPC takes another message, or the stream fails. */
    void awaitReady(FlightClient.ClientStreamListener put) throws InterruptedException {
      while (!put.isReady()) {
        if (failure != null) {
          throw new IllegalStateException("pushing to the job failed", failure);
        }
        if (done) {
          throw new IllegalStateException("the job ended the push stream early");
        }
        LockSupport.parkNanos(READY_POLL_NANOS);
        if (Thread.interrupted()) {
          throw new InterruptedException("push cancelled");
        }
      }
    }

    @Override
    public void getResult() {}

    @Override
    public void onNext(PutResult val) {
      // The acknowledgement carries nothing a pusher needs; Flight releases it after this call.
    }

    @Override
    public void onError(Throwable t) {
      failure = t;
    }

    @Override
    public void onCompleted() {
      done = true;
    }

    @Override
    public boolean isCancelled() {
      return false;
    }
  }
}

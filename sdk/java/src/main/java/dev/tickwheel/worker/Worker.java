package dev.tickwheel.worker;

import com.google.protobuf.ByteString;
import com.google.protobuf.Timestamp;
import dev.tickwheel.TickwheelException;
import dev.tickwheel.TlsOptions;
import dev.tickwheel.v1.Assignment;
import dev.tickwheel.v1.ExecutionProgress;
import dev.tickwheel.v1.ExecutionResult;
import dev.tickwheel.v1.InFlightExecution;
import dev.tickwheel.v1.PullRequest;
import dev.tickwheel.v1.PullResponse;
import dev.tickwheel.v1.ResultAck;
import dev.tickwheel.v1.ResultOutcome;
import dev.tickwheel.v1.ServerDrain;
import dev.tickwheel.v1.ServerWelcome;
import dev.tickwheel.v1.WorkerCredit;
import dev.tickwheel.v1.WorkerHeartbeat;
import dev.tickwheel.v1.WorkerHello;
import dev.tickwheel.v1.WorkerResults;
import dev.tickwheel.v1.WorkerServiceGrpc;
import io.grpc.ChannelCredentials;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import io.grpc.stub.MetadataUtils;
import java.lang.System.Logger.Level;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;
import java.util.function.DoubleSupplier;
import java.util.function.Function;
import java.util.regex.Pattern;

/**
 * A worker process's connection to Tickwheel: holds one {@code WorkerService.Pull} stream at a
 * time, keeps it up, and runs the named {@link Handler}s it was built with. The same protocol as
 * the Python worker runtime ({@code tickwheel_worker.runtime}) and the TypeScript worker. HTTP
 * targets stay in the Python worker: an HTTP assignment (which the server never sends, since the
 * hello says {@code http: false}) is reported FAILED_PERMANENT.
 *
 * <p>Per stream (a <em>session</em>) the worker sends {@code hello} (with the executions it still
 * runs or holds an unacknowledged result for: a server counts a result only from the stream that
 * holds its delivery, so a new stream must re-attach those too), waits for {@code welcome}, then:
 *
 * <ul>
 *   <li><b>credit</b>: {@code hello.slots} is the stream's initial credit. The worker tracks the
 *       credit the server still holds and grants more only while {@code held + outstanding <
 *       slots} and fewer than {@code slots} results await their ack, {@code held} counting every
 *       assignment it has not finished with (waiting for a handler thread, running, or decided
 *       with a handler that has not returned). At most {@code slots} handlers run at once (a pool
 *       of that many threads); the surplus after a reconnect waits in a queue bounded by {@code 2 *
 *       slots}. An assignment beyond {@code 2 * slots} held (a server ignoring credit) is answered
 *       FAILED_RETRYABLE at once; more than {@link #MAX_REFUSED} such refusals unacknowledged end
 *       the stream as a protocol error and are forgotten (the server hands those executions out
 *       again; the results of real attempts are kept and sent on the next stream).
 *   <li><b>heartbeats</b>: every {@code welcome.heartbeat_interval} (clamped to [50 ms, 5 min],
 *       the bounds a server's configuration takes, with a WARNING),
 *       listing every execution not yet decided, with its progress.
 *   <li><b>results</b>: sent when each attempt's outcome is known, batched (at most 1000 or about
 *       1 MiB per message), kept until acknowledged; after a reconnect every unacknowledged result
 *       is sent again (the server's result handling is idempotent). An ack forgets the execution.
 *   <li><b>cancel</b>: the attempt is stopped (context cancelled, handler thread interrupted) and
 *       reported CANCELED; <b>welcome.rejected</b>: stopped and not reported (another worker holds
 *       it now), and an unacknowledged result for it is dropped.
 *   <li><b>deadline</b>: at the assignment's {@code deadline_at} the attempt is stopped the same
 *       way and reported TIMED_OUT at once.
 *   <li><b>drain</b>: no more credit; when every attempt is decided and every result
 *       acknowledged, or at the drain deadline, the worker half-closes the stream and reconnects
 *       (to the next address; attempts still running are re-attached by the next hello).
 *   <li><b>server liveness</b>: any message from the server counts; after {@code
 *       serverSilenceIntervals} heartbeat intervals of silence the server is presumed dead and the
 *       worker reconnects.
 * </ul>
 *
 * <p>Reconnects go round the address list, each after a wait of full jitter ({@link
 * Backoff#reconnectDelay}) doubling per stream that got no welcome or ended within a heartbeat
 * interval of it, capped. A server that refuses the worker (UNAUTHENTICATED, PERMISSION_DENIED,
 * INVALID_ARGUMENT, UNIMPLEMENTED) ends {@link #run()} with {@link WorkerFatalException} (one
 * ERROR line). Any other failure is an outage of the stream, logged through {@link OutageLog}: one
 * WARNING when it begins, one after 1, 3, 7 and 15 minutes and every 15 minutes, DEBUG in between,
 * one INFO once a stream lasted a heartbeat interval. What a server can make the worker say at will
 * (second welcomes, duplicate or surplus assignments, rejected results, drains, drains done,
 * streams closed, an interval out of bounds) is one line of each kind a minute, the rest DEBUG
 * ({@link Limited}); a server's text in any line is its first line, printable, at most 300
 * characters, the credential masked ({@link ServerText#said}).
 *
 * <p>An assignment message with a field over its bound ({@link Bounds}: an execution id of 1 to
 * 1 024 characters; a job id, tenant or traceparent of 1 024; a handler name of 200; a payload of 4
 * MiB; an HTTP target's URL of 2 048, method of 16, 32 headers of 16 KiB in all) ends the stream as
 * a protocol error and nothing of it is taken, as does a welcome's heartbeat interval or a drain's
 * deadline out of protobuf's range; an assignment's timestamps out of it are read as the nearest
 * instant in it (years 1 to 9999: a deadline beyond never comes); a cancel's reason is cut to {@link #CANCEL_REASON_CHARS} characters; a cancel or a welcome's
 * {@code rejected} list costs one pass over the attempts however many entries it has.
 *
 * <p>Nothing is queued without bound: messages to the server are computed from state (results
 * pending, credit owed, heartbeat due) by one writer, the thread in {@link #run()}, only while
 * the stream is ready to send; the state is bounded by the executions held (at most {@code 2 *
 * slots}), their results (no credit while {@code slots} results await their ack, and an
 * assignment arriving while attempts and results fill a hello, {@link #MAX_IN_FLIGHT}, is
 * refused) and at most {@link #MAX_REFUSED} refusals.
 *
 * <pre>{@code
 * Worker worker = Worker.builder("127.0.0.1:50051")
 *     .credential(System.getenv("TICKWHEEL_WORKER_CREDENTIAL"))
 *     .handler("reports.nightly", ctx -> render(ctx.payloadText(), ctx))
 *     .build();
 * Runtime.getRuntime().addShutdownHook(new Thread(() -> worker.stop(Duration.ofSeconds(30))));
 * worker.run();
 * }</pre>
 *
 * <p>Thread-safe. A worker runs once.
 */
public final class Worker {
  /** The version sent in every hello. */
  public static final String VERSION = "0.1.0";
  /** The most handlers a worker runs at once. */
  public static final int MAX_SLOTS = 10_000;

  static final Set<Status.Code> FATAL_CODES =
      EnumSet.of(
          Status.Code.UNAUTHENTICATED,
          Status.Code.PERMISSION_DENIED,
          Status.Code.INVALID_ARGUMENT,
          Status.Code.UNIMPLEMENTED);
  static final int RESULTS_PER_MESSAGE = 1000;
  static final int RESULT_MESSAGE_BYTES = 1024 * 1024;
  static final int ERROR_MAX_BYTES = 4096;
  static final int OUTPUT_MAX_BYTES = 16 * 1024;
  /** The most {@code hello.in_flight} entries a server takes. */
  static final int MAX_IN_FLIGHT = 20_000;
  /** The bounds a server's configuration takes (it refuses to start outside them). */
  static final Duration MIN_HEARTBEAT_INTERVAL = Duration.ofMillis(50);

  static final Duration MAX_HEARTBEAT_INTERVAL = Duration.ofMinutes(5);

  /**
   * The most refusals of assignments beyond the credit held unacknowledged; one more ends the
   * stream as a protocol error (a server that ignores the credit and never acks would grow them
   * without end).
   */
  static final int MAX_REFUSED = 1000;

  /** What a canceled attempt keeps of the server's reason. */
  static final int CANCEL_REASON_CHARS = 1024;
  /** How long a clean close waits for the last writes and for the server to end the stream. */
  static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(1);
  static final int MAX_RECEIVE_BYTES = 64 * 1024 * 1024;

  private static final Pattern WORKER_ID = Pattern.compile("[A-Za-z0-9_.:-]{1,128}");
  private static final Pattern HANDLER_NAME = Pattern.compile("[A-Za-z0-9_.:-]{1,200}");
  private static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);
  private static final Metadata.Key<String> SDK =
      Metadata.Key.of("x-tickwheel-sdk", Metadata.ASCII_STRING_MARSHALLER);
  private static final System.Logger LOG = System.getLogger("dev.tickwheel.worker");

  /** One hand-out of one execution. */
  record Key(String executionId, int delivery) {
    static Key of(InFlightExecution e) {
      return new Key(e.getExecutionId(), e.getDelivery());
    }

    InFlightExecution toProto() {
      return InFlightExecution.newBuilder()
          .setExecutionId(executionId)
          .setDelivery(delivery)
          .build();
    }

    @Override
    public String toString() {
      return executionId + "#" + delivery;
    }
  }

  /** The stream ended or the server misbehaved: reconnect. */
  static final class SessionLost extends RuntimeException {
    private static final long serialVersionUID = 1L;

    SessionLost(String message) {
      super(message);
    }
  }

  private final List<String> addresses;
  private final String credential;
  private final String workerId;
  private final int slots;
  private final int maxHeld;
  private final Map<String, Handler> handlers;
  private final Duration reconnectInitialBackoff;
  private final Duration reconnectMaxBackoff;
  private final Duration defaultHeartbeatInterval;
  private final int serverSilenceIntervals;
  private final Duration welcomeTimeout;
  private final Duration cancelGrace;
  private final Clock clock;
  private final DoubleSupplier random;
  private final Function<String, ManagedChannel> channels;
  private final System.Logger log;
  /** Failed streams and reconnects: a line an outage, not one a try (the run thread's). */
  private final OutageLog outages;
  /** When the last "connected" line was INFO (the clock's millis; the run thread's). */
  private long saidConnectedAt = -1;

  private final ReentrantLock lock = new ReentrantLock();
  /** Signalled on every change of state someone may wait for. */
  private final Condition changed = lock.newCondition();
  // Guarded by lock.
  private final Map<Key, Attempt> attempts = new LinkedHashMap<>();
  private final Map<Key, ExecutionResult> unacked = new LinkedHashMap<>();
  /** The keys in unacked of refusals of assignments beyond the credit (at most MAX_REFUSED). */
  private final Set<Key> refused = new HashSet<>();
  /** What a server's messages make the worker log, one line a kind a minute. */
  private final Limited limited;
  private Session session;
  private boolean started;
  private boolean stopping;
  private boolean shutdown;
  private boolean finished;
  private boolean welcomedThisRound;
  /** The last stream was welcomed and lasted a heartbeat interval. */
  private boolean streamWorked;
  private int sessions;

  private final ThreadPoolExecutor pool;
  private final ScheduledThreadPoolExecutor timers;

  private Worker(Builder b) {
    this.addresses = List.copyOf(b.addresses);
    this.credential = b.credential;
    this.workerId = b.workerId == null ? defaultWorkerId() : b.workerId;
    this.slots = b.slots;
    this.maxHeld = 2 * b.slots;
    this.handlers = Map.copyOf(b.handlers);
    this.reconnectInitialBackoff = b.reconnectInitialBackoff;
    this.reconnectMaxBackoff = b.reconnectMaxBackoff;
    this.defaultHeartbeatInterval = b.defaultHeartbeatInterval;
    this.serverSilenceIntervals = b.serverSilenceIntervals;
    this.welcomeTimeout = b.welcomeTimeout;
    this.cancelGrace = b.cancelGrace;
    this.clock = b.clock;
    this.random = b.random;
    this.channels = b.channels != null ? b.channels : channelFactory(b.tls);
    this.log = b.logger;
    this.outages = new OutageLog(b.logger, "worker " + workerId, b.clock);
    this.limited = new Limited(b.logger, b.clock);
    AtomicInteger threads = new AtomicInteger();
    // Every held attempt fits in the queue (held <= 2 * slots), so a hand-off never blocks; the
    // pool never exceeds `slots` threads.
    this.pool =
        new ThreadPoolExecutor(
            slots,
            slots,
            30,
            TimeUnit.SECONDS,
            new ArrayBlockingQueue<>(maxHeld),
            r -> daemon(r, "tickwheel-handler-" + threads.incrementAndGet()));
    this.pool.allowCoreThreadTimeOut(true);
    this.timers = new ScheduledThreadPoolExecutor(1, r -> daemon(r, "tickwheel-worker-timer"));
    this.timers.setRemoveOnCancelPolicy(true);
  }

  /** A builder for a worker of the server at {@code address} ({@code host:port}). */
  public static Builder builder(String address) {
    return builder(List.of(Objects.requireNonNull(address, "address")));
  }

  /**
   * A builder for a worker of a cluster: each stream goes to the next address of the list, round
   * robin, so a reconnect after a drain or a lost server tries another one.
   */
  public static Builder builder(List<String> addresses) {
    return new Builder(addresses);
  }

  /** {@code <hostname>-<pid>-<6 random hex>}: unique per process, readable in logs. */
  public static String defaultWorkerId() {
    String host;
    try {
      host = InetAddress.getLocalHost().getHostName();
    } catch (Exception e) {
      host = "worker";
    }
    host = host.replaceAll("[^A-Za-z0-9_.:-]", "-");
    if (host.isEmpty()) {
      host = "worker";
    }
    byte[] random = new byte[3];
    ThreadLocalRandom.current().nextBytes(random);
    String suffix = "-" + ProcessHandle.current().pid() + "-" + HexFormat.of().formatHex(random);
    return host.substring(0, Math.min(host.length(), 128 - suffix.length())) + suffix;
  }

  // --- public surface ------------------------------------------------------------------------

  /** This process's worker id, stable across reconnects. */
  public String workerId() {
    return workerId;
  }

  /** How many handlers run at once; the initial credit of every stream. */
  public int slots() {
    return slots;
  }

  /** How many streams were welcomed so far. */
  public int sessions() {
    lock.lock();
    try {
      return sessions;
    } finally {
      lock.unlock();
    }
  }

  /** True while the current stream has been told by its server to drain. */
  boolean draining() {
    lock.lock();
    try {
      return session != null && session.draining;
    } finally {
      lock.unlock();
    }
  }

  /** Tests: the attempts held, decided ones included until their handler has returned. */
  int heldCount() {
    lock.lock();
    try {
      return attempts.size();
    } finally {
      lock.unlock();
    }
  }

  /** True once {@link #stop} was called. */
  public boolean stopping() {
    lock.lock();
    try {
      return stopping;
    } finally {
      lock.unlock();
    }
  }

  /** True while a stream is open and welcomed. */
  public boolean connected() {
    lock.lock();
    try {
      return session != null;
    } finally {
      lock.unlock();
    }
  }

  /** Executions whose outcome is not yet decided, in the order they arrived. */
  public List<InFlightExecution> inFlight() {
    lock.lock();
    try {
      List<InFlightExecution> out = new ArrayList<>();
      for (Attempt a : attempts.values()) {
        if (!a.decided) {
          out.add(a.key.toProto());
        }
      }
      return out;
    } finally {
      lock.unlock();
    }
  }

  /** Results reported but not yet acknowledged by a server. */
  public List<InFlightExecution> unacked() {
    lock.lock();
    try {
      List<InFlightExecution> out = new ArrayList<>();
      for (Key key : unacked.keySet()) {
        out.add(key.toProto());
      }
      return out;
    } finally {
      lock.unlock();
    }
  }

  /**
   * Waits until a stream is welcomed (returns at once if one is).
   *
   * @return true when connected, false when {@code timeout} passed first or the worker finished
   */
  public boolean awaitConnected(Duration timeout) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    lock.lock();
    try {
      while (session == null) {
        long left = deadline - System.nanoTime();
        if (finished || left <= 0) {
          return false;
        }
        changed.awaitNanos(left);
      }
      return true;
    } finally {
      lock.unlock();
    }
  }

  /**
   * Connects, serves and reconnects until {@link #stop}; blocks the calling thread, which is the
   * only writer of the stream.
   *
   * <p>On return every attempt has been told to stop (context cancelled, thread interrupted;
   * handlers that ignore both may still be running on their daemon threads), and results not yet
   * acknowledged are left to the server, which re-delivers those executions. Interrupting the
   * thread that runs it ends it too, as {@code stop(Duration.ZERO)} would.
   *
   * @throws WorkerFatalException when the server refuses the worker
   * @throws IllegalStateException when called a second time
   */
  public void run() {
    lock.lock();
    try {
      if (started) {
        throw new IllegalStateException("a Worker runs once");
      }
      started = true;
    } finally {
      lock.unlock();
    }
    int failures = 0;
    int next = 0;
    try {
      while (!isShutdown()) {
        String address = addresses.get(next);
        next = (next + 1) % addresses.size();
        setWelcomedThisRound(false);
        try {
          runSession(address);
          if (!isShutdown()) {
            if (welcomedThisRound() && !streamWorked()) {
              throw new SessionLost(
                  "the server ended the stream within a heartbeat interval of its welcome");
            }
            limitedLog("closed", Level.INFO, "stream to {0} closed; reconnecting", address);
          }
        } catch (SessionLost e) {
          outages.failed(stage(address), ServerText.said(e.getMessage(), credential));
        } catch (io.grpc.StatusRuntimeException e) {
          TickwheelException status = TickwheelException.from(e);
          // The status and the first line of its message, bounded, the credential masked.
          String said = ServerText.said(status.code() + ": " + status.statusMessage(), credential);
          if (FATAL_CODES.contains(status.code())) {
            log.log(
                Level.ERROR, "{0} refused the worker {1}: {2}; stopping", address, workerId, said);
            throw new WorkerFatalException(
                address + " refused the worker: " + said, status.code(), status);
          }
          outages.failed(stage(address), said);
        } catch (RuntimeException e) {
          // A runtime bug must not kill the worker: keep serving.
          log.log(Level.ERROR, "stream to " + address + " failed", e);
        }
        // A stream that lasted a heartbeat interval worked: the next connect is quick again. One
        // that ended sooner (a welcome, then at once a close, a drain or an error, in a loop)
        // backs off as a refused connect does, and its outage goes on.
        failures = streamWorked() ? 0 : Math.min(failures + 1, 62);
        if (isShutdown()) {
          break;
        }
        Duration delay =
            Backoff.reconnectDelay(
                failures, reconnectInitialBackoff, reconnectMaxBackoff, random.getAsDouble());
        waitUntilShutdown(delay);
      }
    } finally {
      abandonAll();
    }
  }

  /**
   * Stops taking work, lets in-flight attempts finish, then ends {@link #run()}; for SIGTERM, call
   * it from a shutdown hook.
   *
   * <p>Waits up to {@code grace} until every attempt is decided and every result acknowledged
   * (reconnecting meanwhile if the stream drops), then closes the stream and stops what still runs
   * without reporting it: the server re-delivers those, and any result left unacknowledged. Returns
   * when {@link #run()} has returned (at once when it never started).
   */
  public void stop(Duration grace) {
    long deadline = System.nanoTime() + Math.max(0, grace.toNanos());
    lock.lock();
    try {
      stopping = true;
      changed.signalAll();
      if (!started) {
        shutdown = true;
        return;
      }
      while (!finished && !quiet()) {
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          break;
        }
        changed.awaitNanos(left);
      }
      shutdown = true;
      changed.signalAll();
      while (!finished) {
        changed.await();
      }
    } catch (InterruptedException e) {
      shutdown = true;
      changed.signalAll();
      Thread.currentThread().interrupt();
    } finally {
      lock.unlock();
    }
  }

  // --- one stream ----------------------------------------------------------------------------

  /** The state of one Pull stream; guarded by the worker's lock. */
  private final class Session {
    ClientCallStreamObserver<PullRequest> requests;
    ServerWelcome welcome;
    RuntimeException failure;
    boolean serverClosed;
    boolean ended;
    long intervalNanos = defaultHeartbeatInterval.toNanos();
    long lastSeen = System.nanoTime();
    long nextHeartbeat;
    int outstanding = slots;
    final LinkedHashSet<Key> unsent = new LinkedHashSet<>();
    boolean heartbeatDue;
    boolean draining;
    Instant drainDeadline;
    boolean closing;
    boolean halfClosed;
    long closingSince;
    /** The welcome's server id, fit for a log line. */
    String serverId = "";
    /** When the stream counts as having worked (nanoTime): its welcome plus an interval. */
    long healthyAt;
  }

  private void runSession(String address) {
    ManagedChannel channel = channels.apply(address);
    Session s = new Session();
    try {
      Metadata headers = new Metadata();
      headers.put(AUTHORIZATION, "Bearer " + credential);
      headers.put(SDK, "java/" + VERSION);
      WorkerServiceGrpc.WorkerServiceStub stub =
          WorkerServiceGrpc.newStub(channel)
              .withInterceptors(MetadataUtils.newAttachHeadersInterceptor(headers))
              .withMaxInboundMessageSize(MAX_RECEIVE_BYTES);
      stub.pull(new Responses(s));
      lock.lock();
      try {
        s.requests.onNext(PullRequest.newBuilder().setHello(hello()).build());
      } finally {
        lock.unlock();
      }
      if (!handshake(s)) {
        return; // the worker is stopping
      }
      serve(s);
    } finally {
      lock.lock();
      try {
        if (session == s) {
          session = null;
        }
        streamWorked =
            s.welcome != null && s.healthyAt != 0 && System.nanoTime() - s.healthyAt >= 0;
        s.ended = true;
        changed.signalAll();
      } finally {
        lock.unlock();
      }
      s.requests.cancel("the stream is over", null); // no effect once it ended
      channel.shutdownNow();
    }
  }

  /** Reads grpc-java's callbacks into the session's state. */
  private final class Responses implements ClientResponseObserver<PullRequest, PullResponse> {
    private final Session s;

    Responses(Session s) {
      this.s = s;
    }

    @Override
    public void beforeStart(ClientCallStreamObserver<PullRequest> requests) {
      s.requests = requests;
      requests.setOnReadyHandler(Worker.this::signal);
    }

    @Override
    public void onNext(PullResponse message) {
      List<JobContext> toCancel = new ArrayList<>();
      lock.lock();
      try {
        if (s.ended || s.failure != null) {
          return;
        }
        s.lastSeen = System.nanoTime();
        try {
          receive(s, message, toCancel);
        } catch (SessionLost e) {
          s.failure = e;
        }
        changed.signalAll();
      } finally {
        lock.unlock();
      }
      toCancel.forEach(JobContext::runCancelListeners);
    }

    @Override
    public void onError(Throwable t) {
      lock.lock();
      try {
        if (s.failure == null) {
          s.failure =
              t instanceof io.grpc.StatusRuntimeException sre
                  ? sre
                  : Status.fromThrowable(t).asRuntimeException();
        }
        s.serverClosed = true;
        changed.signalAll();
      } finally {
        lock.unlock();
      }
    }

    @Override
    public void onCompleted() {
      lock.lock();
      try {
        s.serverClosed = true;
        changed.signalAll();
      } finally {
        lock.unlock();
      }
    }
  }

  /**
   * Waits for the welcome within the welcome timeout and applies it.
   *
   * @return false when the worker started stopping first
   */
  private boolean handshake(Session s) {
    long deadline = System.nanoTime() + welcomeTimeout.toNanos();
    List<JobContext> toCancel = new ArrayList<>();
    lock.lock();
    try {
      while (s.welcome == null) {
        if (shutdown) {
          return false;
        }
        if (s.failure != null) {
          throw s.failure;
        }
        if (s.serverClosed) {
          throw new SessionLost("the server closed the stream before its welcome");
        }
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          throw new SessionLost("no welcome within " + welcomeTimeout.toMillis() + " ms");
        }
        changed.awaitNanos(left);
      }
      ServerWelcome w = s.welcome;
      s.serverId = ServerText.said(w.getServerId(), credential);
      s.intervalNanos = heartbeatInterval(w, s.serverId).toNanos();
      s.lastSeen = System.nanoTime();
      s.nextHeartbeat = s.lastSeen + s.intervalNanos;
      s.healthyAt = s.lastSeen + s.intervalNanos;
      if (w.getRejectedCount() > 0) {
        reject(w.getRejectedList(), toCancel);
      }
      s.unsent.addAll(unacked.keySet());
      session = s;
      welcomedThisRound = true;
      sessions++;
      changed.signalAll();
      // Through an outage (streams welcomed, then ended at once, in a loop) this line too is one a
      // minute; the outage's end is logged once a stream lasted a heartbeat interval (serve).
      long now = clock.millis();
      boolean quietLine =
          outages.down()
              && saidConnectedAt >= 0
              && now - saidConnectedAt < OutageLog.STILL_EVERY.toMillis();
      if (!quietLine) {
        saidConnectedAt = now;
      }
      log.log(
          quietLine ? Level.DEBUG : Level.INFO,
          "worker {0} connected to server {1} ({2} in flight, {3} results to resend)",
          workerId,
          s.serverId,
          w.getReattachedCount(),
          s.unsent.size());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new SessionLost("interrupted");
    } finally {
      lock.unlock();
    }
    toCancel.forEach(JobContext::runCancelListeners);
    return true;
  }

  /**
   * The welcome's heartbeat interval clamped into [{@link #MIN_HEARTBEAT_INTERVAL}, {@link
   * #MAX_HEARTBEAT_INTERVAL}], with a WARNING (a line a minute) when it was out of them; the
   * default when it has none (or none positive). Lock held.
   */
  private Duration heartbeatInterval(ServerWelcome w, String serverId) {
    if (!w.hasHeartbeatInterval()) {
      return defaultHeartbeatInterval;
    }
    if (!Bounds.valid(w.getHeartbeatInterval())) {
      throw new SessionLost("protocol error: the welcome's heartbeat_interval is out of range");
    }
    long seconds = w.getHeartbeatInterval().getSeconds();
    int nanos = w.getHeartbeatInterval().getNanos();
    if (seconds < 0 || (seconds == 0 && nanos <= 0)) {
      return defaultHeartbeatInterval;
    }
    Duration announced =
        seconds > MAX_HEARTBEAT_INTERVAL.getSeconds()
            ? MAX_HEARTBEAT_INTERVAL.plusSeconds(1)
            : Duration.ofSeconds(seconds, Math.max(0, Math.min(999_999_999, nanos)));
    Duration d = announced;
    if (d.compareTo(MIN_HEARTBEAT_INTERVAL) < 0) {
      d = MIN_HEARTBEAT_INTERVAL;
    } else if (d.compareTo(MAX_HEARTBEAT_INTERVAL) > 0) {
      d = MAX_HEARTBEAT_INTERVAL;
    }
    if (!d.equals(announced)) {
      limited.log(
          "heartbeat interval",
          Level.WARNING,
          "server {0} announced a heartbeat interval of {1} s; using {2} s",
          serverId,
          Double.toString(seconds + nanos / 1e9),
          Double.toString(d.toMillis() / 1000.0));
    }
    return d;
  }

  /**
   * The writer: sends what the state calls for while the stream is ready, until the session ends.
   * A clean end (drain complete, or the worker stops) sends the pending results, half-closes and
   * gives the server {@link #CLOSE_TIMEOUT} to end its side, so it sees a finished stream rather
   * than a canceled one.
   *
   * @throws SessionLost or the stream's status when it fails
   */
  private void serve(Session s) {
    for (; ; ) {
      PullRequest message = null;
      boolean halfClose = false;
      lock.lock();
      try {
        long now = System.nanoTime();
        if (s.failure != null) {
          throw s.failure;
        }
        if (s.serverClosed) {
          if (s.closing) {
            return;
          }
          throw new SessionLost("the server closed the stream");
        }
        if (!s.closing && sessionShouldEnd(s)) {
          s.closing = true;
          s.closingSince = now;
        }
        long silenceLimit = s.intervalNanos * serverSilenceIntervals;
        if (!s.closing && now - s.lastSeen >= silenceLimit) {
          throw new SessionLost(
              "no message from the server for "
                  + TimeUnit.NANOSECONDS.toMillis(silenceLimit)
                  + " ms: presumed dead");
        }
        if (s.closing && now - s.closingSince >= CLOSE_TIMEOUT.toNanos()) {
          return; // the server did not end its side in time
        }
        if (now - s.nextHeartbeat >= 0) {
          outages.ok(); // the stream lasted a heartbeat interval: an outage is over
          s.heartbeatDue = true;
          s.nextHeartbeat = now + s.intervalNanos;
        }
        if (!s.halfClosed && s.requests.isReady()) {
          message = nextMessage(s);
          if (message == null && s.closing && s.unsent.isEmpty()) {
            s.halfClosed = true;
            halfClose = true;
          }
        }
        if (message == null && !halfClose) {
          long wait = s.nextHeartbeat - now;
          if (!s.closing) {
            wait = Math.min(wait, s.lastSeen + silenceLimit - now);
            if (s.draining && s.drainDeadline != null) {
              wait = Math.min(wait, nanosUntil(s.drainDeadline));
            }
          } else {
            wait = Math.min(wait, s.closingSince + CLOSE_TIMEOUT.toNanos() - now);
          }
          changed.awaitNanos(Math.max(1, wait));
          continue;
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new SessionLost("interrupted");
      } finally {
        lock.unlock();
      }
      if (halfClose) {
        s.requests.onCompleted(); // then only the server's end is awaited
      } else {
        s.requests.onNext(message);
      }
    }
  }

  /** The next message the state calls for, or null; results first, then credit, then heartbeat. */
  private PullRequest nextMessage(Session s) {
    if (!s.unsent.isEmpty()) {
      WorkerResults.Builder batch = WorkerResults.newBuilder();
      int bytes = 0;
      for (Iterator<Key> it = s.unsent.iterator(); it.hasNext(); ) {
        ExecutionResult result = unacked.get(it.next());
        if (result != null) {
          int size = result.getSerializedSize() + 16;
          if (batch.getResultsCount() > 0
              && (batch.getResultsCount() >= RESULTS_PER_MESSAGE
                  || bytes + size > RESULT_MESSAGE_BYTES)) {
            break; // this one goes in the next message
          }
          bytes += size;
          batch.addResults(result);
        }
        it.remove();
      }
      if (batch.getResultsCount() > 0) {
        return PullRequest.newBuilder().setResult(batch).build();
      }
    }
    int credit = grantable(s);
    if (credit > 0) {
      s.outstanding += credit;
      return PullRequest.newBuilder()
          .setCredit(WorkerCredit.newBuilder().setCredits(credit))
          .build();
    }
    if (s.closing) {
      return null;
    }
    if (s.heartbeatDue) {
      s.heartbeatDue = false;
      return PullRequest.newBuilder().setHeartbeat(heartbeat()).build();
    }
    return null;
  }

  /** True when the worker shuts down, or a drain is complete or past its deadline. */
  private boolean sessionShouldEnd(Session s) {
    if (shutdown) {
      return true;
    }
    if (!s.draining) {
      return false;
    }
    if (quiet()) {
      limited.log("drained", Level.INFO, "drained: every attempt decided and acknowledged");
      return true;
    }
    if (s.drainDeadline != null && nanosUntil(s.drainDeadline) <= 0) {
      limited.log(
          "drained", Level.INFO, "drain deadline passed with {0} in flight", inFlightCount());
      return true;
    }
    return false;
  }

  /** Applies one server message; lock held. */
  private void receive(Session s, PullResponse message, List<JobContext> toCancel) {
    if (s.welcome == null) {
      if (message.hasWelcome()) {
        s.welcome = message.getWelcome();
        return;
      }
      throw new SessionLost("protocol error: expected welcome, got " + message.getMessageCase());
    }
    switch (message.getMessageCase()) {
      case ASSIGNMENT -> {
        List<Assignment> assignments = message.getAssignment().getAssignmentsList();
        for (Assignment assignment : assignments) {
          String breach = Bounds.breach(assignment);
          if (breach != null) { // nothing of a message with a field over its bound is taken
            throw new SessionLost("protocol error: " + breach);
          }
        }
        for (Assignment assignment : assignments) {
          accept(s, assignment);
        }
      }
      case CANCEL -> {
        String reason = ServerText.cut(message.getCancel().getReason(), CANCEL_REASON_CHARS);
        for (Attempt a : matching(message.getCancel().getExecutionsList())) {
          if (a.cancel(reason.isEmpty() ? "canceled by the server" : reason)) {
            toCancel.add(a.context);
          }
        }
      }
      case ACK -> {
        for (ResultAck ack : message.getAck().getAcksList()) {
          Key key = new Key(ack.getExecutionId(), ack.getDelivery());
          boolean held = unacked.remove(key) != null;
          refused.remove(key);
          s.unsent.remove(key);
          if (!ack.getAccepted() && held) {
            limited.log(
                "result rejected",
                Level.WARNING,
                "server rejected the result for {0}: {1}",
                key,
                ServerText.said(ack.getReason(), credential));
          }
        }
      }
      case DRAIN -> {
        ServerDrain drain = message.getDrain();
        if (drain.hasDeadlineAt() && !Bounds.valid(drain.getDeadlineAt())) {
          throw new SessionLost("protocol error: the drain's deadline_at is out of range");
        }
        s.draining = true;
        if (drain.hasDeadlineAt()) {
          s.drainDeadline = instant(drain.getDeadlineAt());
        }
        limited.log(
            "drains",
            Level.INFO,
            "server {0} drains: {1}",
            s.serverId,
            ServerText.said(drain.getReason(), credential));
      }
      case WELCOME ->
          limited.log("welcome", Level.WARNING, "ignoring a second welcome from {0}", s.serverId);
      default -> {
        // A server heartbeat: seeing it was the point.
      }
    }
  }

  // --- state (lock held) -----------------------------------------------------------------------

  private WorkerHello hello() {
    Map<Key, InFlightExecution> held = new LinkedHashMap<>();
    for (Attempt a : attempts.values()) {
      if (!a.decided) {
        held.put(a.key, a.key.toProto());
      }
    }
    for (Key key : unacked.keySet()) {
      held.putIfAbsent(key, key.toProto());
    }
    return WorkerHello.newBuilder()
        .setWorkerId(workerId)
        .setVersion("java/" + VERSION)
        .addAllHandlers(new TreeMap<>(handlers).keySet())
        .setHttp(false)
        .setSlots(slots)
        .addAllInFlight(held.values().stream().limit(MAX_IN_FLIGHT).toList())
        .build();
  }

  private WorkerHeartbeat heartbeat() {
    WorkerHeartbeat.Builder beat = WorkerHeartbeat.newBuilder();
    for (Attempt a : attempts.values()) {
      if (!a.decided) {
        beat.addExecutions(
            ExecutionProgress.newBuilder()
                .setExecutionId(a.key.executionId())
                .setDelivery(a.key.delivery())
                .setProgress(a.context.progress()));
      }
    }
    return beat.build();
  }

  private int grantable(Session s) {
    if (stopping || shutdown || s.draining || s.closing || unacked.size() >= slots) {
      return 0;
    }
    return Math.max(0, slots - attempts.size() - s.outstanding);
  }

  /** Nothing left to report: every attempt decided and every result acknowledged. */
  private boolean quiet() {
    if (!unacked.isEmpty()) {
      return false;
    }
    for (Attempt a : attempts.values()) {
      if (!a.decided) {
        return false;
      }
    }
    return true;
  }

  private int inFlightCount() {
    int n = 0;
    for (Attempt a : attempts.values()) {
      n += a.decided ? 0 : 1;
    }
    return n;
  }

  /**
   * Attempts of {@code executions}, each once; delivery 0 matches every delivery. One pass over the
   * attempts at most, however many entries a server sends (a scan an entry would let one message
   * cost entries times attempts).
   */
  private Collection<Attempt> matching(List<InFlightExecution> executions) {
    Map<Key, Attempt> found = new LinkedHashMap<>();
    Map<String, List<Attempt>> byId = null;
    for (InFlightExecution execution : executions) {
      if (execution.getDelivery() != 0) {
        Attempt a = attempts.get(Key.of(execution));
        if (a != null) {
          found.put(a.key, a);
        }
        continue;
      }
      if (byId == null) {
        byId = new HashMap<>();
        for (Attempt a : attempts.values()) {
          byId.computeIfAbsent(a.key.executionId(), id -> new ArrayList<>()).add(a);
        }
      }
      for (Attempt a : byId.getOrDefault(execution.getExecutionId(), List.of())) {
        found.put(a.key, a);
      }
    }
    return found.values();
  }

  /**
   * Stops the attempts a welcome's rejected list names, unreported, and drops their unacknowledged
   * results (a result for a delivery this stream does not hold can never count). One pass over the
   * list, the attempts and the results at most.
   */
  private void reject(List<InFlightExecution> rejected, List<JobContext> toCancel) {
    for (Attempt a : matching(rejected)) {
      if (a.reject("the server gave this execution to another worker")) {
        toCancel.add(a.context);
      }
    }
    Set<Key> deliveries = new HashSet<>();
    Set<String> everyDelivery = new HashSet<>();
    for (InFlightExecution r : rejected) {
      if (r.getDelivery() == 0) {
        everyDelivery.add(r.getExecutionId());
      } else {
        deliveries.add(Key.of(r));
      }
    }
    int dropped = 0;
    for (Iterator<Key> it = unacked.keySet().iterator(); it.hasNext(); ) {
      Key key = it.next();
      if (deliveries.contains(key) || everyDelivery.contains(key.executionId())) {
        it.remove();
        refused.remove(key);
        dropped++;
      }
    }
    if (dropped > 0) {
      log.log(
          Level.WARNING,
          "dropped {0} results: the server gave their executions to another worker",
          dropped);
    }
  }

  private void accept(Session s, Assignment assignment) {
    Key key = new Key(assignment.getExecutionId(), assignment.getDelivery());
    s.outstanding = Math.max(0, s.outstanding - 1);
    if (attempts.containsKey(key)) {
      limited.log("duplicate", Level.WARNING, "duplicate assignment {0} ignored", key);
      return;
    }
    if (unacked.containsKey(key)) {
      s.unsent.add(key); // finished, but the server did not see the result yet
      return;
    }
    // Beyond twice the slots held, or once attempts and unacknowledged results fill a hello (a
    // server that never acks; the credit never gets there): refused, so that neither grows
    // without bound.
    if (attempts.size() >= maxHeld || attempts.size() + unacked.size() >= MAX_IN_FLIGHT) {
      limited.log(
          "beyond credit",
          Level.ERROR,
          "assignment {0} beyond this worker''s credit; refused",
          key);
      if (refused.size() >= MAX_REFUSED) {
        forgetRefused(s);
        throw new SessionLost(
            "protocol error: more than "
                + MAX_REFUSED
                + " assignments beyond the credit unacknowledged");
      }
      refused.add(key);
      record(
          key,
          result(assignment, ResultOutcome.RESULT_OUTCOME_FAILED_RETRYABLE)
              .setError("worker " + workerId + " over capacity: the assignment exceeded its credit")
              .build());
      return;
    }
    Attempt attempt = new Attempt(key, assignment);
    attempts.put(key, attempt);
    if (assignment.hasDeadlineAt()) {
      long left = nanosUntil(instant(assignment.getDeadlineAt()));
      attempt.deadlineTimer =
          timers.schedule(attempt::deadlinePassed, Math.max(1_000_000, left), TimeUnit.NANOSECONDS);
    }
    try {
      pool.execute(attempt);
    } catch (RejectedExecutionException e) {
      // Only when the worker is stopping: the server re-delivers it.
      attempt.reject("the worker stopped");
      attempt.finish();
    }
  }

  /**
   * Drops every refusal not yet acknowledged (the server hands those executions out again once
   * their deliveries time out); the results of real attempts stay.
   */
  private void forgetRefused(Session s) {
    for (Key key : refused) {
      unacked.remove(key);
      s.unsent.remove(key);
    }
    refused.clear();
    changed.signalAll();
  }

  private void record(Key key, ExecutionResult result) {
    unacked.put(key, result);
    if (session != null) {
      session.unsent.add(key);
    }
    changed.signalAll();
  }

  private ExecutionResult.Builder result(Assignment a, ResultOutcome outcome) {
    return ExecutionResult.newBuilder()
        .setExecutionId(a.getExecutionId())
        .setDelivery(a.getDelivery())
        .setAttempt(a.getAttempt())
        .setOutcome(outcome)
        .setFinishedAt(timestamp(clock.instant()));
  }

  /** Stops every attempt without reporting it (the server re-delivers them); run() ends here. */
  private void abandonAll() {
    List<JobContext> toCancel = new ArrayList<>();
    lock.lock();
    try {
      shutdown = true;
      for (Attempt a : new ArrayList<>(attempts.values())) {
        if (a.reject("the worker stopped")) {
          toCancel.add(a.context);
        }
      }
    } finally {
      lock.unlock();
    }
    toCancel.forEach(JobContext::runCancelListeners);
    pool.shutdownNow();
    timers.shutdownNow();
    lock.lock();
    try {
      for (Attempt a : new ArrayList<>(attempts.values())) {
        if (!a.started) {
          a.finish();
        }
      }
      finished = true;
      changed.signalAll();
    } finally {
      lock.unlock();
    }
  }

  // --- small helpers -------------------------------------------------------------------------

  private void signal() {
    lock.lock();
    try {
      changed.signalAll();
    } finally {
      lock.unlock();
    }
  }

  /** {@code read} of the state, under the lock. */
  private boolean locked(BooleanSupplier read) {
    lock.lock();
    try {
      return read.getAsBoolean();
    } finally {
      lock.unlock();
    }
  }

  private boolean isShutdown() {
    return locked(() -> shutdown);
  }

  private boolean welcomedThisRound() {
    return locked(() -> welcomedThisRound);
  }

  private void setWelcomedThisRound(boolean value) {
    lock.lock();
    try {
      welcomedThisRound = value;
      streamWorked = false;
    } finally {
      lock.unlock();
    }
  }

  private boolean streamWorked() {
    return locked(() -> streamWorked);
  }

  /** What failed, in a log line: the stream a server welcomed, or a connect. */
  private String stage(String address) {
    return (welcomedThisRound() ? "the stream to " : "connecting to ") + address;
  }

  private void limitedLog(String kind, Level level, String format, Object... args) {
    lock.lock();
    try {
      limited.log(kind, level, format, args);
    } finally {
      lock.unlock();
    }
  }

  private void waitUntilShutdown(Duration delay) {
    long deadline = System.nanoTime() + delay.toNanos();
    lock.lock();
    try {
      while (!shutdown) {
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          return;
        }
        changed.awaitNanos(left);
      }
    } catch (InterruptedException e) {
      shutdown = true;
      Thread.currentThread().interrupt();
    } finally {
      lock.unlock();
    }
  }

  /** Nanoseconds from the clock's now to {@code at}, saturated. */
  private long nanosUntil(Instant at) {
    Duration left = Duration.between(clock.instant(), at);
    if (left.getSeconds() > 1_000_000_000L) {
      return Long.MAX_VALUE / 4;
    }
    if (left.getSeconds() < -1_000_000_000L) {
      return Long.MIN_VALUE / 4;
    }
    return left.toNanos();
  }

  /** A protobuf timestamp as an Instant, clamped to protobuf's range ({@link Bounds#instant}). */
  static Instant instant(Timestamp t) {
    return Bounds.instant(t);
  }

  private static Timestamp timestamp(Instant at) {
    return Timestamp.newBuilder().setSeconds(at.getEpochSecond()).setNanos(at.getNano()).build();
  }

  /** {@code text} cut to at most {@code limit} UTF-8 bytes, never inside a character. */
  static String truncateUtf8(String text, int limit) {
    byte[] bytes = text.getBytes(StandardCharsets.UTF_8);
    if (bytes.length <= limit) {
      return text;
    }
    int end = limit;
    while (end > 0 && (bytes[end] & 0xc0) == 0x80) {
      end--; // a continuation byte: back to the start of its character
    }
    return new String(bytes, 0, end, StandardCharsets.UTF_8);
  }

  private static Thread daemon(Runnable r, String name) {
    Thread t = new Thread(r, name);
    t.setDaemon(true);
    return t;
  }

  private static Function<String, ManagedChannel> channelFactory(TlsOptions tls) {
    ChannelCredentials credentials =
        tls == null ? InsecureChannelCredentials.create() : tls.channelCredentials();
    return address -> {
      ManagedChannelBuilder<?> builder = Grpc.newChannelBuilder(address, credentials);
      builder.userAgent("tickwheel-java-worker");
      if (tls != null) {
        tls.serverName().ifPresent(builder::overrideAuthority);
      }
      return builder.build();
    };
  }

  // --- one attempt ---------------------------------------------------------------------------

  /**
   * One hand-out held by the worker, from receipt until its handler has really returned. Its
   * outcome is decided exactly once (and reported unless rejected); its fields are guarded by the
   * worker's lock.
   */
  final class Attempt implements Runnable {
    final Key key;
    final Assignment assignment;
    final JobContext context;
    boolean decided;
    boolean rejected;
    boolean started;
    boolean stopRequested;
    boolean finished;
    String stopReason = "";
    Instant startedAt;
    Thread thread;
    ScheduledFuture<?> deadlineTimer;
    ScheduledFuture<?> graceTimer;

    Attempt(Key key, Assignment assignment) {
      this.key = key;
      this.assignment = assignment;
      this.context = new JobContext(assignment);
    }

    /** On a handler thread: runs the handler and decides from what it did. */
    @Override
    public void run() {
      Handler handler;
      lock.lock();
      try {
        if (finished) {
          return;
        }
        if (decided || stopRequested) {
          finish(); // stopped while it waited for a thread
          return;
        }
        started = true;
        startedAt = clock.instant();
        if (!assignment.getTarget().hasHandler()) {
          decide(
              ResultOutcome.RESULT_OUTCOME_FAILED_PERMANENT,
              assignment.getTarget().hasHttp()
                  ? "this worker does not run HTTP targets (the Python worker does)"
                  : "the assignment has no target",
              null,
              null);
          finish();
          return;
        }
        String name = assignment.getTarget().getHandler().getName();
        handler = handlers.get(name);
        if (handler == null) {
          decide(
              ResultOutcome.RESULT_OUTCOME_FAILED_PERMANENT,
              "no handler named \""
                  + truncateUtf8(name, 256)
                  + "\" in this worker (it serves: "
                  + String.join(", ", new TreeMap<>(handlers).keySet())
                  + ")",
              null,
              null);
          finish();
          return;
        }
        thread = Thread.currentThread();
      } finally {
        lock.unlock();
      }
      byte[] output = null;
      Throwable failure = null;
      try {
        output = handler.handle(context);
      } catch (Throwable t) {
        failure = t;
      }
      lock.lock();
      try {
        thread = null;
        Thread.interrupted(); // an interrupt meant for this attempt must not reach the next one
        if (stopRequested) {
          decide(ResultOutcome.RESULT_OUTCOME_CANCELED, "canceled: " + stopReason, null, null);
        } else if (failure == null) {
          decide(ResultOutcome.RESULT_OUTCOME_SUCCEEDED, "", output, null);
        } else if (failure instanceof PermanentException) {
          String message = failure.getMessage();
          decide(
              ResultOutcome.RESULT_OUTCOME_FAILED_PERMANENT,
              message == null || message.isEmpty() ? failure.getClass().getName() : message,
              null,
              null);
        } else if (failure instanceof RetryableException retryable) {
          decide(
              ResultOutcome.RESULT_OUTCOME_FAILED_RETRYABLE,
              retryable.getMessage() == null ? describe(failure) : retryable.getMessage(),
              null,
              retryable.retryAfter().orElse(null));
        } else {
          log.log(Level.WARNING, "handler for " + key + " failed", failure);
          decide(ResultOutcome.RESULT_OUTCOME_FAILED_RETRYABLE, describe(failure), null, null);
        }
        finish();
      } finally {
        lock.unlock();
      }
      if (failure instanceof VirtualMachineError e) {
        throw e;
      }
    }

    /**
     * The server canceled it: stop it and report CANCELED (at once when it has not started, when
     * the handler returns, or after the cancel grace). Returns true when the context must now run
     * its listeners (the caller does, without the lock).
     */
    boolean cancel(String reason) {
      if (decided || stopRequested) {
        return false;
      }
      stopRequested = true;
      stopReason = reason;
      context.markCancelled("canceled: " + reason);
      if (!started) {
        decide(
            ResultOutcome.RESULT_OUTCOME_CANCELED,
            "canceled before it started: " + reason,
            null,
            null);
        if (pool.remove(this)) {
          finish();
        }
        return true;
      }
      interrupt();
      if (cancelGrace.isZero()) {
        decide(ResultOutcome.RESULT_OUTCOME_CANCELED, "canceled: " + reason, null, null);
      } else {
        graceTimer =
            timers.schedule(
                () -> {
                  lock.lock();
                  try {
                    decide(
                        ResultOutcome.RESULT_OUTCOME_CANCELED, "canceled: " + reason, null, null);
                  } finally {
                    lock.unlock();
                  }
                },
                cancelGrace.toNanos(),
                TimeUnit.NANOSECONDS);
      }
      return true;
    }

    /** Stop it without reporting: it is no longer this worker's. Same return as cancel. */
    boolean reject(String reason) {
      if (decided) {
        return false;
      }
      decided = true;
      rejected = true;
      stopRequested = true;
      stopReason = reason;
      context.markCancelled(reason);
      if (!started) {
        if (pool.remove(this)) {
          finish();
        }
      } else {
        interrupt();
      }
      changed.signalAll();
      return true;
    }

    /** On the timer thread: the deadline passed; TIMED_OUT now. */
    void deadlinePassed() {
      lock.lock();
      try {
        if (decided) {
          return;
        }
        Instant at = context.deadlineAt().orElse(null);
        stopRequested = true;
        stopReason = "deadline passed";
        decide(
            ResultOutcome.RESULT_OUTCOME_TIMED_OUT,
            started
                ? "attempt still running at its deadline " + at
                : "deadline passed before a slot was free",
            null,
            null);
        context.markCancelled("deadline passed");
        if (!started) {
          if (pool.remove(this)) {
            finish();
          }
        } else {
          interrupt();
        }
      } finally {
        lock.unlock();
      }
      context.runCancelListeners();
    }

    private void interrupt() {
      if (thread != null) {
        thread.interrupt();
      }
    }

    /** Decides the outcome once; reports it unless rejected. */
    void decide(ResultOutcome outcome, String error, byte[] output, Duration retryAfter) {
      if (decided) {
        return;
      }
      decided = true;
      changed.signalAll();
      if (rejected) {
        return;
      }
      ExecutionResult.Builder r =
          result(assignment, outcome).setError(truncateUtf8(error, ERROR_MAX_BYTES));
      if (output != null && output.length > 0) {
        r.setOutput(ByteString.copyFrom(output, 0, Math.min(output.length, OUTPUT_MAX_BYTES)));
      }
      if (retryAfter != null) {
        r.setRetryAfter(
            com.google.protobuf.Duration.newBuilder()
                .setSeconds(retryAfter.getSeconds())
                .setNanos(retryAfter.getNano()));
      }
      if (startedAt != null) {
        r.setStartedAt(timestamp(startedAt));
      }
      record(key, r.build());
    }

    /** The handler has returned (or never will run): the attempt no longer holds a slot. */
    void finish() {
      if (finished) {
        return;
      }
      finished = true;
      if (deadlineTimer != null) {
        deadlineTimer.cancel(false);
      }
      if (graceTimer != null) {
        graceTimer.cancel(false);
      }
      attempts.remove(key);
      changed.signalAll();
    }
  }

  private static String describe(Throwable t) {
    String message = t.getMessage();
    return message == null || message.isEmpty()
        ? t.getClass().getName()
        : t.getClass().getName() + ": " + message;
  }

  // --- builder -------------------------------------------------------------------------------

  /** Options of a {@link Worker}, checked as they are set; {@link #build()} checks the rest. */
  public static final class Builder {
    private final List<String> addresses;
    private String credential;
    private String workerId;
    private int slots = 4;
    private TlsOptions tls;
    private final Map<String, Handler> handlers = new LinkedHashMap<>();
    private Duration reconnectInitialBackoff = Duration.ofMillis(200);
    private Duration reconnectMaxBackoff = Duration.ofSeconds(15);
    private Duration defaultHeartbeatInterval = Duration.ofSeconds(5);
    private int serverSilenceIntervals = 3;
    private Duration welcomeTimeout = Duration.ofSeconds(10);
    private Duration cancelGrace = Duration.ofSeconds(2);
    private Clock clock = Clock.systemUTC();
    private System.Logger logger = LOG;
    private DoubleSupplier random = () -> ThreadLocalRandom.current().nextDouble();
    private Function<String, ManagedChannel> channels;

    private Builder(List<String> addresses) {
      Objects.requireNonNull(addresses, "addresses");
      if (addresses.isEmpty()) {
        throw new IllegalArgumentException("at least one address (host:port) is required");
      }
      for (String address : addresses) {
        if (address == null || address.isBlank()) {
          throw new IllegalArgumentException("an address (host:port) is required");
        }
      }
      this.addresses = List.copyOf(addresses);
    }

    /**
     * Required. The worker credential, sent as {@code authorization: Bearer <credential>}: one
     * line without surrounding spaces.
     */
    public Builder credential(String credential) {
      if (credential == null || credential.isEmpty()) {
        throw new IllegalArgumentException("a worker credential is required");
      }
      if (!credential.equals(credential.strip())
          || credential.chars().anyMatch(c -> c < 0x20 || c >= 0x7f)) {
        throw new IllegalArgumentException(
            "the worker credential must be one line of printable ASCII without surrounding spaces");
      }
      this.credential = credential;
      return this;
    }

    /** Stable for this process across reconnects: 1 to 128 of {@code [A-Za-z0-9_.:-]}. */
    public Builder workerId(String workerId) {
      if (workerId == null || !WORKER_ID.matcher(workerId).matches()) {
        throw new IllegalArgumentException(
            "the worker id must be 1 to 128 characters of [A-Za-z0-9_.:-]");
      }
      this.workerId = workerId;
      return this;
    }

    /** Handlers run at once (1 to 10 000); also the initial credit of every stream. Default 4. */
    public Builder slots(int slots) {
      if (slots < 1 || slots > MAX_SLOTS) {
        throw new IllegalArgumentException("slots must be between 1 and " + MAX_SLOTS);
      }
      this.slots = slots;
      return this;
    }

    /** Connects over TLS, or mutual TLS with a client certificate (the default is plaintext). */
    public Builder tls(TlsOptions tls) {
      this.tls = tls;
      return this;
    }

    /**
     * Registers {@code handler} under {@code name} (1 to 200 of {@code [A-Za-z0-9_.:-]}); the name
     * goes in every hello. Registering a name twice throws, so two modules cannot silently shadow
     * each other.
     */
    public Builder handler(String name, Handler handler) {
      if (name == null || !HANDLER_NAME.matcher(name).matches()) {
        throw new IllegalArgumentException(
            "a handler name must be 1 to 200 characters of [A-Za-z0-9_.:-]");
      }
      Objects.requireNonNull(handler, "handler");
      if (handlers.putIfAbsent(name, handler) != null) {
        throw new IllegalArgumentException("handler \"" + name + "\" is already registered");
      }
      return this;
    }

    /**
     * The reconnect backoff: the first wait is uniform in [0, initial], doubling per stream that
     * got no welcome, never above max. Defaults 200 ms and 15 s.
     */
    public Builder reconnectBackoff(Duration initial, Duration max) {
      if (initial.isNegative() || initial.isZero() || max.compareTo(initial) < 0) {
        throw new IllegalArgumentException("the backoff needs 0 < initial <= max");
      }
      this.reconnectInitialBackoff = initial;
      this.reconnectMaxBackoff = max;
      return this;
    }

    /** Between heartbeats when the welcome does not say. Default 5 s. */
    public Builder defaultHeartbeatInterval(Duration interval) {
      this.defaultHeartbeatInterval = positive("defaultHeartbeatInterval", interval);
      return this;
    }

    /** The server is presumed dead after this many heartbeat intervals of silence. Default 3. */
    public Builder serverSilenceIntervals(int intervals) {
      if (intervals < 1) {
        throw new IllegalArgumentException("serverSilenceIntervals must be at least 1");
      }
      this.serverSilenceIntervals = intervals;
      return this;
    }

    /** How long to wait for the welcome after hello, connecting included. Default 10 s. */
    public Builder welcomeTimeout(Duration timeout) {
      this.welcomeTimeout = positive("welcomeTimeout", timeout);
      return this;
    }

    /** How long a canceled handler has to return before CANCELED is reported. Default 2 s. */
    public Builder cancelGrace(Duration grace) {
      if (grace == null || grace.isNegative()) {
        throw new IllegalArgumentException("cancelGrace must be zero or positive");
      }
      this.cancelGrace = grace;
      return this;
    }

    /** Tests: where the worker logs. */
    Builder logger(System.Logger logger) {
      this.logger = Objects.requireNonNull(logger);
      return this;
    }

    /** Tests: the wall clock for deadlines, result instants and the rate of log lines. */
    Builder clock(Clock clock) {
      this.clock = Objects.requireNonNull(clock);
      return this;
    }

    /** Tests: uniform in [0, 1), the reconnect jitter. */
    Builder random(DoubleSupplier random) {
      this.random = Objects.requireNonNull(random);
      return this;
    }

    /** Tests: how a stream's channel is opened for an address (in-process servers). */
    Builder channels(Function<String, ManagedChannel> channels) {
      this.channels = Objects.requireNonNull(channels);
      return this;
    }

    /**
     * The worker. Unusable TLS material or an address the channel cannot parse fails here.
     *
     * @throws IllegalStateException without a credential or a handler
     */
    public Worker build() {
      if (credential == null) {
        throw new IllegalStateException("a worker credential is required (credential(...))");
      }
      if (handlers.isEmpty()) {
        throw new IllegalStateException("the worker has no handler: nothing to run");
      }
      if (channels == null) {
        ChannelCredentials credentials =
            tls == null ? InsecureChannelCredentials.create() : tls.channelCredentials();
        for (String address : addresses) {
          try {
            Grpc.newChannelBuilder(address, credentials);
          } catch (RuntimeException e) {
            throw new IllegalArgumentException(
                "cannot open a channel to " + address + ": " + e.getMessage(), e);
          }
        }
      }
      return new Worker(this);
    }

    private static Duration positive(String name, Duration value) {
      if (value == null || value.isNegative() || value.isZero()) {
        throw new IllegalArgumentException(name + " must be positive");
      }
      return value;
    }
  }

}

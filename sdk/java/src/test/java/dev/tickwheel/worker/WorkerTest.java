package dev.tickwheel.worker;

import static dev.tickwheel.v1.PullRequest.MessageCase.CREDIT;
import static dev.tickwheel.v1.PullRequest.MessageCase.HEARTBEAT;
import static dev.tickwheel.v1.PullRequest.MessageCase.HELLO;
import static dev.tickwheel.v1.PullRequest.MessageCase.RESULT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.google.protobuf.ByteString;
import com.google.protobuf.Timestamp;
import dev.tickwheel.v1.Assignment;
import dev.tickwheel.v1.Assignments;
import dev.tickwheel.v1.CancelExecutions;
import dev.tickwheel.v1.ExecutionProgress;
import dev.tickwheel.v1.ExecutionResult;
import dev.tickwheel.v1.HandlerTarget;
import dev.tickwheel.v1.HttpTarget;
import dev.tickwheel.v1.InFlightExecution;
import dev.tickwheel.v1.PullRequest;
import dev.tickwheel.v1.PullResponse;
import dev.tickwheel.v1.ResultAck;
import dev.tickwheel.v1.ResultAcks;
import dev.tickwheel.v1.ResultOutcome;
import dev.tickwheel.v1.ServerDrain;
import dev.tickwheel.v1.ServerWelcome;
import dev.tickwheel.v1.Target;
import dev.tickwheel.worker.FakeServer.FakeStream;
import io.grpc.Status;
import java.lang.System.Logger.Level;
import java.nio.charset.StandardCharsets;
import java.text.MessageFormat;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.ResourceBundle;
import java.util.TreeSet;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The worker's Pull protocol against a scripted in-process server: hello, credit, heartbeats with
 * progress, results kept until acked and resent after a reconnect, re-attachment, cancel,
 * deadlines, welcome.rejected, drain, stop, server silence, refusal and the address list.
 */
class WorkerTest {
  private FakeServer server;
  private final List<FakeServer> others = new ArrayList<>();
  private Worker worker;
  private Thread runner;
  private final AtomicReference<Throwable> runFailure = new AtomicReference<>();
  private final CountDownLatch runReturned = new CountDownLatch(1);

  @BeforeEach
  void setUp() throws Exception {
    server = new FakeServer();
  }

  @AfterEach
  void tearDown() throws Exception {
    if (worker != null) {
      worker.stop(Duration.ZERO);
      runner.join(10_000);
    }
    server.close();
    for (FakeServer other : others) {
      other.close();
    }
  }

  private Worker start(Consumer<Worker.Builder> options, Map<String, Handler> handlers) {
    return start(List.of(server.name), options, handlers);
  }

  private Worker start(
      List<String> addresses, Consumer<Worker.Builder> options, Map<String, Handler> handlers) {
    Worker.Builder builder =
        Worker.builder(addresses)
            .credential("tww_test_secret")
            .workerId("w1")
            .slots(2)
            .reconnectBackoff(Duration.ofMillis(10), Duration.ofMillis(20))
            // Longer than the tests wait for a message: a stream slow to open (a loaded machine)
            // is not given up while the test waits for its hello.
            .welcomeTimeout(Duration.ofSeconds(2 * FakeServer.WAIT_SECONDS))
            .channels(FakeServer::channel);
    options.accept(builder);
    handlers.forEach(builder::handler);
    worker = builder.build();
    runner =
        new Thread(
            () -> {
              try {
                worker.run();
              } catch (Throwable t) {
                runFailure.set(t);
              } finally {
                runReturned.countDown();
              }
            },
            "worker-run");
    runner.start();
    return worker;
  }

  private static Map<String, Handler> handlers(Object... nameThenHandler) {
    Map<String, Handler> out = new LinkedHashMap<>();
    for (int i = 0; i < nameThenHandler.length; i += 2) {
      out.put((String) nameThenHandler[i], (Handler) nameThenHandler[i + 1]);
    }
    return out;
  }

  private static Assignment.Builder assignment(String id, String handler, int delivery) {
    return Assignment.newBuilder()
        .setExecutionId(id)
        .setJobId("job_1")
        .setTenant("acme")
        .setAttempt(1)
        .setDelivery(delivery)
        .setPayload(ByteString.copyFromUtf8("payload"))
        .setNominalAt(Timestamp.newBuilder().setSeconds(1_893_456_000L))
        .setDueAt(Timestamp.newBuilder().setSeconds(1_893_456_001L))
        .setTarget(Target.newBuilder().setHandler(HandlerTarget.newBuilder().setName(handler)));
  }

  private static PullResponse assign(Assignment.Builder... assignments) {
    Assignments.Builder batch = Assignments.newBuilder();
    for (Assignment.Builder a : assignments) {
      batch.addAssignments(a);
    }
    return PullResponse.newBuilder().setAssignment(batch).build();
  }

  private static PullResponse welcome(long intervalMillis, InFlightExecution... rejected) {
    return PullResponse.newBuilder()
        .setWelcome(
            ServerWelcome.newBuilder()
                .setServerId("fake")
                .setHeartbeatInterval(millis(intervalMillis))
                .setHeartbeatTimeout(millis(10 * intervalMillis))
                .addAllRejected(List.of(rejected)))
        .build();
  }

  private static PullResponse ack(String id, int delivery) {
    return PullResponse.newBuilder()
        .setAck(
            ResultAcks.newBuilder()
                .addAcks(
                    ResultAck.newBuilder()
                        .setExecutionId(id)
                        .setDelivery(delivery)
                        .setAccepted(true)))
        .build();
  }

  private static PullResponse cancel(String id, int delivery, String reason) {
    return PullResponse.newBuilder()
        .setCancel(
            CancelExecutions.newBuilder().addExecutions(held(id, delivery)).setReason(reason))
        .build();
  }

  private static InFlightExecution held(String id, int delivery) {
    return InFlightExecution.newBuilder().setExecutionId(id).setDelivery(delivery).build();
  }

  private static com.google.protobuf.Duration millis(long millis) {
    return com.google.protobuf.Duration.newBuilder()
        .setSeconds(millis / 1000)
        .setNanos((int) (millis % 1000) * 1_000_000)
        .build();
  }

  private static Timestamp at(Instant instant) {
    return Timestamp.newBuilder()
        .setSeconds(instant.getEpochSecond())
        .setNanos(instant.getNano())
        .build();
  }

  private static List<String> keys(List<InFlightExecution> executions) {
    return executions.stream().map(e -> e.getExecutionId() + "#" + e.getDelivery()).toList();
  }

  /** Returns once {@code check} holds; fails after {@link FakeServer#WAIT_SECONDS}. */
  private static void eventually(BooleanSupplier check, String what) {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(FakeServer.WAIT_SECONDS);
    while (!check.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        fail("not within " + FakeServer.WAIT_SECONDS + " s: " + what);
      }
      LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5));
    }
  }

  private static void await(CountDownLatch latch, String what) throws InterruptedException {
    assertTrue(
        latch.await(FakeServer.WAIT_SECONDS, TimeUnit.SECONDS),
        "not within " + FakeServer.WAIT_SECONDS + " s: " + what);
  }

  /** Stops the worker from another thread (stop blocks until run() returns). */
  private Thread stopInBackground(Duration grace) {
    Thread stopper = new Thread(() -> worker.stop(grace), "worker-stop");
    stopper.start();
    return stopper;
  }

  @Test
  void helloHeartbeatsWithProgressResultKeptUntilAckedThenCredit() throws Exception {
    CountDownLatch release = new CountDownLatch(1);
    Worker w =
        start(
            b -> b.serverSilenceIntervals(1000), // this fake server never heartbeats
            handlers(
                "h",
                (Handler)
                    ctx -> {
                      ctx.heartbeat("half way");
                      release.await();
                      return "out".getBytes(StandardCharsets.UTF_8);
                    }));
    FakeStream stream = server.nextStream();
    assertEquals("Bearer tww_test_secret", stream.authorization);
    PullRequest hello = stream.expect(HELLO);
    assertEquals("w1", hello.getHello().getWorkerId());
    assertEquals(List.of("h"), hello.getHello().getHandlersList());
    assertEquals(2, hello.getHello().getSlots());
    assertFalse(hello.getHello().getHttp());
    assertEquals(0, hello.getHello().getInFlightCount());
    stream.send(welcome(30));
    stream.send(assign(assignment("e1", "h", 1)));
    for (; ; ) {
      List<ExecutionProgress> beat = stream.expect(HEARTBEAT).getHeartbeat().getExecutionsList();
      if (beat.stream().anyMatch(e -> e.getExecutionId().equals("e1") && e.getProgress().equals("half way"))) {
        assertEquals(1, beat.get(0).getDelivery());
        break;
      }
    }
    assertEquals(0, stream.count(CREDIT), "the server holds all the credit the slots allow");
    release.countDown();
    List<ExecutionResult> results = stream.expect(RESULT).getResult().getResultsList();
    assertEquals(1, results.size());
    ExecutionResult r = results.get(0);
    assertEquals("e1", r.getExecutionId());
    assertEquals(ResultOutcome.RESULT_OUTCOME_SUCCEEDED, r.getOutcome());
    assertEquals("out", r.getOutput().toStringUtf8());
    assertTrue(r.hasStartedAt() && r.hasFinishedAt());
    // The slot is free and the server holds 1 credit of 2: one more.
    assertEquals(1, stream.expect(CREDIT).getCredit().getCredits());
    assertEquals(List.of("e1#1"), keys(w.unacked()));
    stream.send(ack("e1", 1));
    eventually(() -> w.unacked().isEmpty(), "the ack forgets the result");
    Thread stopper = stopInBackground(Duration.ofSeconds(5));
    await(stream.closed, "the worker closes its side");
    assertTrue(stream.halfClosedCleanly, "a half-close, not a cancel");
    stream.end();
    stopper.join(TimeUnit.SECONDS.toMillis(FakeServer.WAIT_SECONDS));
    await(runReturned, "run() returns");
    assertNull(runFailure.get());
  }

  @Test
  void aResultNotAckedIsReattachedAndSentAgainOnTheNextStream() throws Exception {
    Worker w = start(b -> {}, handlers("h", (Handler) ctx -> "x".getBytes(StandardCharsets.UTF_8)));
    FakeStream first = server.nextStream();
    first.expect(HELLO);
    first.send(welcome(60_000));
    first.send(assign(assignment("e1", "h", 1)));
    assertEquals("e1", first.expect(RESULT).getResult().getResults(0).getExecutionId());
    first.failWith(Status.UNAVAILABLE.withDescription("the server goes away before acking"));

    FakeStream second = server.nextStream();
    // Listed, so that the new stream holds it: a server takes a result only from the stream
    // holding its delivery.
    assertEquals(List.of("e1#1"), keys(second.expect(HELLO).getHello().getInFlightList()));
    second.send(welcome(60_000));
    ExecutionResult resent = second.expect(RESULT).getResult().getResults(0);
    assertEquals("e1", resent.getExecutionId());
    assertEquals(ResultOutcome.RESULT_OUTCOME_SUCCEEDED, resent.getOutcome());
    second.send(ack("e1", 1));
    eventually(() -> w.unacked().isEmpty(), "the ack on the second stream forgets it");
    assertEquals(2, w.sessions());
  }

  @Test
  void aRunningExecutionIsReattachedAfterAReconnectAndReportedThere() throws Exception {
    CountDownLatch started = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    Worker w =
        start(
            b -> b.serverSilenceIntervals(1000), // this fake server never heartbeats
            handlers(
                "h",
                (Handler)
                    ctx -> {
                      started.countDown();
                      release.await();
                      return "done".getBytes(StandardCharsets.UTF_8);
                    }));
    FakeStream first = server.nextStream();
    first.expect(HELLO);
    first.send(welcome(60_000));
    first.send(assign(assignment("e1", "h", 3)));
    await(started, "the handler starts");
    first.failWith(Status.UNAVAILABLE.withDescription("restart"));

    FakeStream second = server.nextStream();
    assertEquals(List.of("e1#3"), keys(second.expect(HELLO).getHello().getInFlightList()));
    second.send(welcome(20));
    PullRequest beat = second.expect(HEARTBEAT);
    assertEquals("e1", beat.getHeartbeat().getExecutions(0).getExecutionId());
    assertEquals(List.of("e1#3"), keys(w.inFlight()));
    release.countDown();
    ExecutionResult r = second.expect(RESULT).getResult().getResults(0);
    assertEquals("e1", r.getExecutionId());
    assertEquals(3, r.getDelivery());
    assertEquals("done", r.getOutput().toStringUtf8());
    assertEquals(0, first.count(RESULT), "nothing was reported on the lost stream");
  }

  @Test
  void cancelMarksTheContextInterruptsTheHandlerAndReportsCanceled() throws Exception {
    CountDownLatch started = new CountDownLatch(1);
    AtomicBoolean sawCancelled = new AtomicBoolean();
    AtomicReference<String> reason = new AtomicReference<>();
    AtomicInteger listened = new AtomicInteger();
    CountDownLatch listenerRan = new CountDownLatch(1);
    start(
        b -> b.cancelGrace(Duration.ofSeconds(5)),
        handlers(
            "h",
            (Handler)
                ctx -> {
                  ctx.onCancel(
                      () -> {
                        listened.incrementAndGet();
                        listenerRan.countDown();
                      });
                  started.countDown();
                  try {
                    Thread.sleep(60_000);
                  } catch (InterruptedException e) {
                    sawCancelled.set(ctx.isCancelled());
                    reason.set(ctx.cancelReason().orElse(""));
                  }
                  return "stopped".getBytes(StandardCharsets.UTF_8);
                }));
    FakeStream stream = server.nextStream();
    stream.expect(HELLO);
    stream.send(welcome(60_000));
    stream.send(assign(assignment("e1", "h", 1)));
    await(started, "the handler starts");
    stream.send(cancel("e1", 1, "by request"));
    ExecutionResult r = stream.expect(RESULT).getResult().getResults(0);
    assertEquals(ResultOutcome.RESULT_OUTCOME_CANCELED, r.getOutcome());
    assertTrue(r.getError().contains("by request"), r.getError());
    assertTrue(sawCancelled.get(), "the interrupted handler sees isCancelled()");
    assertEquals("canceled: by request", reason.get());
    // The listener runs on the reader's thread once it holds no lock: maybe after the result went.
    await(listenerRan, "the cancel listener runs");
    assertEquals(1, listened.get());
  }

  @Test
  void aHandlerIgnoringTheCancelIsReportedAfterTheGraceAndKeepsItsSlot() throws Exception {
    CountDownLatch started = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    start(
        b -> b.slots(1).cancelGrace(Duration.ofMillis(50)),
        handlers(
            "h",
            (Handler)
                ctx -> {
                  started.countDown();
                  while (release.getCount() > 0) {
                    try {
                      release.await();
                    } catch (InterruptedException ignored) {
                      // this handler ignores cancellation
                    }
                  }
                  return null;
                }));
    FakeStream stream = server.nextStream();
    stream.expect(HELLO);
    stream.send(welcome(60_000));
    stream.send(assign(assignment("e1", "h", 1)));
    await(started, "the handler starts");
    stream.send(cancel("e1", 0, "")); // delivery 0: every delivery
    ExecutionResult r = stream.expect(RESULT).getResult().getResults(0);
    assertEquals(ResultOutcome.RESULT_OUTCOME_CANCELED, r.getOutcome());
    stream.send(ack("e1", 1));
    eventually(() -> worker.unacked().isEmpty(), "acked");
    assertEquals(0, stream.count(CREDIT), "the handler still runs: its slot is held");
    release.countDown();
    assertEquals(1, stream.expect(CREDIT).getCredit().getCredits());
  }

  @Test
  void theDeadlineStopsTheHandlerAndReportsTimedOut() throws Exception {
    AtomicBoolean interrupted = new AtomicBoolean();
    start(
        b -> {},
        handlers(
            "h",
            (Handler)
                ctx -> {
                  try {
                    Thread.sleep(60_000);
                  } catch (InterruptedException e) {
                    interrupted.set(ctx.isCancelled());
                  }
                  return null;
                }));
    FakeStream stream = server.nextStream();
    stream.expect(HELLO);
    stream.send(welcome(60_000));
    Instant deadline = Instant.now().plusMillis(100);
    stream.send(assign(assignment("e1", "h", 1).setDeadlineAt(at(deadline))));
    ExecutionResult r = stream.expect(RESULT).getResult().getResults(0);
    assertEquals(ResultOutcome.RESULT_OUTCOME_TIMED_OUT, r.getOutcome());
    assertTrue(r.getError().contains("deadline"), r.getError());
    eventually(interrupted::get, "the handler is interrupted and sees isCancelled()");
  }

  @Test
  void anExecutionTheWelcomeRejectsIsStoppedAndNeverReported() throws Exception {
    CountDownLatch started = new CountDownLatch(1);
    AtomicBoolean stopped = new AtomicBoolean();
    Worker w =
        start(
            b -> b.slots(1),
            handlers(
                "h",
                (Handler)
                    ctx -> {
                      started.countDown();
                      ctx.awaitCancellation(Duration.ofMinutes(1));
                      stopped.set(true);
                      return "too late".getBytes(StandardCharsets.UTF_8);
                    },
                "quick",
                (Handler) ctx -> "done".getBytes(StandardCharsets.UTF_8)));
    FakeStream first = server.nextStream();
    first.expect(HELLO);
    first.send(welcome(60_000));
    first.send(assign(assignment("e1", "h", 1)));
    await(started, "the handler starts");
    first.failWith(Status.UNAVAILABLE.withDescription("restart"));

    FakeStream second = server.nextStream();
    assertEquals(List.of("e1#1"), keys(second.expect(HELLO).getHello().getInFlightList()));
    second.send(welcome(60_000, held("e1", 1)));
    eventually(stopped::get, "the rejected attempt's handler is told to stop");
    // A result for e1 would have been queued before e2's: e2's alone shows there is none.
    second.send(assign(assignment("e2", "quick", 1)));
    List<ExecutionResult> results = second.expect(RESULT).getResult().getResultsList();
    assertEquals(List.of("e2"), results.stream().map(ExecutionResult::getExecutionId).toList());
    assertEquals(1, second.count(RESULT));
    assertEquals(List.of("e2#1"), keys(w.unacked()));
  }

  @Test
  void drainGrantsNoCreditAndClosesTheStreamOnceEverythingIsAcked() throws Exception {
    CountDownLatch started = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    start(
        b -> b.slots(2), // a finished attempt would leave room for one more credit
        handlers(
            "h",
            (Handler)
                ctx -> {
                  started.countDown();
                  release.await();
                  return "ok".getBytes(StandardCharsets.UTF_8);
                }));
    FakeStream first = server.nextStream();
    first.expect(HELLO);
    first.send(welcome(60_000));
    // The attempt is running before the drain arrives, so the drain has something to wait for
    // (a drain that finds nothing in flight ends the stream at once), and the credit the
    // attempt's end would free is never granted.
    first.send(assign(assignment("e1", "h", 1)));
    await(started, "the handler starts");
    first.send(
        PullResponse.newBuilder()
            .setDrain(
                ServerDrain.newBuilder()
                    .setReason("restart")
                    .setDeadlineAt(at(Instant.now().plusSeconds(60))))
            .build());
    eventually(worker::draining, "the worker has seen the drain");
    release.countDown();
    first.expect(RESULT);
    assertEquals(1, first.closed.getCount(), "open until the result is acked");
    first.send(ack("e1", 1));
    await(first.closed, "the worker closes its side once drained");
    assertTrue(first.halfClosedCleanly);
    assertEquals(0, first.count(CREDIT), "no credit while draining");
    first.end();
    server.nextStream().expect(HELLO);
  }

  @Test
  void stopLetsTheRunningHandlerFinishReportsItAndEndsRun() throws Exception {
    CountDownLatch started = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    start(
        b -> b.slots(1),
        handlers(
            "h",
            (Handler)
                ctx -> {
                  started.countDown();
                  release.await();
                  return "finished".getBytes(StandardCharsets.UTF_8);
                }));
    FakeStream stream = server.nextStream();
    stream.expect(HELLO);
    stream.send(welcome(60_000));
    stream.send(assign(assignment("e1", "h", 1)));
    await(started, "the handler starts");
    Thread stopper = stopInBackground(Duration.ofSeconds(30));
    eventually(worker::stopping, "stop() has begun");
    release.countDown();
    ExecutionResult r = stream.expect(RESULT).getResult().getResults(0);
    assertEquals(ResultOutcome.RESULT_OUTCOME_SUCCEEDED, r.getOutcome());
    assertEquals(1, runReturned.getCount(), "run() waits for the ack");
    stream.send(ack("e1", 1));
    await(stream.closed, "the stream is closed after the ack");
    assertTrue(stream.halfClosedCleanly);
    stream.end();
    await(runReturned, "run() returns");
    stopper.join(TimeUnit.SECONDS.toMillis(FakeServer.WAIT_SECONDS));
    assertFalse(stopper.isAlive());
    assertNull(runFailure.get());
    assertEquals(0, stream.count(CREDIT), "no credit once stopping");
    assertNull(server.pollStream(100), "no reconnect after stop");
  }

  @Test
  void stopPastItsGraceAbandonsTheHandlerWithoutReportingIt() throws Exception {
    CountDownLatch started = new CountDownLatch(1);
    AtomicBoolean told = new AtomicBoolean();
    start(
        b -> b.slots(1),
        handlers(
            "h",
            (Handler)
                ctx -> {
                  started.countDown();
                  told.set(ctx.awaitCancellation(Duration.ofMinutes(1)));
                  return null;
                }));
    FakeStream stream = server.nextStream();
    stream.expect(HELLO);
    stream.send(welcome(60_000));
    stream.send(assign(assignment("e1", "h", 1)));
    await(started, "the handler starts");
    worker.stop(Duration.ofMillis(50));
    await(runReturned, "run() returns after the grace");
    eventually(told::get, "the abandoned handler is told to stop");
    assertEquals(0, stream.count(RESULT), "the server re-delivers it; nothing is reported");
  }

  @Test
  void aSilentServerIsPresumedDeadAndTheWorkerReconnects() throws Exception {
    Worker w =
        start(b -> b.serverSilenceIntervals(3), handlers("h", (Handler) ctx -> null));
    FakeStream first = server.nextStream();
    first.expect(HELLO);
    first.send(welcome(20));
    FakeStream second = server.nextStream();
    second.expect(HELLO);
    second.send(welcome(60_000));
    eventually(() -> w.sessions() == 2, "the second stream is welcomed");
    await(first.closed, "the silent stream is canceled");
  }

  @Test
  void assignmentsBeyondTwiceTheSlotsAreRefusedAtOnce() throws Exception {
    CountDownLatch release = new CountDownLatch(1);
    start(
        b -> b.slots(1),
        handlers(
            "h",
            (Handler)
                ctx -> {
                  release.await();
                  return null;
                }));
    FakeStream stream = server.nextStream();
    stream.expect(HELLO);
    stream.send(welcome(60_000));
    stream.send(assign(assignment("e1", "h", 1), assignment("e2", "h", 1), assignment("e3", "h", 1)));
    ExecutionResult r = stream.expect(RESULT).getResult().getResults(0);
    assertEquals("e3", r.getExecutionId());
    assertEquals(ResultOutcome.RESULT_OUTCOME_FAILED_RETRYABLE, r.getOutcome());
    assertTrue(r.getError().contains("over capacity"), r.getError());
    release.countDown();
  }

  @ParameterizedTest
  @EnumSource(
      value = Status.Code.class,
      names = {"UNAUTHENTICATED", "PERMISSION_DENIED", "INVALID_ARGUMENT", "UNIMPLEMENTED"})
  void aServerThatRefusesTheWorkerEndsRunWithWorkerFatalException(Status.Code code)
      throws Exception {
    start(b -> {}, handlers("h", (Handler) ctx -> null));
    FakeStream stream = server.nextStream();
    stream.expect(HELLO);
    stream.failWith(Status.fromCode(code).withDescription("the credential is not valid"));
    await(runReturned, "run() ends");
    WorkerFatalException fatal = assertInstanceOf(WorkerFatalException.class, runFailure.get());
    assertEquals(code, fatal.code());
    assertTrue(fatal.getMessage().contains(code + ": the credential is not valid"), fatal.getMessage());
    assertNull(server.pollStream(100), "no reconnect after a refusal");
  }

  @Test
  void reconnectsGoRoundTheAddressList() throws Exception {
    FakeServer other = new FakeServer();
    others.add(other);
    Worker w =
        start(List.of(server.name, other.name), b -> {}, handlers("h", (Handler) ctx -> null));
    FakeStream a = server.nextStream();
    a.expect(HELLO);
    a.failWith(Status.UNAVAILABLE.withDescription("down"));
    FakeStream b = other.nextStream();
    b.expect(HELLO);
    b.send(welcome(60_000));
    eventually(() -> w.sessions() == 1, "welcomed by the second address");
    b.failWith(Status.RESOURCE_EXHAUSTED.withDescription("budget"));
    server.nextStream().expect(HELLO);
  }

  @Test
  void handlerOutcomesBecomeResults() throws Exception {
    byte[] big = new byte[Worker.OUTPUT_MAX_BYTES + 100];
    start(
        b -> b.slots(6),
        handlers(
            "perm", (Handler) ctx -> {
              throw new PermanentException("cannot ever work");
            },
            "retry", (Handler) ctx -> {
              throw new RetryableException("later", Duration.ofSeconds(7));
            },
            "boom", (Handler) ctx -> {
              throw new IllegalStateException("bug");
            },
            "big", (Handler) ctx -> big,
            "echo", (Handler) ctx -> ctx.payload()));
    FakeStream stream = server.nextStream();
    stream.expect(HELLO);
    stream.send(welcome(60_000));
    stream.send(
        assign(
            assignment("p", "perm", 1),
            assignment("r", "retry", 1),
            assignment("b", "boom", 1),
            assignment("g", "big", 1),
            assignment("m", "missing", 1),
            assignment("x", "echo", 1)
                .setTarget(Target.newBuilder().setHttp(HttpTarget.newBuilder().setUrl("https://x")))));
    Map<String, ExecutionResult> byId = new HashMap<>();
    while (byId.size() < 6) {
      for (ExecutionResult r : stream.expect(RESULT).getResult().getResultsList()) {
        byId.put(r.getExecutionId(), r);
      }
    }
    assertEquals(ResultOutcome.RESULT_OUTCOME_FAILED_PERMANENT, byId.get("p").getOutcome());
    assertEquals("cannot ever work", byId.get("p").getError());
    assertEquals(ResultOutcome.RESULT_OUTCOME_FAILED_RETRYABLE, byId.get("r").getOutcome());
    assertEquals("later", byId.get("r").getError());
    assertEquals(7, byId.get("r").getRetryAfter().getSeconds());
    assertEquals(ResultOutcome.RESULT_OUTCOME_FAILED_RETRYABLE, byId.get("b").getOutcome());
    assertEquals("java.lang.IllegalStateException: bug", byId.get("b").getError());
    assertEquals(Worker.OUTPUT_MAX_BYTES, byId.get("g").getOutput().size());
    assertEquals(ResultOutcome.RESULT_OUTCOME_FAILED_PERMANENT, byId.get("m").getOutcome());
    assertTrue(byId.get("m").getError().contains("no handler named \"missing\""));
    assertEquals(ResultOutcome.RESULT_OUTCOME_FAILED_PERMANENT, byId.get("x").getOutcome());
    assertTrue(byId.get("x").getError().contains("HTTP"));
  }

  @Test
  void theContextCarriesTheAssignment() throws Exception {
    AtomicReference<JobContext> seen = new AtomicReference<>();
    start(
        b -> {},
        handlers(
            "h",
            (Handler)
                ctx -> {
                  seen.set(ctx);
                  ctx.heartbeat("x".repeat(300));
                  return null;
                }));
    FakeStream stream = server.nextStream();
    stream.expect(HELLO);
    stream.send(welcome(60_000));
    stream.send(assign(assignment("e9", "h", 2).setAttempt(3).setTraceparent("00-abc")));
    stream.expect(RESULT);
    JobContext ctx = seen.get();
    assertEquals("e9", ctx.executionId());
    assertEquals("e9", ctx.idempotencyKey());
    assertEquals(3, ctx.attempt());
    assertEquals(2, ctx.delivery());
    assertEquals("acme", ctx.tenant());
    assertEquals("job_1", ctx.jobId());
    assertEquals(Instant.ofEpochSecond(1_893_456_000L), ctx.nominalAt());
    assertEquals(Instant.ofEpochSecond(1_893_456_001L), ctx.dueAt());
    assertTrue(ctx.deadlineAt().isEmpty());
    assertEquals("payload", ctx.payloadText());
    assertEquals("h", ctx.handler());
    assertEquals("00-abc", ctx.traceparent());
    assertEquals(JobContext.PROGRESS_MAX_CHARS, ctx.progress().length());
    assertFalse(ctx.isCancelled());
  }

  @Test
  void badOptionsFailWhenSet() {
    assertThrows(IllegalArgumentException.class, () -> Worker.builder(List.of()));
    assertThrows(IllegalArgumentException.class, () -> Worker.builder("a:1").credential(""));
    assertThrows(
        IllegalArgumentException.class, () -> Worker.builder("a:1").credential("tww_x\nEvil: 1"));
    assertThrows(IllegalArgumentException.class, () -> Worker.builder("a:1").workerId("has space"));
    assertThrows(IllegalArgumentException.class, () -> Worker.builder("a:1").slots(0));
    assertThrows(IllegalArgumentException.class, () -> Worker.builder("a:1").slots(10_001));
    assertThrows(
        IllegalArgumentException.class,
        () -> Worker.builder("a:1").reconnectBackoff(Duration.ofSeconds(2), Duration.ofSeconds(1)));
    assertThrows(
        IllegalArgumentException.class,
        () -> Worker.builder("a:1").handler("bad name", ctx -> null));
    assertThrows(
        IllegalArgumentException.class,
        () -> Worker.builder("a:1").handler("a.b", ctx -> null).handler("a.b", ctx -> null));
    assertThrows(
        IllegalStateException.class, () -> Worker.builder("a:1").credential("tww_x").build());
    assertThrows(
        IllegalStateException.class, () -> Worker.builder("a:1").handler("h", ctx -> null).build());
    String id = Worker.defaultWorkerId();
    assertTrue(id.matches("[A-Za-z0-9_.:-]{1,128}") && id.matches(".*-\\d+-[0-9a-f]{6}"), id);
  }

  // --- against a hostile or broken server -----------------------------------------------------

  private static final String SECRET = "tww_test_secret";

  /** A System.Logger that keeps every line with its level. */
  static final class RecordingLogger implements System.Logger {
    record Line(Level level, String text) {}

    final List<Line> lines = new CopyOnWriteArrayList<>();

    @Override
    public String getName() {
      return "recording";
    }

    @Override
    public boolean isLoggable(Level level) {
      return true;
    }

    @Override
    public void log(Level level, ResourceBundle bundle, String msg, Throwable thrown) {
      lines.add(new Line(level, msg + (thrown == null ? "" : " " + thrown)));
    }

    @Override
    public void log(Level level, ResourceBundle bundle, String format, Object... params) {
      String text =
          params == null || params.length == 0 ? format : MessageFormat.format(format, params);
      lines.add(new Line(level, text));
    }

    /** The lines at {@code level} (exactly) containing {@code part}. */
    List<String> at(Level level, String part) {
      return lines.stream()
          .filter(l -> l.level() == level && l.text().contains(part))
          .map(Line::text)
          .toList();
    }

    String all() {
      StringBuilder out = new StringBuilder();
      for (Line l : lines) {
        out.append(l.level()).append(' ').append(l.text()).append('\n');
      }
      return out.toString();
    }
  }

  /** A clock the test moves. */
  static final class SettableClock extends Clock {
    private volatile Instant now = Instant.parse("2030-01-01T00:00:00Z");

    void advance(Duration d) {
      now = now.plus(d);
    }

    @Override
    public ZoneId getZone() {
      return ZoneOffset.UTC;
    }

    @Override
    public Clock withZone(ZoneId zone) {
      return this;
    }

    @Override
    public Instant instant() {
      return now;
    }
  }

  /** A handler that blocks until closed (or interrupted), with the ids it started, in order. */
  static final class Blocking implements AutoCloseable {
    private final CountDownLatch release = new CountDownLatch(1);
    final BlockingQueue<String> started = new LinkedBlockingQueue<>();
    final Handler handler =
        ctx -> {
          started.add(ctx.executionId());
          release.await();
          return "out".getBytes(StandardCharsets.UTF_8);
        };

    /** The id of the next handler to start; fails after {@link FakeServer#WAIT_SECONDS}. */
    String nextStarted() throws InterruptedException {
      String id = started.poll(FakeServer.WAIT_SECONDS, TimeUnit.SECONDS);
      assertTrue(id != null, "not within " + FakeServer.WAIT_SECONDS + " s: a handler starts");
      return id;
    }

    @Override
    public void close() {
      release.countDown();
    }
  }

  @ParameterizedTest
  @org.junit.jupiter.params.provider.ValueSource(longs = {1L, 365L * 24 * 3600 * 1000})
  void aHeartbeatIntervalOutOfBoundsIsClampedWithOneWarningAMinute(long announcedMillis)
      throws Exception {
    RecordingLogger logs = new RecordingLogger();
    Worker w =
        start(
            b -> b.logger(logs).serverSilenceIntervals(1000), handlers("h", (Handler) ctx -> null));
    for (int i = 1; i <= 3; i++) { // welcomed again and again, within a minute
      FakeStream stream = server.nextStream();
      stream.expect(HELLO);
      stream.send(welcome(announcedMillis));
      int sessions = i;
      eventually(() -> w.sessions() == sessions, "the welcome");
      stream.failWith(Status.UNAVAILABLE.withDescription("again"));
    }
    server.nextStream();
    String using = announcedMillis == 1 ? "using 0.05 s" : "using 300.0 s";
    List<String> warned = logs.at(Level.WARNING, "heartbeat interval");
    assertEquals(1, warned.size(), logs.all());
    assertTrue(warned.get(0).contains(using), warned.get(0));
    assertEquals(2, logs.at(Level.DEBUG, "heartbeat interval").size(), logs.all());
  }

  @Test
  void refusalsANeverAckingServerSendsAreBoundedAndRealResultsKept() throws Exception {
    RecordingLogger logs = new RecordingLogger();
    try (Blocking h = new Blocking()) {
      Worker w =
          start(
              b -> b.logger(logs).slots(1),
              handlers(
                  "h", h.handler,
                  "quick", (Handler) ctx -> "q".getBytes(StandardCharsets.UTF_8)));
      FakeStream stream = server.nextStream();
      stream.expect(HELLO);
      stream.send(welcome(60_000));
      stream.send(assign(assignment("q1", "quick", 1)));
      assertEquals("q1", stream.expect(RESULT).getResult().getResults(0).getExecutionId());
      stream.send(assign(assignment("e1", "h", 1), assignment("e2", "h", 1))); // 2 * slots held
      assertEquals("e1", h.nextStarted());
      Assignment.Builder[] refusals = new Assignment.Builder[Worker.MAX_REFUSED];
      for (int i = 0; i < refusals.length; i++) {
        refusals[i] = assignment("r" + i, "h", 1);
      }
      stream.send(assign(refusals));
      eventually(() -> w.unacked().size() == 1 + Worker.MAX_REFUSED, "every refusal held");
      stream.send(assign(assignment("r-last", "h", 1))); // one more, none acked: a protocol error
      FakeStream next = server.nextStream();
      List<String> held =
          new ArrayList<>(new TreeSet<>(keys(next.expect(HELLO).getHello().getInFlightList())));
      assertEquals(List.of("e1#1", "e2#1", "q1#1"), held, "the refusals are forgotten");
      next.send(welcome(60_000));
      List<ExecutionResult> again = next.expect(RESULT).getResult().getResultsList();
      assertEquals(1, again.size());
      assertEquals("q1", again.get(0).getExecutionId());
      assertEquals("q", again.get(0).getOutput().toStringUtf8());
      assertEquals(1, logs.at(Level.ERROR, "beyond this worker's credit").size(), logs.all());
      assertEquals(
          1,
          logs.at(Level.WARNING, "protocol error: more than 1000 assignments beyond the credit")
              .size(),
          logs.all());
    }
  }

  @Test
  void refusalsAServerAcknowledgesNeverEndTheStream() throws Exception {
    try (Blocking h = new Blocking()) {
      Worker w = start(b -> b.slots(1), handlers("h", h.handler));
      FakeStream stream = server.nextStream();
      stream.expect(HELLO);
      stream.send(welcome(60_000));
      eventually(() -> w.sessions() == 1, "the welcome");
      stream.send(assign(assignment("e1", "h", 1), assignment("e2", "h", 1)));
      assertEquals("e1", h.nextStarted());
      for (int round = 0; round < 3; round++) { // 3 * 700 refusals, each round acknowledged
        Assignment.Builder[] refusals = new Assignment.Builder[700];
        ResultAcks.Builder acks = ResultAcks.newBuilder();
        for (int i = 0; i < refusals.length; i++) {
          String id = "r" + round + "-" + i;
          refusals[i] = assignment(id, "h", 1);
          acks.addAcks(ResultAck.newBuilder().setExecutionId(id).setDelivery(1).setAccepted(true));
        }
        stream.send(assign(refusals));
        eventually(() -> w.unacked().size() == 700, "the round's refusals");
        stream.send(PullResponse.newBuilder().setAck(acks).build());
        eventually(() -> w.unacked().isEmpty(), "the round's acks");
      }
      assertEquals(1, w.sessions());
      assertNull(server.pollStream(0), "the stream did not end");
    }
  }

  @Test
  void resultsAServerNeverAcknowledgesStopAtAHellosWorthThenAreRefused() throws Exception {
    Worker w = start(b -> b.slots(100), handlers("h", (Handler) ctx -> null));
    FakeStream stream = server.nextStream();
    stream.expect(HELLO);
    stream.send(welcome(60_000));
    // 200 rounds of 100 quick attempts (within twice the slots each time), none acknowledged.
    for (int round = 0; round < Worker.MAX_IN_FLIGHT / 100; round++) {
      Assignment.Builder[] batch = new Assignment.Builder[100];
      for (int i = 0; i < batch.length; i++) {
        batch[i] = assignment("e" + round + "-" + i, "h", 1);
      }
      stream.send(assign(batch));
      int want = (round + 1) * 100;
      eventually(
          () -> w.unacked().size() == want && w.inFlight().isEmpty(), "the round's results");
      eventually(() -> w.heldCount() == 0, "the round's handlers return");
    }
    stream.send(assign(assignment("more", "h", 1)));
    for (; ; ) {
      for (ExecutionResult r : stream.expect(RESULT).getResult().getResultsList()) {
        if (r.getExecutionId().equals("more")) {
          assertTrue(r.getError().contains("over capacity"), r.toString());
          return;
        }
      }
    }
  }

  /** The next stream of {@code on}, its hello read and welcomed (an interval of a minute). */
  private static FakeStream welcomed(FakeServer on) throws InterruptedException {
    FakeStream stream = on.nextStream();
    stream.expect(HELLO);
    stream.send(welcome(60_000));
    return stream;
  }

  private static HttpTarget.Builder http(Assignment.Builder a) {
    a.setTarget(
        Target.newBuilder()
            .setHttp(HttpTarget.newBuilder().setUrl("https://example.com/").setMethod("POST")));
    return a.getTargetBuilder().getHttpBuilder();
  }

  @Test
  void anAssignmentOverABoundEndsTheStreamAndNothingOfItIsTaken() throws Exception {
    String longer = "ü".repeat(Bounds.MAX_ID_CHARS + 1); // characters, not bytes
    Map<String, Consumer<Assignment.Builder>> bad = new LinkedHashMap<>();
    bad.put("an execution id of 0 characters", a -> a.setExecutionId(""));
    bad.put("an execution id of 1025 characters", a -> a.setExecutionId(longer));
    bad.put("a job id of 1025 characters", a -> a.setJobId(longer));
    bad.put("a tenant of 1025 characters", a -> a.setTenant(longer));
    bad.put("a traceparent of 1025 characters", a -> a.setTraceparent(longer));
    bad.put(
        "a handler name of 201 characters",
        a -> a.getTargetBuilder().getHandlerBuilder().setName("ü".repeat(Bounds.MAX_HANDLER_CHARS + 1)));
    bad.put(
        "a payload of " + (Bounds.MAX_PAYLOAD_BYTES + 1) + " bytes",
        a -> a.setPayload(ByteString.copyFrom(new byte[Bounds.MAX_PAYLOAD_BYTES + 1])));
    bad.put(
        "an HTTP URL of 2049 characters",
        a -> http(a).setUrl("https://example.com/" + "ü".repeat(Bounds.MAX_URL_CHARS + 1 - 20)));
    bad.put("an HTTP method of 17 characters", a -> http(a).setMethod("P".repeat(17)));
    bad.put(
        "33 HTTP headers",
        a -> {
          HttpTarget.Builder h = http(a);
          for (int i = 0; i <= Bounds.MAX_HEADERS; i++) {
            h.putHeaders("x-" + i, "v");
          }
        });
    bad.put(
        "HTTP headers of 16385 characters",
        a -> http(a).putHeaders("x-big", "ü".repeat(Bounds.MAX_HEADERS_CHARS + 1 - 5)));
    String named = "h".repeat(Bounds.MAX_HANDLER_CHARS); // at the bound: taken
    RecordingLogger logs = new RecordingLogger();
    try (Blocking h = new Blocking()) {
      Worker w = start(b -> b.logger(logs), handlers("h", h.handler, named, h.handler));
      for (Map.Entry<String, Consumer<Assignment.Builder>> c : bad.entrySet()) {
        FakeStream stream = server.nextStream();
        assertEquals(0, stream.expect(HELLO).getHello().getInFlightCount(), c.getKey());
        stream.send(welcome(60_000));
        Assignment.Builder a = assignment("bad", "h", 1);
        c.getValue().accept(a);
        stream.send(assign(assignment("ok", "h", 1), a)); // refused whole
      }
      FakeStream stream = server.nextStream();
      assertEquals(0, stream.expect(HELLO).getHello().getInFlightCount());
      assertTrue(h.started.isEmpty(), "a handler started from a message over a bound");
      stream.send(welcome(60_000));
      String at = "ü".repeat(Bounds.MAX_ID_CHARS); // at the bound: taken
      stream.send(
          assign(
              assignment(at, named, 1)
                  .setJobId(at)
                  .setTenant(at)
                  .setTraceparent(at)
                  // a message over gRPC's default 4 MiB: received
                  .setPayload(ByteString.copyFrom(new byte[Bounds.MAX_PAYLOAD_BYTES]))));
      assertEquals(at, h.nextStarted());
      String all = logs.all();
      for (String said : bad.keySet()) {
        assertTrue(all.contains("protocol error: an assignment with " + said), said + "\n" + all);
      }
      assertFalse(all.contains(longer), "a log line repeats the string over the bound");
      // The assignment may be taken before run()'s thread counts the welcome.
      eventually(() -> w.sessions() == bad.size() + 1, "one session a stream");
    }
  }

  @Test
  void anHttpTargetAtItsBoundsIsAnsweredNotAProtocolError() throws Exception {
    Worker w = start(b -> {}, handlers("h", (Handler) ctx -> null));
    FakeStream stream = welcomed(server);
    Assignment.Builder a = assignment("http", "h", 1);
    HttpTarget.Builder h =
        http(a)
            .setUrl("https://example.com/" + "u".repeat(Bounds.MAX_URL_CHARS - 20))
            .setMethod("P".repeat(Bounds.MAX_METHOD_CHARS));
    for (int i = 0; i < Bounds.MAX_HEADERS - 1; i++) {
      h.putHeaders(String.format("x-%02d", i), "v"); // 5 characters each
    }
    h.putHeaders("x-big", "ü".repeat(Bounds.MAX_HEADERS_CHARS - 5 * (Bounds.MAX_HEADERS - 1) - 5));
    stream.send(assign(a));
    ExecutionResult r = stream.expect(RESULT).getResult().getResults(0);
    assertEquals(ResultOutcome.RESULT_OUTCOME_FAILED_PERMANENT, r.getOutcome(), r.toString());
    assertEquals(1, w.sessions());
  }

  @Test
  void timestampsOutOfRangeAreReadAsTheNearestInstantInIt() throws Exception {
    BlockingQueue<JobContext> started = new LinkedBlockingQueue<>();
    CountDownLatch release = new CountDownLatch(1);
    Worker w =
        start(
            b -> {},
            handlers(
                "h",
                (Handler)
                    ctx -> {
                      started.add(ctx);
                      release.await();
                      return null;
                    }));
    try {
      FakeStream stream = welcomed(server);
      // Past Instant's range: it never comes.
      stream.send(
          assign(
              assignment("late", "h", 1)
                  .setNominalAt(Timestamp.newBuilder().setSeconds(Long.MAX_VALUE).setNanos(-1))
                  .setDeadlineAt(Timestamp.newBuilder().setSeconds(Long.MAX_VALUE - 1))));
      JobContext late = started.poll(FakeServer.WAIT_SECONDS, TimeUnit.SECONDS);
      assertTrue(late != null, "the late one starts");
      Instant last = Instant.parse("9999-12-31T23:59:59Z");
      assertEquals(last, late.deadlineAt().orElseThrow());
      assertEquals(last, late.nominalAt());
      // Before year 1: it has passed, the attempt times out.
      stream.send(
          assign(
              assignment("early", "h", 1)
                  .setDeadlineAt(
                      Timestamp.newBuilder().setSeconds(Long.MIN_VALUE).setNanos(2_000_000_000))));
      for (; ; ) {
        ExecutionResult r = stream.expect(RESULT).getResult().getResults(0);
        if (r.getExecutionId().equals("early")) {
          assertEquals(ResultOutcome.RESULT_OUTCOME_TIMED_OUT, r.getOutcome(), r.toString());
          break;
        }
      }
      assertEquals(List.of("late"), w.inFlight().stream().map(e -> e.getExecutionId()).toList());
      assertEquals(1, w.sessions());
    } finally {
      release.countDown();
    }
  }

  @Test
  void aDrainDeadlineOrHeartbeatIntervalOutOfProtobufsRangeIsAProtocolError() throws Exception {
    RecordingLogger logs = new RecordingLogger();
    Worker w = start(b -> b.logger(logs), handlers("h", (Handler) ctx -> null));
    FakeStream stream = server.nextStream();
    stream.expect(HELLO);
    stream.send(
        PullResponse.newBuilder()
            .setWelcome(
                ServerWelcome.newBuilder()
                    .setServerId("fake")
                    .setHeartbeatInterval(
                        com.google.protobuf.Duration.newBuilder().setSeconds(315_576_000_001L)))
            .build());
    stream = welcomed(server);
    stream.send(
        PullResponse.newBuilder()
            .setDrain(
                ServerDrain.newBuilder()
                    .setDeadlineAt(
                        Timestamp.newBuilder().setSeconds(Bounds.MAX_TIMESTAMP_SECONDS + 1)))
            .build());
    server.nextStream();
    String all = logs.all();
    for (String said :
        List.of(
            "protocol error: the welcome's heartbeat_interval is out of range",
            "protocol error: the drain's deadline_at is out of range")) {
      assertTrue(all.contains(said), said + "\n" + all);
    }
    assertEquals(1, w.sessions());
  }

  @Test
  void aMessageOverTheReceiveLimitEndsTheStreamAndTheNextOneServes() throws Exception {
    RecordingLogger logs = new RecordingLogger();
    // Over TCP: in process, messages pass unserialized and no receive limit applies.
    FakeServer tcp = new FakeServer(true);
    others.add(tcp);
    try (Blocking h = new Blocking()) {
      Worker w =
          start(
              List.of(tcp.name),
              b -> b.logger(logs).channels(FakeServer::tcpChannel),
              handlers("h", h.handler));
      FakeStream stream = welcomed(tcp);
      // The message is a little more than the limit.
      stream.send(
          assign(
              assignment("huge", "h", 1)
                  .setPayload(ByteString.copyFrom(new byte[Worker.MAX_RECEIVE_BYTES]))));
      stream = tcp.nextStream();
      assertEquals(0, stream.expect(HELLO).getHello().getInFlightCount());
      stream.send(welcome(60_000));
      stream.send(assign(assignment("next", "h", 1)));
      assertEquals("next", h.nextStarted());
      assertTrue(logs.all().contains("RESOURCE_EXHAUSTED"), logs.all());
      eventually(() -> w.sessions() == 2, "two sessions");
    }
  }

  @Test
  void aServersTextsAreOneBoundedPrintableLineWithoutTheCredential() throws Exception {
    String nasty = "boom " + SECRET + "\u001b[31m\u0000" + "x".repeat(100_000) + "\nsecond line";
    RecordingLogger logs = new RecordingLogger();
    try (Blocking h = new Blocking()) {
      Worker w =
          start(
              b -> b.logger(logs).slots(2).cancelGrace(Duration.ZERO),
              handlers("h", h.handler));
      FakeStream stream = server.nextStream();
      stream.expect(HELLO);
      stream.send(
          PullResponse.newBuilder()
              .setWelcome(
                  ServerWelcome.newBuilder()
                      .setServerId(nasty)
                      .setHeartbeatInterval(millis(60_000)))
              .build());
      eventually(() -> w.sessions() == 1, "the welcome");
      List<String> connected = logs.at(Level.INFO, "connected to server");
      assertEquals(1, connected.size(), logs.all());
      assertTrue(connected.get(0).contains("server boom ***?[31m?xxx"), connected.get(0));
      // A cancel's reason of a megabyte: the result's error is bounded.
      stream.send(assign(assignment("e1", "h", 1), assignment("e2", "h", 1)));
      h.nextStarted();
      h.nextStarted();
      stream.send(cancel("e1", 1, "r".repeat(1 << 20)));
      ExecutionResult r = stream.expect(RESULT).getResult().getResults(0);
      assertEquals(ResultOutcome.RESULT_OUTCOME_CANCELED, r.getOutcome());
      assertTrue(
          r.getError().length() <= Worker.CANCEL_REASON_CHARS + 100, r.getError().length() + "");
      // A rejected result, a second welcome, each five times: a line each.
      for (int i = 0; i < 5; i++) {
        stream.send(
            PullResponse.newBuilder()
                .setAck(
                    ResultAcks.newBuilder()
                        .addAcks(
                            ResultAck.newBuilder()
                                .setExecutionId("e1")
                                .setDelivery(1)
                                .setReason(nasty)))
                .build());
        stream.send(welcome(60_000));
      }
      eventually(() -> w.unacked().isEmpty(), "the rejection forgets the result");
      stream.send(
          PullResponse.newBuilder().setDrain(ServerDrain.newBuilder().setReason(nasty)).build());
      eventually(w::draining, "the drain");
      stream.failWith(Status.UNAVAILABLE.withDescription(nasty));
      FakeStream next = server.nextStream();
      next.expect(HELLO);
      next.failWith(Status.UNAUTHENTICATED.withDescription(nasty));
      await(runReturned, "run() ends");
      WorkerFatalException fatal = assertInstanceOf(WorkerFatalException.class, runFailure.get());
      assertFalse(fatal.getMessage().contains(SECRET), fatal.getMessage());
      assertFalse(fatal.getMessage().contains("second line"), fatal.getMessage());
      assertTrue(fatal.getMessage().length() < 500, fatal.getMessage());
      assertEquals(1, logs.at(Level.WARNING, "server rejected the result").size(), logs.all());
      assertEquals(1, logs.at(Level.WARNING, "second welcome").size(), logs.all());
      assertEquals(4, logs.at(Level.DEBUG, "second welcome").size(), logs.all());
      assertEquals(1, logs.at(Level.INFO, "drains").size(), logs.all());
      assertEquals(1, logs.at(Level.ERROR, "refused the worker").size(), logs.all());
      String all = logs.all();
      for (String forbidden :
          List.of(
              SECRET, "\u001b", "\u0000", "second line", "x".repeat(ServerText.SAID_CHARS + 1))) {
        assertFalse(all.contains(forbidden), "the logs hold " + forbidden);
      }
      for (RecordingLogger.Line line : logs.lines) {
        assertTrue(line.text().length() < 2000, line.text().substring(0, 300));
      }
    }
  }

  @Test
  void aCancelOfManyEntriesCancelsEachAttemptOnce() throws Exception {
    try (Blocking h = new Blocking()) {
      Worker w =
          start(
              b -> b.slots(100).cancelGrace(Duration.ZERO), handlers("h", h.handler));
      FakeStream stream = server.nextStream();
      stream.expect(HELLO);
      stream.send(welcome(60_000));
      Assignment.Builder[] assignments = new Assignment.Builder[100];
      for (int i = 0; i < assignments.length; i++) {
        assignments[i] = assignment("job" + i + ":e", "h", 1);
      }
      stream.send(assign(assignments));
      for (int i = 0; i < 100; i++) {
        h.nextStarted();
      }
      // 100 000 entries naming nothing (delivery 0: every delivery of the id), then every tenth
      // attempt three times over: a scan an entry would be 1e7 steps.
      CancelExecutions.Builder entries = CancelExecutions.newBuilder().setReason("stop");
      for (int i = 0; i < 100_000; i++) {
        entries.addExecutions(held("none" + i + ":e", 0));
      }
      for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 100; i += 10) {
          entries.addExecutions(held("job" + i + ":e", 0));
        }
      }
      stream.send(PullResponse.newBuilder().setCancel(entries).build());
      Map<String, Integer> canceled = new HashMap<>();
      while (canceled.size() < 10) {
        for (ExecutionResult r : stream.expect(RESULT).getResult().getResultsList()) {
          assertEquals(ResultOutcome.RESULT_OUTCOME_CANCELED, r.getOutcome(), r.toString());
          canceled.merge(r.getExecutionId(), 1, Integer::sum);
        }
      }
      assertTrue(canceled.values().stream().allMatch(n -> n == 1), canceled.toString());
      assertEquals(90, w.inFlight().size());
    }
  }

  @Test
  void anOutageIsALineThenLinesAfterDoublingGapsThenOneRecovery() {
    RecordingLogger logs = new RecordingLogger();
    SettableClock clock = new SettableClock();
    OutageLog outages = new OutageLog(logs, "worker w1", clock);
    for (int i = 0; i < 241; i++) { // a failure every 10 s for 40 minutes
      outages.failed("connecting to a", "UNAVAILABLE: down");
      clock.advance(Duration.ofSeconds(10));
    }
    outages.ok();
    List<String> warnings = logs.at(Level.WARNING, "");
    // The first line, then after 1, 3, 7, 15 minutes, then every 15 minutes.
    assertEquals(6, warnings.size(), logs.all());
    assertTrue(warnings.get(0).startsWith("worker w1: connecting to a failed, server unavailable"));
    List<String> after = new ArrayList<>();
    for (String warning : warnings.subList(1, warnings.size())) {
      after.add(warning.replaceAll(".*still failing for (\\d+) s.*", "$1"));
    }
    assertEquals(List.of("60", "180", "420", "900", "1800"), after);
    assertEquals(241 - 6, logs.at(Level.DEBUG, "").size());
    List<String> recovered = logs.at(Level.INFO, "recovered");
    assertEquals(List.of("worker w1: recovered after 2410 s (241 failures)"), recovered);
    // A relapse within a minute of the last line is quiet, and so is its recovery.
    RecordingLogger relapse = new RecordingLogger();
    OutageLog again = new OutageLog(relapse, "worker w1", clock);
    again.failed("the stream", "first");
    again.ok();
    again.failed("the stream", "relapse");
    again.ok();
    clock.advance(Duration.ofMinutes(1));
    again.failed("the stream", "a minute later");
    List<String> warned = relapse.at(Level.WARNING, "");
    assertEquals(2, warned.size(), relapse.all());
    assertTrue(warned.get(1).contains("a minute later"));
    assertEquals(1, relapse.at(Level.INFO, "recovered").size(), relapse.all());
    assertEquals(1, relapse.at(Level.DEBUG, "recovered").size(), relapse.all());
  }

  @Test
  void refusedReconnectsInALoopAreAFewLinesThenOneRecovery() throws Exception {
    RecordingLogger logs = new RecordingLogger();
    SettableClock clock = new SettableClock();
    start(b -> b.logger(logs).clock(clock), handlers("h", (Handler) ctx -> null));
    for (int i = 0; i < 40; i++) { // 20 minutes
      FakeStream stream = server.nextStream();
      stream.expect(HELLO);
      clock.advance(Duration.ofSeconds(30));
      stream.failWith(Status.UNAVAILABLE.withDescription("restarting " + SECRET + "\nsecond line"));
    }
    FakeStream stream = server.nextStream();
    stream.expect(HELLO);
    stream.send(welcome(50));
    assertTrue(logs.at(Level.INFO, "recovered").isEmpty(), "a welcome is not enough");
    stream.expect(HEARTBEAT); // the stream lasted a heartbeat interval
    eventually(() -> !logs.at(Level.INFO, "recovered").isEmpty(), "the recovery");
    assertEquals(
        List.of("worker w1: recovered after 1170 s (40 failures)"),
        logs.at(Level.INFO, "recovered"));
    List<String> warnings = logs.at(Level.WARNING, "");
    // The first failure, then after 1, 3, 7 and 15 minutes.
    assertEquals(5, warnings.size(), logs.all());
    assertTrue(warnings.get(0).contains("connecting to "), warnings.get(0));
    assertFalse(logs.all().contains(SECRET) || logs.all().contains("second line"), logs.all());
  }

  @Test
  void aWelcomeThenACloseInALoopIsAnOutageUntilAStreamLasts() throws Exception {
    RecordingLogger logs = new RecordingLogger();
    start(b -> b.logger(logs), handlers("h", (Handler) ctx -> null));
    for (int i = 0; i < 5; i++) { // a welcome, a drain, a clean close, within a heartbeat interval
      FakeStream stream = server.nextStream();
      stream.expect(HELLO);
      stream.send(welcome(60_000));
      stream.send(PullResponse.newBuilder().setDrain(ServerDrain.newBuilder()).build());
      await(stream.closed, "the worker closes its side");
      stream.end();
    }
    FakeStream stream = server.nextStream();
    stream.expect(HELLO);
    List<String> warned = logs.at(Level.WARNING, "");
    assertEquals(1, warned.size(), logs.all());
    assertTrue(
        warned.get(0).contains("ended the stream within a heartbeat interval"), warned.get(0));
    assertEquals(1, logs.at(Level.INFO, "connected to server").size(), logs.all());
    assertTrue(logs.at(Level.INFO, "closed; reconnecting").isEmpty(), logs.all());
    assertEquals(1, logs.at(Level.INFO, "drained").size(), logs.all());
    stream.send(welcome(50));
    stream.expect(HEARTBEAT);
    eventually(() -> !logs.at(Level.INFO, "recovered").isEmpty(), "the recovery");
    assertTrue(logs.at(Level.INFO, "recovered").get(0).contains("(5 failures)"), logs.all());
  }
}

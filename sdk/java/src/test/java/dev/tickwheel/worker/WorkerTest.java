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
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
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

  /** Returns once {@code check} holds; fails after 5 s. */
  private static void eventually(BooleanSupplier check, String what) {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
    while (!check.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        fail("not within 5 s: " + what);
      }
      LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5));
    }
  }

  private static void await(CountDownLatch latch, String what) throws InterruptedException {
    assertTrue(latch.await(5, TimeUnit.SECONDS), "not within 5 s: " + what);
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
    stopper.join(5000);
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
    stopper.join(5000);
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
}

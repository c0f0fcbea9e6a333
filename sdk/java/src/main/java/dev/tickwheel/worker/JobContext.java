package dev.tickwheel.worker;

import com.google.protobuf.Timestamp;
import dev.tickwheel.v1.Assignment;
import dev.tickwheel.v1.ExecutionOrigin;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * What a {@link Handler} knows about the attempt it runs, and how it learns that the attempt must
 * stop.
 *
 * <p>{@link #executionId()} is the idempotency key: retries ({@link #attempt()} + 1) and
 * re-deliveries after a worker or server died ({@link #delivery()} + 1) keep it, so a handler whose
 * effect must happen once records it under this key.
 *
 * <p>Cancellation: when the server cancels the execution, its deadline passes, or the worker stops
 * without waiting for it, the context turns {@link #isCancelled() cancelled} (once, for good), the
 * listeners given to {@link #onCancel} run, and the handler's thread is interrupted. A handler
 * checks {@link #isCancelled()} between steps, waits with {@link #awaitCancellation}, or lets
 * {@link InterruptedException} end a blocking call. Safe to use from any thread.
 */
public final class JobContext {
  /** Progress longer than this many characters (code points) is cut. */
  public static final int PROGRESS_MAX_CHARS = 256;

  private final Assignment assignment;
  private final String handler;
  private final CountDownLatch cancelled = new CountDownLatch(1);
  private final List<Runnable> listeners = new ArrayList<>();
  private volatile String cancelReason;
  private volatile String progress = "";

  JobContext(Assignment assignment) {
    this.assignment = assignment;
    this.handler =
        assignment.getTarget().hasHandler() ? assignment.getTarget().getHandler().getName() : "";
  }

  /** The idempotency key, stable across attempts and deliveries. */
  public String executionId() {
    return assignment.getExecutionId();
  }

  /** Same as {@link #executionId()}; the {@code Idempotency-Key} an HTTP target sees. */
  public String idempotencyKey() {
    return assignment.getExecutionId();
  }

  /** The job this execution belongs to. */
  public String jobId() {
    return assignment.getJobId();
  }

  /** The job's tenant. */
  public String tenant() {
    return assignment.getTenant();
  }

  /** The attempt number, from 1; a retry after a failure increments it. */
  public int attempt() {
    return assignment.getAttempt();
  }

  /** How many times this attempt has been handed out, from 1. */
  public int delivery() {
    return assignment.getDelivery();
  }

  /** The occurrence's nominal instant: what the schedule names. */
  public Instant nominalAt() {
    return instant(assignment.getNominalAt());
  }

  /** Nominal plus jitter: the earliest instant it could start (the nominal one when unset). */
  public Instant dueAt() {
    return assignment.hasDueAt() ? instant(assignment.getDueAt()) : nominalAt();
  }

  /** When the attempt is abandoned and reported TIMED_OUT; empty: no limit. */
  public Optional<Instant> deadlineAt() {
    return assignment.hasDeadlineAt()
        ? Optional.of(instant(assignment.getDeadlineAt()))
        : Optional.empty();
  }

  /** The payload as given at creation (or by the trigger): a fresh copy on every call. */
  public byte[] payload() {
    return assignment.getPayload().toByteArray();
  }

  /** The payload decoded as UTF-8 (malformed bytes become U+FFFD). */
  public String payloadText() {
    return assignment.getPayload().toString(StandardCharsets.UTF_8);
  }

  /** The handler name the job targets. */
  public String handler() {
    return handler;
  }

  /** W3C trace context of the dispatch, empty when there is none. */
  public String traceparent() {
    return assignment.getTraceparent();
  }

  /** How many missed occurrences this execution stands for (misfire run_once). */
  public int missedCount() {
    return assignment.getMissedCount();
  }

  /** How the execution came to exist (scheduled, trigger, backfill). */
  public ExecutionOrigin origin() {
    return assignment.getOrigin();
  }

  /**
   * Records progress; the worker's next heartbeat carries it to the server. Liveness does not
   * depend on this call: the worker heartbeats every execution it runs at the server's interval.
   * Cut to {@link #PROGRESS_MAX_CHARS} characters; null or empty keeps the previous progress.
   */
  public void heartbeat(String progress) {
    if (progress == null || progress.isEmpty()) {
      return;
    }
    int count = progress.codePointCount(0, progress.length());
    this.progress =
        count <= PROGRESS_MAX_CHARS
            ? progress
            : progress.substring(0, progress.offsetByCodePoints(0, PROGRESS_MAX_CHARS));
  }

  /** The last progress given to {@link #heartbeat}, empty before. */
  public String progress() {
    return progress;
  }

  /** True once the attempt must stop (canceled, past its deadline, or the worker stopping). */
  public boolean isCancelled() {
    return cancelled.getCount() == 0;
  }

  /** Why the attempt must stop, once it must. */
  public Optional<String> cancelReason() {
    return Optional.ofNullable(cancelReason);
  }

  /**
   * Runs {@code listener} once when the attempt must stop, on the thread that stops it (at once, on
   * this thread, when it already must). A listener should be quick and must not block; what it
   * throws is ignored.
   */
  public void onCancel(Runnable listener) {
    synchronized (listeners) {
      if (!isCancelled()) {
        listeners.add(listener);
        return;
      }
    }
    runQuietly(listener);
  }

  /**
   * Waits until the attempt must stop, at most {@code timeout}.
   *
   * @return true when it must stop (the worker's own interrupt then stays set on the thread, so
   *     blocking calls that follow end at once), false when {@code timeout} passed first
   * @throws InterruptedException when the thread is interrupted for another reason
   */
  public boolean awaitCancellation(Duration timeout) throws InterruptedException {
    try {
      return cancelled.await(Math.max(0, timeout.toNanos()), TimeUnit.NANOSECONDS);
    } catch (InterruptedException e) {
      if (isCancelled()) {
        Thread.currentThread().interrupt();
        return true;
      }
      throw e;
    }
  }

  /**
   * The attempt must stop: flags it (before its thread is interrupted, so an interrupted handler
   * sees {@link #isCancelled()}). Only the first call counts. Runs no listener: the worker calls
   * {@link #runCancelListeners()} once it holds no lock.
   */
  void markCancelled(String reason) {
    synchronized (listeners) {
      if (isCancelled()) {
        return;
      }
      cancelReason = reason;
      cancelled.countDown();
    }
  }

  /** Runs (and forgets) the listeners registered before the attempt was marked cancelled. */
  void runCancelListeners() {
    List<Runnable> toRun;
    synchronized (listeners) {
      if (!isCancelled()) {
        return;
      }
      toRun = new ArrayList<>(listeners);
      listeners.clear();
    }
    toRun.forEach(JobContext::runQuietly);
  }

  private static void runQuietly(Runnable listener) {
    try {
      listener.run();
    } catch (RuntimeException e) {
      // A listener's failure must not keep the others, or the worker, from stopping the attempt.
    }
  }

  private static Instant instant(Timestamp timestamp) {
    return Worker.instant(timestamp);
  }
}

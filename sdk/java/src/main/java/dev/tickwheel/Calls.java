package dev.tickwheel;

import io.grpc.Deadline;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.AbstractStub;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.function.BiFunction;
import java.util.function.DoubleSupplier;
import java.util.function.Predicate;

/**
 * How both clients send a unary call: within the client's deadline, retried as the retry options
 * and the RPC's own rule allow, every failure a {@link TickwheelException}.
 */
final class Calls {
  private Calls() {}

  /** How a client waits between retries. */
  @FunctionalInterface
  interface Sleeper {
    void sleep(Duration duration) throws InterruptedException;
  }

  /**
   * Sends {@code request} with {@code send}, retrying while the status is in the retry options'
   * codes, {@code repeatable} holds for the request, attempts remain and the wait ends before the
   * deadline ({@code timeout} from now, covering every attempt and wait; null for none).
   *
   * @throws TickwheelException the last attempt's failure
   */
  static <S extends AbstractStub<S>, Req, Resp> Resp invoke(
      S stub,
      BiFunction<S, Req, Resp> send,
      Predicate<Req> repeatable,
      Req request,
      Duration timeout,
      RetryOptions retry,
      Sleeper sleeper,
      DoubleSupplier random) {
    Deadline deadline =
        timeout == null ? null : Deadline.after(timeout.toNanos(), TimeUnit.NANOSECONDS);
    S bounded = deadline == null ? stub : stub.withDeadline(deadline);
    for (int attempt = 1; ; attempt++) {
      TickwheelException failure;
      try {
        return send.apply(bounded, request);
      } catch (StatusRuntimeException e) {
        failure = TickwheelException.from(e);
      }
      Duration delay = retryDelay(retry, repeatable.test(request), failure, attempt, deadline, random);
      if (delay == null) {
        throw failure;
      }
      try {
        sleeper.sleep(delay);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw failure;
      }
    }
  }

  /**
   * How long to wait before attempt {@code attempt + 1}, or null to give up: when the status is
   * not retryable, the call is not safe to repeat, the attempts are spent, or the wait would end
   * past the deadline.
   */
  private static Duration retryDelay(
      RetryOptions retry,
      boolean repeatable,
      TickwheelException failure,
      int attempt,
      Deadline deadline,
      DoubleSupplier random) {
    if (!retry.retryableCodes().contains(failure.code())
        || !repeatable
        || attempt >= retry.maxAttempts()) {
      return null;
    }
    Duration delay = retry.backoff(attempt, random.getAsDouble());
    if (deadline != null && delay.toNanos() >= deadline.timeRemaining(TimeUnit.NANOSECONDS)) {
      return null;
    }
    return delay;
  }
}

package dev.tickwheel;

import io.grpc.Status;
import java.time.Duration;
import java.util.EnumSet;
import java.util.Objects;
import java.util.Set;

/**
 * How a call that failed with a retryable status is retried.
 *
 * <p>Only calls that are safe to repeat are ever retried: reads, and writes made idempotent by a
 * request id (CreateJob, TriggerJob) or a dry run. Other writes (UpdateJob, DeleteJob, ...) fail on
 * the first error, because a reply lost after the server committed would otherwise apply them
 * twice.
 *
 * <p>Retry {@code n} (from 1) waits a uniformly random time in {@code [0, min(maxBackoff,
 * initialBackoff * 2^(n-1))]} (full jitter), and never past the call's deadline.
 *
 * @param maxAttempts attempts in total, including the first; 1 disables retries
 * @param initialBackoff the upper bound of the first retry's wait
 * @param maxBackoff the cap of any single wait
 * @param retryableCodes status codes that may be retried. UNAVAILABLE means the request did not
 *     reach a server that could act on it, or the connection broke.
 */
public record RetryOptions(
    int maxAttempts, Duration initialBackoff, Duration maxBackoff, Set<Status.Code> retryableCodes) {

  /** Five attempts, waits bounded by 0.2 s, 0.4 s, 0.8 s, 1.6 s; UNAVAILABLE only. */
  public static final RetryOptions DEFAULT =
      new RetryOptions(
          5, Duration.ofMillis(200), Duration.ofSeconds(5), EnumSet.of(Status.Code.UNAVAILABLE));

  /** Every call is a single attempt. */
  public static final RetryOptions NONE =
      new RetryOptions(1, Duration.ZERO, Duration.ZERO, EnumSet.noneOf(Status.Code.class));

  /** Checks the options: a bad value fails here, not on the first call. */
  public RetryOptions {
    Objects.requireNonNull(initialBackoff, "initialBackoff");
    Objects.requireNonNull(maxBackoff, "maxBackoff");
    Objects.requireNonNull(retryableCodes, "retryableCodes");
    if (maxAttempts < 1) {
      throw new IllegalArgumentException("RetryOptions.maxAttempts must be at least 1");
    }
    if (initialBackoff.isNegative() || maxBackoff.compareTo(initialBackoff) < 0) {
      throw new IllegalArgumentException("RetryOptions needs 0 <= initialBackoff <= maxBackoff");
    }
    retryableCodes = Set.copyOf(retryableCodes);
  }

  /** {@code maxAttempts} in total with the default backoff and codes. */
  public static RetryOptions attempts(int maxAttempts) {
    return new RetryOptions(
        maxAttempts, DEFAULT.initialBackoff, DEFAULT.maxBackoff, DEFAULT.retryableCodes);
  }

  /**
   * The wait before retry number {@code retry} (1 for the first retry), given {@code u} drawn
   * uniformly from [0, 1): {@code u * min(maxBackoff, initialBackoff * 2^(retry-1))}. Pure, so
   * tests pin {@code u}.
   */
  public Duration backoff(int retry, double u) {
    if (retry < 1) {
      throw new IllegalArgumentException("retries count from 1");
    }
    long initial = initialBackoff.toNanos();
    long cap = maxBackoff.toNanos();
    int step = retry - 1;
    // Doubling past the cap would overflow; stop as soon as it reaches it.
    long ceiling = step < 62 && initial <= (cap >> step) ? initial << step : cap;
    return Duration.ofNanos((long) (u * ceiling));
  }
}

package dev.tickwheel.worker;

import java.time.Duration;
import java.util.Optional;

/**
 * Thrown by a {@link Handler} for a failure worth retrying: the attempt is reported
 * FAILED_RETRYABLE (as for any exception other than {@link PermanentException}), optionally asking
 * the server to wait at least {@link #retryAfter()} before the next attempt (honoured within the
 * job's retry policy; the server counts more than 24 hours as 24 hours).
 */
public class RetryableException extends Exception {
  private static final long serialVersionUID = 1L;

  private final Duration retryAfter;

  /** A retryable failure described by {@code message}. */
  public RetryableException(String message) {
    this(message, null);
  }

  /**
   * A retryable failure described by {@code message}, to be retried no earlier than {@code
   * retryAfter} from now (null: as the retry policy says).
   *
   * @throws IllegalArgumentException when {@code retryAfter} is negative
   */
  public RetryableException(String message, Duration retryAfter) {
    super(message);
    if (retryAfter != null && retryAfter.isNegative()) {
      throw new IllegalArgumentException("retryAfter must not be negative");
    }
    this.retryAfter = retryAfter;
  }

  /** The earliest retry the handler asked for, if any. */
  public Optional<Duration> retryAfter() {
    return Optional.ofNullable(retryAfter);
  }
}

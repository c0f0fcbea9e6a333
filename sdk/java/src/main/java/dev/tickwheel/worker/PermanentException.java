package dev.tickwheel.worker;

/**
 * Thrown by a {@link Handler} for a failure that retrying cannot fix: the attempt is reported
 * FAILED_PERMANENT with this message, and the execution is dead-lettered without further attempts
 * (its payload is kept for replay).
 */
public class PermanentException extends Exception {
  private static final long serialVersionUID = 1L;

  /** A permanent failure described by {@code message}. */
  public PermanentException(String message) {
    super(message);
  }

  /** A permanent failure described by {@code message}, caused by {@code cause}. */
  public PermanentException(String message, Throwable cause) {
    super(message, cause);
  }
}

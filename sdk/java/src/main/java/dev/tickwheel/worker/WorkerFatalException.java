package dev.tickwheel.worker;

import io.grpc.Status;

/**
 * The server refused this worker (UNAUTHENTICATED, PERMISSION_DENIED, INVALID_ARGUMENT,
 * UNIMPLEMENTED): retrying with the same configuration cannot help, so {@link Worker#run()} ends
 * with this exception. Its cause is the {@link dev.tickwheel.TickwheelException} of the refusal.
 */
public final class WorkerFatalException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final transient Status.Code code;

  WorkerFatalException(String message, Status.Code code, Throwable cause) {
    super(message, cause);
    this.code = code;
  }

  /** The status code of the refusal. */
  public Status.Code code() {
    return code;
  }
}

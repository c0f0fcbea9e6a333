package dev.tickwheel.worker;

/**
 * The code a {@link Worker} runs for the executions of one handler name.
 *
 * <p>Called on one of the worker's handler threads (at most {@code slots} at once) with the
 * attempt's context. The outcome the worker reports:
 *
 * <ul>
 *   <li>returns: SUCCEEDED, with the returned bytes as the output (null: empty; more than 16 KiB is
 *       cut to 16 KiB);
 *   <li>throws {@link PermanentException}: FAILED_PERMANENT, no retry (dead letter);
 *   <li>throws {@link RetryableException}: FAILED_RETRYABLE with its message (and its retry
 *       after), retried within the job's retry policy;
 *   <li>throws anything else: FAILED_RETRYABLE, the error being the exception's class and message;
 *   <li>the server cancels the execution: the context turns {@link JobContext#isCancelled()
 *       cancelled}, its listeners run and the handler thread is interrupted; CANCELED is reported
 *       when the handler returns or after the worker's cancel grace, whichever is first;
 *   <li>the assignment's deadline passes: the same signals, and TIMED_OUT is reported at once.
 * </ul>
 *
 * <p>A handler that ignores the signals keeps its slot (and its thread) until it returns, so the
 * worker never runs more than {@code slots} handlers at once.
 */
@FunctionalInterface
public interface Handler {
  /**
   * Runs one attempt.
   *
   * @param context the attempt: ids, payload, cancellation
   * @return the output kept in the execution's history; null for none
   * @throws Exception a failure, reported as described above
   */
  byte[] handle(JobContext context) throws Exception;
}

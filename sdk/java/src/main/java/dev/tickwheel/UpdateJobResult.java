package dev.tickwheel;

import dev.tickwheel.v1.Job;
import java.util.Objects;

/**
 * What became of one request given to {@link TickwheelClient#updateJobs}: the job as stored after
 * it (at its old version when it changed nothing), or {@code error}, the exception UpdateJob would
 * have thrown for it alone (NOT_FOUND, FAILED_PRECONDITION for a stale version, INVALID_ARGUMENT
 * with field violations relative to the item). Exactly one of {@code job} and {@code error} is
 * non-null.
 *
 * @param jobId the id the request named
 * @param job the job as stored, or null when refused
 * @param error why the change was refused, or null
 */
public record UpdateJobResult(String jobId, Job job, TickwheelException error) {
  /** Checks that exactly one of job and error is set. */
  public UpdateJobResult {
    Objects.requireNonNull(jobId, "jobId");
    if ((job == null) == (error == null)) {
      throw new IllegalArgumentException("exactly one of job and error is set");
    }
  }

  /** True when the change was applied (or changed nothing). */
  public boolean ok() {
    return error == null;
  }
}

package dev.tickwheel;

import dev.tickwheel.v1.Job;
import java.util.Objects;

/**
 * What became of one request given to {@link TickwheelClient#createJobs}: the job as stored and
 * {@code created} (false when its request id had been seen and the existing job is returned), or
 * {@code error}, the exception CreateJob would have thrown for that request alone (its field
 * violations name fields of the item, {@code job.schedule.cron.expression}). Exactly one of {@code
 * job} and {@code error} is non-null.
 *
 * @param requestId the request id the job was sent with: sending it again with that id is safe
 * @param job the job as stored, or null when refused
 * @param created true when this request created the job
 * @param error why the job was refused, or null
 */
public record CreateJobResult(
    String requestId, Job job, boolean created, TickwheelException error) {
  /** Checks that exactly one of job and error is set. */
  public CreateJobResult {
    Objects.requireNonNull(requestId, "requestId");
    if ((job == null) == (error == null)) {
      throw new IllegalArgumentException("exactly one of job and error is set");
    }
  }

  /** True when the job exists (created now or before). */
  public boolean ok() {
    return error == null;
  }
}

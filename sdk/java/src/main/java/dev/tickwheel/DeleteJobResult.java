package dev.tickwheel;

import java.util.Objects;

/**
 * What became of one request given to {@link TickwheelClient#deleteJobs}: deleted, with how many
 * executions that had not started were canceled, or {@code error}, the exception DeleteJob would
 * have thrown for it alone. NOT_FOUND after a retried call may mean an earlier attempt deleted it.
 *
 * @param jobId the id the request named
 * @param canceledExecutions executions canceled by the delete (0 when refused)
 * @param error why the delete was refused, or null
 */
public record DeleteJobResult(String jobId, long canceledExecutions, TickwheelException error) {
  /** Checks the id. */
  public DeleteJobResult {
    Objects.requireNonNull(jobId, "jobId");
  }

  /** True when this request deleted the job. */
  public boolean ok() {
    return error == null;
  }
}

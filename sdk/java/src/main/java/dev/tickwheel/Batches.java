package dev.tickwheel;

import dev.tickwheel.v1.BatchCreateJobsRequest;
import dev.tickwheel.v1.BatchCreateJobsResponse;
import dev.tickwheel.v1.BatchCreateJobsResult;
import dev.tickwheel.v1.CreateJobRequest;
import dev.tickwheel.v1.CreateJobResponse;
import io.grpc.Status;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.function.Supplier;

/**
 * Creating any number of jobs through BatchCreateJobs, the pure half: {@link #plan} splits the
 * requests into calls of at most {@link TickwheelClient#MAX_BATCH_ITEMS} items and gives each item
 * its request id once, so a retried call resends the very same ids; {@link #results} pairs one
 * call's response with its items.
 */
final class Batches {
  private Batches() {}

  /**
   * The BatchCreateJobs requests that create {@code requests}, in order, at most {@code maxItems}
   * items each; none for no requests. An item without a request id gets one from {@code
   * newRequestId}.
   */
  static List<BatchCreateJobsRequest> plan(
      List<CreateJobRequest> requests, int maxItems, Supplier<String> newRequestId) {
    List<BatchCreateJobsRequest> batches = new ArrayList<>();
    for (int start = 0; start < requests.size(); start += maxItems) {
      BatchCreateJobsRequest.Builder batch = BatchCreateJobsRequest.newBuilder();
      int end = Math.min(start + maxItems, requests.size());
      for (CreateJobRequest request : requests.subList(start, end)) {
        Objects.requireNonNull(request, "a request of createJobs is null");
        batch.addItems(
            request.getRequestId().isEmpty()
                ? request.toBuilder().setRequestId(newRequestId.get()).build()
                : request);
      }
      batches.add(batch.build());
    }
    return batches;
  }

  /**
   * One result per item of {@code batch}, in order, from its {@code response}. A response with
   * another number of results than items, or a result with neither a job nor an error, breaks the
   * contract: it throws INTERNAL rather than pair a job with the wrong item or drop one.
   */
  static List<CreateJobResult> results(
      BatchCreateJobsRequest batch, BatchCreateJobsResponse response) {
    if (response.getResultsCount() != batch.getItemsCount()) {
      throw internal(
          "BatchCreateJobs answered "
              + response.getResultsCount()
              + " results for "
              + batch.getItemsCount()
              + " items");
    }
    List<CreateJobResult> out = new ArrayList<>(batch.getItemsCount());
    for (int i = 0; i < batch.getItemsCount(); i++) {
      String requestId = batch.getItems(i).getRequestId();
      BatchCreateJobsResult result = response.getResults(i);
      if (result.hasJob() && result.getJob().hasJob()) {
        CreateJobResponse job = result.getJob();
        out.add(new CreateJobResult(requestId, job.getJob(), job.getCreated(), null));
      } else if (result.hasError()) {
        TickwheelException error = TickwheelException.fromStatus(result.getError());
        out.add(new CreateJobResult(requestId, null, false, error));
      } else {
        throw internal("BatchCreateJobs result " + i + " has neither a job nor an error");
      }
    }
    return out;
  }

  private static TickwheelException internal(String message) {
    return new TickwheelException(Status.Code.INTERNAL, message, List.of(), List.of(), null);
  }
}

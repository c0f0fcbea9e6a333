package dev.tickwheel;

import dev.tickwheel.v1.BatchDeleteJobsRequest;
import dev.tickwheel.v1.BatchDeleteJobsResponse;
import dev.tickwheel.v1.BatchDeleteJobsResult;
import dev.tickwheel.v1.BatchUpdateJobsRequest;
import dev.tickwheel.v1.BatchUpdateJobsResponse;
import dev.tickwheel.v1.BatchUpdateJobsResult;
import dev.tickwheel.v1.DeleteJobRequest;
import dev.tickwheel.v1.UpdateJobRequest;
import io.grpc.Status;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * Changing and deleting any number of jobs through BatchUpdateJobs and BatchDeleteJobs, the pure
 * half: the requests split into calls of at most {@link TickwheelClient#MAX_BATCH_ITEMS} items,
 * and one call's response paired with its items. No request ids: each update names the version
 * it expects and a delete happens once, so a retried call applies nothing twice.
 */
final class BatchChanges {
  private BatchChanges() {}

  static List<BatchUpdateJobsRequest> planUpdates(List<UpdateJobRequest> requests, int maxItems) {
    List<BatchUpdateJobsRequest> batches = new ArrayList<>();
    for (int start = 0; start < requests.size(); start += maxItems) {
      BatchUpdateJobsRequest.Builder batch = BatchUpdateJobsRequest.newBuilder();
      int end = Math.min(start + maxItems, requests.size());
      for (UpdateJobRequest request : requests.subList(start, end)) {
        batch.addItems(Objects.requireNonNull(request, "a request of updateJobs is null"));
      }
      batches.add(batch.build());
    }
    return batches;
  }

  static List<BatchDeleteJobsRequest> planDeletes(List<DeleteJobRequest> requests, int maxItems) {
    List<BatchDeleteJobsRequest> batches = new ArrayList<>();
    for (int start = 0; start < requests.size(); start += maxItems) {
      BatchDeleteJobsRequest.Builder batch = BatchDeleteJobsRequest.newBuilder();
      int end = Math.min(start + maxItems, requests.size());
      for (DeleteJobRequest request : requests.subList(start, end)) {
        batch.addItems(Objects.requireNonNull(request, "a request of deleteJobs is null"));
      }
      batches.add(batch.build());
    }
    return batches;
  }

  /** One result per item, in order; INTERNAL when the response breaks the contract. */
  static List<UpdateJobResult> updateResults(
      BatchUpdateJobsRequest batch, BatchUpdateJobsResponse response) {
    sameLength("BatchUpdateJobs", batch.getItemsCount(), response.getResultsCount());
    List<UpdateJobResult> out = new ArrayList<>(batch.getItemsCount());
    for (int i = 0; i < batch.getItemsCount(); i++) {
      String jobId = batch.getItems(i).getJob().getId();
      BatchUpdateJobsResult result = response.getResults(i);
      if (result.hasJob() && result.getJob().hasJob()) {
        out.add(new UpdateJobResult(jobId, result.getJob().getJob(), null));
      } else if (result.hasError()) {
        out.add(new UpdateJobResult(jobId, null, TickwheelException.fromStatus(result.getError())));
      } else {
        throw internal("BatchUpdateJobs result " + i + " has neither a job nor an error");
      }
    }
    return out;
  }

  /** One result per item, in order; INTERNAL when the response breaks the contract. */
  static List<DeleteJobResult> deleteResults(
      BatchDeleteJobsRequest batch, BatchDeleteJobsResponse response) {
    sameLength("BatchDeleteJobs", batch.getItemsCount(), response.getResultsCount());
    List<DeleteJobResult> out = new ArrayList<>(batch.getItemsCount());
    for (int i = 0; i < batch.getItemsCount(); i++) {
      String jobId = batch.getItems(i).getId();
      BatchDeleteJobsResult result = response.getResults(i);
      if (result.hasDeleted()) {
        out.add(new DeleteJobResult(jobId, result.getDeleted().getCanceledExecutions(), null));
      } else if (result.hasError()) {
        out.add(new DeleteJobResult(jobId, 0, TickwheelException.fromStatus(result.getError())));
      } else {
        throw internal("BatchDeleteJobs result " + i + " has neither a deletion nor an error");
      }
    }
    return out;
  }

  private static void sameLength(String method, int items, int results) {
    if (items != results) {
      throw internal(method + " answered " + results + " results for " + items + " items");
    }
  }

  private static TickwheelException internal(String message) {
    return new TickwheelException(Status.Code.INTERNAL, message, List.of(), List.of(), null);
  }

  /**
   * The ErrorInfo reason of a batch call the server refused, before writing anything, because its
   * answer would be over what a default client reads: send fewer items, or JOB_VIEW_BASIC.
   */
  static final String ANSWER_TOO_LARGE = "BATCH_ANSWER_TOO_LARGE";

  /** True when {@code error} is that refusal: nothing of the call was written. */
  static boolean answerTooLarge(TickwheelException error) {
    return error.details().stream()
        .anyMatch(
            detail ->
                detail instanceof com.google.rpc.ErrorInfo info
                    && ANSWER_TOO_LARGE.equals(info.getReason()));
  }

  /**
   * Sends items [from, to) of a call through {@code send}, which answers their results; a call
   * refused for the size of its answer (nothing written) is sent again as its two halves, in
   * order, until each answer fits. A refused single item, or any other error, is thrown.
   */
  static <R> List<R> halving(
      int from, int to, java.util.function.BiFunction<Integer, Integer, List<R>> send) {
    try {
      return send.apply(from, to);
    } catch (TickwheelException error) {
      if (to - from < 2 || !answerTooLarge(error)) {
        throw error;
      }
      int middle = from + (to - from) / 2;
      List<R> out = new ArrayList<>(halving(from, middle, send));
      out.addAll(halving(middle, to, send));
      return out;
    }
  }
}

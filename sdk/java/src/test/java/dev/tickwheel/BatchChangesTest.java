package dev.tickwheel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.FieldMask;
import dev.tickwheel.v1.BatchDeleteJobsRequest;
import dev.tickwheel.v1.BatchDeleteJobsResponse;
import dev.tickwheel.v1.BatchDeleteJobsResult;
import dev.tickwheel.v1.BatchUpdateJobsRequest;
import dev.tickwheel.v1.BatchUpdateJobsResponse;
import dev.tickwheel.v1.BatchUpdateJobsResult;
import dev.tickwheel.v1.DeleteJobRequest;
import dev.tickwheel.v1.DeleteJobResponse;
import dev.tickwheel.v1.Job;
import dev.tickwheel.v1.JobView;
import dev.tickwheel.v1.SchedulerServiceGrpc;
import dev.tickwheel.v1.UpdateJobRequest;
import dev.tickwheel.v1.UpdateJobResponse;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Deque;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** updateJobs and deleteJobs against a scripted in-process BatchUpdateJobs/BatchDeleteJobs. */
class BatchChangesTest {
  /**
   * Records every call; answers with the next queued failure, else applies every item whose id
   * does not start with "gone" (NOT_FOUND); {@code short} drops each answer's last result.
   */
  static final class FakeChanges extends SchedulerServiceGrpc.SchedulerServiceImplBase {
    final List<BatchUpdateJobsRequest> updates = Collections.synchronizedList(new ArrayList<>());
    final List<BatchDeleteJobsRequest> deletes = Collections.synchronizedList(new ArrayList<>());
    final Deque<StatusRuntimeException> failures = new ArrayDeque<>();
    boolean shortAnswers;
    int answerLimit = Integer.MAX_VALUE;

    private static com.google.rpc.Status notFound() {
      return com.google.rpc.Status.newBuilder()
          .setCode(Status.Code.NOT_FOUND.value())
          .setMessage("job not found")
          .build();
    }

    @Override
    public void batchUpdateJobs(
        BatchUpdateJobsRequest request, StreamObserver<BatchUpdateJobsResponse> replies) {
      updates.add(request);
      StatusRuntimeException failure = failures.poll();
      if (failure != null) {
        replies.onError(failure);
        return;
      }
      if (request.getItemsCount() > answerLimit) {
        replies.onError(answerTooLarge());
        return;
      }
      BatchUpdateJobsResponse.Builder response = BatchUpdateJobsResponse.newBuilder();
      for (UpdateJobRequest item : request.getItemsList()) {
        if (item.getJob().getId().startsWith("gone")) {
          response.addResults(BatchUpdateJobsResult.newBuilder().setError(notFound()));
        } else {
          Job job = item.getJob().toBuilder().setVersion(item.getJob().getVersion() + 1).build();
          response.addResults(
              BatchUpdateJobsResult.newBuilder().setJob(UpdateJobResponse.newBuilder().setJob(job)));
        }
      }
      if (shortAnswers) {
        response.removeResults(response.getResultsCount() - 1);
      }
      replies.onNext(response.build());
      replies.onCompleted();
    }

    @Override
    public void batchDeleteJobs(
        BatchDeleteJobsRequest request, StreamObserver<BatchDeleteJobsResponse> replies) {
      deletes.add(request);
      StatusRuntimeException failure = failures.poll();
      if (failure != null) {
        replies.onError(failure);
        return;
      }
      BatchDeleteJobsResponse.Builder response = BatchDeleteJobsResponse.newBuilder();
      for (DeleteJobRequest item : request.getItemsList()) {
        if (item.getId().startsWith("gone")) {
          response.addResults(BatchDeleteJobsResult.newBuilder().setError(notFound()));
        } else {
          response.addResults(
              BatchDeleteJobsResult.newBuilder()
                  .setDeleted(
                      DeleteJobResponse.newBuilder().setCanceledExecutions(item.getId().length())));
        }
      }
      if (shortAnswers) {
        response.removeResults(response.getResultsCount() - 1);
      }
      replies.onNext(response.build());
      replies.onCompleted();
    }
  }

  /** The server's refusal of a call whose answer would be too large (nothing written). */
  static StatusRuntimeException answerTooLarge() {
    com.google.rpc.Status status =
        com.google.rpc.Status.newBuilder()
            .setCode(Status.Code.INVALID_ARGUMENT.value())
            .setMessage("items: the answer would be too large")
            .addDetails(
                com.google.protobuf.Any.pack(
                    com.google.rpc.ErrorInfo.newBuilder()
                        .setReason("BATCH_ANSWER_TOO_LARGE")
                        .setDomain("tickwheel")
                        .build()))
            .build();
    return io.grpc.protobuf.StatusProto.toStatusRuntimeException(status);
  }

  static List<UpdateJobRequest> updates(int count) {
    List<UpdateJobRequest> out = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      out.add(
          UpdateJobRequest.newBuilder()
              .setJob(Job.newBuilder().setId("job_" + i).setVersion(3).setName("n" + i))
              .setUpdateMask(FieldMask.newBuilder().addPaths("name"))
              .build());
    }
    return out;
  }

  private final FakeChanges fake = new FakeChanges();
  private final List<Duration> waits = new ArrayList<>();
  private Server server;
  private ManagedChannel channel;
  private TickwheelClient client;

  @BeforeEach
  void start() throws IOException {
    String name = InProcessServerBuilder.generateName();
    server = InProcessServerBuilder.forName(name).directExecutor().addService(fake).build().start();
    channel = InProcessChannelBuilder.forName(name).directExecutor().build();
    client = TickwheelClient.builder(channel).random(() -> 0.5).sleeper(waits::add).build();
  }

  @AfterEach
  void stop() {
    channel.shutdownNow();
    server.shutdownNow();
  }

  @Test
  void updatesGoInCallsOfAThousandInOrderWithItemErrors() {
    List<UpdateJobRequest> requests = new ArrayList<>(updates(2100));
    requests.set(5, requests.get(5).toBuilder().setJob(Job.newBuilder().setId("gone_5").setVersion(1)).build());

    List<UpdateJobResult> results = client.updateJobs(requests);

    assertEquals(List.of(1000, 1000, 100), fake.updates.stream().map(BatchUpdateJobsRequest::getItemsCount).toList());
    assertEquals(2100, results.size());
    assertEquals(4, results.get(0).job().getVersion());
    assertEquals("job_2099", results.get(2099).jobId());
    assertFalse(results.get(5).ok());
    assertEquals(Status.Code.NOT_FOUND, results.get(5).error().code());
  }

  @Test
  void aCallWhoseAnswerIsTooLargeIsHalvedUntilEachFitsInOrderWithItsView() {
    fake.answerLimit = 300;
    List<UpdateJobRequest> requests = updates(1100);

    List<UpdateJobResult> results = client.updateJobs(requests, JobView.JOB_VIEW_BASIC);

    assertEquals(
        List.of(1000, 500, 250, 250, 500, 250, 250, 100),
        fake.updates.stream().map(BatchUpdateJobsRequest::getItemsCount).toList());
    assertTrue(fake.updates.stream().allMatch(u -> u.getView() == JobView.JOB_VIEW_BASIC));
    assertEquals(1100, results.size());
    for (int i = 0; i < 1100; i++) {
      assertEquals("job_" + i, results.get(i).jobId());
      assertEquals("n" + i, results.get(i).job().getName());
    }
  }

  @Test
  void aRefusedSingleItemAndOtherRefusalsAreThrown() {
    fake.answerLimit = 0;
    TickwheelException error = assertThrows(TickwheelException.class, () -> client.updateJobs(updates(2)));
    assertEquals(Status.Code.INVALID_ARGUMENT, error.code());
    assertEquals(List.of(2, 1), fake.updates.stream().map(BatchUpdateJobsRequest::getItemsCount).toList());
    fake.updates.clear();
    fake.answerLimit = Integer.MAX_VALUE;
    fake.failures.add(Status.INVALID_ARGUMENT.withDescription("items: must hold 1 to 1000").asRuntimeException());
    assertThrows(TickwheelException.class, () -> client.updateJobs(updates(4)));
    assertEquals(List.of(4), fake.updates.stream().map(BatchUpdateJobsRequest::getItemsCount).toList());
  }

  @Test
  void unavailableIsRetriedWithTheSameItemsWhenEveryUpdateHasAVersion() {
    fake.failures.add(Status.UNAVAILABLE.asRuntimeException());
    List<UpdateJobResult> updated = client.updateJobs(updates(2));
    assertTrue(updated.stream().allMatch(UpdateJobResult::ok));
    assertEquals(2, fake.updates.size());
    assertEquals(fake.updates.get(0), fake.updates.get(1));

    fake.failures.add(Status.UNAVAILABLE.asRuntimeException());
    List<UpdateJobRequest> unversioned = new ArrayList<>(updates(1));
    unversioned.set(0, unversioned.get(0).toBuilder().setJob(Job.newBuilder().setId("a")).build());
    TickwheelException error = assertThrows(TickwheelException.class, () -> client.updateJobs(unversioned));
    assertEquals(Status.Code.UNAVAILABLE, error.code());
    assertEquals(3, fake.updates.size(), "an update without a version is not retried");
  }

  @Test
  void deletesAreRetriedAndMappedPerItem() {
    fake.failures.add(Status.UNAVAILABLE.asRuntimeException());
    List<DeleteJobResult> results =
        client.deleteJobs(
            List.of(
                DeleteJobRequest.newBuilder().setId("gone").build(),
                DeleteJobRequest.newBuilder().setId("job_1").setVersion(2).build()));
    assertEquals(2, fake.deletes.size());
    assertEquals(fake.deletes.get(0), fake.deletes.get(1));
    assertEquals(Status.Code.NOT_FOUND, results.get(0).error().code());
    assertEquals(5, results.get(1).canceledExecutions());
    assertEquals(List.of(), client.deleteJobs(List.of()));
  }

  @Test
  void aShortAnswerIsAnError() {
    fake.shortAnswers = true;
    TickwheelException error =
        assertThrows(
            TickwheelException.class,
            () ->
                client.deleteJobs(
                    List.of(
                        DeleteJobRequest.newBuilder().setId("a").build(),
                        DeleteJobRequest.newBuilder().setId("b").build())));
    assertEquals(Status.Code.INTERNAL, error.code());
    assertTrue(error.getMessage().contains("1 results for 2 items"), error.getMessage());
  }
}

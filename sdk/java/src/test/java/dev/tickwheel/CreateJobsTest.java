package dev.tickwheel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.Any;
import com.google.rpc.BadRequest;
import com.google.rpc.QuotaFailure;
import dev.tickwheel.v1.BatchCreateJobsRequest;
import dev.tickwheel.v1.BatchCreateJobsResponse;
import dev.tickwheel.v1.BatchCreateJobsResult;
import dev.tickwheel.v1.CreateJobRequest;
import dev.tickwheel.v1.CreateJobResponse;
import dev.tickwheel.v1.Job;
import dev.tickwheel.v1.SchedulerServiceGrpc;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Deque;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.function.Function;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** createJobs against a scripted in-process BatchCreateJobs. */
class CreateJobsTest {
  private static final Pattern UUID =
      Pattern.compile("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");

  /**
   * Records every call; answers with the next queued failure, else the next queued answer, else
   * creates every item as {@code job_<index in the call>}.
   */
  static final class FakeBatch extends SchedulerServiceGrpc.SchedulerServiceImplBase {
    final List<BatchCreateJobsRequest> received = Collections.synchronizedList(new ArrayList<>());
    final Deque<StatusRuntimeException> failures = new ArrayDeque<>();
    final Deque<Function<BatchCreateJobsRequest, BatchCreateJobsResponse>> answers =
        new ArrayDeque<>();

    @Override
    public void batchCreateJobs(
        BatchCreateJobsRequest request, StreamObserver<BatchCreateJobsResponse> replies) {
      received.add(request);
      StatusRuntimeException failure = failures.poll();
      if (failure != null) {
        replies.onError(failure);
        return;
      }
      Function<BatchCreateJobsRequest, BatchCreateJobsResponse> answer = answers.poll();
      replies.onNext(answer == null ? createEvery(request) : answer.apply(request));
      replies.onCompleted();
    }
  }

  static BatchCreateJobsResponse createEvery(BatchCreateJobsRequest request) {
    BatchCreateJobsResponse.Builder response = BatchCreateJobsResponse.newBuilder();
    for (int i = 0; i < request.getItemsCount(); i++) {
      response.addResults(jobResult(request.getItems(i), "job_" + i, true));
    }
    return response.build();
  }

  static BatchCreateJobsResult jobResult(CreateJobRequest item, String id, boolean created) {
    Job job = Job.newBuilder().setId(id).setName(item.getJob().getName()).build();
    return BatchCreateJobsResult.newBuilder()
        .setJob(CreateJobResponse.newBuilder().setJob(job).setCreated(created))
        .build();
  }

  static BatchCreateJobsResult errorResult(Status.Code code, String message, Any... details) {
    return BatchCreateJobsResult.newBuilder()
        .setError(
            com.google.rpc.Status.newBuilder()
                .setCode(code.value())
                .setMessage(message)
                .addAllDetails(List.of(details)))
        .build();
  }

  static List<CreateJobRequest> requests(int count) {
    List<CreateJobRequest> out = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      Job job =
          Jobs.once("job-" + i, Instant.parse("2031-01-01T00:00:00Z"), Jobs.handler("h")).build();
      out.add(CreateJobRequest.newBuilder().setJob(job).build());
    }
    return out;
  }

  private final FakeBatch fake = new FakeBatch();
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
  void twoThousandFiveHundredJobsGoInThreeCallsAndComeBackInOrder() {
    List<CreateJobRequest> requests = new ArrayList<>(requests(2500));
    requests.set(7, requests.get(7).toBuilder().setRequestId("deploy-7").build());

    List<CreateJobResult> results = client.createJobs(requests);

    assertEquals(List.of(1000, 1000, 500), fake.received.stream().map(BatchCreateJobsRequest::getItemsCount).toList());
    assertEquals(2500, results.size());
    Set<String> ids = new HashSet<>();
    for (int i = 0; i < results.size(); i++) {
      CreateJobResult result = results.get(i);
      CreateJobRequest sent = fake.received.get(i / 1000).getItems(i % 1000);
      assertTrue(result.ok(), "result " + i);
      assertEquals("job-" + i, result.job().getName());
      assertEquals("job_" + (i % 1000), result.job().getId(), "paired with its own item");
      assertTrue(result.created());
      assertEquals(sent.getRequestId(), result.requestId());
      if (i != 7) {
        assertTrue(UUID.matcher(result.requestId()).matches(), result.requestId());
      }
      ids.add(result.requestId());
    }
    assertEquals(2500, ids.size(), "every job its own request id");
    assertEquals("deploy-7", results.get(7).requestId());
  }

  @Test
  void noJobsMakeNoCall() {
    assertEquals(List.of(), client.createJobs(List.of()));
    assertEquals(0, fake.received.size());
  }

  @Test
  void aRetriedCallResendsTheSameRequestIds() {
    // The first call succeeds and queues one UNAVAILABLE for the second, whose retry succeeds.
    fake.answers.add(
        request -> {
          fake.failures.add(Status.UNAVAILABLE.withDescription("store unavailable").asRuntimeException());
          return createEvery(request);
        });

    List<CreateJobResult> results = client.createJobs(requests(1500));

    assertEquals(List.of(1000, 500, 500), fake.received.stream().map(BatchCreateJobsRequest::getItemsCount).toList());
    List<String> first = fake.received.get(1).getItemsList().stream().map(CreateJobRequest::getRequestId).toList();
    List<String> retry = fake.received.get(2).getItemsList().stream().map(CreateJobRequest::getRequestId).toList();
    assertEquals(first, retry, "the retry resends the very same ids");
    assertFalse(first.contains(""));
    assertEquals(List.of(Duration.ofMillis(100)), waits, "the client's backoff, its draw pinned at 0.5");
    assertEquals(1500, results.size());
    assertEquals("job-1499", results.get(1499).job().getName());
  }

  @Test
  void eachRefusedItemCarriesItsErrorAndFieldViolations() {
    Any bad =
        Any.pack(
            BadRequest.newBuilder()
                .addFieldViolations(
                    BadRequest.FieldViolation.newBuilder()
                        .setField("job.schedule.cron.expression")
                        .setDescription("61 is out of range 0-59"))
                .build());
    Any quota =
        Any.pack(
            QuotaFailure.newBuilder()
                .addViolations(
                    QuotaFailure.Violation.newBuilder().setSubject("tenant:acme").setDescription("max_jobs 2"))
                .build());
    fake.answers.add(
        request ->
            BatchCreateJobsResponse.newBuilder()
                .addResults(jobResult(request.getItems(0), "job_a", true))
                .addResults(errorResult(Status.Code.INVALID_ARGUMENT, "invalid job", bad))
                .addResults(errorResult(Status.Code.RESOURCE_EXHAUSTED, "max_jobs reached", quota))
                .addResults(jobResult(request.getItems(3), "job_b", false))
                .addResults(errorResult(Status.Code.OK, "fine"))
                .build());

    List<CreateJobResult> results = client.createJobs(requests(5));

    assertEquals("job_a", results.get(0).job().getId());
    TickwheelException invalid = results.get(1).error();
    assertNull(results.get(1).job());
    assertEquals(Status.Code.INVALID_ARGUMENT, invalid.code());
    assertEquals(
        List.of(new FieldViolation("job.schedule.cron.expression", "61 is out of range 0-59")),
        invalid.fieldViolations());
    assertEquals(
        "INVALID_ARGUMENT: job.schedule.cron.expression: 61 is out of range 0-59 (invalid job)",
        invalid.getMessage());
    TickwheelException over = results.get(2).error();
    assertEquals(Status.Code.RESOURCE_EXHAUSTED, over.code());
    assertInstanceOf(QuotaFailure.class, over.details().get(0));
    assertEquals("job_b", results.get(3).job().getId());
    assertFalse(results.get(3).created());
    assertEquals(Status.Code.INTERNAL, results.get(4).error().code(), "code OK is not a success");
    assertEquals(1, fake.received.size(), "item errors are answers: not retried");
  }

  @Test
  void anAnswerThatDoesNotMatchTheItemsIsAnError() {
    fake.answers.add(
        request -> createEvery(request).toBuilder().removeResults(0).build());
    TickwheelException missing = assertThrows(TickwheelException.class, () -> client.createJobs(requests(3)));
    assertEquals(Status.Code.INTERNAL, missing.code());
    assertTrue(missing.getMessage().contains("2 results for 3 items"), missing.getMessage());

    fake.answers.add(
        request -> createEvery(request).toBuilder().addResults(jobResult(request.getItems(0), "x", true)).build());
    assertThrows(TickwheelException.class, () -> client.createJobs(requests(1)), "a result too many");

    fake.answers.add(
        request -> BatchCreateJobsResponse.newBuilder().addResults(BatchCreateJobsResult.getDefaultInstance()).build());
    TickwheelException empty = assertThrows(TickwheelException.class, () -> client.createJobs(requests(1)));
    assertTrue(empty.getMessage().contains("neither a job nor an error"), empty.getMessage());
  }

  @Test
  void aCallThatFailsAsAWholeStopsTheBatch() {
    fake.failures.add(Status.UNAUTHENTICATED.withDescription("bad key").asRuntimeException());
    TickwheelException error =
        assertThrows(TickwheelException.class, () -> client.createJobs(requests(1200)));
    assertEquals(Status.Code.UNAUTHENTICATED, error.code());
    assertEquals(1, fake.received.size(), "not retried, and no later call");
  }

  @Test
  void theSingleCallFillsAMissingItemRequestId() {
    List<CreateJobRequest> items = new ArrayList<>(requests(2));
    items.set(1, items.get(1).toBuilder().setRequestId("kept").build());
    client.batchCreateJobs(BatchCreateJobsRequest.newBuilder().addAllItems(items).build());
    BatchCreateJobsRequest sent = fake.received.get(0);
    assertTrue(UUID.matcher(sent.getItems(0).getRequestId()).matches());
    assertEquals("kept", sent.getItems(1).getRequestId());
  }
}

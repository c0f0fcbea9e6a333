package dev.tickwheel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.Any;
import com.google.protobuf.Message;
import com.google.rpc.BadRequest;
import dev.tickwheel.v1.BackfillJobRequest;
import dev.tickwheel.v1.BackfillJobResponse;
import dev.tickwheel.v1.CreateJobRequest;
import dev.tickwheel.v1.CreateJobResponse;
import dev.tickwheel.v1.Execution;
import dev.tickwheel.v1.GetJobRequest;
import dev.tickwheel.v1.GetJobResponse;
import dev.tickwheel.v1.Job;
import dev.tickwheel.v1.ListExecutionsRequest;
import dev.tickwheel.v1.ListExecutionsResponse;
import dev.tickwheel.v1.ListJobsRequest;
import dev.tickwheel.v1.ListJobsResponse;
import dev.tickwheel.v1.PreviewScheduleRequest;
import dev.tickwheel.v1.PreviewScheduleResponse;
import dev.tickwheel.v1.ScheduledFire;
import dev.tickwheel.v1.SchedulerServiceGrpc;
import dev.tickwheel.v1.UpdateJobRequest;
import dev.tickwheel.v1.UpdateJobResponse;
import io.grpc.Context;
import io.grpc.Contexts;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.protobuf.StatusProto;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The client against a scripted in-process SchedulerService. */
class TickwheelClientTest {
  private static final Context.Key<String> AUTHORIZATION = Context.key("authorization");

  /**
   * Answers from a script: each RPC pops the next failure (none: succeed) queued for its method,
   * and records what it received.
   */
  static final class FakeScheduler extends SchedulerServiceGrpc.SchedulerServiceImplBase {
    final Map<String, Deque<StatusRuntimeException>> failures = new HashMap<>();
    final Map<String, List<Message>> requests = Collections.synchronizedMap(new HashMap<>());
    final List<String> authorizations = Collections.synchronizedList(new ArrayList<>());
    final Map<String, ListExecutionsResponse> pages = new HashMap<>();
    final Map<String, ListJobsResponse> jobPages = new HashMap<>();

    void fail(String method, StatusRuntimeException... errors) {
      failures.computeIfAbsent(method, m -> new ArrayDeque<>()).addAll(List.of(errors));
    }

    List<Message> calls(String method) {
      return requests.getOrDefault(method, List.of());
    }

    private <T> boolean failed(String method, Message request, StreamObserver<T> replies) {
      requests.computeIfAbsent(method, m -> new ArrayList<>()).add(request);
      authorizations.add(String.valueOf(AUTHORIZATION.get()));
      Deque<StatusRuntimeException> queue = failures.get(method);
      if (queue != null && !queue.isEmpty()) {
        replies.onError(queue.poll());
        return true;
      }
      return false;
    }

    private static <T> void reply(StreamObserver<T> replies, T reply) {
      replies.onNext(reply);
      replies.onCompleted();
    }

    @Override
    public void createJob(CreateJobRequest request, StreamObserver<CreateJobResponse> replies) {
      if (!failed("CreateJob", request, replies)) {
        Job job = request.getJob().toBuilder().setId("job_01").build();
        reply(replies, CreateJobResponse.newBuilder().setJob(job).setCreated(true).build());
      }
    }

    @Override
    public void getJob(GetJobRequest request, StreamObserver<GetJobResponse> replies) {
      if (!failed("GetJob", request, replies)) {
        reply(
            replies,
            GetJobResponse.newBuilder().setJob(Job.newBuilder().setId(request.getId())).build());
      }
    }

    @Override
    public void updateJob(UpdateJobRequest request, StreamObserver<UpdateJobResponse> replies) {
      if (!failed("UpdateJob", request, replies)) {
        reply(replies, UpdateJobResponse.newBuilder().setJob(request.getJob()).build());
      }
    }

    @Override
    public void backfillJob(
        BackfillJobRequest request, StreamObserver<BackfillJobResponse> replies) {
      if (!failed("BackfillJob", request, replies)) {
        reply(replies, BackfillJobResponse.getDefaultInstance());
      }
    }

    @Override
    public void previewSchedule(
        PreviewScheduleRequest request, StreamObserver<PreviewScheduleResponse> replies) {
      if (!failed("PreviewSchedule", request, replies)) {
        reply(
            replies,
            PreviewScheduleResponse.newBuilder()
                .addFires(ScheduledFire.newBuilder().setLocalTime("2027-01-01T02:00:00+00:00"))
                .build());
      }
    }

    @Override
    public void listExecutions(
        ListExecutionsRequest request, StreamObserver<ListExecutionsResponse> replies) {
      if (!failed("ListExecutions", request, replies)) {
        ListExecutionsResponse page = pages.get(request.getPageToken());
        if (page == null) {
          replies.onError(Status.INVALID_ARGUMENT.withDescription("unknown page token").asRuntimeException());
        } else {
          reply(replies, page);
        }
      }
    }

    @Override
    public void listJobs(ListJobsRequest request, StreamObserver<ListJobsResponse> replies) {
      if (!failed("ListJobs", request, replies)) {
        ListJobsResponse page = jobPages.get(request.getPageToken());
        if (page == null) {
          replies.onError(Status.INVALID_ARGUMENT.withDescription("unknown page token").asRuntimeException());
        } else {
          reply(replies, page);
        }
      }
    }
  }

  private final FakeScheduler fake = new FakeScheduler();
  private final List<Duration> waits = new ArrayList<>();
  private Server server;
  private ManagedChannel channel;

  @BeforeEach
  void start() throws IOException {
    String name = InProcessServerBuilder.generateName();
    ServerInterceptor readAuthorization =
        new ServerInterceptor() {
          @Override
          public <Q, R> ServerCall.Listener<Q> interceptCall(
              ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
            String value =
                headers.get(Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER));
            return Contexts.interceptCall(
                Context.current().withValue(AUTHORIZATION, value), call, headers, next);
          }
        };
    server =
        InProcessServerBuilder.forName(name)
            .directExecutor()
            .addService(ServerInterceptors.intercept(fake, readAuthorization))
            .build()
            .start();
    channel = InProcessChannelBuilder.forName(name).directExecutor().build();
  }

  @AfterEach
  void stop() {
    channel.shutdownNow();
    server.shutdownNow();
  }

  /** A client whose jitter draw is pinned at 0.5 and whose waits are recorded, not slept. */
  private TickwheelClient.Builder client() {
    return TickwheelClient.builder(channel).random(() -> 0.5).sleeper(waits::add);
  }

  private static StatusRuntimeException unavailable() {
    return Status.UNAVAILABLE.withDescription("connection reset").asRuntimeException();
  }

  @Test
  void createJobIsRetriedWithOneGeneratedRequestIdAndTheApiKey() {
    fake.fail("CreateJob", unavailable(), unavailable());
    TickwheelClient client = client().apiKey("twk_a_secret").build();

    Job job = Jobs.cron("report", "0 2 * * *", "UTC", Jobs.handler("echo")).build();
    CreateJobResponse reply = client.createJob(job);

    assertEquals("job_01", reply.getJob().getId());
    List<Message> calls = fake.calls("CreateJob");
    assertEquals(3, calls.size());
    String requestId = ((CreateJobRequest) calls.get(0)).getRequestId();
    assertEquals(36, requestId.length(), "a UUID: " + requestId);
    for (Message call : calls) {
      assertEquals(requestId, ((CreateJobRequest) call).getRequestId());
    }
    // Full jitter with the draw pinned at 0.5: half of 0.2 s, then half of 0.4 s.
    assertEquals(List.of(Duration.ofMillis(100), Duration.ofMillis(200)), waits);
    assertEquals(List.of("Bearer twk_a_secret", "Bearer twk_a_secret", "Bearer twk_a_secret"), fake.authorizations);
  }

  @Test
  void aGivenRequestIdIsKept() {
    TickwheelClient client = client().build();
    client.createJob(
        CreateJobRequest.newBuilder()
            .setJob(Jobs.cron("report", "0 2 * * *", "UTC", Jobs.handler("echo")))
            .setRequestId("deploy-42")
            .build());
    assertEquals("deploy-42", ((CreateJobRequest) fake.calls("CreateJob").get(0)).getRequestId());
    assertEquals(List.of("null"), fake.authorizations, "no API key, no authorization header");
  }

  @Test
  void writesThatAreNotIdempotentAreNeverRetried() {
    fake.fail("UpdateJob", unavailable());
    fake.fail("BackfillJob", unavailable(), unavailable());
    TickwheelClient client = client().build();

    TickwheelException update =
        assertThrows(
            TickwheelException.class,
            () ->
                client.updateJob(
                    UpdateJobRequest.newBuilder().setJob(Job.newBuilder().setId("job_01")).build()));
    assertEquals(Status.Code.UNAVAILABLE, update.code());
    assertEquals(1, fake.calls("UpdateJob").size());

    // A real backfill writes; a dry run does not, so only the dry run is retried.
    assertThrows(
        TickwheelException.class,
        () -> client.backfillJob(BackfillJobRequest.newBuilder().setId("job_01").build()));
    client.backfillJob(BackfillJobRequest.newBuilder().setId("job_01").setDryRun(true).build());
    assertEquals(3, fake.calls("BackfillJob").size());
  }

  @Test
  void retriesStopWhenTheAttemptsAreSpent() {
    for (int i = 0; i < 6; i++) {
      fake.fail("GetJob", unavailable());
    }
    TickwheelClient client = client().build();
    TickwheelException error = assertThrows(TickwheelException.class, () -> client.getJob("job_01"));
    assertEquals(Status.Code.UNAVAILABLE, error.code());
    assertEquals(RetryOptions.DEFAULT.maxAttempts(), fake.calls("GetJob").size());
    assertEquals(
        List.of(
            Duration.ofMillis(100), Duration.ofMillis(200), Duration.ofMillis(400), Duration.ofMillis(800)),
        waits);
  }

  @Test
  void noRetryPastTheDeadline() {
    fake.fail("GetJob", unavailable());
    // The first wait (half of 20 s) would end long after the 5 s deadline.
    RetryOptions slow =
        new RetryOptions(5, Duration.ofSeconds(20), Duration.ofMinutes(1), Set.of(Status.Code.UNAVAILABLE));
    TickwheelClient client = client().retry(slow).timeout(Duration.ofSeconds(5)).build();
    assertThrows(TickwheelException.class, () -> client.getJob("job_01"));
    assertEquals(1, fake.calls("GetJob").size());
    assertEquals(List.of(), waits);
  }

  @Test
  void otherCodesAreNotRetried() {
    fake.fail("GetJob", Status.NOT_FOUND.withDescription("no job job_x").asRuntimeException());
    TickwheelClient client = client().build();
    TickwheelException error = assertThrows(TickwheelException.class, () -> client.getJob("job_x"));
    assertEquals("NOT_FOUND: no job job_x", error.getMessage());
    assertEquals(1, fake.calls("GetJob").size());
  }

  @Test
  void invalidArgumentCarriesTheFieldViolations() {
    BadRequest bad =
        BadRequest.newBuilder()
            .addFieldViolations(
                BadRequest.FieldViolation.newBuilder()
                    .setField("job.schedule.cron.expression")
                    .setDescription("minute 61 is out of range 0-59"))
            .addFieldViolations(
                BadRequest.FieldViolation.newBuilder().setField("job.name").setDescription("required"))
            .build();
    com.google.rpc.Status rich =
        com.google.rpc.Status.newBuilder()
            .setCode(Status.Code.INVALID_ARGUMENT.value())
            .setMessage("invalid job")
            .addDetails(Any.pack(bad))
            .build();
    fake.fail("CreateJob", StatusProto.toStatusRuntimeException(rich));
    TickwheelClient client = client().build();

    TickwheelException error =
        assertThrows(
            TickwheelException.class,
            () -> client.createJob(Jobs.cron("", "61 * * * *", "UTC", Jobs.handler("echo")).build()));

    assertEquals(Status.Code.INVALID_ARGUMENT, error.code());
    assertEquals("INVALID_ARGUMENT", error.codeName());
    assertEquals(
        List.of(
            new FieldViolation("job.schedule.cron.expression", "minute 61 is out of range 0-59"),
            new FieldViolation("job.name", "required")),
        error.fieldViolations());
    assertInstanceOf(BadRequest.class, error.details().get(0));
    assertEquals(
        "INVALID_ARGUMENT: job.schedule.cron.expression: minute 61 is out of range 0-59; "
            + "job.name: required (invalid job)",
        error.getMessage());
    assertEquals(1, fake.calls("CreateJob").size(), "INVALID_ARGUMENT is not retried");
  }

  @Test
  void executionsWalksEveryPage() {
    fake.pages.put(
        "",
        ListExecutionsResponse.newBuilder()
            .addExecutions(Execution.newBuilder().setId("e3"))
            .addExecutions(Execution.newBuilder().setId("e2"))
            .setNextPageToken("p2")
            .build());
    fake.pages.put(
        "p2", ListExecutionsResponse.newBuilder().addExecutions(Execution.newBuilder().setId("e1")).build());
    TickwheelClient client = client().build();

    List<String> ids = new ArrayList<>();
    client.executions("job_01").forEach(e -> ids.add(e.getId()));

    assertEquals(List.of("e3", "e2", "e1"), ids);
    List<Message> calls = fake.calls("ListExecutions");
    assertEquals(2, calls.size());
    assertEquals("p2", ((ListExecutionsRequest) calls.get(1)).getPageToken());
    assertEquals("job_01", ((ListExecutionsRequest) calls.get(1)).getJobId());
  }

  /** A filtered page may be empty and still carry a token: the walk goes on to the last page. */
  @Test
  void jobsWalkOnPastAnEmptyPageWithAToken() {
    fake.jobPages.put("", ListJobsResponse.newBuilder().setNextPageToken("p2").build());
    fake.jobPages.put(
        "p2",
        ListJobsResponse.newBuilder().addJobs(Job.newBuilder().setId("job_a")).setNextPageToken("p3").build());
    fake.jobPages.put("p3", ListJobsResponse.newBuilder().setNextPageToken("p4").build());
    fake.jobPages.put("p4", ListJobsResponse.newBuilder().addJobs(Job.newBuilder().setId("job_b")).build());
    TickwheelClient client = client().build();

    List<String> ids = new ArrayList<>();
    client.jobs(ListJobsRequest.newBuilder().setNamePrefix("rare").build()).forEach(j -> ids.add(j.getId()));

    assertEquals(List.of("job_a", "job_b"), ids);
    List<Message> calls = fake.calls("ListJobs");
    assertEquals(4, calls.size());
    assertEquals("p4", ((ListJobsRequest) calls.get(3)).getPageToken());
    assertEquals("rare", ((ListJobsRequest) calls.get(3)).getNamePrefix());
  }

  @Test
  void executionsStopsOnARepeatedPageToken() {
    fake.pages.put("", ListExecutionsResponse.newBuilder().setNextPageToken("p2").build());
    fake.pages.put("p2", ListExecutionsResponse.newBuilder().setNextPageToken("p2").build());
    TickwheelClient client = client().build();
    IllegalStateException error =
        assertThrows(
            IllegalStateException.class, () -> client.executions("job_01").forEach(e -> {}));
    assertTrue(error.getMessage().contains("same page token"));
  }

  @Test
  void previewSendsTheUnsavedJobAndNextRunsTheSavedId() {
    TickwheelClient client = client().build();
    Job job = Jobs.cron("report", "0 2 * * *", "Europe/London", Jobs.handler("echo")).build();
    assertEquals(1, client.preview(job, 3).size());
    PreviewScheduleRequest sent = (PreviewScheduleRequest) fake.calls("PreviewSchedule").get(0);
    assertEquals(job, sent.getJob());
    assertEquals(3, sent.getCount());
    client.nextRuns("job_01", 2);
    assertEquals(
        "job_01", ((PreviewScheduleRequest) fake.calls("PreviewSchedule").get(1)).getJobId());
  }

  @Test
  void optionsAreCheckedWhenSet() {
    assertThrows(
        IllegalArgumentException.class, () -> TickwheelClient.builder("127.0.0.1:1").apiKey("a\nb"));
    assertThrows(
        IllegalArgumentException.class,
        () -> TickwheelClient.builder("127.0.0.1:1").timeout(Duration.ofSeconds(-1)));
    assertThrows(IllegalArgumentException.class, () -> TickwheelClient.builder(""));
    assertThrows(
        IllegalArgumentException.class,
        () -> TlsOptions.fromPem(null, "cert".getBytes(java.nio.charset.StandardCharsets.UTF_8), null));
    assertThrows(
        IllegalArgumentException.class,
        () ->
            TickwheelClient.builder("127.0.0.1:1")
                .tls(TlsOptions.fromPem("not PEM".getBytes(java.nio.charset.StandardCharsets.UTF_8), null, null))
                .build());
    try (TickwheelClient client =
        TickwheelClient.builder("127.0.0.1:1").tls(TlsOptions.systemRoots().withServerName("tickwheel.test")).build()) {
      assertEquals(Duration.ofSeconds(10), client.timeout());
    }
  }
}

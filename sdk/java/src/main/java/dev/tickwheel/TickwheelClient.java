package dev.tickwheel;

import dev.tickwheel.SchedulerRpcs.Rpc;
import dev.tickwheel.v1.BackfillJobRequest;
import dev.tickwheel.v1.BackfillJobResponse;
import dev.tickwheel.v1.BatchCreateJobsRequest;
import dev.tickwheel.v1.BatchCreateJobsResponse;
import dev.tickwheel.v1.BatchDeleteJobsRequest;
import dev.tickwheel.v1.BatchDeleteJobsResponse;
import dev.tickwheel.v1.BatchPauseJobsRequest;
import dev.tickwheel.v1.BatchPauseJobsResponse;
import dev.tickwheel.v1.BatchResumeJobsRequest;
import dev.tickwheel.v1.BatchResumeJobsResponse;
import dev.tickwheel.v1.BatchUpdateJobsRequest;
import dev.tickwheel.v1.BatchUpdateJobsResponse;
import dev.tickwheel.v1.Calendar;
import dev.tickwheel.v1.CancelExecutionRequest;
import dev.tickwheel.v1.CancelExecutionResponse;
import dev.tickwheel.v1.CreateCalendarRequest;
import dev.tickwheel.v1.CreateCalendarResponse;
import dev.tickwheel.v1.CreateJobRequest;
import dev.tickwheel.v1.CreateJobResponse;
import dev.tickwheel.v1.DeleteCalendarRequest;
import dev.tickwheel.v1.DeleteCalendarResponse;
import dev.tickwheel.v1.DeleteJobRequest;
import dev.tickwheel.v1.DeleteJobResponse;
import dev.tickwheel.v1.Execution;
import dev.tickwheel.v1.GetCalendarRequest;
import dev.tickwheel.v1.GetCalendarResponse;
import dev.tickwheel.v1.GetExecutionRequest;
import dev.tickwheel.v1.GetExecutionResponse;
import dev.tickwheel.v1.GetJobRequest;
import dev.tickwheel.v1.GetJobResponse;
import dev.tickwheel.v1.Job;
import dev.tickwheel.v1.JobView;
import dev.tickwheel.v1.ListCalendarsRequest;
import dev.tickwheel.v1.ListCalendarsResponse;
import dev.tickwheel.v1.ListDeadLettersRequest;
import dev.tickwheel.v1.ListDeadLettersResponse;
import dev.tickwheel.v1.ListExecutionsRequest;
import dev.tickwheel.v1.ListExecutionsResponse;
import dev.tickwheel.v1.ListJobsRequest;
import dev.tickwheel.v1.ListJobsResponse;
import dev.tickwheel.v1.PauseJobRequest;
import dev.tickwheel.v1.PauseJobResponse;
import dev.tickwheel.v1.PreviewScheduleRequest;
import dev.tickwheel.v1.PreviewScheduleResponse;
import dev.tickwheel.v1.ReplayDeadLetterRequest;
import dev.tickwheel.v1.ReplayDeadLetterResponse;
import dev.tickwheel.v1.ResumeJobRequest;
import dev.tickwheel.v1.ResumeJobResponse;
import dev.tickwheel.v1.ScheduledFire;
import dev.tickwheel.v1.SchedulerServiceGrpc.SchedulerServiceBlockingStub;
import dev.tickwheel.v1.SchedulerServiceGrpc;
import dev.tickwheel.v1.TriggerJobRequest;
import dev.tickwheel.v1.TriggerJobResponse;
import dev.tickwheel.v1.UpdateCalendarRequest;
import dev.tickwheel.v1.UpdateCalendarResponse;
import dev.tickwheel.v1.UpdateJobRequest;
import dev.tickwheel.v1.UpdateJobResponse;
import io.grpc.Channel;
import io.grpc.ChannelCredentials;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.ManagedChannelRegistry;
import io.grpc.Metadata;
import io.grpc.stub.MetadataUtils;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.Objects;
import java.util.UUID;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.DoubleSupplier;
import java.util.function.Function;

/**
 * A blocking SchedulerService client for one Tickwheel server address, over the generated {@code
 * dev.tickwheel.v1} stubs.
 *
 * <p>Each method sends its request with {@code authorization: Bearer <API key>} within the
 * client's deadline and returns the response message unchanged. A failed call throws {@link
 * TickwheelException}, carrying the status code and the BadRequest field violations.
 *
 * <p>Retries: UNAVAILABLE (by default) is retried with exponential backoff and full jitter, within
 * the deadline, and only for calls that are safe to repeat: reads, CreateJob, BatchCreateJobs and
 * TriggerJob (request ids make them idempotent; the client generates them where the request has
 * none), BatchUpdateJobs and BatchDeleteJobs (versions make each change apply once), and dry runs.
 * Other writes fail on the first error. {@link #createJobs} creates any number of jobs, 1000 per
 * BatchCreateJobs call, with one result per job; {@link #updateJobs} and {@link #deleteJobs} do
 * the same for changes and deletes.
 *
 * <pre>{@code
 * try (TickwheelClient client = TickwheelClient.builder("127.0.0.1:50051").apiKey(key).build()) {
 *   Job job = Jobs.cron("nightly-report", "0 2 * * *", "Europe/London", Jobs.handler("reports.nightly"))
 *       .setRetryPolicy(Jobs.retry(3, Duration.ofSeconds(1), Duration.ofMinutes(1)))
 *       .build();
 *   String id = client.createJob(job).getJob().getId();
 *   for (Execution execution : client.executions(id)) { ... }
 * }
 * }</pre>
 *
 * <p>It is safe to share between threads. Close it to close the channel it opened.
 */
public final class TickwheelClient implements AutoCloseable {
  /** How the client waits between retries. */
  interface Sleeper extends Calls.Sleeper {}

  /** The most items one BatchCreateJobs call takes. */
  public static final int MAX_BATCH_ITEMS = 1000;

  private static final String USER_AGENT = "tickwheel-java";
  private static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

  private final ManagedChannel ownedChannel;
  private final SchedulerServiceBlockingStub stub;
  private final Duration timeout;
  private final RetryOptions retry;
  private final Sleeper sleeper;
  private final DoubleSupplier random;

  private TickwheelClient(Builder builder) {
    Channel channel = builder.channel;
    if (channel == null) {
      ChannelCredentials credentials =
          builder.tls == null
              ? InsecureChannelCredentials.create()
              : builder.tls.channelCredentials();
      ManagedChannelBuilder<?> channelBuilder;
      try {
        channelBuilder = Grpc.newChannelBuilder(builder.address, credentials);
      } catch (ManagedChannelRegistry.ProviderNotFoundException e) {
        // What the transport could not use, typically a certificate or key that does not parse.
        throw new IllegalArgumentException("cannot open a channel: " + e.getMessage(), e);
      }
      channelBuilder.userAgent(USER_AGENT);
      if (builder.tls != null) {
        builder.tls.serverName().ifPresent(channelBuilder::overrideAuthority);
      }
      ownedChannel = channelBuilder.build();
      channel = ownedChannel;
    } else {
      ownedChannel = null;
    }
    SchedulerServiceBlockingStub blocking = SchedulerServiceGrpc.newBlockingStub(channel);
    if (builder.apiKey != null) {
      Metadata headers = new Metadata();
      headers.put(AUTHORIZATION, "Bearer " + builder.apiKey);
      blocking = blocking.withInterceptors(MetadataUtils.newAttachHeadersInterceptor(headers));
    }
    this.stub = blocking;
    this.timeout = builder.timeout;
    this.retry = builder.retry;
    this.sleeper = builder.sleeper;
    this.random = builder.random;
  }

  /** A builder for a client of {@code address} ({@code host:port}). */
  public static Builder builder(String address) {
    Objects.requireNonNull(address, "address");
    if (address.isEmpty()) {
      throw new IllegalArgumentException("an address (host:port) is required");
    }
    return new Builder(address, null);
  }

  /**
   * A builder for a client over an existing channel, which the client shares and does not close
   * (TLS options do not apply: the channel has its own).
   */
  public static Builder builder(Channel channel) {
    return new Builder(null, Objects.requireNonNull(channel, "channel"));
  }

  /** A fresh request id (a random UUID), valid for CreateJob and TriggerJob. */
  public static String newRequestId() {
    return UUID.randomUUID().toString();
  }

  /** How long each call may take in total, retries and waits included; null means no deadline. */
  public Duration timeout() {
    return timeout;
  }

  /** The retry options in force. */
  public RetryOptions retryOptions() {
    return retry;
  }

  /** Closes the channel the client opened (not one it was given), waiting up to 5 s. */
  @Override
  public void close() {
    if (ownedChannel == null) {
      return;
    }
    ownedChannel.shutdown();
    try {
      if (!ownedChannel.awaitTermination(5, TimeUnit.SECONDS)) {
        ownedChannel.shutdownNow();
      }
    } catch (InterruptedException e) {
      ownedChannel.shutdownNow();
      Thread.currentThread().interrupt();
    }
  }

  // --- SchedulerService ---------------------------------------------------------------------

  /**
   * Creates the job with a fresh request id and computes its first run; see {@link
   * #createJob(CreateJobRequest)}.
   */
  public CreateJobResponse createJob(Job job) {
    return createJob(CreateJobRequest.newBuilder().setJob(job).build());
  }

  /**
   * Creates the job and computes its first run. Returns the job as stored (id, state, {@code
   * next_run_at}) and {@code created}, false when the request id had been seen and the existing
   * job is returned.
   *
   * <p>The request id makes the call idempotent for 24 hours. When it is empty a fresh one is
   * used: this call's own retries are then safe, but running your program twice creates two jobs,
   * so set a stable id where that matters. Retried. INVALID_ARGUMENT names the offending field
   * ({@code job.schedule.cron.expression}).
   */
  public CreateJobResponse createJob(CreateJobRequest request) {
    if (request.getRequestId().isEmpty()) {
      request = request.toBuilder().setRequestId(newRequestId()).build();
    }
    return invoke(SchedulerRpcs.CREATE_JOB, request);
  }

  /**
   * Creates the job of every request through BatchCreateJobs and returns one {@link
   * CreateJobResult} per request, in order: the job as stored and {@code created}, or the {@link
   * TickwheelException} CreateJob would have thrown for that request alone (with its field
   * violations). A refused job does not stop the others. No requests: no call, an empty list.
   *
   * <p>The requests go in calls of at most {@link #MAX_BATCH_ITEMS}, one after the other; each call
   * has the client's timeout and is retried on UNAVAILABLE with the client's retry options,
   * resending the same request ids. A request without a request id gets a fresh one, once: set
   * stable ids to make re-running your program safe, including after a failure part way.
   *
   * @throws TickwheelException when a call fails as a whole (after its retries: UNAUTHENTICATED,
   *     or UNAVAILABLE past the attempts), or when the server answers a call with another number
   *     of results than items (INTERNAL). The calls before it took effect; sending the same
   *     requests again with the same request ids is safe.
   */
  public List<CreateJobResult> createJobs(List<CreateJobRequest> requests) {
    return createJobs(requests, JobView.JOB_VIEW_UNSPECIFIED);
  }

  /**
   * As {@link #createJobs(List)}, each job answered in {@code view}: JOB_VIEW_BASIC its identity
   * and state only (no payload, target or schedule), JOB_VIEW_FULL (or unspecified) the whole job.
   * A call the server refuses because its answer would be too large for the client (nothing
   * written) is sent again as two halves, with the same request ids, until each answer fits.
   */
  public List<CreateJobResult> createJobs(List<CreateJobRequest> requests, JobView view) {
    List<CreateJobResult> results = new ArrayList<>(requests.size());
    for (BatchCreateJobsRequest batch :
        Batches.plan(requests, MAX_BATCH_ITEMS, TickwheelClient::newRequestId)) {
      results.addAll(
          BatchChanges.halving(
              0,
              batch.getItemsCount(),
              (from, to) -> {
                BatchCreateJobsRequest part =
                    BatchCreateJobsRequest.newBuilder()
                        .addAllItems(batch.getItemsList().subList(from, to))
                        .setView(view)
                        .build();
                return Batches.results(part, invoke(SchedulerRpcs.BATCH_CREATE_JOBS, part));
              }));
    }
    return results;
  }

  /**
   * One BatchCreateJobs call: 1 to 1000 items, each a CreateJobRequest (an item without a request
   * id gets a fresh one). Returns the response unchanged: one result per item, in order. Retried.
   * Prefer {@link #createJobs}, which takes any number of jobs and maps each result.
   */
  public BatchCreateJobsResponse batchCreateJobs(BatchCreateJobsRequest request) {
    if (request.getItemsList().stream().anyMatch(item -> item.getRequestId().isEmpty())) {
      BatchCreateJobsRequest.Builder filled = request.toBuilder();
      for (CreateJobRequest.Builder item : filled.getItemsBuilderList()) {
        if (item.getRequestId().isEmpty()) {
          item.setRequestId(newRequestId());
        }
      }
      request = filled.build();
    }
    return invoke(SchedulerRpcs.BATCH_CREATE_JOBS, request);
  }

  /**
   * Applies every request through BatchUpdateJobs and returns one {@link UpdateJobResult} per
   * request, in order: the job as stored, or the {@link TickwheelException} UpdateJob would have
   * thrown for it alone. Requests apply in order: a job named twice sees the first change (and its
   * new version). Calls of at most {@link #MAX_BATCH_ITEMS}, one after the other, each retried on
   * UNAVAILABLE when every item names its version: a change applies once, and one a lost attempt
   * applied then answers FAILED_PRECONDITION.
   *
   * @throws TickwheelException when a call fails as a whole, or the server answers another number
   *     of results than items (INTERNAL); the calls before it took effect.
   */
  public List<UpdateJobResult> updateJobs(List<UpdateJobRequest> requests) {
    return updateJobs(requests, JobView.JOB_VIEW_UNSPECIFIED);
  }

  /**
   * As {@link #updateJobs(List)}, each job answered in {@code view}; a call refused for the size
   * of its answer is sent again as two halves, as {@link #createJobs(List, JobView)} does.
   */
  public List<UpdateJobResult> updateJobs(List<UpdateJobRequest> requests, JobView view) {
    List<UpdateJobResult> results = new ArrayList<>(requests.size());
    for (BatchUpdateJobsRequest batch : BatchChanges.planUpdates(requests, MAX_BATCH_ITEMS)) {
      results.addAll(
          BatchChanges.halving(
              0,
              batch.getItemsCount(),
              (from, to) -> {
                BatchUpdateJobsRequest part =
                    BatchUpdateJobsRequest.newBuilder()
                        .addAllItems(batch.getItemsList().subList(from, to))
                        .setView(view)
                        .build();
                return BatchChanges.updateResults(
                    part, invoke(SchedulerRpcs.BATCH_UPDATE_JOBS, part));
              }));
    }
    return results;
  }

  /**
   * Deletes the job of every request through BatchDeleteJobs and returns one {@link
   * DeleteJobResult} per request, in order: deleted (with the executions canceled) or the {@link
   * TickwheelException} DeleteJob would have thrown (NOT_FOUND for an unknown id, one named twice
   * or another tenant's; FAILED_PRECONDITION when a non-zero version is stale). Calls of at most
   * {@link #MAX_BATCH_ITEMS}, each retried on UNAVAILABLE: a job a lost attempt deleted then
   * answers NOT_FOUND.
   *
   * @throws TickwheelException as {@link #updateJobs}
   */
  public List<DeleteJobResult> deleteJobs(List<DeleteJobRequest> requests) {
    List<DeleteJobResult> results = new ArrayList<>(requests.size());
    for (BatchDeleteJobsRequest batch : BatchChanges.planDeletes(requests, MAX_BATCH_ITEMS)) {
      BatchDeleteJobsResponse response = invoke(SchedulerRpcs.BATCH_DELETE_JOBS, batch);
      results.addAll(BatchChanges.deleteResults(batch, response));
    }
    return results;
  }

  /** One BatchUpdateJobs call: 1 to 1000 items. Retried when every item names its version. */
  public BatchUpdateJobsResponse batchUpdateJobs(BatchUpdateJobsRequest request) {
    return invoke(SchedulerRpcs.BATCH_UPDATE_JOBS, request);
  }

  /** One BatchDeleteJobs call: 1 to 1000 items. Retried. */
  public BatchDeleteJobsResponse batchDeleteJobs(BatchDeleteJobsRequest request) {
    return invoke(SchedulerRpcs.BATCH_DELETE_JOBS, request);
  }

  /**
   * One BatchPauseJobs call: 1 to 1000 items, each answered as PauseJob would answer it alone.
   * Retried (pausing a paused job changes nothing). Set the request's view to JOB_VIEW_BASIC to
   * answer each job without its definition: over jobs with large payloads, a full answer too
   * large for the client is refused whole (INVALID_ARGUMENT, ErrorInfo reason
   * BATCH_ANSWER_TOO_LARGE), nothing written.
   */
  public BatchPauseJobsResponse batchPauseJobs(BatchPauseJobsRequest request) {
    return invoke(SchedulerRpcs.BATCH_PAUSE_JOBS, request);
  }

  /**
   * One BatchResumeJobs call: 1 to 1000 items, each answered as ResumeJob would answer it alone.
   * Retried (resuming an active job changes nothing). The view: as for {@link #batchPauseJobs}.
   */
  public BatchResumeJobsResponse batchResumeJobs(BatchResumeJobsRequest request) {
    return invoke(SchedulerRpcs.BATCH_RESUME_JOBS, request);
  }

  /** The job with its last outcome and its five upcoming fires. Retried. */
  public GetJobResponse getJob(String jobId) {
    return getJob(GetJobRequest.newBuilder().setId(jobId).build());
  }

  /**
   * The job with its last outcome and its upcoming fires ({@code next_runs}, default 5, at most
   * 100). NOT_FOUND for an unknown id or another tenant's job. Retried.
   */
  public GetJobResponse getJob(GetJobRequest request) {
    return invoke(SchedulerRpcs.GET_JOB, request);
  }

  /**
   * One page of the tenant's jobs, ordered by id ({@code next_page_token} empty on the last page);
   * {@link #jobs} walks every page. A filtered page (state, name prefix) may be short or empty and
   * still carry a token: its scan stopped before the end. Retried.
   */
  public ListJobsResponse listJobs(ListJobsRequest request) {
    return invoke(SchedulerRpcs.LIST_JOBS, request);
  }

  /**
   * Changes the fields of the job named in the update mask (empty: every mutable field). The
   * job's id and version (as last read) are required: FAILED_PRECONDITION when the stored version
   * moved on. Executions not yet started are canceled. Never retried.
   */
  public UpdateJobResponse updateJob(UpdateJobRequest request) {
    return invoke(SchedulerRpcs.UPDATE_JOB, request);
  }

  /**
   * Deletes the job and cancels its executions that have not started; history stays for the
   * retention window. A non-zero version must equal the stored one. Never retried.
   */
  public DeleteJobResponse deleteJob(DeleteJobRequest request) {
    return invoke(SchedulerRpcs.DELETE_JOB, request);
  }

  /**
   * Stops creating occurrences and holds the executions that have not started until resumeJob.
   * Never retried.
   */
  public PauseJobResponse pauseJob(PauseJobRequest request) {
    return invoke(SchedulerRpcs.PAUSE_JOB, request);
  }

  /**
   * Resumes a paused job: each occurrence that came due while paused (claimed ahead or not) runs
   * late when still within the job's misfire threshold (a bounded few, see the proto), the older
   * ones come back as one skip range; other held executions are released. Never retried.
   */
  public ResumeJobResponse resumeJob(ResumeJobRequest request) {
    return invoke(SchedulerRpcs.RESUME_JOB, request);
  }

  /**
   * Runs the job now, once per request id: the execution id is {@code <job id>:trigger:<request
   * id>}. An empty request id gets a fresh one. Retried.
   */
  public TriggerJobResponse triggerJob(TriggerJobRequest request) {
    if (request.getRequestId().isEmpty()) {
      request = request.toBuilder().setRequestId(newRequestId()).build();
    }
    return invoke(SchedulerRpcs.TRIGGER_JOB, request);
  }

  /**
   * Creates the occurrences the schedule had in {@code [from_at, to_at)} with their normal ids,
   * so a repeated or overlapping backfill never duplicates. A dry run creates nothing and returns
   * what a real run would. Retried only when a dry run.
   */
  public BackfillJobResponse backfillJob(BackfillJobRequest request) {
    return invoke(SchedulerRpcs.BACKFILL_JOB, request);
  }

  /**
   * The next fires of a saved job or of an unsaved one; {@link #preview} and {@link #nextRuns}
   * are the one-line forms. Retried.
   */
  public PreviewScheduleResponse previewSchedule(PreviewScheduleRequest request) {
    return invoke(SchedulerRpcs.PREVIEW_SCHEDULE, request);
  }

  /**
   * The next {@code count} fires (0: the server's default, 5) after now of an unsaved job: its
   * schedule, DST policy, jitter, start, end and max runs are used, and its id (may be empty)
   * seeds {@code H} and jitter.
   */
  public List<ScheduledFire> preview(Job job, int count) {
    return previewSchedule(PreviewScheduleRequest.newBuilder().setJob(job).setCount(count).build())
        .getFiresList();
  }

  /** The next {@code count} fires of a saved job after now. */
  public List<ScheduledFire> nextRuns(String jobId, int count) {
    return previewSchedule(
            PreviewScheduleRequest.newBuilder().setJobId(jobId).setCount(count).build())
        .getFiresList();
  }

  /** One execution with its attempts. Retried. */
  public GetExecutionResponse getExecution(String executionId) {
    return invoke(
        SchedulerRpcs.GET_EXECUTION, GetExecutionRequest.newBuilder().setId(executionId).build());
  }

  /**
   * One page of a job's history, newest nominal instant first, each execution with its attempts,
   * and the skip ranges overlapping the page; {@link #executions} walks every page. Retried.
   */
  public ListExecutionsResponse listExecutions(ListExecutionsRequest request) {
    return invoke(SchedulerRpcs.LIST_EXECUTIONS, request);
  }

  /**
   * Cancels an execution: a waiting one at once, a running one through its worker.
   * FAILED_PRECONDITION when it had already ended. Never retried.
   */
  public CancelExecutionResponse cancelExecution(CancelExecutionRequest request) {
    return invoke(SchedulerRpcs.CANCEL_EXECUTION, request);
  }

  /** One page of the tenant's dead executions, newest first. Retried. */
  public ListDeadLettersResponse listDeadLetters(ListDeadLettersRequest request) {
    return invoke(SchedulerRpcs.LIST_DEAD_LETTERS, request);
  }

  /** Starts a fresh attempt series for a DEAD execution, with the same id. Never retried. */
  public ReplayDeadLetterResponse replayDeadLetter(ReplayDeadLetterRequest request) {
    return invoke(SchedulerRpcs.REPLAY_DEAD_LETTER, request);
  }

  // --- calendars ------------------------------------------------------------------------------

  /**
   * Creates the calendar (build one with {@link Calendars}) with a fresh request id; see {@link
   * #createCalendar(CreateCalendarRequest)}.
   */
  public CreateCalendarResponse createCalendar(Calendar calendar) {
    return createCalendar(CreateCalendarRequest.newBuilder().setCalendar(calendar).build());
  }

  /**
   * Creates a business-day calendar of the tenant. Returns it as stored (version 1) and {@code
   * created}, false when the request id had been seen (the first request's calendar is returned,
   * whatever this one holds). ALREADY_EXISTS when the name is taken, RESOURCE_EXHAUSTED past 1 000
   * calendars, INVALID_ARGUMENT naming the field ({@code calendar.holidays[3]}). An empty request
   * id gets a fresh one. Retried (the request id makes it safe).
   */
  public CreateCalendarResponse createCalendar(CreateCalendarRequest request) {
    if (request.getRequestId().isEmpty()) {
      request = request.toBuilder().setRequestId(newRequestId()).build();
    }
    return invoke(SchedulerRpcs.CREATE_CALENDAR, request);
  }

  /**
   * The calendar with every holiday and half-day. NOT_FOUND for an unknown name or another
   * tenant's. Retried.
   */
  public GetCalendarResponse getCalendar(String name) {
    return invoke(SchedulerRpcs.GET_CALENDAR, GetCalendarRequest.newBuilder().setName(name).build());
  }

  /**
   * One page of the tenant's calendars by name, without their dates (their counts instead);
   * {@link #calendars} walks every page. Retried.
   */
  public ListCalendarsResponse listCalendars(ListCalendarsRequest request) {
    return invoke(SchedulerRpcs.LIST_CALENDARS, request);
  }

  /**
   * Replaces the fields named in the update mask ({@code time_zone}, {@code business_days},
   * {@code holidays}, {@code half_days}; empty: all four; a list is replaced whole). The
   * calendar's name and version (as last read) are required: FAILED_PRECONDITION when the stored
   * version moved on. A change that changes nothing returns the calendar as it is. Never retried.
   */
  public UpdateCalendarResponse updateCalendar(UpdateCalendarRequest request) {
    return invoke(SchedulerRpcs.UPDATE_CALENDAR, request);
  }

  /** Deletes the calendar; a non-zero version must equal the stored one. Never retried. */
  public DeleteCalendarResponse deleteCalendar(DeleteCalendarRequest request) {
    return invoke(SchedulerRpcs.DELETE_CALENDAR, request);
  }

  // --- every page -----------------------------------------------------------------------------

  /** Every calendar {@link #listCalendars} would list for {@code request}, across pages. */
  public Iterable<Calendar> calendars(ListCalendarsRequest request) {
    return () ->
        new Pages<>(
            token -> listCalendars(request.toBuilder().setPageToken(token).build()),
            ListCalendarsResponse::getCalendarsList,
            ListCalendarsResponse::getNextPageToken,
            request.getPageToken());
  }

  /** A job's whole history, newest first, fetching pages as the iteration asks for them. */
  public Iterable<Execution> executions(String jobId) {
    return executions(ListExecutionsRequest.newBuilder().setJobId(jobId).build());
  }

  /** Every execution {@link #listExecutions} would list for {@code request}, across pages. */
  public Iterable<Execution> executions(ListExecutionsRequest request) {
    return () ->
        new Pages<>(
            token -> listExecutions(request.toBuilder().setPageToken(token).build()),
            ListExecutionsResponse::getExecutionsList,
            ListExecutionsResponse::getNextPageToken,
            request.getPageToken());
  }

  /** Every job {@link #listJobs} would list for {@code request}, across pages. */
  public Iterable<Job> jobs(ListJobsRequest request) {
    return () ->
        new Pages<>(
            token -> listJobs(request.toBuilder().setPageToken(token).build()),
            ListJobsResponse::getJobsList,
            ListJobsResponse::getNextPageToken,
            request.getPageToken());
  }

  /** Every dead execution {@link #listDeadLetters} would list for {@code request}. */
  public Iterable<Execution> deadLetters(ListDeadLettersRequest request) {
    return () ->
        new Pages<>(
            token -> listDeadLetters(request.toBuilder().setPageToken(token).build()),
            ListDeadLettersResponse::getExecutionsList,
            ListDeadLettersResponse::getNextPageToken,
            request.getPageToken());
  }

  /** Items across pages, following next_page_token until it is empty. */
  private static final class Pages<Page, Item> implements Iterator<Item> {
    private final Function<String, Page> fetch;
    private final Function<Page, List<Item>> items;
    private final Function<Page, String> nextToken;
    private String token;
    private Iterator<Item> current = List.<Item>of().iterator();
    private boolean last;

    Pages(
        Function<String, Page> fetch,
        Function<Page, List<Item>> items,
        Function<Page, String> nextToken,
        String firstToken) {
      this.fetch = fetch;
      this.items = items;
      this.nextToken = nextToken;
      this.token = firstToken;
    }

    @Override
    public boolean hasNext() {
      while (!current.hasNext() && !last) {
        Page page = fetch.apply(token);
        current = items.apply(page).iterator();
        String next = nextToken.apply(page);
        if (!next.isEmpty() && next.equals(token)) {
          throw new IllegalStateException("the server returned the same page token twice");
        }
        last = next.isEmpty();
        token = next;
      }
      return current.hasNext();
    }

    @Override
    public Item next() {
      if (!hasNext()) {
        throw new NoSuchElementException();
      }
      return current.next();
    }
  }

  // --- sending --------------------------------------------------------------------------------

  /**
   * Sends {@code request} as {@code rpc}, retrying as the retry options and the RPC's idempotency
   * allow, every attempt and wait within the client's timeout.
   */
  private <Req, Resp> Resp invoke(Rpc<Req, Resp> rpc, Req request) {
    return Calls.invoke(
        stub, rpc.send(), rpc.repeatable(), request, timeout, retry, sleeper, random);
  }

  /** Options of a {@link TickwheelClient}, checked as they are set. */
  public static final class Builder {
    private final String address;
    private final Channel channel;
    private String apiKey;
    private TlsOptions tls;
    private Duration timeout = Duration.ofSeconds(10);
    private RetryOptions retry = RetryOptions.DEFAULT;
    private Sleeper sleeper = duration -> TimeUnit.NANOSECONDS.sleep(duration.toNanos());
    private DoubleSupplier random = () -> ThreadLocalRandom.current().nextDouble();

    private Builder(String address, Channel channel) {
      this.address = address;
      this.channel = channel;
    }

    /**
     * The tenant API key sent as {@code authorization: Bearer <key>} on every call; without one
     * the server answers UNAUTHENTICATED.
     */
    public Builder apiKey(String apiKey) {
      if (apiKey != null && !apiKey.isEmpty()) {
        if (!apiKey.equals(apiKey.strip()) || apiKey.chars().anyMatch(c -> c < 0x20 || c == 0x7f)) {
          throw new IllegalArgumentException(
              "the API key must be one line without surrounding spaces");
        }
        this.apiKey = apiKey;
      } else {
        this.apiKey = null;
      }
      return this;
    }

    /** Connects over TLS (the default is plaintext). */
    public Builder tls(TlsOptions tls) {
      this.tls = tls;
      return this;
    }

    /**
     * How long each call may take in total, retries and their waits included (default 10 s);
     * null means no deadline.
     */
    public Builder timeout(Duration timeout) {
      if (timeout != null && (timeout.isNegative() || timeout.isZero())) {
        throw new IllegalArgumentException("the timeout must be positive, or null for none");
      }
      this.timeout = timeout;
      return this;
    }

    /** Replaces {@link RetryOptions#DEFAULT}; {@link RetryOptions#NONE} disables retries. */
    public Builder retry(RetryOptions retry) {
      this.retry = Objects.requireNonNull(retry, "retry");
      return this;
    }

    Builder sleeper(Sleeper sleeper) {
      this.sleeper = sleeper;
      return this;
    }

    Builder random(DoubleSupplier random) {
      this.random = random;
      return this;
    }

    /**
     * The client; it opens its channel now (unusable TLS material fails here, not on the first
     * call) and connects on the first call.
     */
    public TickwheelClient build() {
      return new TickwheelClient(this);
    }
  }
}

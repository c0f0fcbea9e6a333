package dev.tickwheel;

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
import dev.tickwheel.v1.GetCalendarRequest;
import dev.tickwheel.v1.GetCalendarResponse;
import dev.tickwheel.v1.GetExecutionRequest;
import dev.tickwheel.v1.GetExecutionResponse;
import dev.tickwheel.v1.GetJobRequest;
import dev.tickwheel.v1.GetJobResponse;
import dev.tickwheel.v1.ListCalendarsRequest;
import dev.tickwheel.v1.ListCalendarsResponse;
import dev.tickwheel.v1.ListDeadLettersRequest;
import dev.tickwheel.v1.ListDeadLettersResponse;
import dev.tickwheel.v1.ListExecutionsRequest;
import dev.tickwheel.v1.ListExecutionsResponse;
import dev.tickwheel.v1.ListJobRevisionsRequest;
import dev.tickwheel.v1.ListJobRevisionsResponse;
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
import dev.tickwheel.v1.SchedulerServiceGrpc.SchedulerServiceBlockingStub;
import dev.tickwheel.v1.TriggerJobRequest;
import dev.tickwheel.v1.TriggerJobResponse;
import dev.tickwheel.v1.UpdateCalendarRequest;
import dev.tickwheel.v1.UpdateCalendarResponse;
import dev.tickwheel.v1.UpdateJobRequest;
import dev.tickwheel.v1.UpdateJobResponse;
import java.util.List;
import java.util.function.BiFunction;
import java.util.function.Predicate;

/**
 * Every SchedulerService RPC once: its name, how the blocking stub sends it, and whether an
 * attempt that failed with a retryable status may be sent again with this request. A test checks
 * that {@link #ALL} covers every RPC of the service, so a new one forces a decision.
 */
final class SchedulerRpcs {
  private SchedulerRpcs() {}

  /** One unary RPC of SchedulerService. */
  record Rpc<Req, Resp>(
      String method,
      BiFunction<SchedulerServiceBlockingStub, Req, Resp> send,
      Predicate<Req> repeatable) {}

  private static <Req, Resp> Rpc<Req, Resp> rpc(
      String method,
      BiFunction<SchedulerServiceBlockingStub, Req, Resp> send,
      Predicate<Req> repeatable) {
    return new Rpc<>(method, send, repeatable);
  }

  private static <T> Predicate<T> always() {
    return request -> true;
  }

  private static <T> Predicate<T> never() {
    return request -> false;
  }

  static final Rpc<CreateJobRequest, CreateJobResponse> CREATE_JOB =
      rpc("CreateJob", SchedulerServiceBlockingStub::createJob, r -> !r.getRequestId().isEmpty());
  /** Repeatable when every item carries its request id: a repeat answers each item as before. */
  static final Rpc<BatchCreateJobsRequest, BatchCreateJobsResponse> BATCH_CREATE_JOBS =
      rpc(
          "BatchCreateJobs",
          SchedulerServiceBlockingStub::batchCreateJobs,
          r ->
              r.getItemsCount() > 0
                  && r.getItemsList().stream().noneMatch(item -> item.getRequestId().isEmpty()));
  static final Rpc<GetJobRequest, GetJobResponse> GET_JOB =
      rpc("GetJob", SchedulerServiceBlockingStub::getJob, always());
  static final Rpc<ListJobsRequest, ListJobsResponse> LIST_JOBS =
      rpc("ListJobs", SchedulerServiceBlockingStub::listJobs, always());
  /** Never repeated, {@code validate_only} included: it is UpdateJob, decided by the RPC. */
  static final Rpc<UpdateJobRequest, UpdateJobResponse> UPDATE_JOB =
      rpc("UpdateJob", SchedulerServiceBlockingStub::updateJob, never());
  static final Rpc<ListJobRevisionsRequest, ListJobRevisionsResponse> LIST_JOB_REVISIONS =
      rpc("ListJobRevisions", SchedulerServiceBlockingStub::listJobRevisions, always());
  static final Rpc<DeleteJobRequest, DeleteJobResponse> DELETE_JOB =
      rpc("DeleteJob", SchedulerServiceBlockingStub::deleteJob, never());
  /**
   * Repeatable when every item names the version it expects: a change then applies once (one a
   * lost attempt applied answers FAILED_PRECONDITION).
   */
  static final Rpc<BatchUpdateJobsRequest, BatchUpdateJobsResponse> BATCH_UPDATE_JOBS =
      rpc(
          "BatchUpdateJobs",
          SchedulerServiceBlockingStub::batchUpdateJobs,
          r ->
              r.getItemsCount() > 0
                  && r.getItemsList().stream().noneMatch(item -> item.getJob().getVersion() == 0));
  /** Repeatable: a delete happens once (one a lost attempt applied answers NOT_FOUND). */
  static final Rpc<BatchDeleteJobsRequest, BatchDeleteJobsResponse> BATCH_DELETE_JOBS =
      rpc("BatchDeleteJobs", SchedulerServiceBlockingStub::batchDeleteJobs, always());
  static final Rpc<PauseJobRequest, PauseJobResponse> PAUSE_JOB =
      rpc("PauseJob", SchedulerServiceBlockingStub::pauseJob, never());
  static final Rpc<ResumeJobRequest, ResumeJobResponse> RESUME_JOB =
      rpc("ResumeJob", SchedulerServiceBlockingStub::resumeJob, never());
  /** Repeatable: pausing a paused job changes nothing. */
  static final Rpc<BatchPauseJobsRequest, BatchPauseJobsResponse> BATCH_PAUSE_JOBS =
      rpc("BatchPauseJobs", SchedulerServiceBlockingStub::batchPauseJobs, always());
  /** Repeatable: resuming an active job changes nothing. */
  static final Rpc<BatchResumeJobsRequest, BatchResumeJobsResponse> BATCH_RESUME_JOBS =
      rpc("BatchResumeJobs", SchedulerServiceBlockingStub::batchResumeJobs, always());
  static final Rpc<TriggerJobRequest, TriggerJobResponse> TRIGGER_JOB =
      rpc("TriggerJob", SchedulerServiceBlockingStub::triggerJob, r -> !r.getRequestId().isEmpty());
  static final Rpc<BackfillJobRequest, BackfillJobResponse> BACKFILL_JOB =
      rpc("BackfillJob", SchedulerServiceBlockingStub::backfillJob, BackfillJobRequest::getDryRun);
  static final Rpc<PreviewScheduleRequest, PreviewScheduleResponse> PREVIEW_SCHEDULE =
      rpc("PreviewSchedule", SchedulerServiceBlockingStub::previewSchedule, always());
  static final Rpc<GetExecutionRequest, GetExecutionResponse> GET_EXECUTION =
      rpc("GetExecution", SchedulerServiceBlockingStub::getExecution, always());
  static final Rpc<ListExecutionsRequest, ListExecutionsResponse> LIST_EXECUTIONS =
      rpc("ListExecutions", SchedulerServiceBlockingStub::listExecutions, always());
  static final Rpc<CancelExecutionRequest, CancelExecutionResponse> CANCEL_EXECUTION =
      rpc("CancelExecution", SchedulerServiceBlockingStub::cancelExecution, never());
  static final Rpc<ListDeadLettersRequest, ListDeadLettersResponse> LIST_DEAD_LETTERS =
      rpc("ListDeadLetters", SchedulerServiceBlockingStub::listDeadLetters, always());
  static final Rpc<ReplayDeadLetterRequest, ReplayDeadLetterResponse> REPLAY_DEAD_LETTER =
      rpc("ReplayDeadLetter", SchedulerServiceBlockingStub::replayDeadLetter, never());
  /** Calendars as jobs: a create carries a request id; an update or delete is never repeated. */
  static final Rpc<CreateCalendarRequest, CreateCalendarResponse> CREATE_CALENDAR =
      rpc(
          "CreateCalendar",
          SchedulerServiceBlockingStub::createCalendar,
          r -> !r.getRequestId().isEmpty());
  static final Rpc<GetCalendarRequest, GetCalendarResponse> GET_CALENDAR =
      rpc("GetCalendar", SchedulerServiceBlockingStub::getCalendar, always());
  static final Rpc<ListCalendarsRequest, ListCalendarsResponse> LIST_CALENDARS =
      rpc("ListCalendars", SchedulerServiceBlockingStub::listCalendars, always());
  static final Rpc<UpdateCalendarRequest, UpdateCalendarResponse> UPDATE_CALENDAR =
      rpc("UpdateCalendar", SchedulerServiceBlockingStub::updateCalendar, never());
  static final Rpc<DeleteCalendarRequest, DeleteCalendarResponse> DELETE_CALENDAR =
      rpc("DeleteCalendar", SchedulerServiceBlockingStub::deleteCalendar, never());

  static final List<Rpc<?, ?>> ALL =
      List.of(
          CREATE_JOB,
          BATCH_CREATE_JOBS,
          GET_JOB,
          LIST_JOBS,
          UPDATE_JOB,
          DELETE_JOB,
          BATCH_UPDATE_JOBS,
          BATCH_DELETE_JOBS,
          LIST_JOB_REVISIONS,
          PAUSE_JOB,
          RESUME_JOB,
          BATCH_PAUSE_JOBS,
          BATCH_RESUME_JOBS,
          TRIGGER_JOB,
          BACKFILL_JOB,
          PREVIEW_SCHEDULE,
          GET_EXECUTION,
          LIST_EXECUTIONS,
          CANCEL_EXECUTION,
          LIST_DEAD_LETTERS,
          REPLAY_DEAD_LETTER,
          CREATE_CALENDAR,
          GET_CALENDAR,
          LIST_CALENDARS,
          UPDATE_CALENDAR,
          DELETE_CALENDAR);
}

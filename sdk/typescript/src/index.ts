/**
 * Tickwheel's TypeScript SDK for Node.js: a typed client and a worker over
 * Connect's gRPC (HTTP/2) transport, on top of the generated `tickwheel.v1`
 * messages (re-exported here; every client method returns them).
 */

export {
  TickwheelClient,
  newRequestId,
  retryDelayMs,
  type CallOptions,
  type ClientOptions,
  type ListExecutionsOptions,
  type ListJobsOptions,
  type ServiceClient,
} from "./client.js";
export {
  calendar,
  cronJob,
  dstPolicy,
  duration,
  executionStatus,
  handlerTarget,
  httpTarget,
  jobState,
  localJob,
  misfirePolicy,
  onceJob,
  overlapPolicy,
  payloadBytes,
  retryPolicy,
  timestamp,
  weekday,
  type CalendarOptions,
  type CronJobOptions,
  type DateLike,
  type DstGapName,
  type DstRepeatName,
  type ExecutionStatusName,
  type JobOptions,
  type JobStateName,
  type LocalJobOptions,
  type MisfireName,
  type OverlapName,
  type TimestampLike,
  type WeekdayName,
} from "./builders.js";
export { ANSWER_TOO_LARGE, MAX_BATCH_ITEMS, isAnswerTooLarge, type CreateJobsResult, type DeleteJobsResult, type UpdateJobsResult } from "./batch.js";
export { Code, TickwheelError, codeName, type FieldViolation } from "./errors.js";
export {
  DEFAULT_RETRY,
  backoffMs,
  retryOptions,
  tlsFromFiles,
  type RetryOptions,
  type TlsOptions,
} from "./options.js";
export { systemClock, type Clock } from "./clock.js";
export {
  PermanentError,
  Worker,
  WorkerFatalError,
  defaultWorkerId,
  stderrLogger,
  type Handler,
  type InFlight,
  type JobContext,
  type Logger,
  type WorkerOptions,
} from "./worker.js";
export { reconnectDelayMs } from "./backoff.js";
export { VERSION } from "./version.js";

export * from "./gen/tickwheel/v1/job_pb.js";
export * from "./gen/tickwheel/v1/execution_pb.js";
export * from "./gen/tickwheel/v1/scheduler_pb.js";
export * from "./gen/tickwheel/v1/worker_pb.js";
export * from "./gen/tickwheel/v1/admin_pb.js";
export * from "./gen/tickwheel/v1/calendar_pb.js";

/**
 * The hand-written TypeScript client over the generated `tickwheel.v1` code.
 *
 * {@link TickwheelClient} has one method per SchedulerService RPC taking plain
 * arguments, and the raw typed services `client.scheduler` and
 * `client.admin` (every RPC, request as a message or its init shape). Each
 * call is sent over gRPC (HTTP/2) with `authorization: Bearer <credential>`
 * (the API key for SchedulerService, the admin token for AdminService) and
 * returns the response message unchanged. Failures throw
 * {@link TickwheelError}.
 *
 * Retries: UNAVAILABLE (by default) is retried with exponential backoff and
 * full jitter, within the call's deadline, and only for calls that are safe
 * to repeat: reads, CreateJob, BatchCreateJobs and TriggerJob (request ids
 * make them idempotent; the client generates them when you do not),
 * BatchUpdateJobs and BatchDeleteJobs (versions make each change apply
 * once), and dry runs. Other writes fail on the first error.
 *
 * ```ts
 * const client = new TickwheelClient({ address: "127.0.0.1:50051", apiKey: process.env.TICKWHEEL_API_KEY });
 * const { job } = await client.createJob(cronJob("report", "0 2 * * *", "UTC", { handler: "reports.nightly" }));
 * for await (const execution of client.iterExecutions(job!.id)) console.log(execution.id, execution.status);
 * client.close();
 * ```
 */

import { randomUUID } from "node:crypto";

import {
  create,
  type DescMethodServerStreaming,
  type DescMethodUnary,
  type DescService,
  type MessageInitShape,
  type MessageShape,
} from "@bufbuild/protobuf";
import { FieldMaskSchema } from "@bufbuild/protobuf/wkt";
import { Code, createClient, type Interceptor } from "@connectrpc/connect";

import {
  batchResults,
  deleteResults,
  planBatches,
  planDeletes,
  planUpdates,
  sendHalving,
  updateResults,
  type CreateJobsResult,
  type DeleteJobsResult,
  type UpdateJobsResult,
} from "./batch.js";
import { payloadBytes, timestamp, executionStatus, jobState, type ExecutionStatusName, type JobStateName, type TimestampLike } from "./builders.js";
import { systemClock, type Clock } from "./clock.js";
import { TickwheelError } from "./errors.js";
import { AdminService } from "./gen/tickwheel/v1/admin_pb.js";
import {
  CalendarSchema,
  type Calendar,
  type CreateCalendarResponse,
  type DeleteCalendarResponse,
  type GetCalendarResponse,
  type ListCalendarsResponse,
  type UpdateCalendarResponse,
} from "./gen/tickwheel/v1/calendar_pb.js";
import type { Execution } from "./gen/tickwheel/v1/execution_pb.js";
import { JobSchema, type ExecutionStatus, type Job, type JobState } from "./gen/tickwheel/v1/job_pb.js";
import {
  CreateJobRequestSchema,
  DeleteJobRequestSchema,
  PauseJobRequestSchema,
  ResumeJobRequestSchema,
  SchedulerService,
  UpdateJobRequestSchema,
  type JobView,
  type BackfillJobResponse,
  type BatchCreateJobsResponse,
  type BatchDeleteJobsResponse,
  type BatchPauseJobsResponse,
  type BatchResumeJobsResponse,
  type BatchUpdateJobsResponse,
  type CancelExecutionResponse,
  type CreateJobResponse,
  type DeleteJobResponse,
  type GetExecutionResponse,
  type GetJobResponse,
  type ListDeadLettersResponse,
  type ListExecutionsResponse,
  type ListJobsResponse,
  type PauseJobResponse,
  type PreviewScheduleResponse,
  type ReplayDeadLetterResponse,
  type ResumeJobResponse,
  type TriggerJobResponse,
  type UpdateJobRequest,
  type UpdateJobResponse,
} from "./gen/tickwheel/v1/scheduler_pb.js";
import { backoffMs, retryOptions, type RetryOptions, type TlsOptions } from "./options.js";
import { connect, checkCredential, type Connection } from "./transport.js";
import { VERSION } from "./version.js";

/** How to reach a server and how to call it. */
export interface ClientOptions {
  /** `host:port` of any server (`127.0.0.1:50051` for `tickwheel dev`), or an `http(s)://` URL. */
  address: string;
  /** The tenant API key sent on SchedulerService calls; unset sends none (the server answers UNAUTHENTICATED). */
  apiKey?: string;
  /** The admin credential sent on `client.admin` calls. */
  adminToken?: string;
  /** TLS options; unset connects in plaintext. */
  tls?: TlsOptions;
  /**
   * Milliseconds each call may take in total, retries and their waits
   * included. Default 10 000; `null` or 0 means no deadline.
   */
  timeoutMs?: number | null;
  /** {@link RetryOptions} (partial), a number of retries after the first attempt, or `null` for none. */
  retries?: Partial<RetryOptions> | number | null;
  /** Extra Connect interceptors, run after the one that adds the credential. */
  interceptors?: Interceptor[];
  /** How the client waits between retries (tests). */
  clock?: Clock;
  /** Uniform in [0, 1): the jitter of retry waits (tests). */
  random?: () => number;
}

/** Options every call takes. */
export interface CallOptions {
  /** Overrides the client's `timeoutMs` for this call (`null` or 0: no deadline). */
  timeoutMs?: number | null;
  /** Aborts the call (and its retries) with CANCELLED. */
  signal?: AbortSignal;
  /** Extra request headers. */
  headers?: Record<string, string>;
}

/** A service's RPCs with the client's credentials, deadlines, retries and errors. */
export type ServiceClient<S extends DescService> = {
  [K in keyof S["method"]]: S["method"][K] extends DescMethodUnary<infer I, infer O>
    ? (request: MessageInitShape<I>, options?: CallOptions) => Promise<MessageShape<O>>
    : S["method"][K] extends DescMethodServerStreaming<infer I, infer O>
      ? (request: MessageInitShape<I>, options?: CallOptions) => AsyncIterable<MessageShape<O>>
      : never;
};

/** A fresh request id (a UUID v4), valid for CreateJob and TriggerJob. */
export function newRequestId(): string {
  return randomUUID();
}

// --- which calls may be repeated --------------------------------------------

type Request = Record<string, unknown>;

interface CallPolicy {
  /** True when an attempt of this request that failed with a retryable status may be sent again. */
  idempotent(request: Request): boolean;
  /** Completes the request before the first attempt (a request id where one makes it idempotent). */
  prepare?(request: Request): Request;
}

const always: CallPolicy = { idempotent: () => true };
const withRequestId: CallPolicy = {
  idempotent: (request) => Boolean(request["requestId"]),
  prepare: (request) => (request["requestId"] ? request : { ...request, requestId: newRequestId() }),
};
const withItemRequestIds: CallPolicy = {
  idempotent: (request) => {
    const items = request["items"];
    return Array.isArray(items) && items.length > 0 && items.every((item: Request) => Boolean(item?.["requestId"]));
  },
  prepare: (request) => {
    const items = request["items"];
    if (!Array.isArray(items)) return request;
    return { ...request, items: items.map((item: Request) => (item?.["requestId"] ? item : { ...item, requestId: newRequestId() })) };
  },
};
const whenDryRun: CallPolicy = { idempotent: (request) => Boolean(request["dryRun"]) };
/** Each update item names the version it expects: a retry cannot apply one twice. */
const withItemVersions: CallPolicy = {
  idempotent: (request) => {
    const items = request["items"];
    return Array.isArray(items) && items.length > 0 && items.every((item: Request) => Boolean((item?.["job"] as Request | undefined)?.["version"]));
  },
};

/**
 * Per RPC (by its local name), when it may be retried. Anything not listed
 * is never retried: UpdateJob, DeleteJob, PauseJob, ResumeJob,
 * CancelExecution, ReplayDeadLetter, UpdateCalendar, DeleteCalendar and the
 * admin writes, because a reply
 * lost after the server committed would otherwise apply them twice.
 */
const POLICIES: Record<string, Record<string, CallPolicy>> = {
  [SchedulerService.typeName]: {
    createJob: withRequestId,
    batchCreateJobs: withItemRequestIds,
    // A delete happens once and each update carries its version: a retried
    // batch applies nothing twice (an item a lost attempt applied answers
    // NOT_FOUND or FAILED_PRECONDITION).
    batchUpdateJobs: withItemVersions,
    batchDeleteJobs: always,
    // Pausing a paused job and resuming an active one change nothing.
    batchPauseJobs: always,
    batchResumeJobs: always,
    triggerJob: withRequestId,
    backfillJob: whenDryRun,
    getJob: always,
    listJobs: always,
    // A read. UpdateJob with validateOnly writes nothing but is UpdateJob: never retried.
    listJobRevisions: always,
    previewSchedule: always,
    getExecution: always,
    listExecutions: always,
    listDeadLetters: always,
    // Calendars as jobs: a create carries a request id, reads are safe;
    // UpdateCalendar and DeleteCalendar are never repeated.
    createCalendar: withRequestId,
    getCalendar: always,
    listCalendars: always,
  },
  [AdminService.typeName]: {
    clusterStatus: always,
    getTenant: always,
    listTenants: always,
    listApiKeys: always,
    listWorkerCredentials: always,
    searchJobs: always,
    searchExecutions: always,
    listAlerts: always,
    recomputeSchedules: whenDryRun,
  },
};

const NEVER: CallPolicy = { idempotent: () => false };

/**
 * The unary RPCs never retried, named so that a new RPC must be placed in
 * one table or the other (the unit tests check every RPC of the services).
 */
const NOT_RETRIED: Record<string, readonly string[]> = {
  [SchedulerService.typeName]: [
    "updateJob", "deleteJob", "pauseJob", "resumeJob", "cancelExecution", "replayDeadLetter",
    "updateCalendar", "deleteCalendar",
  ],
  [AdminService.typeName]: [
    "createTenant", "updateTenant", "pauseTenant", "resumeTenant", "issueApiKey", "rotateApiKey", "revokeApiKey",
    "issueWorkerCredential", "revokeWorkerCredential", "drainServer",
  ],
};

/** The unary RPCs of `service` that neither retry table names (none, when the tables are complete). */
export function unclassifiedRpcs(service: DescService): string[] {
  const listed = POLICIES[service.typeName] ?? {};
  const never = new Set(NOT_RETRIED[service.typeName] ?? []);
  return service.methods
    .filter((method) => method.methodKind === "unary" && !(method.localName in listed) && !never.has(method.localName))
    .map((method) => method.localName);
}

/**
 * How long to wait before attempt `attempt + 1`, in milliseconds, or
 * `undefined` to give up: when the status is not retryable, the call is not
 * safe to repeat, the attempts are spent, or the wait would end past the
 * deadline (`remainingMs` left; `undefined` means no deadline).
 */
export function retryDelayMs(
  retry: RetryOptions,
  idempotent: boolean,
  error: TickwheelError,
  attempt: number,
  remainingMs: number | undefined,
  random: () => number = Math.random,
): number | undefined {
  if (!retry.retryableCodes.has(error.code) || !idempotent || attempt >= retry.maxAttempts) {
    return undefined;
  }
  const delay = backoffMs(retry, attempt, random);
  if (remainingMs !== undefined && delay >= remainingMs) {
    return undefined;
  }
  return delay;
}

function checkTimeout(timeoutMs: number | null | undefined): number | undefined {
  if (timeoutMs === null || timeoutMs === 0 || timeoutMs === undefined) {
    return undefined;
  }
  if (!(timeoutMs > 0) || !Number.isFinite(timeoutMs)) {
    throw new TypeError("timeoutMs must be positive milliseconds, or null for no deadline");
  }
  return timeoutMs;
}

// --- the client -----------------------------------------------------------------

/**
 * A client for one Tickwheel server address. It holds one HTTP/2 connection,
 * opened on the first call and re-opened after a failure; call
 * {@link close} when done. Safe to share across concurrent calls.
 */
export class TickwheelClient {
  /** Every SchedulerService RPC, request as a message or its init shape. */
  readonly scheduler: ServiceClient<typeof SchedulerService>;
  /** Every AdminService RPC; calls carry `adminToken` (none: UNAUTHENTICATED; an API key: PERMISSION_DENIED). */
  readonly admin: ServiceClient<typeof AdminService>;
  /** The retry options in force. */
  readonly retries: RetryOptions;
  /** Milliseconds each call may take in total, or undefined for no deadline. */
  readonly timeoutMs: number | undefined;

  private readonly connection: Connection;
  private readonly clock: Clock;
  private readonly random: () => number;
  private closed = false;

  constructor(options: ClientOptions) {
    const apiKey = checkCredential("apiKey", options.apiKey);
    const adminToken = checkCredential("adminToken", options.adminToken);
    this.timeoutMs = checkTimeout(options.timeoutMs === undefined ? 10_000 : options.timeoutMs);
    this.retries = retryOptions(options.retries);
    this.clock = options.clock ?? systemClock;
    this.random = options.random ?? Math.random;
    const credentials: Interceptor = (next) => async (request) => {
      const token = request.service.typeName === AdminService.typeName ? adminToken : apiKey;
      if (token !== undefined) {
        request.header.set("authorization", `Bearer ${token}`);
      }
      request.header.set("x-tickwheel-sdk", `typescript/${VERSION}`);
      return next(request);
    };
    this.connection = connect(options.address, options.tls, [credentials, ...(options.interceptors ?? [])]);
    this.scheduler = this.service(SchedulerService);
    this.admin = this.service(AdminService);
  }

  /** The base URL calls go to (`http://127.0.0.1:50051`). */
  get url(): string {
    return this.connection.url;
  }

  /** Closes the connection; calls made afterwards fail with CANCELLED. */
  close(): void {
    this.closed = true;
    this.connection.close();
  }

  private service<S extends DescService>(service: S): ServiceClient<S> {
    const raw = createClient(service, this.connection.transport) as unknown as Record<
      string,
      (request: unknown, options: object) => Promise<unknown> | AsyncIterable<unknown>
    >;
    const policies = POLICIES[service.typeName] ?? {};
    const out: Record<string, unknown> = {};
    for (const method of service.methods) {
      const name = method.localName;
      const call = raw[name];
      if (call === undefined) continue;
      const policy = policies[name] ?? NEVER;
      if (method.methodKind === "unary") {
        out[name] = (request: Request, options?: CallOptions) => {
          const prepared = policy.prepare ? policy.prepare(request) : request;
          return this.invoke(
            (callOptions) => call(prepared, callOptions) as Promise<unknown>,
            policy.idempotent(prepared),
            options,
          );
        };
      } else if (method.methodKind === "server_streaming") {
        out[name] = (request: Request, options?: CallOptions) => this.stream(
          (callOptions) => call(request, callOptions) as AsyncIterable<unknown>,
          options,
        );
      }
    }
    return out as ServiceClient<S>;
  }

  /**
   * Runs `call`, retrying as the retry options and `idempotent` allow,
   * within the call's deadline. Throws {@link TickwheelError}.
   */
  private async invoke<R>(
    call: (options: { timeoutMs?: number; signal?: AbortSignal; headers?: Record<string, string> }) => Promise<R>,
    idempotent: boolean,
    options: CallOptions | undefined,
  ): Promise<R> {
    if (this.closed) {
      throw new TickwheelError(Code.Canceled, "the client is closed");
    }
    const timeoutMs = options?.timeoutMs === undefined ? this.timeoutMs : checkTimeout(options.timeoutMs);
    const deadline = timeoutMs === undefined ? undefined : this.clock.monotonicMs() + timeoutMs;
    const signal = options?.signal;
    for (let attempt = 1; ; attempt += 1) {
      const remaining = deadline === undefined ? undefined : Math.max(deadline - this.clock.monotonicMs(), 1);
      try {
        return await call({
          ...(remaining !== undefined ? { timeoutMs: Math.ceil(remaining) } : {}),
          ...(signal !== undefined ? { signal } : {}),
          ...(options?.headers !== undefined ? { headers: options.headers } : {}),
        });
      } catch (reason) {
        const error = TickwheelError.from(reason);
        const left = deadline === undefined ? undefined : deadline - this.clock.monotonicMs();
        const delay = retryDelayMs(this.retries, idempotent, error, attempt, left, this.random);
        if (delay === undefined || this.closed) {
          throw error;
        }
        await this.clock.sleep(delay, signal);
        if (signal?.aborted) {
          throw new TickwheelError(Code.Canceled, "the call was aborted while waiting to retry", [], [], { cause: error });
        }
      }
    }
  }

  /** A server stream: no retries, and a deadline only when the caller gives one. */
  private async *stream<R>(
    call: (options: { timeoutMs?: number; signal?: AbortSignal; headers?: Record<string, string> }) => AsyncIterable<R>,
    options: CallOptions | undefined,
  ): AsyncIterable<R> {
    if (this.closed) {
      throw new TickwheelError(Code.Canceled, "the client is closed");
    }
    const timeoutMs = checkTimeout(options?.timeoutMs);
    try {
      yield* call({
        ...(timeoutMs !== undefined ? { timeoutMs } : {}),
        ...(options?.signal !== undefined ? { signal: options.signal } : {}),
        ...(options?.headers !== undefined ? { headers: options.headers } : {}),
      });
    } catch (reason) {
      throw TickwheelError.from(reason);
    }
  }

  // --- SchedulerService, with plain arguments ------------------------------------

  /**
   * Creates `job` and computes its first run. Returns the job as stored (id,
   * state, `nextRunAt`) and `created`, false when the request id had been
   * seen and the existing job is returned.
   *
   * `requestId` makes the call idempotent for 24 h. When omitted a fresh
   * UUID is used: this call's own retries are then safe, but running your
   * program twice creates two jobs, so pass a stable id where that matters.
   * Retried. INVALID_ARGUMENT names the offending field
   * (`job.schedule.cron.expression`).
   */
  createJob(job: Job | MessageInitShape<typeof JobSchema>, options: { requestId?: string } & CallOptions = {}): Promise<CreateJobResponse> {
    const { requestId, ...call } = options;
    return this.scheduler.createJob({ job: create(JobSchema, job), requestId: requestId || newRequestId() }, call);
  }

  /**
   * Creates every job of `jobs` through BatchCreateJobs and returns one
   * {@link CreateJobsResult} per job, in order: the job as stored and
   * `created`, or the {@link TickwheelError} CreateJob would have thrown for
   * that job alone (with its field violations). A bad job does not stop the
   * others. No jobs: no call, an empty array.
   *
   * The jobs go in calls of at most 1000, one after the other; each call
   * has the client's (or `timeoutMs`') deadline and is retried on
   * UNAVAILABLE with the client's retry options, resending the same request
   * ids. `requestIds` (one per job; `undefined` or `""` for a fresh UUID)
   * makes each job idempotent for 24 h: pass stable ids to make re-running
   * your program safe, including after a failure part way.
   *
   * Throws when a call fails as a whole (after its retries, e.g.
   * UNAUTHENTICATED, or UNAVAILABLE past the attempts), or when the server
   * answers a call with another number of results than jobs (INTERNAL): the
   * calls before it took effect, their results are not returned, and
   * sending the same jobs with the same request ids again is safe.
   *
   * `view` JobView.BASIC answers each job with its identity and state only
   * (no payload, target or schedule); unset or FULL, the whole job. A call
   * the server refuses because its answer would be too large for the client
   * (nothing written) is sent again as two halves, with the same request
   * ids, until each answer fits.
   */
  async createJobs(
    jobs: Iterable<Job | MessageInitShape<typeof JobSchema>>,
    options: { requestIds?: readonly (string | undefined)[]; view?: JobView } & CallOptions = {},
  ): Promise<CreateJobsResult[]> {
    const { requestIds, ...call } = options;
    const results: CreateJobsResult[] = [];
    for (const items of planBatches(jobs, requestIds, newRequestId)) {
      await sendHalving(items, async (part) => {
        results.push(...batchResults(part, await this.batchCreateJobs(part, call)));
      });
    }
    return results;
  }

  /**
   * One BatchCreateJobs call: 1 to 1000 items, each a CreateJobRequest
   * (an item without a request id gets a fresh one). Returns the response
   * unchanged: one result per item, in order. Retried. Prefer
   * {@link createJobs}, which takes any number of jobs and maps each result.
   * `view`: as for {@link createJobs}; a call whose answer would be too
   * large is refused whole, nothing written.
   */
  batchCreateJobs(
    items: readonly MessageInitShape<typeof CreateJobRequestSchema>[],
    options: { view?: JobView } & CallOptions = {},
  ): Promise<BatchCreateJobsResponse> {
    const { view, ...call } = options;
    return this.scheduler.batchCreateJobs({ items: [...items], view }, call);
  }

  /**
   * Changes every job of `changes` through BatchUpdateJobs and returns one
   * {@link UpdateJobsResult} per change, in order: the job as stored, or the
   * {@link TickwheelError} UpdateJob would have thrown for it alone. A change
   * is a Job with `id`, the `version` last read and the new values of
   * `updateMask` (unset: every mutable field), or an UpdateJobRequest with
   * its own mask. Changes apply in order: a job named twice sees the first
   * change (and its new version). Calls of at most 1000, one after the other,
   * each retried on UNAVAILABLE: the versions make a change apply once, and
   * one a lost attempt applied then answers FAILED_PRECONDITION. Throws when
   * a call fails as a whole: the calls before it were applied. `view`, and
   * a call whose answer would be too large: as for {@link createJobs}.
   */
  async updateJobs(
    changes: Iterable<Job | MessageInitShape<typeof JobSchema> | UpdateJobRequest>,
    options: { updateMask?: readonly string[]; view?: JobView } & CallOptions = {},
  ): Promise<UpdateJobsResult[]> {
    const { updateMask, ...call } = options;
    const results: UpdateJobsResult[] = [];
    for (const items of planUpdates(changes, updateMask)) {
      await sendHalving(items, async (part) => {
        results.push(...updateResults(part, await this.batchUpdateJobs(part, call)));
      });
    }
    return results;
  }

  /**
   * Deletes every job of `ids` through BatchDeleteJobs and returns one
   * {@link DeleteJobsResult} per id, in order: deleted (with
   * `canceledExecutions`) or the {@link TickwheelError} DeleteJob would have
   * thrown (NOT_FOUND for an unknown id, one named twice or another
   * tenant's; FAILED_PRECONDITION when a non-zero `versions` entry is
   * stale). Retried on UNAVAILABLE: a job a lost attempt deleted then
   * answers NOT_FOUND. Throws when a call fails as a whole: the calls before
   * it were applied.
   */
  async deleteJobs(
    ids: Iterable<string>,
    options: { versions?: readonly (bigint | number)[] } & CallOptions = {},
  ): Promise<DeleteJobsResult[]> {
    const { versions, ...call } = options;
    const results: DeleteJobsResult[] = [];
    for (const items of planDeletes(ids, versions)) {
      const response = await this.batchDeleteJobs(items, call);
      results.push(...deleteResults(items, response));
    }
    return results;
  }

  /** One BatchUpdateJobs call: 1 to 1000 UpdateJobRequest items. Retried when every item has a version. `view`: as for {@link createJobs}. Prefer {@link updateJobs}. */
  batchUpdateJobs(
    items: readonly MessageInitShape<typeof UpdateJobRequestSchema>[],
    options: { view?: JobView } & CallOptions = {},
  ): Promise<BatchUpdateJobsResponse> {
    const { view, ...call } = options;
    return this.scheduler.batchUpdateJobs({ items: [...items], view }, call);
  }

  /** One BatchDeleteJobs call: 1 to 1000 DeleteJobRequest items. Retried. Prefer {@link deleteJobs}. */
  batchDeleteJobs(
    items: readonly MessageInitShape<typeof DeleteJobRequestSchema>[],
    options: CallOptions = {},
  ): Promise<BatchDeleteJobsResponse> {
    return this.scheduler.batchDeleteJobs({ items: [...items] }, options);
  }

  /**
   * One BatchPauseJobs call: 1 to 1000 items, each answered as pauseJob
   * would be alone. Retried. `view` JobView.BASIC answers each job without
   * its definition: over jobs with large payloads, a full answer too large
   * for the client is refused whole, nothing written.
   */
  batchPauseJobs(
    items: readonly MessageInitShape<typeof PauseJobRequestSchema>[],
    options: { view?: JobView } & CallOptions = {},
  ): Promise<BatchPauseJobsResponse> {
    const { view, ...call } = options;
    return this.scheduler.batchPauseJobs({ items: [...items], view }, call);
  }

  /** One BatchResumeJobs call: 1 to 1000 items, each answered as resumeJob would be alone. Retried. `view`: as for {@link batchPauseJobs}. */
  batchResumeJobs(
    items: readonly MessageInitShape<typeof ResumeJobRequestSchema>[],
    options: { view?: JobView } & CallOptions = {},
  ): Promise<BatchResumeJobsResponse> {
    const { view, ...call } = options;
    return this.scheduler.batchResumeJobs({ items: [...items], view }, call);
  }

  /**
   * The job with its last outcome and its upcoming fires (`nextRuns`, default
   * 5, at most 100). NOT_FOUND for an unknown id or another tenant's job.
   * Retried.
   */
  getJob(id: string, options: { nextRuns?: number } & CallOptions = {}): Promise<GetJobResponse> {
    const { nextRuns = 0, ...call } = options;
    return this.scheduler.getJob({ id, nextRuns }, call);
  }

  /**
   * One page of the tenant's jobs, ordered by id (`nextPageToken` empty on
   * the last page). `pageSize` default 100, at most 1000. A filtered page
   * (state, name prefix) may be short or empty and still carry a token: its
   * scan stopped before the end. Use {@link iterJobs} to walk every page.
   * Retried.
   */
  listJobs(options: ListJobsOptions & CallOptions = {}): Promise<ListJobsResponse> {
    const { state, namePrefix = "", pageSize = 0, pageToken = "", ...call } = options;
    return this.scheduler.listJobs({ state: state === undefined ? 0 : jobState(state), namePrefix, pageSize, pageToken }, call);
  }

  /**
   * Changes the fields of `job` named in `updateMask` (`"schedule"`,
   * `"payload"`, `"retry_policy"`, ...; unset or empty means every mutable
   * field). `job.id` and `job.version` (as last read) are required:
   * FAILED_PRECONDITION when the stored version moved on. Executions not yet
   * started are canceled. Never retried.
   */
  updateJob(job: Job, options: { updateMask?: string[] } & CallOptions = {}): Promise<UpdateJobResponse> {
    const { updateMask, ...call } = options;
    return this.scheduler.updateJob(
      { job, ...(updateMask !== undefined ? { updateMask: create(FieldMaskSchema, { paths: updateMask }) } : {}) },
      call,
    );
  }

  /**
   * Deletes the job and cancels its executions that have not started;
   * history stays for the retention window. `version` (when non-zero) must
   * equal the stored one: FAILED_PRECONDITION otherwise. Never retried.
   */
  deleteJob(id: string, options: { version?: bigint | number } & CallOptions = {}): Promise<DeleteJobResponse> {
    const { version = 0, ...call } = options;
    return this.scheduler.deleteJob({ id, version: BigInt(version) }, call);
  }

  /** Stops creating occurrences and holds the executions that have not started until resumeJob. Never retried. */
  pauseJob(id: string, options: { reason?: string } & CallOptions = {}): Promise<PauseJobResponse> {
    const { reason = "", ...call } = options;
    return this.scheduler.pauseJob({ id, reason }, call);
  }

  /**
   * Resumes a paused job: each occurrence that came due while paused (claimed ahead or not) runs late
   * when still within the job's misfire threshold (a bounded few, see the proto), the older ones are one
   * skip range; other held executions are released. Never retried.
   */
  resumeJob(id: string, options: CallOptions = {}): Promise<ResumeJobResponse> {
    return this.scheduler.resumeJob({ id }, options);
  }

  /**
   * Runs the job now, once per `requestId`: the execution id is
   * `<job id>:trigger:<request id>` (a fresh UUID when omitted). `payload`
   * replaces the job's for this execution only; `allowOverlap` lets it run
   * beside a running one instead of queueing. Retried (the request id makes
   * it safe).
   */
  triggerJob(
    id: string,
    options: { requestId?: string; payload?: Uint8Array | string; allowOverlap?: boolean } & CallOptions = {},
  ): Promise<TriggerJobResponse> {
    const { requestId, payload, allowOverlap = false, ...call } = options;
    return this.scheduler.triggerJob(
      { id, requestId: requestId || newRequestId(), payload: payloadBytes(payload), allowOverlap },
      call,
    );
  }

  /**
   * Creates the occurrences the schedule had in `[fromAt, toAt)` with their
   * normal ids, so a repeated backfill never duplicates. `dryRun` creates
   * nothing and returns exactly what a real run would. Retried only when
   * `dryRun`.
   */
  backfillJob(
    id: string,
    fromAt: TimestampLike,
    toAt: TimestampLike,
    options: { dryRun?: boolean; allowOverlap?: boolean } & CallOptions = {},
  ): Promise<BackfillJobResponse> {
    const { dryRun = false, allowOverlap = false, ...call } = options;
    return this.scheduler.backfillJob({ id, fromAt: timestamp(fromAt), toAt: timestamp(toAt), dryRun, allowOverlap }, call);
  }

  /**
   * The next fires of a saved job (`{ jobId }`) or of an unsaved one
   * (`{ job }`: its schedule, DST policy, jitter, start/end and max runs are
   * used). Fires strictly after `after` (default now); `count` default 5, at
   * most 1000. Retried.
   */
  previewSchedule(
    source: { jobId: string } | { job: Job },
    options: { after?: TimestampLike; count?: number } & CallOptions = {},
  ): Promise<PreviewScheduleResponse> {
    const { after, count = 0, ...call } = options;
    const kind = "jobId" in source
      ? ({ case: "jobId", value: source.jobId } as const)
      : ({ case: "job", value: source.job } as const);
    return this.scheduler.previewSchedule(
      { source: kind, count, ...(after !== undefined ? { after: timestamp(after) } : {}) },
      call,
    );
  }

  /** One execution with its attempts. Retried. */
  getExecution(id: string, options: CallOptions = {}): Promise<GetExecutionResponse> {
    return this.scheduler.getExecution({ id }, options);
  }

  /**
   * One page of a job's history, newest nominal instant first, each
   * execution with its attempts, plus the skip ranges overlapping the page.
   * `statuses` filters (empty means all); `[fromAt, toAt)` bounds the nominal
   * instants; `pageSize` default 50, at most 500. Retried.
   */
  listExecutions(jobId: string, options: ListExecutionsOptions & CallOptions = {}): Promise<ListExecutionsResponse> {
    const { statuses = [], fromAt, toAt, pageSize = 0, pageToken = "", ...call } = options;
    return this.scheduler.listExecutions(
      {
        jobId,
        statuses: statuses.map((s) => executionStatus(s)),
        pageSize,
        pageToken,
        ...(fromAt !== undefined ? { fromAt: timestamp(fromAt) } : {}),
        ...(toAt !== undefined ? { toAt: timestamp(toAt) } : {}),
      },
      call,
    );
  }

  /**
   * Cancels an execution: a waiting one at once, a running one through its
   * worker. FAILED_PRECONDITION when it had already ended. Never retried.
   */
  cancelExecution(id: string, options: { reason?: string } & CallOptions = {}): Promise<CancelExecutionResponse> {
    const { reason = "", ...call } = options;
    return this.scheduler.cancelExecution({ id, reason }, call);
  }

  /** One page of the tenant's dead executions (only `jobId`'s when given), newest first. Retried. */
  listDeadLetters(options: { jobId?: string; pageSize?: number; pageToken?: string } & CallOptions = {}): Promise<ListDeadLettersResponse> {
    const { jobId = "", pageSize = 0, pageToken = "", ...call } = options;
    return this.scheduler.listDeadLetters({ jobId, pageSize, pageToken }, call);
  }

  /** Starts a fresh attempt series for a DEAD execution, same id. Never retried. */
  replayDeadLetter(executionId: string, options: CallOptions = {}): Promise<ReplayDeadLetterResponse> {
    return this.scheduler.replayDeadLetter({ executionId }, options);
  }

  // --- calendars ----------------------------------------------------------------------

  /**
   * Creates a business-day calendar of the tenant (build one with
   * {@link calendar}): the calendar as stored (version 1) and `created`,
   * false when the request id had been seen (the first call's calendar is
   * returned, whatever this one's definition). ALREADY_EXISTS when the name
   * is taken, RESOURCE_EXHAUSTED past 1 000 calendars, INVALID_ARGUMENT
   * naming the field (`calendar.holidays[3]`). Retried: `requestId` (a fresh
   * UUID when omitted) makes it safe; pass a stable one to make re-running
   * your program safe.
   */
  createCalendar(
    calendar: Calendar | MessageInitShape<typeof CalendarSchema>,
    options: { requestId?: string } & CallOptions = {},
  ): Promise<CreateCalendarResponse> {
    const { requestId, ...call } = options;
    return this.scheduler.createCalendar({ calendar: create(CalendarSchema, calendar), requestId: requestId || newRequestId() }, call);
  }

  /** The calendar with every holiday and half-day. NOT_FOUND for an unknown name or another tenant's. Retried. */
  getCalendar(name: string, options: CallOptions = {}): Promise<GetCalendarResponse> {
    return this.scheduler.getCalendar({ name }, options);
  }

  /**
   * One page of the tenant's calendars by name, without their dates (their
   * counts instead). `pageSize` default 100, at most 1000. Use
   * {@link iterCalendars} to walk every page. Retried.
   */
  listCalendars(options: { pageSize?: number; pageToken?: string } & CallOptions = {}): Promise<ListCalendarsResponse> {
    const { pageSize = 0, pageToken = "", ...call } = options;
    return this.scheduler.listCalendars({ pageSize, pageToken }, call);
  }

  /**
   * Replaces the fields of `calendar` named in `updateMask` (`"time_zone"`,
   * `"business_days"`, `"holidays"`, `"half_days"`; unset or empty: all four;
   * a list is replaced whole). `calendar.name` and `calendar.version` (as
   * last read) are required: FAILED_PRECONDITION when the stored version
   * moved on. A change that changes nothing returns the calendar as it is.
   * Never retried.
   */
  updateCalendar(calendar: Calendar, options: { updateMask?: string[] } & CallOptions = {}): Promise<UpdateCalendarResponse> {
    const { updateMask, ...call } = options;
    return this.scheduler.updateCalendar(
      { calendar, ...(updateMask !== undefined ? { updateMask: create(FieldMaskSchema, { paths: updateMask }) } : {}) },
      call,
    );
  }

  /**
   * Deletes a calendar. `version` (when non-zero) must equal the stored one:
   * FAILED_PRECONDITION otherwise. Never retried.
   */
  deleteCalendar(name: string, options: { version?: bigint | number } & CallOptions = {}): Promise<DeleteCalendarResponse> {
    const { version = 0, ...call } = options;
    return this.scheduler.deleteCalendar({ name, version: BigInt(version) }, call);
  }

  // --- pages ------------------------------------------------------------------------

  /**
   * Every page of a list call, following `nextPageToken` until it is empty:
   * `client.pages((pageToken) => client.listJobs({ pageToken }))`.
   */
  async *pages<P extends { nextPageToken: string }>(fetch: (pageToken: string) => Promise<P>, pageToken = ""): AsyncGenerator<P> {
    let token = pageToken;
    for (;;) {
      const page = await fetch(token);
      yield page;
      if (page.nextPageToken && page.nextPageToken === token) {
        throw new Error("the server returned the same page token twice; stopping");
      }
      token = page.nextPageToken;
      if (!token) return;
    }
  }

  /** Every job {@link listJobs} would list with `options`, across pages. */
  async *iterJobs(options: Omit<ListJobsOptions, "pageToken"> & CallOptions = {}): AsyncGenerator<Job> {
    for await (const page of this.pages((pageToken) => this.listJobs({ ...options, pageToken }))) {
      yield* page.jobs;
    }
  }

  /** A job's whole history, newest first, across pages. */
  async *iterExecutions(jobId: string, options: Omit<ListExecutionsOptions, "pageToken"> & CallOptions = {}): AsyncGenerator<Execution> {
    for await (const page of this.pages((pageToken) => this.listExecutions(jobId, { ...options, pageToken }))) {
      yield* page.executions;
    }
  }

  /** Every calendar {@link listCalendars} would list (without their dates), across pages. */
  async *iterCalendars(options: { pageSize?: number } & CallOptions = {}): AsyncGenerator<Calendar> {
    for await (const page of this.pages((pageToken) => this.listCalendars({ ...options, pageToken }))) {
      yield* page.calendars;
    }
  }

  /** Every dead execution (only `jobId`'s when given), newest first, across pages. */
  async *iterDeadLetters(options: { jobId?: string; pageSize?: number } & CallOptions = {}): AsyncGenerator<Execution> {
    for await (const page of this.pages((pageToken) => this.listDeadLetters({ ...options, pageToken }))) {
      yield* page.executions;
    }
  }
}

/** Filters of {@link TickwheelClient.listJobs}. */
export interface ListJobsOptions {
  state?: JobStateName | JobState;
  namePrefix?: string;
  pageSize?: number;
  pageToken?: string;
}

/** Filters of {@link TickwheelClient.listExecutions}. */
export interface ListExecutionsOptions {
  statuses?: (ExecutionStatusName | ExecutionStatus)[];
  fromAt?: TimestampLike;
  toAt?: TimestampLike;
  pageSize?: number;
  pageToken?: string;
}

/**
 * Creating, changing and deleting any number of jobs through the batch RPCs: the pure half.
 *
 * {@link planBatches} splits jobs into calls of at most
 * {@link MAX_BATCH_ITEMS} items and gives each item its request id once (the
 * caller's, or a fresh UUID), so a retried call resends the very same ids
 * and the server answers a repeat instead of creating twice.
 * {@link batchResults} turns one call's response into one
 * {@link CreateJobsResult} per item, in order. `TickwheelClient.createJobs`
 * sends the planned calls between the two.
 *
 * {@link planUpdates}/{@link updateResults} and {@link planDeletes}/
 * {@link deleteResults} do the same for BatchUpdateJobs and BatchDeleteJobs
 * (`updateJobs`, `deleteJobs`). Those carry no request ids: each update names
 * the version it expects and a delete happens once, so a retried call applies
 * nothing twice; an item a lost attempt applied answers FAILED_PRECONDITION
 * (update) or NOT_FOUND (delete) instead.
 *
 * A call whose answer would be larger than a default client reads is
 * refused by the server before anything is written
 * ({@link isAnswerTooLarge}); the client's helpers then send it again as two
 * halves ({@link sendHalving}) until each answer fits. `view`
 * JobView.BASIC answers each job's identity and state only, in fewer calls.
 */

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";

import { TickwheelError } from "./errors.js";
import { ErrorInfoSchema, type ErrorInfo } from "./gen/google/rpc/error_details_pb.js";
import { JobSchema, type Job } from "./gen/tickwheel/v1/job_pb.js";
import { FieldMaskSchema } from "@bufbuild/protobuf/wkt";
import {
  CreateJobRequestSchema,
  DeleteJobRequestSchema,
  UpdateJobRequestSchema,
  type BatchCreateJobsResponse,
  type BatchDeleteJobsResponse,
  type BatchUpdateJobsResponse,
  type CreateJobRequest,
  type DeleteJobRequest,
  type UpdateJobRequest,
} from "./gen/tickwheel/v1/scheduler_pb.js";

/**
 * The ErrorInfo reason of a batch call the server refused, before writing
 * anything, because its answer would be over what a default client reads
 * (INVALID_ARGUMENT `items`): send fewer items, or view JobView.BASIC.
 */
export const ANSWER_TOO_LARGE = "BATCH_ANSWER_TOO_LARGE";

/** True when `error` is the server's refusal of a batch call for the size of its answer: nothing of the call was written. */
export function isAnswerTooLarge(error: unknown): boolean {
  return (
    error instanceof TickwheelError &&
    error.details.some(
      (detail) => detail.$typeName === ErrorInfoSchema.typeName && (detail as ErrorInfo).reason === ANSWER_TOO_LARGE,
    )
  );
}

/**
 * Sends `items` through `send`, in order; a call refused for the size of
 * its answer (nothing written) is sent again as its two halves until each
 * answer fits. A refused single item, or any other error, is thrown.
 */
export async function sendHalving<T>(items: readonly T[], send: (part: readonly T[]) => Promise<void>): Promise<void> {
  try {
    await send(items);
  } catch (error) {
    if (items.length < 2 || !isAnswerTooLarge(error)) {
      throw error;
    }
    const middle = Math.floor(items.length / 2);
    await sendHalving(items.slice(0, middle), send);
    await sendHalving(items.slice(middle), send);
  }
}

/** The most items one BatchCreateJobs, BatchUpdateJobs or BatchDeleteJobs call takes. */
export const MAX_BATCH_ITEMS = 1000;

/**
 * What became of one job given to `createJobs`: the job as stored and
 * `created` (false when its request id had been seen and the existing job
 * is returned), or `error`, what CreateJob would have thrown for this job
 * alone (`fieldViolations` relative to the item, e.g.
 * `job.schedule.cron.expression`). `requestId` is the one the job was sent
 * with: sending the job again with it is safe.
 */
export type CreateJobsResult =
  | { readonly requestId: string; readonly job: Job; readonly created: boolean; readonly error?: undefined }
  | { readonly requestId: string; readonly job?: undefined; readonly created?: undefined; readonly error: TickwheelError };

/**
 * The items of each BatchCreateJobs call that creates `jobs`, in order, at
 * most {@link MAX_BATCH_ITEMS} per call; none for no jobs.
 *
 * `requestIds`, when given, has one entry per job: a non-empty string is
 * that job's request id, `undefined` or `""` gets a fresh one from
 * `newRequestId`. Throws a TypeError when its length is not the number of
 * jobs.
 */
export function planBatches(
  jobs: Iterable<Job | MessageInitShape<typeof JobSchema>>,
  requestIds: readonly (string | undefined)[] | undefined,
  newRequestId: () => string,
): CreateJobRequest[][] {
  const list = [...jobs];
  if (typeof requestIds === "string") {
    throw new TypeError("requestIds has one id per job, not one string");
  }
  if (requestIds !== undefined && requestIds.length !== list.length) {
    throw new TypeError(`requestIds has ${requestIds.length} entries for ${list.length} jobs`);
  }
  const items = list.map((job, index) =>
    create(CreateJobRequestSchema, { job: create(JobSchema, job), requestId: requestIds?.[index] || newRequestId() }),
  );
  const batches: CreateJobRequest[][] = [];
  for (let start = 0; start < items.length; start += MAX_BATCH_ITEMS) {
    batches.push(items.slice(start, start + MAX_BATCH_ITEMS));
  }
  return batches;
}

/**
 * One result per item of a call, in order, from its `response`.
 *
 * A response with another number of results than items, or a result with
 * neither a job nor an error, breaks the contract: it throws a
 * TickwheelError (INTERNAL) rather than pair a job with the wrong item or
 * drop one. The server still created the items or not as it decided:
 * sending them again with the same request ids is safe.
 */
export function batchResults(items: readonly CreateJobRequest[], response: BatchCreateJobsResponse): CreateJobsResult[] {
  if (response.results.length !== items.length) {
    throw new TickwheelError(
      Code.Internal,
      `BatchCreateJobs answered ${response.results.length} results for ${items.length} items`,
    );
  }
  return items.map((item, index): CreateJobsResult => {
    const result = response.results[index]!.result;
    if (result.case === "job" && result.value.job !== undefined) {
      return { requestId: item.requestId, job: result.value.job, created: result.value.created };
    }
    if (result.case === "error") {
      return { requestId: item.requestId, error: TickwheelError.fromStatus(result.value) };
    }
    throw new TickwheelError(Code.Internal, `BatchCreateJobs result ${index} has neither a job nor an error`);
  });
}

/**
 * What became of one change given to `updateJobs`: the job as stored after
 * it (at its old version when it changed nothing), or `error`, what
 * UpdateJob would have thrown for it alone (NOT_FOUND, FAILED_PRECONDITION
 * for a stale version, INVALID_ARGUMENT with `fieldViolations` relative to
 * the item).
 */
export type UpdateJobsResult =
  | { readonly jobId: string; readonly job: Job; readonly error?: undefined }
  | { readonly jobId: string; readonly job?: undefined; readonly error: TickwheelError };

/**
 * What became of one id given to `deleteJobs`: deleted, with how many
 * executions that had not started were canceled, or `error`, what
 * DeleteJob would have thrown for it alone. NOT_FOUND after a retried call
 * may mean an earlier attempt of the call deleted it.
 */
export type DeleteJobsResult =
  | { readonly jobId: string; readonly canceledExecutions: bigint; readonly error?: undefined }
  | { readonly jobId: string; readonly canceledExecutions?: undefined; readonly error: TickwheelError };

function chunk<T>(items: T[]): T[][] {
  const batches: T[][] = [];
  for (let start = 0; start < items.length; start += MAX_BATCH_ITEMS) {
    batches.push(items.slice(start, start + MAX_BATCH_ITEMS));
  }
  return batches;
}

/**
 * The items of each BatchUpdateJobs call that applies `changes`, in order,
 * at most {@link MAX_BATCH_ITEMS} per call. A change is a Job (`id`, the
 * `version` last read, the new values), sent with `updateMask` (unset or
 * empty: every mutable field), or an UpdateJobRequest with its own mask.
 */
export function planUpdates(
  changes: Iterable<Job | MessageInitShape<typeof JobSchema> | UpdateJobRequest>,
  updateMask: readonly string[] | undefined,
): UpdateJobRequest[][] {
  const items = [...changes].map((change) => {
    if ((change as { $typeName?: string }).$typeName === UpdateJobRequestSchema.typeName) {
      return change as UpdateJobRequest;
    }
    return create(UpdateJobRequestSchema, {
      job: create(JobSchema, change as MessageInitShape<typeof JobSchema>),
      ...(updateMask !== undefined ? { updateMask: create(FieldMaskSchema, { paths: [...updateMask] }) } : {}),
    });
  });
  return chunk(items);
}

/**
 * The items of each BatchDeleteJobs call that deletes `ids`, in order, at
 * most {@link MAX_BATCH_ITEMS} per call. `versions`, when given, has one
 * entry per id (0: any version); a TypeError otherwise.
 */
export function planDeletes(
  ids: Iterable<string>,
  versions: readonly (bigint | number)[] | undefined,
): DeleteJobRequest[][] {
  if (typeof ids === "string") {
    throw new TypeError("ids is a list of job ids, not one string");
  }
  const list = [...ids];
  if (versions !== undefined && versions.length !== list.length) {
    throw new TypeError(`versions has ${versions.length} entries for ${list.length} ids`);
  }
  return chunk(list.map((id, index) => create(DeleteJobRequestSchema, { id, version: BigInt(versions?.[index] ?? 0) })));
}

function sameLength(method: string, items: number, results: number): void {
  if (results !== items) {
    throw new TickwheelError(Code.Internal, `${method} answered ${results} results for ${items} items`);
  }
}

/** One result per item of a BatchUpdateJobs call, in order; INTERNAL when the response breaks the contract. */
export function updateResults(items: readonly UpdateJobRequest[], response: BatchUpdateJobsResponse): UpdateJobsResult[] {
  sameLength("BatchUpdateJobs", items.length, response.results.length);
  return items.map((item, index): UpdateJobsResult => {
    const jobId = item.job?.id ?? "";
    const result = response.results[index]!.result;
    if (result.case === "job" && result.value.job !== undefined) {
      return { jobId, job: result.value.job };
    }
    if (result.case === "error") {
      return { jobId, error: TickwheelError.fromStatus(result.value) };
    }
    throw new TickwheelError(Code.Internal, `BatchUpdateJobs result ${index} has neither a job nor an error`);
  });
}

/** One result per item of a BatchDeleteJobs call, in order; INTERNAL when the response breaks the contract. */
export function deleteResults(items: readonly DeleteJobRequest[], response: BatchDeleteJobsResponse): DeleteJobsResult[] {
  sameLength("BatchDeleteJobs", items.length, response.results.length);
  return items.map((item, index): DeleteJobsResult => {
    const result = response.results[index]!.result;
    if (result.case === "deleted") {
      return { jobId: item.id, canceledExecutions: result.value.canceledExecutions };
    }
    if (result.case === "error") {
      return { jobId: item.id, error: TickwheelError.fromStatus(result.value) };
    }
    throw new TickwheelError(Code.Internal, `BatchDeleteJobs result ${index} has neither a deletion nor an error`);
  });
}

/**
 * Creating any number of jobs through BatchCreateJobs: the pure half.
 *
 * {@link planBatches} splits jobs into calls of at most
 * {@link MAX_BATCH_ITEMS} items and gives each item its request id once (the
 * caller's, or a fresh UUID), so a retried call resends the very same ids
 * and the server answers a repeat instead of creating twice.
 * {@link batchResults} turns one call's response into one
 * {@link CreateJobsResult} per item, in order. `TickwheelClient.createJobs`
 * sends the planned calls between the two.
 */

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";

import { TickwheelError } from "./errors.js";
import { JobSchema, type Job } from "./gen/tickwheel/v1/job_pb.js";
import {
  CreateJobRequestSchema,
  type BatchCreateJobsResponse,
  type CreateJobRequest,
} from "./gen/tickwheel/v1/scheduler_pb.js";

/** The most items one BatchCreateJobs call takes. */
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

/**
 * createJobs against a scripted SchedulerService on a real gRPC (HTTP/2)
 * server: chunks of at most 1000 in order, request ids kept across retries,
 * per-item errors with their field violations, and answers that break the
 * contract refused.
 */

import assert from "node:assert/strict";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { after, before, beforeEach, describe, test } from "node:test";

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";

import { MAX_BATCH_ITEMS } from "../../src/batch.js";
import { onceJob } from "../../src/builders.js";
import { TickwheelClient } from "../../src/client.js";
import { TickwheelError } from "../../src/errors.js";
import { BadRequestSchema, QuotaFailureSchema } from "../../src/gen/google/rpc/error_details_pb.js";
import { JobSchema } from "../../src/gen/tickwheel/v1/job_pb.js";
import {
  BatchCreateJobsResponseSchema,
  SchedulerService,
  type BatchCreateJobsRequest,
  type CreateJobRequest,
} from "../../src/gen/tickwheel/v1/scheduler_pb.js";

type Answer = (request: BatchCreateJobsRequest) => MessageInitShape<typeof BatchCreateJobsResponseSchema>;

/** Creates every item as a job named after it, `created` true. */
const createEvery = (request: BatchCreateJobsRequest) =>
  create(BatchCreateJobsResponseSchema, {
    results: request.items.map((item, index) => ({
      result: { case: "job" as const, value: { job: stored(item, `job_${index}`), created: true } },
    })),
  });

/** The job of `item` as a server would store it, with `id`. */
function stored(item: CreateJobRequest | undefined, id: string) {
  return { name: item?.job?.name ?? "", id };
}

/** What the fake received and what it answers next (a thrown ConnectError fails the call). */
const received: BatchCreateJobsRequest[] = [];
const authorizations: (string | null)[] = [];
let answers: Answer[] = [];

let server: http2.Http2Server;
let address = "";

before(async () => {
  const handler = connectNodeAdapter({
    routes: (router) =>
      router.service(SchedulerService, {
        batchCreateJobs: (request, context) => {
          received.push(request);
          authorizations.push(context.requestHeader.get("authorization"));
          const answer = answers.shift() ?? createEvery;
          return create(BatchCreateJobsResponseSchema, answer(request));
        },
      }),
  });
  server = http2.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

beforeEach(() => {
  received.length = 0;
  authorizations.length = 0;
  answers = [];
});

const waits: number[] = [];
function client(): TickwheelClient {
  waits.length = 0;
  const clock = { now: () => new Date(), monotonicMs: () => performance.now(), sleep: async (ms: number) => void waits.push(ms) };
  return new TickwheelClient({ address, apiKey: "twk_batch", clock, random: () => 0.5 });
}

function jobs(count: number) {
  const at = new Date("2031-01-01T00:00:00Z");
  return Array.from({ length: count }, (_, i) => onceJob(`job-${i}`, at, { handler: "h" }));
}

describe("createJobs", () => {
  test("2500 jobs go in 3 calls of at most 1000, results in the jobs' order", async () => {
    const c = client();
    try {
      const results = await c.createJobs(jobs(2500));
      assert.deepEqual(received.map((r) => r.items.length), [1000, 1000, 500]);
      assert.equal(MAX_BATCH_ITEMS, 1000);
      assert.equal(results.length, 2500);
      // Each result is its own job's, across the chunk boundaries.
      results.forEach((result, i) => {
        assert.equal(result.error, undefined);
        assert.equal(result.job?.name, `job-${i}`);
        assert.equal(result.created, true);
      });
      assert.deepEqual([results[999]!.job!.id, results[1000]!.job!.id, results[2499]!.job!.id], ["job_999", "job_0", "job_499"]);
      const sentIds = received.flatMap((r) => r.items.map((item) => item.requestId));
      assert.deepEqual(results.map((r) => r.requestId), sentIds);
      assert.equal(new Set(sentIds).size, 2500, "every job its own generated request id");
      assert.ok(sentIds.every((id) => /^[0-9a-f-]{36}$/.test(id)));
      assert.deepEqual(new Set(authorizations), new Set(["Bearer twk_batch"]));
    } finally {
      c.close();
    }
  });

  test("the caller's request ids are sent; missing ones are generated", async () => {
    const c = client();
    try {
      const results = await c.createJobs(jobs(3), { requestIds: ["deploy-1", undefined, ""] });
      const [sent] = received;
      assert.equal(sent!.items[0]!.requestId, "deploy-1");
      assert.match(sent!.items[1]!.requestId, /^[0-9a-f-]{36}$/);
      assert.match(sent!.items[2]!.requestId, /^[0-9a-f-]{36}$/);
      assert.deepEqual(results.map((r) => r.requestId), sent!.items.map((item) => item.requestId));
      await assert.rejects(c.createJobs(jobs(2), { requestIds: ["only-one"] }), /1 entries for 2 jobs/);
    } finally {
      c.close();
    }
  });

  test("no jobs: no call", async () => {
    const c = client();
    try {
      assert.deepEqual(await c.createJobs([]), []);
      assert.equal(received.length, 0);
    } finally {
      c.close();
    }
  });

  test("a call that failed UNAVAILABLE is retried with the same request ids", async () => {
    answers = [
      createEvery,
      () => {
        throw new ConnectError("store unavailable", Code.Unavailable);
      },
      createEvery,
    ];
    const c = client();
    try {
      const results = await c.createJobs(jobs(1500), { requestIds: Array.from({ length: 1500 }, (_, i) => (i % 2 ? `mine-${i}` : undefined)) });
      assert.deepEqual(received.map((r) => r.items.length), [1000, 500, 500]);
      const ids = (r: BatchCreateJobsRequest) => r.items.map((item) => item.requestId);
      assert.deepEqual(ids(received[2]!), ids(received[1]!), "the retry resends the very same ids");
      assert.deepEqual(waits, [100], "one wait: the client's backoff, its draw pinned at 0.5");
      assert.equal(results.length, 1500);
      assert.ok(results.every((r, i) => r.job?.name === `job-${i}`));
    } finally {
      c.close();
    }
  });

  test("a refused job carries its error and field violations; the others are created", async () => {
    answers = [
      (request) => ({
        results: [
          { result: { case: "job", value: { job: stored(request.items[0], "job_a"), created: true } } },
          {
            result: {
              case: "error",
              value: {
                code: Code.InvalidArgument,
                message: "invalid job",
                details: [
                  anyPack(
                    BadRequestSchema,
                    create(BadRequestSchema, { fieldViolations: [{ field: "job.schedule.cron.expression", description: "61 is out of range 0-59" }] }),
                  ),
                ],
              },
            },
          },
          {
            result: {
              case: "error",
              value: {
                code: Code.ResourceExhausted,
                message: "max_jobs reached",
                details: [anyPack(QuotaFailureSchema, create(QuotaFailureSchema, { violations: [{ subject: "tenant:acme", description: "max_jobs 2" }] }))],
              },
            },
          },
          { result: { case: "job", value: { job: stored(request.items[3], "job_b"), created: false } } },
        ],
      }),
    ];
    const c = client();
    try {
      const [first, bad, over, repeat] = await c.createJobs(jobs(4));
      assert.equal(first!.job?.id, "job_a");
      assert.ok(bad!.error instanceof TickwheelError);
      assert.equal(bad!.error.codeName, "INVALID_ARGUMENT");
      assert.deepEqual(bad!.error.fieldViolations, [{ field: "job.schedule.cron.expression", description: "61 is out of range 0-59" }]);
      assert.equal(bad!.error.message, "INVALID_ARGUMENT: job.schedule.cron.expression: 61 is out of range 0-59 (invalid job)");
      assert.equal(bad!.job, undefined);
      assert.equal(over!.error?.codeName, "RESOURCE_EXHAUSTED");
      assert.deepEqual(over!.error?.details.map((d) => d.$typeName), ["google.rpc.QuotaFailure"]);
      assert.equal(repeat!.job?.id, "job_b");
      assert.equal(repeat!.created, false);
      assert.equal(received.length, 1, "item errors are answers, not retried");
    } finally {
      c.close();
    }
  });

  test("an answer with a result missing is an error, not a dropped job", async () => {
    answers = [(request) => ({ results: createEvery(request).results.slice(1) })];
    const c = client();
    try {
      await assert.rejects(
        c.createJobs(jobs(3)),
        (e: unknown) => e instanceof TickwheelError && e.codeName === "INTERNAL" && /2 results for 3 items/.test(e.message),
      );
      answers = [(request) => ({ results: [...createEvery(request).results, {}] })];
      await assert.rejects(c.createJobs(jobs(1)), /2 results for 1 items/);
      answers = [() => ({ results: [{}] })];
      await assert.rejects(c.createJobs(jobs(1)), /neither a job nor an error/);
      answers = [() => ({ results: [{ result: { case: "error", value: { code: 0, message: "fine" } } }] })];
      const [okError] = await c.createJobs(jobs(1));
      assert.equal(okError!.error?.codeName, "INTERNAL", "an error status with code OK is not a success");
    } finally {
      c.close();
    }
  });

  test("a call that fails as a whole stops the batch with its error", async () => {
    answers = [
      () => {
        throw new ConnectError("bad key", Code.Unauthenticated);
      },
    ];
    const c = client();
    try {
      await assert.rejects(c.createJobs(jobs(1200)), (e: unknown) => e instanceof TickwheelError && e.codeName === "UNAUTHENTICATED");
      assert.equal(received.length, 1, "not retried, and no later call");
    } finally {
      c.close();
    }
  });

  test("the raw batchCreateJobs fills a missing item request id", async () => {
    const c = client();
    try {
      await c.batchCreateJobs([{ job: create(JobSchema, jobs(1)[0]!) }, { job: jobs(1)[0]!, requestId: "kept" }]);
      const [sent] = received;
      assert.match(sent!.items[0]!.requestId, /^[0-9a-f-]{36}$/);
      assert.equal(sent!.items[1]!.requestId, "kept");
    } finally {
      c.close();
    }
  });
});

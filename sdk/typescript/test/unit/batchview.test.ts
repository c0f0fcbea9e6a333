/**
 * The batch helpers keep each answer readable: `view` sent on every call,
 * and a call the server refuses for the size of its answer
 * (INVALID_ARGUMENT with ErrorInfo BATCH_ANSWER_TOO_LARGE: nothing written)
 * sent again as two halves, in order, until each fits; any other refusal,
 * or a refused single item, thrown as it was.
 */

import assert from "node:assert/strict";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { after, before, beforeEach, describe, test } from "node:test";

import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";

import { isAnswerTooLarge } from "../../src/batch.js";
import { TickwheelClient } from "../../src/client.js";
import { TickwheelError } from "../../src/errors.js";
import { ErrorInfoSchema } from "../../src/gen/google/rpc/error_details_pb.js";
import {
  BatchCreateJobsResponseSchema,
  BatchPauseJobsResponseSchema,
  BatchUpdateJobsResponseSchema,
  JobView,
  SchedulerService,
  type BatchCreateJobsRequest,
  type BatchPauseJobsRequest,
  type BatchUpdateJobsRequest,
} from "../../src/gen/tickwheel/v1/scheduler_pb.js";

const creates: BatchCreateJobsRequest[] = [];
const updates: BatchUpdateJobsRequest[] = [];
const pauses: BatchPauseJobsRequest[] = [];
let limit = 1000;
let otherRefusal = false;

function refuseOver(items: number): void {
  if (otherRefusal) {
    throw new ConnectError("items: must hold 1 to 1000 items", Code.InvalidArgument);
  }
  if (items > limit) {
    throw new ConnectError("items: the answer would be too large", Code.InvalidArgument, undefined, [
      { desc: ErrorInfoSchema, value: { reason: "BATCH_ANSWER_TOO_LARGE", domain: "tickwheel" } },
    ]);
  }
}

let server: http2.Http2Server;
let address = "";

before(async () => {
  const handler = connectNodeAdapter({
    routes: (router) =>
      router.service(SchedulerService, {
        batchCreateJobs: (request) => {
          creates.push(request);
          refuseOver(request.items.length);
          return create(BatchCreateJobsResponseSchema, {
            results: request.items.map((item) => ({
              result: { case: "job" as const, value: { job: { id: item.requestId, name: item.job!.name }, created: true } },
            })),
          });
        },
        batchUpdateJobs: (request) => {
          updates.push(request);
          refuseOver(request.items.length);
          return create(BatchUpdateJobsResponseSchema, {
            results: request.items.map((item) => ({
              result: { case: "job" as const, value: { job: { id: item.job!.id, name: item.job!.name, version: item.job!.version + 1n } } },
            })),
          });
        },
        batchPauseJobs: (request) => {
          pauses.push(request);
          return create(BatchPauseJobsResponseSchema, { pausedCount: request.items.length });
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
  creates.length = 0;
  updates.length = 0;
  pauses.length = 0;
  limit = 1000;
  otherRefusal = false;
});

function client(): TickwheelClient {
  const clock = { now: () => new Date(), monotonicMs: () => performance.now(), sleep: async () => {} };
  return new TickwheelClient({ address, apiKey: "twk_batch", clock, random: () => 0.5 });
}

describe("answers a default client can read", () => {
  test("a refused update call is halved until each answer fits, in order, with its view", async () => {
    limit = 300;
    const c = client();
    try {
      const changes = Array.from({ length: 1100 }, (_, i) => ({ id: `j${i}`, version: 1n, name: `n${i}` }));
      const results = await c.updateJobs(changes, { updateMask: ["name"], view: JobView.BASIC });
      assert.deepEqual(updates.map((u) => u.items.length), [1000, 500, 250, 250, 500, 250, 250, 100]);
      assert.ok(updates.every((u) => u.view === JobView.BASIC));
      assert.deepEqual(results.map((r) => r.jobId), changes.map((ch) => ch.id));
      assert.deepEqual(results.map((r) => r.job?.name), changes.map((ch) => ch.name));
    } finally {
      c.close();
    }
  });

  test("a refused create call is resent as halves with the very request ids", async () => {
    limit = 3;
    const c = client();
    try {
      const ids = Array.from({ length: 7 }, (_, i) => `r${i}`);
      const results = await c.createJobs(ids.map((id) => ({ name: id })), { requestIds: ids });
      assert.deepEqual(creates.map((r) => r.items.length), [7, 3, 4, 2, 2]);
      assert.deepEqual(results.map((r) => r.requestId), ids);
      assert.deepEqual(results.map((r) => r.job?.id), ids);
    } finally {
      c.close();
    }
  });

  test("a refused single item and any other refusal are thrown", async () => {
    limit = 0;
    const c = client();
    try {
      await assert.rejects(
        c.updateJobs([{ id: "a", version: 1n }, { id: "b", version: 1n }]),
        (e: unknown) => isAnswerTooLarge(e) && e instanceof TickwheelError && e.codeName === "INVALID_ARGUMENT",
      );
      assert.deepEqual(updates.map((u) => u.items.length), [2, 1]);
      updates.length = 0;
      otherRefusal = true;
      await assert.rejects(c.updateJobs([{ id: "a", version: 1n }, { id: "b", version: 1n }]), (e: unknown) => !isAnswerTooLarge(e));
      assert.deepEqual(updates.map((u) => u.items.length), [2]);
    } finally {
      c.close();
    }
  });

  test("batchPauseJobs sends the view asked for", async () => {
    const c = client();
    try {
      await c.batchPauseJobs([{ id: "a" }], { view: JobView.BASIC });
      await c.batchPauseJobs([{ id: "b" }]);
      assert.deepEqual(pauses.map((p) => p.view), [JobView.BASIC, JobView.UNSPECIFIED]);
    } finally {
      c.close();
    }
  });
});

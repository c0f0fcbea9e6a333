/**
 * updateJobs and deleteJobs against a scripted SchedulerService on a real
 * gRPC (HTTP/2) server: chunks of at most 1000 in order, the same items
 * resent on UNAVAILABLE, per-item errors mapped, and answers that break the
 * contract refused.
 */

import assert from "node:assert/strict";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { after, before, beforeEach, describe, test } from "node:test";

import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";

import { TickwheelClient } from "../../src/client.js";
import { TickwheelError } from "../../src/errors.js";
import {
  BatchDeleteJobsResponseSchema,
  BatchUpdateJobsResponseSchema,
  SchedulerService,
  UpdateJobRequestSchema,
  type BatchDeleteJobsRequest,
  type BatchUpdateJobsRequest,
} from "../../src/gen/tickwheel/v1/scheduler_pb.js";

/** Applies every item whose id does not start with "gone" (NOT_FOUND), the version + 1. */
const updateEvery = (request: BatchUpdateJobsRequest) =>
  create(BatchUpdateJobsResponseSchema, {
    results: request.items.map((item) =>
      item.job!.id.startsWith("gone")
        ? { result: { case: "error" as const, value: { code: Code.NotFound, message: "job not found" } } }
        : { result: { case: "job" as const, value: { job: { id: item.job!.id, name: item.job!.name, version: item.job!.version + 1n } } } },
    ),
  });

const deleteEvery = (request: BatchDeleteJobsRequest) =>
  create(BatchDeleteJobsResponseSchema, {
    results: request.items.map((item) =>
      item.id.startsWith("gone")
        ? { result: { case: "error" as const, value: { code: Code.NotFound, message: "job not found" } } }
        : { result: { case: "deleted" as const, value: { canceledExecutions: BigInt(item.id.length) } } },
    ),
  });

const updates: BatchUpdateJobsRequest[] = [];
const deletes: BatchDeleteJobsRequest[] = [];
let updateAnswers: ((r: BatchUpdateJobsRequest) => ReturnType<typeof updateEvery>)[] = [];
let deleteAnswers: ((r: BatchDeleteJobsRequest) => ReturnType<typeof deleteEvery>)[] = [];

let server: http2.Http2Server;
let address = "";

before(async () => {
  const handler = connectNodeAdapter({
    routes: (router) =>
      router.service(SchedulerService, {
        batchUpdateJobs: (request) => {
          updates.push(request);
          return (updateAnswers.shift() ?? updateEvery)(request);
        },
        batchDeleteJobs: (request) => {
          deletes.push(request);
          return (deleteAnswers.shift() ?? deleteEvery)(request);
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
  updates.length = 0;
  deletes.length = 0;
  updateAnswers = [];
  deleteAnswers = [];
});

const waits: number[] = [];
function client(): TickwheelClient {
  waits.length = 0;
  const clock = { now: () => new Date(), monotonicMs: () => performance.now(), sleep: async (ms: number) => void waits.push(ms) };
  return new TickwheelClient({ address, apiKey: "twk_batch", clock, random: () => 0.5 });
}

const unavailable = () => {
  throw new ConnectError("store unavailable", Code.Unavailable);
};

describe("updateJobs", () => {
  test("2100 changes go in 3 calls in order with the mask; errors mapped per item", async () => {
    const c = client();
    try {
      const changes = Array.from({ length: 2100 }, (_, i) => ({ id: i === 5 ? "gone-5" : `j${i}`, version: 3n, name: `n${i}` }));
      const results = await c.updateJobs(changes, { updateMask: ["name"] });
      assert.deepEqual(updates.map((r) => r.items.length), [1000, 1000, 100]);
      const sent = updates.flatMap((r) => r.items);
      assert.deepEqual(sent.map((item) => item.job!.id), changes.map((change) => change.id));
      assert.ok(sent.every((item) => item.updateMask?.paths.join() === "name"));
      assert.equal(results.length, 2100);
      assert.equal(results[0]!.job?.version, 4n);
      assert.deepEqual(results.map((r) => r.jobId), changes.map((change) => change.id));
      assert.ok(results[5]!.error instanceof TickwheelError);
      assert.equal(results[5]!.error.codeName, "NOT_FOUND");
    } finally {
      c.close();
    }
  });

  test("an UpdateJobRequest keeps its own mask", async () => {
    const c = client();
    try {
      const own = create(UpdateJobRequestSchema, { job: { id: "a", version: 1n }, updateMask: { paths: ["labels"] } });
      await c.updateJobs([own, { id: "b", version: 1n }], { updateMask: ["name"] });
      assert.deepEqual(updates[0]!.items.map((item) => item.updateMask?.paths), [["labels"], ["name"]]);
    } finally {
      c.close();
    }
  });

  test("UNAVAILABLE is retried with the same items when every item has a version, not otherwise", async () => {
    updateAnswers = [unavailable, updateEvery];
    const c = client();
    try {
      const results = await c.updateJobs([{ id: "a", version: 1n, name: "x" }], { updateMask: ["name"] });
      assert.equal(updates.length, 2);
      assert.deepEqual(updates[1], updates[0]);
      assert.deepEqual(waits, [100]);
      assert.equal(results[0]!.job?.version, 2n);
      updates.length = 0;
      updateAnswers = [unavailable];
      await assert.rejects(c.updateJobs([{ id: "a", name: "x" }], { updateMask: ["name"] }), (e: unknown) => e instanceof TickwheelError && e.codeName === "UNAVAILABLE");
      assert.equal(updates.length, 1, "without a version a retry could apply twice");
    } finally {
      c.close();
    }
  });

  test("a short answer or an empty result is an error", async () => {
    updateAnswers = [(request) => create(BatchUpdateJobsResponseSchema, { results: updateEvery(request).results.slice(1) })];
    const c = client();
    try {
      await assert.rejects(c.updateJobs([{ id: "a", version: 1n }, { id: "b", version: 1n }]), /1 results for 2 items/);
      updateAnswers = [() => create(BatchUpdateJobsResponseSchema, { results: [{}] })];
      await assert.rejects(c.updateJobs([{ id: "a", version: 1n }]), /neither a job nor an error/);
      assert.deepEqual(await c.updateJobs([]), []);
    } finally {
      c.close();
    }
  });
});

describe("deleteJobs", () => {
  test("ids go in calls of at most 1000 with their versions; results in order", async () => {
    const c = client();
    try {
      const ids = Array.from({ length: 1500 }, (_, i) => (i === 3 ? "gone-3" : `job-${i}`));
      const results = await c.deleteJobs(ids, { versions: ids.map((_, i) => i % 2) });
      assert.deepEqual(deletes.map((r) => r.items.length), [1000, 500]);
      const sent = deletes.flatMap((r) => r.items);
      assert.deepEqual(sent.map((item) => [item.id, item.version]), ids.map((id, i) => [id, BigInt(i % 2)]));
      assert.equal(results[0]!.canceledExecutions, BigInt("job-0".length));
      assert.equal(results[3]!.error?.codeName, "NOT_FOUND");
      await assert.rejects(c.deleteJobs(["a", "b"], { versions: [1] }), /1 entries for 2 ids/);
      await assert.rejects(c.deleteJobs("job-1" as unknown as string[]), /not one string/);
    } finally {
      c.close();
    }
  });

  test("UNAVAILABLE is retried with the same ids; a call failing as a whole throws", async () => {
    deleteAnswers = [unavailable, unavailable, deleteEvery];
    const c = client();
    try {
      const results = await c.deleteJobs(["a", "b"]);
      assert.equal(deletes.length, 3);
      assert.deepEqual(deletes[2], deletes[0]);
      assert.ok(results.every((r) => r.error === undefined));
      deletes.length = 0;
      deleteAnswers = [
        () => {
          throw new ConnectError("bad key", Code.Unauthenticated);
        },
      ];
      await assert.rejects(c.deleteJobs(["a"]), (e: unknown) => e instanceof TickwheelError && e.codeName === "UNAUTHENTICATED");
      assert.equal(deletes.length, 1);
    } finally {
      c.close();
    }
  });
});

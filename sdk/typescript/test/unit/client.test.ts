/**
 * The client's pure parts: retry decisions and backoff, option validation,
 * error decoding from `grpc-status-details-bin`, and the builders.
 */

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { create, toBinary } from "@bufbuild/protobuf";
import { anyPack, durationMs, timestampDate, type Any } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";

import { cronJob, duration, executionStatus, localJob, onceJob, overlapPolicy, retryPolicy } from "../../src/builders.js";
import { TickwheelClient, retryDelayMs, unclassifiedRpcs } from "../../src/client.js";
import { AdminService } from "../../src/gen/tickwheel/v1/admin_pb.js";
import { TickwheelError } from "../../src/errors.js";
import { BadRequestSchema, QuotaFailureSchema } from "../../src/gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../../src/gen/google/rpc/status_pb.js";
import { ExecutionStatus, JobSchema, OverlapPolicy } from "../../src/gen/tickwheel/v1/job_pb.js";
import { ListJobsResponseSchema, SchedulerService, type ListJobsResponse } from "../../src/gen/tickwheel/v1/scheduler_pb.js";
import { DEFAULT_RETRY, backoffMs, baseUrl, retryOptions } from "../../src/options.js";
import { reconnectDelayMs } from "../../src/backoff.js";

const unavailable = new TickwheelError(Code.Unavailable, "down");

describe("retries", () => {
  test("every unary RPC of both services has a retry decision, so a new one is placed on purpose", () => {
    assert.deepEqual(unclassifiedRpcs(SchedulerService), []);
    assert.deepEqual(unclassifiedRpcs(AdminService), []);
  });

  test("backoff is full jitter under a doubling, capped ceiling", () => {
    const retry = retryOptions({ initialBackoffMs: 100, maxBackoffMs: 1000 });
    assert.deepEqual([1, 2, 3, 4, 5, 60].map((n) => backoffMs(retry, n, () => 1)), [100, 200, 400, 800, 1000, 1000]);
    assert.equal(backoffMs(retry, 3, () => 0), 0);
    assert.throws(() => backoffMs(retry, 0), /from 1/);
  });

  test("only retryable codes of idempotent calls, within the attempts and the deadline", () => {
    const retry = retryOptions(2); // three attempts
    const half = () => 0.5;
    assert.equal(retryDelayMs(retry, true, unavailable, 1, undefined, half), 100);
    assert.equal(retryDelayMs(retry, true, unavailable, 2, undefined, half), 200);
    assert.equal(retryDelayMs(retry, true, unavailable, 3, undefined, half), undefined, "attempts spent");
    assert.equal(retryDelayMs(retry, false, unavailable, 1, undefined, half), undefined, "not idempotent");
    assert.equal(retryDelayMs(retry, true, new TickwheelError(Code.InvalidArgument), 1, undefined, half), undefined);
    assert.equal(retryDelayMs(retry, true, unavailable, 1, 100, half), undefined, "the wait would pass the deadline");
    assert.equal(retryDelayMs(retry, true, unavailable, 1, 101, half), 100);
  });

  test("retry options are validated when built", () => {
    assert.equal(retryOptions(undefined), DEFAULT_RETRY);
    assert.equal(retryOptions(null).maxAttempts, 1);
    assert.equal(retryOptions(0).maxAttempts, 1);
    assert.throws(() => retryOptions(-1), TypeError);
    assert.throws(() => retryOptions({ maxAttempts: 0 }), /maxAttempts/);
    assert.throws(() => retryOptions({ initialBackoffMs: 10, maxBackoffMs: 5 }), /initialBackoffMs/);
  });

  test("reconnect delays double per failure up to the cap", () => {
    const options = { initialMs: 200, capMs: 1000, random: () => 1 };
    assert.deepEqual([0, 1, 2, 3, 10].map((f) => reconnectDelayMs(f, options)), [200, 400, 800, 1000, 1000]);
  });

  test("a call retries UNAVAILABLE only where it is safe", async () => {
    // Nothing listens on port 1: every attempt fails UNAVAILABLE at once.
    const waits: number[] = [];
    const clock = {
      now: () => new Date(),
      monotonicMs: () => performance.now(),
      sleep: async (ms: number) => void waits.push(ms),
    };
    const client = new TickwheelClient({ address: "127.0.0.1:1", apiKey: "twk_x", retries: 3, clock, random: () => 1 });
    try {
      await assert.rejects(client.getJob("job_1"), (e: unknown) => e instanceof TickwheelError && e.code === Code.Unavailable);
      assert.deepEqual(waits, [200, 400, 800], "a read is retried");
      waits.length = 0;
      await assert.rejects(client.pauseJob("job_1"), (e: unknown) => e instanceof TickwheelError && e.code === Code.Unavailable);
      assert.deepEqual(waits, [], "a plain write is not");
      await assert.rejects(client.createJob(onceJob("x", new Date(), { handler: "h" })));
      assert.equal(waits.length, 3, "CreateJob carries a request id: retried");
      waits.length = 0;
      await assert.rejects(client.scheduler.createJob({ job: onceJob("x", new Date(), { handler: "h" }) }));
      assert.equal(waits.length, 3, "the raw service fills the request id too");
    } finally {
      client.close();
    }
    await assert.rejects(client.getJob("job_1"), /closed/);
  });
});

describe("pages", () => {
  test("a filtered page may be empty and still carry a token: the walk goes on to the last page", async () => {
    const job = (id: string) => create(JobSchema, { id });
    const byToken: Record<string, ListJobsResponse> = {
      "": create(ListJobsResponseSchema, { nextPageToken: "p2" }),
      p2: create(ListJobsResponseSchema, { jobs: [job("job_a")], nextPageToken: "p3" }),
      p3: create(ListJobsResponseSchema, { nextPageToken: "p4" }),
      p4: create(ListJobsResponseSchema, { jobs: [job("job_b")] }),
    };
    const pageOf = async (token: string): Promise<ListJobsResponse> => {
      const page = byToken[token];
      if (page === undefined) throw new Error(`unknown page token ${token}`);
      return page;
    };
    const client = new TickwheelClient({ address: "127.0.0.1:1", apiKey: "twk_x" });
    const asked: { pageToken?: string; namePrefix?: string }[] = [];
    client.listJobs = async (options = {}) => {
      asked.push({ pageToken: options.pageToken, namePrefix: options.namePrefix });
      return pageOf(options.pageToken ?? "");
    };
    try {
      const ids: string[] = [];
      for await (const found of client.iterJobs({ namePrefix: "rare" })) ids.push(found.id);
      assert.deepEqual(ids, ["job_a", "job_b"]);
      assert.deepEqual(asked.map((a) => a.pageToken), ["", "p2", "p3", "p4"]);
      assert.ok(asked.every((a) => a.namePrefix === "rare"));
      const walked: number[] = [];
      for await (const page of client.pages(pageOf)) walked.push(page.jobs.length);
      assert.deepEqual(walked, [0, 1, 0, 1]);
    } finally {
      client.close();
    }
  });
});

describe("options", () => {
  test("addresses become base URLs", () => {
    assert.equal(baseUrl("127.0.0.1:50051", undefined), "http://127.0.0.1:50051");
    assert.equal(baseUrl("scheduler.internal:443", {}), "https://scheduler.internal:443");
    assert.equal(baseUrl("[::1]:50051", undefined), "http://[::1]:50051");
    assert.equal(baseUrl("https://x.example:8443/", {}), "https://x.example:8443");
    assert.throws(() => baseUrl("no-port", undefined), /host:port/);
    assert.throws(() => baseUrl("https://x:1", undefined), /tls/);
  });

  test("client options are validated when built", () => {
    assert.throws(() => new TickwheelClient({ address: "127.0.0.1:1", apiKey: "a\nb" }), /single-line/);
    assert.throws(() => new TickwheelClient({ address: "127.0.0.1:1", timeoutMs: -5 }), /timeoutMs/);
    assert.throws(() => new TickwheelClient({ address: "127.0.0.1:1", tls: { cert: "x" } }), /cert and key/);
    const client = new TickwheelClient({ address: "127.0.0.1:1", timeoutMs: null });
    assert.equal(client.timeoutMs, undefined);
    client.close();
  });
});

describe("TickwheelError", () => {
  function statusTrailer(...details: Any[]): string {
    const status = create(StatusSchema, {
      code: Code.InvalidArgument,
      message: "job.schedule.cron.expression: minute field: 61 is out of range 0-59",
      details,
    });
    return Buffer.from(toBinary(StatusSchema, status)).toString("base64").replace(/=+$/, "");
  }

  test("field violations come from the BadRequest in grpc-status-details-bin", () => {
    const badRequest = create(BadRequestSchema, {
      fieldViolations: [
        { field: "job.schedule.cron.expression", description: "minute field: 61 is out of range 0-59" },
        { field: "job.name", description: "required" },
      ],
    });
    const quota = create(QuotaFailureSchema, { violations: [{ subject: "tenant:acme", description: "max jobs" }] });
    const wire = new ConnectError("ignored", Code.InvalidArgument, {
      "grpc-status-details-bin": statusTrailer(anyPack(BadRequestSchema, badRequest), anyPack(QuotaFailureSchema, quota)),
    });
    const error = TickwheelError.from(wire);
    assert.equal(error.code, Code.InvalidArgument);
    assert.equal(error.codeName, "INVALID_ARGUMENT");
    assert.deepEqual(error.fieldViolations, [
      { field: "job.schedule.cron.expression", description: "minute field: 61 is out of range 0-59" },
      { field: "job.name", description: "required" },
    ]);
    assert.equal(error.violation("job.name")?.description, "required");
    assert.deepEqual(error.details.map((d) => d.$typeName), ["google.rpc.BadRequest", "google.rpc.QuotaFailure"]);
    assert.equal(
      error.message,
      "INVALID_ARGUMENT: job.schedule.cron.expression: minute field: 61 is out of range 0-59; job.name: required (ignored)",
    );
    assert.equal(error.cause, wire);
  });

  test("a corrupt details trailer keeps the status code", () => {
    const error = TickwheelError.from(new ConnectError("no such job", Code.NotFound, { "grpc-status-details-bin": "!!!notbase64-proto" }));
    assert.equal(error.codeName, "NOT_FOUND");
    assert.deepEqual(error.fieldViolations, []);
    assert.equal(error.message, "NOT_FOUND: no such job");
  });

  test("a connection that failed or broke is UNAVAILABLE, whatever Node called it", () => {
    const reset = Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" });
    assert.equal(TickwheelError.from(new ConnectError("reset", Code.Aborted, undefined, undefined, reset)).codeName, "UNAVAILABLE");
    const tls = Object.assign(new Error("certificate required"), { code: "ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED" });
    assert.equal(TickwheelError.from(new ConnectError("tls", Code.Internal, undefined, undefined, tls)).codeName, "UNAVAILABLE");
    assert.equal(TickwheelError.from(new ConnectError("http/2 stream closed with error code CANCEL (0x8)", Code.Canceled)).codeName, "UNAVAILABLE");
    // What a server said stays what it said.
    const wire = new ConnectError("http/2 stream closed with error code CANCEL (0x8)", Code.Canceled);
    wire.isWireError = true;
    assert.equal(TickwheelError.from(wire).codeName, "CANCELLED");
    assert.equal(TickwheelError.from(new ConnectError("stuck", Code.Internal)).codeName, "INTERNAL");
  });

  test("anything else is UNKNOWN, an abort CANCELLED", () => {
    assert.equal(TickwheelError.from(new Error("boom")).codeName, "UNKNOWN");
    const abort = new DOMException("stop", "AbortError");
    assert.equal(TickwheelError.from(abort).codeName, "CANCELLED");
  });
});

describe("builders", () => {
  test("a cron job in a zone with a handler target and policies", () => {
    const job = cronJob("nightly", "0 2 * * *", "Europe/London", {
      handler: "reports.nightly",
      payload: "{}",
      retry: retryPolicy({ maxAttempts: 3, initialBackoffMs: 1500, maxBackoffMs: 60_000 }),
      overlap: "queue_one",
      misfire: "skip",
      dstGap: "skip",
      timeoutMs: 90_000,
      concurrencyKeys: { db: 1 },
      labels: { team: "billing" },
    });
    assert.equal(job.schedule?.kind.case, "cron");
    assert.deepEqual(job.schedule?.kind.value, { $typeName: "tickwheel.v1.CronSchedule", expression: "0 2 * * *", timeZone: "Europe/London" });
    assert.equal(job.target?.kind.case, "handler");
    assert.equal(new TextDecoder().decode(job.payload), "{}");
    assert.equal(job.retryPolicy?.maxAttempts, 3);
    assert.equal(durationMs(job.retryPolicy!.initialBackoff!), 1500);
    assert.equal(job.overlapPolicy, OverlapPolicy.QUEUE_ONE);
    assert.equal(durationMs(job.timeout!), 90_000);
    assert.deepEqual(job.concurrencyKeys.map((k) => [k.key, k.limit]), [["db", 1]]);
    assert.equal(job.jitter, undefined, "server default jitter");
    assert.equal(cronJob("x", "* * * * *", "UTC", { url: "https://example.com/hook", exact: true }).jitter?.exact, true);
  });

  test("a one-off at an instant, an HTTP target, a local wall time", () => {
    const at = new Date("2031-05-06T07:08:09.250Z");
    const once = onceJob("once", at, { url: "https://example.com/hook", method: "PUT", headers: { "x-a": "1" } });
    assert.equal(once.schedule?.kind.case, "onceAt");
    assert.equal(timestampDate(once.schedule!.kind.value as never).toISOString(), at.toISOString());
    assert.equal(once.target?.kind.case, "http");
    const local = localJob("local", "2027-03-28T02:30:00", "Europe/London", { handler: "h", dstGap: "shift" });
    assert.equal(local.schedule?.kind.case, "local");
    assert.equal(local.dstPolicy?.gap, 2);
  });

  test("what can be checked locally is", () => {
    assert.throws(() => onceJob("x", new Date(), {}), /exactly one target/);
    assert.throws(() => onceJob("x", new Date(), { handler: "h", url: "https://e.com" }), /exactly one target/);
    assert.throws(() => onceJob("x", new Date("nope"), { handler: "h" }), /invalid Date/);
    assert.throws(() => cronJob("x", "* * * * *", "UTC", { handler: "h", exact: true, jitterMs: 5 }), /exclude/);
    assert.throws(() => overlapPolicy("sometimes" as never), /one of: skip, queue_one, allow, replace/);
    assert.throws(() => duration(-1), /non-negative/);
    assert.equal(executionStatus("dead"), ExecutionStatus.DEAD);
    assert.deepEqual([duration(1234.5).seconds, duration(1234.5).nanos], [1n, 234_500_000]);
  });
});

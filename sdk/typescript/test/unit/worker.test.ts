/**
 * The worker's Pull protocol against a scripted server over real gRPC
 * (HTTP/2): hello, credit, heartbeats with progress, results kept until
 * acked and resent after a reconnect, cancel, welcome.rejected, drain,
 * server silence, and refusal.
 */

import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";

import { create } from "@bufbuild/protobuf";
import { durationFromMs, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";

import { AssignmentSchema, ResultOutcome, type Assignment } from "../../src/gen/tickwheel/v1/worker_pb.js";
import { Worker, WorkerFatalError, type JobContext, type Logger, type WorkerOptions } from "../../src/worker.js";
import { FakeServer, stopBoth, type FakeStream } from "./fake-server.js";
import { eventually, gate } from "./waits.js";

const quiet: Logger = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

function assignment(executionId: string, handler = "h", delivery = 1, attempt = 1): Assignment {
  return create(AssignmentSchema, {
    executionId,
    jobId: "job_1",
    tenant: "acme",
    attempt,
    delivery,
    payload: new TextEncoder().encode("payload"),
    nominalAt: timestampFromDate(new Date("2030-01-01T00:00:00Z")),
    dueAt: timestampFromDate(new Date("2030-01-01T00:00:00Z")),
    target: { kind: { case: "handler", value: { name: handler } } },
  });
}

function welcome(stream: FakeStream, options: { intervalMs?: number; rejected?: { executionId: string; delivery: number }[] } = {}): void {
  stream.send({
    case: "welcome",
    value: {
      serverId: "fake",
      heartbeatInterval: durationFromMs(options.intervalMs ?? 60_000),
      heartbeatTimeout: durationFromMs(10 * (options.intervalMs ?? 60_000)),
      rejected: options.rejected ?? [],
    },
  });
}

describe("Worker over a Pull stream", () => {
  let server: FakeServer;
  let worker: Worker | undefined;
  let running: Promise<void> | undefined;

  beforeEach(async () => {
    server = new FakeServer();
    await server.start();
  });

  afterEach(async () => {
    await stopBoth(worker, running, server);
    worker = undefined;
    running = undefined;
  });

  function start(options: Partial<WorkerOptions>, handlers: Record<string, (ctx: JobContext) => unknown>): Worker {
    worker = new Worker({
      address: server.address,
      credential: "tww_test_secret",
      workerId: "w1",
      slots: 2,
      reconnectInitialBackoffMs: 10,
      reconnectMaxBackoffMs: 20,
      // A bound, not what a test decides: a loaded machine's first TCP
      // stream has taken 9 s (the Java WorkerTest saw it).
      welcomeTimeoutMs: 60_000,
      logger: quiet,
      ...options,
    });
    for (const [name, handle] of Object.entries(handlers)) worker.handler(name, handle);
    running = worker.run();
    return worker;
  }

  test("hello, heartbeats with progress, a result kept until acked, then credit", async () => {
    const release = gate();
    // Heartbeats every 30 ms show progress quickly; a stall of a loaded machine must not
    // make the worker presume this server dead (3 intervals by default) and reconnect.
    const w = start({ serverSilenceIntervals: 1000 }, {
      h: async (ctx) => {
        ctx.heartbeat("half way");
        await release.promise;
        return "out";
      },
    });
    const stream = await server.nextStream();
    assert.equal(stream.authorization, "Bearer tww_test_secret");
    const hello = await stream.expect("hello");
    assert.deepEqual(
      { workerId: hello.workerId, handlers: hello.handlers, slots: hello.slots, http: hello.http, inFlight: hello.inFlight },
      { workerId: "w1", handlers: ["h"], slots: 2, http: false, inFlight: [] },
    );
    welcome(stream, { intervalMs: 30 });
    stream.send({ case: "assignment", value: { assignments: [assignment("e1")] } });
    for (;;) {
      const beat = await stream.expect("heartbeat");
      const e1 = beat.executions.find((e) => e.executionId === "e1");
      if (e1 !== undefined && e1.progress === "half way") {
        assert.equal(e1.delivery, 1);
        break;
      }
    }
    release.open();
    const { results } = await stream.expect("result");
    assert.equal(results.length, 1);
    assert.equal(results[0]!.executionId, "e1");
    assert.equal(results[0]!.outcome, ResultOutcome.SUCCEEDED);
    assert.equal(new TextDecoder().decode(results[0]!.output), "out");
    assert.ok(results[0]!.startedAt && results[0]!.finishedAt);
    // The slot is free and the server holds 1 credit of 2: one more.
    assert.equal((await stream.expect("credit")).credits, 1);
    assert.deepEqual(w.unacked(), [{ executionId: "e1", delivery: 1 }]);
    stream.send({ case: "ack", value: { acks: [{ executionId: "e1", delivery: 1, accepted: true }] } });
    await eventually(() => w.unacked().length === 0, "the ack forgets the result");
    const stopped = w.stop(5000);
    await stream.halfClosed;
    stream.end();
    await stopped;
    await running;
  });

  test("a result not acked is sent again on the next stream", async () => {
    const w = start({}, { h: () => "x" });
    const first = await server.nextStream();
    await first.expect("hello");
    welcome(first);
    first.send({ case: "assignment", value: { assignments: [assignment("e1")] } });
    const sent = await first.expect("result");
    assert.equal(sent.results[0]!.executionId, "e1");
    first.fail(Code.Unavailable, "the server goes away before acking");

    const second = await server.nextStream();
    const hello = await second.expect("hello");
    // Listed, so that the new stream holds it: a server takes a result only from the stream holding its delivery.
    assert.deepEqual(hello.inFlight.map((e) => [e.executionId, e.delivery]), [["e1", 1]], "an unacked result is re-attached");
    welcome(second);
    const resent = await second.expect("result");
    assert.equal(resent.results[0]!.executionId, "e1");
    assert.equal(resent.results[0]!.outcome, ResultOutcome.SUCCEEDED);
    second.send({ case: "ack", value: { acks: [{ executionId: "e1", delivery: 1, accepted: true }] } });
    await eventually(() => w.unacked().length === 0, "the ack on the second stream forgets it");
    assert.equal(w.sessions, 2);
  });

  test("with several addresses, a lost stream re-attaches its execution on the next server", async () => {
    const other = new FakeServer();
    await other.start();
    try {
      const release = gate();
      const w = start({ address: [server.address, other.address] }, { h: async () => { await release.promise; return "x"; } });
      const first = await server.nextStream();
      await first.expect("hello");
      welcome(first);
      first.send({ case: "assignment", value: { assignments: [assignment("e1")] } });
      await eventually(() => w.inFlight().length === 1, "the handler runs");
      first.fail(Code.Unavailable, "the server dies");

      const second = await other.nextStream();
      const hello = await second.expect("hello");
      assert.deepEqual(hello.inFlight.map((e) => [e.executionId, e.delivery]), [["e1", 1]], "re-attached on the other server");
      welcome(second);
      release.open();
      const { results } = await second.expect("result");
      assert.deepEqual(results.map((r) => [r.executionId, r.outcome]), [["e1", ResultOutcome.SUCCEEDED]]);
    } finally {
      await other.stop();
    }
  });

  test("cancel aborts the handler's signal and reports CANCELED", async () => {
    const started = gate();
    let reason: unknown;
    start({ cancelGraceMs: 2000 }, {
      h: async (ctx) => {
        started.open();
        await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve(), { once: true }));
        reason = ctx.signal.reason;
        return "stopped";
      },
    });
    const stream = await server.nextStream();
    await stream.expect("hello");
    welcome(stream);
    stream.send({ case: "assignment", value: { assignments: [assignment("e1")] } });
    await started.promise;
    stream.send({ case: "cancel", value: { executions: [{ executionId: "e1", delivery: 1 }], reason: "by request" } });
    const { results } = await stream.expect("result");
    assert.equal(results[0]!.outcome, ResultOutcome.CANCELED);
    assert.match(results[0]!.error, /by request/);
    assert.match(String(reason), /canceled: by request/);
  });

  test("an execution the welcome rejects is stopped and never reported", async () => {
    const started = gate();
    let aborted = false;
    const w = start({ slots: 1 }, {
      h: async (ctx) => {
        started.open();
        await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve(), { once: true }));
        aborted = true;
        return "too late";
      },
      quick: () => "done",
    });
    const first = await server.nextStream();
    await first.expect("hello");
    welcome(first);
    first.send({ case: "assignment", value: { assignments: [assignment("e1")] } });
    await started.promise;
    first.fail(Code.Unavailable, "restart");

    const second = await server.nextStream();
    const hello = await second.expect("hello");
    assert.deepEqual(hello.inFlight.map((e) => [e.executionId, e.delivery]), [["e1", 1]]);
    welcome(second, { rejected: [{ executionId: "e1", delivery: 1 }] });
    await eventually(() => aborted, "the rejected attempt's handler is told to stop");
    // A result for e1 would have been queued before e2's: e2's alone shows there is none.
    second.send({ case: "assignment", value: { assignments: [assignment("e2", "quick")] } });
    const { results } = await second.expect("result");
    assert.deepEqual(results.map((r) => r.executionId), ["e2"]);
    assert.equal(second.received.filter((m) => m.message.case === "result").length, 1);
    assert.deepEqual(w.unacked(), [{ executionId: "e2", delivery: 1 }]);
  });

  test("drain: no more credit, and the stream is closed once everything is acked", async () => {
    const release = gate();
    const w = start({ slots: 1 }, { h: async () => { await release.promise; return "ok"; } });
    const first = await server.nextStream();
    await first.expect("hello");
    welcome(first);
    first.send({ case: "assignment", value: { assignments: [assignment("e1")] } });
    first.send({ case: "drain", value: { reason: "restart", deadlineAt: timestampFromDate(new Date(Date.now() + 60_000)) } });
    // The handler ends only once the drain is seen, so the slot it frees is never offered as credit.
    await eventually(() => w.draining, "the worker has seen the drain");
    release.open();
    await first.expect("result");
    first.send({ case: "ack", value: { acks: [{ executionId: "e1", delivery: 1, accepted: true }] } });
    await first.halfClosed;
    assert.equal(first.received.filter((m) => m.message.case === "credit").length, 0, "no credit while draining");
    first.end();
    const second = await server.nextStream();
    await second.expect("hello");
  });

  test("a silent server is presumed dead and the worker reconnects", async () => {
    const w = start({ serverSilenceIntervals: 3 }, { h: () => "x" });
    const first = await server.nextStream();
    await first.expect("hello");
    welcome(first, { intervalMs: 20 });
    const second = await server.nextStream();
    await second.expect("hello");
    welcome(second, { intervalMs: 60_000 });
    await eventually(() => w.sessions === 2, "the second stream is welcomed");
  });

  test("assignments beyond twice the slots are refused at once", async () => {
    const release = gate();
    start({ slots: 1 }, { h: async () => { await release.promise; return "ok"; } });
    const stream = await server.nextStream();
    await stream.expect("hello");
    welcome(stream);
    stream.send({ case: "assignment", value: { assignments: [assignment("e1"), assignment("e2"), assignment("e3")] } });
    const { results } = await stream.expect("result");
    assert.deepEqual(results.map((r) => [r.executionId, r.outcome]), [["e3", ResultOutcome.FAILED_RETRYABLE]]);
    assert.match(results[0]!.error, /over capacity/);
    release.open();
  });

  test("a server that refuses the credential ends run() with WorkerFatalError", async () => {
    start({}, { h: () => "x" });
    const stream = await server.nextStream();
    await stream.expect("hello");
    stream.fail(Code.Unauthenticated, "the credential is not valid");
    await assert.rejects(running!, (error: unknown) => {
      assert.ok(error instanceof WorkerFatalError);
      assert.equal(error.code, Code.Unauthenticated);
      assert.match(error.message, /UNAUTHENTICATED: the credential is not valid/);
      return true;
    });
    running = undefined;
  });
});

describe("Worker configuration", () => {
  test("bad values fail at construction", () => {
    const base = { address: "127.0.0.1:1", credential: "tww_x" };
    assert.throws(() => new Worker({ ...base, credential: "" }), /credential is required/);
    assert.throws(() => new Worker({ ...base, address: [] }), /address is required/);
    assert.throws(() => new Worker({ ...base, address: ["127.0.0.1:1", ""] }), /address is required/);
    assert.throws(() => new Worker({ ...base, workerId: "has space" }), /workerId/);
    assert.throws(() => new Worker({ ...base, slots: 0 }), /slots/);
    assert.throws(() => new Worker({ ...base, reconnectInitialBackoffMs: 100, reconnectMaxBackoffMs: 10 }), /reconnectMaxBackoffMs/);
    const worker = new Worker(base);
    assert.match(worker.workerId, /^[A-Za-z0-9_.:-]+-\d+-[0-9a-f]{6}$/);
    worker.handler("a.b", () => undefined);
    assert.throws(() => worker.handler("a.b", () => undefined), /already registered/);
    assert.throws(() => worker.handler("bad name", () => undefined), /handler name/);
  });

  test("run() without a handler refuses to start", async () => {
    await assert.rejects(new Worker({ address: "127.0.0.1:1", credential: "tww_x" }).run(), /no handler/);
  });
});

/**
 * The worker bounded against a hostile or broken server, as the Python
 * worker is (tests/unit/worker/test_worker_bounds.py and
 * test_worker_assignment_bounds.py): an assignment past a bound, refusals a
 * server never acks, a heartbeat interval of a millisecond or of a year, a
 * drain deadline no clock reaches, a cancel of 200 000 entries, rejected
 * acks and a server that welcomes, drains or fails in a loop grow no
 * structure without end, set no tight loop going and flood no log; the
 * results of real attempts are never dropped.
 *
 * Nothing sleeps on wall time: the worker's clock is a {@link FakeClock}
 * the test moves, over which waits shorter than a minute (the reconnect
 * backoff) pass at once.
 */

import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";

import { create } from "@bufbuild/protobuf";
import { durationFromMs, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";

import {
  assignmentBreach,
  clean,
  dateOf,
  MAX_HANDLER_CHARS,
  MAX_HEADERS,
  MAX_HEADERS_CHARS,
  MAX_HEARTBEAT_INTERVAL_MS,
  MAX_ID_CHARS,
  MAX_METHOD_CHARS,
  MAX_PAYLOAD_BYTES,
  MAX_URL_CHARS,
  MIN_HEARTBEAT_INTERVAL_MS,
  SAID_CHARS,
  TIMESTAMP_SECONDS,
} from "../../src/bounds.js";
import { AssignmentSchema, ResultOutcome, type Assignment } from "../../src/gen/tickwheel/v1/worker_pb.js";
import { MAX_IN_FLIGHT, MAX_RECEIVE_BYTES, MAX_REFUSED, Worker, type JobContext, type Logger, type WorkerOptions } from "../../src/worker.js";
import { FakeClock } from "./fake-clock.js";
import { FakeServer, stopBoth, type FakeStream } from "./fake-server.js";
import { eventually, gate } from "./waits.js";

const SECRET = "tww_worker-secret-0123456789";
const MINUTE = 60_000;
/** The fake's heartbeat interval: past the clock's jumps, so heartbeats and the silence watch wait for the test. */
const INTERVAL = 100_000;

type Level = "debug" | "info" | "warn" | "error";

/** Every line the worker logs, by level. */
class Lines implements Logger {
  readonly all: { level: Level; message: string }[] = [];
  debug(message: string): void { this.all.push({ level: "debug", message }); }
  info(message: string): void { this.all.push({ level: "info", message }); }
  warn(message: string): void { this.all.push({ level: "warn", message }); }
  error(message: string): void { this.all.push({ level: "error", message }); }
  at(level: Level): string[] {
    return this.all.filter((line) => line.level === level).map((line) => line.message);
  }
}

function assignment(executionId: string, handler = "echo", init: Omit<Partial<Assignment>, "$typeName"> = {}): Assignment {
  return create(AssignmentSchema, {
    executionId,
    jobId: executionId.split(":")[0] ?? "",
    tenant: "acme",
    attempt: 1,
    delivery: 1,
    payload: new TextEncoder().encode("x"),
    nominalAt: timestampFromDate(new Date("2030-01-01T00:00:00Z")),
    dueAt: timestampFromDate(new Date("2030-01-01T00:00:07Z")),
    target: { kind: { case: "handler", value: { name: handler } } },
    ...init,
  });
}

function welcome(stream: FakeStream, intervalMs = INTERVAL, serverId = "fake"): void {
  stream.send({
    case: "welcome",
    value: { serverId, heartbeatInterval: durationFromMs(intervalMs), heartbeatTimeout: durationFromMs(5 * intervalMs) },
  });
}

function assign(stream: FakeStream, ...assignments: Assignment[]): void {
  stream.send({ case: "assignment", value: { assignments } });
}

/** The results the worker sent on `stream`, in order. */
function results(stream: FakeStream) {
  return stream.received.flatMap((m) => (m.message.case === "result" ? m.message.value.results : []));
}

function heartbeats(stream: FakeStream): number {
  return stream.received.filter((m) => m.message.case === "heartbeat").length;
}

type Change = (a: Assignment) => void;

function http(url = "http://127.0.0.1:1/", method = "", headers: Record<string, string> = {}): Change {
  return (a) => {
    a.target = { $typeName: "tickwheel.v1.Target", kind: { case: "http", value: { $typeName: "tickwheel.v1.HttpTarget", url, method, headers } } };
  };
}

function seconds(field: "nominalAt" | "dueAt" | "deadlineAt", value: bigint, nanos = 0): Change {
  return (a) => {
    a[field] = { $typeName: "google.protobuf.Timestamp", seconds: value, nanos };
  };
}

const BEYOND: [string, Change, string][] = [
  ["id of megabytes", (a) => (a.executionId = "x".repeat(2_000_000)), "an execution id of 2000000 characters"],
  ["empty id", (a) => (a.executionId = ""), "an execution id of 0 characters"],
  ["id", (a) => (a.executionId = "x".repeat(MAX_ID_CHARS + 1)), `an execution id of ${MAX_ID_CHARS + 1} characters`],
  ["job id", (a) => (a.jobId = "j".repeat(MAX_ID_CHARS + 1)), `a job id of ${MAX_ID_CHARS + 1} characters`],
  ["tenant", (a) => (a.tenant = "t".repeat(100_000)), "a tenant of 100000 characters"],
  ["traceparent", (a) => (a.traceparent = "0".repeat(MAX_ID_CHARS + 1)), `a traceparent of ${MAX_ID_CHARS + 1} characters`],
  ["payload", (a) => (a.payload = new Uint8Array(MAX_PAYLOAD_BYTES + 1)), `a payload of ${MAX_PAYLOAD_BYTES + 1} bytes`],
  ["handler", (a) => (a.target = { $typeName: "tickwheel.v1.Target", kind: { case: "handler", value: { $typeName: "tickwheel.v1.HandlerTarget", name: "h".repeat(MAX_HANDLER_CHARS + 1) } } }),
    `a handler name of ${MAX_HANDLER_CHARS + 1} characters`],
  ["url", http(`http://a/${"u".repeat(MAX_URL_CHARS)}`), `an HTTP URL of ${MAX_URL_CHARS + 9} characters`],
  ["method", http(undefined, "M".repeat(MAX_METHOD_CHARS + 1)), `an HTTP method of ${MAX_METHOD_CHARS + 1} characters`],
  ["headers", http(undefined, "", Object.fromEntries(Array.from({ length: MAX_HEADERS + 1 }, (_, i) => [`h${i}`, "v"]))),
    `${MAX_HEADERS + 1} HTTP headers`],
  ["header bytes", http(undefined, "", { a: "v".repeat(MAX_HEADERS_CHARS) }), `HTTP headers of ${MAX_HEADERS_CHARS + 1} characters`],
  // Characters are code points, as Python counts them: 1024 of U+1F600 are in bounds, 1025 are not.
  ["astral tenant", (a) => (a.tenant = "\u{1F600}".repeat(MAX_ID_CHARS + 1)), `a tenant of ${MAX_ID_CHARS + 1} characters`],
];

describe("assignment bounds (pure)", () => {
  test("each bound is inclusive, one past it is a breach naming the field", () => {
    const at: Change[] = [
      (a) => (a.executionId = "e".repeat(MAX_ID_CHARS)),
      (a) => (a.tenant = "\u{1F600}".repeat(MAX_ID_CHARS)),
      (a) => (a.traceparent = "0".repeat(MAX_ID_CHARS)),
      (a) => (a.payload = new Uint8Array(MAX_PAYLOAD_BYTES)),
      http(`http://a/${"u".repeat(MAX_URL_CHARS - 9)}`, "M".repeat(MAX_METHOD_CHARS),
        Object.fromEntries(Array.from({ length: MAX_HEADERS }, (_, i) => [`h${String(i).padStart(2, "0")}`, "v"]))),
      http(undefined, "", { a: "v".repeat(MAX_HEADERS_CHARS - 1) }),
      seconds("deadlineAt", 2n ** 62n), // timestamps are fixed-size: read clamped, not refused
    ];
    for (const change of at) {
      const a = assignment("e:1");
      change(a);
      assert.equal(assignmentBreach(a), undefined);
    }
    for (const [name, change, said] of BEYOND) {
      const a = assignment("e:1");
      change(a);
      assert.ok(assignmentBreach(a)?.includes(said), `${name}: ${assignmentBreach(a)}`);
    }
  });

  test("a timestamp out of range is read as the nearest instant in range", () => {
    assert.equal(dateOf({ $typeName: "google.protobuf.Timestamp", seconds: 2n ** 62n, nanos: 0 }).toISOString(), "9999-12-31T23:59:59.000Z");
    assert.equal(dateOf({ $typeName: "google.protobuf.Timestamp", seconds: -(2n ** 62n), nanos: -1 }).toISOString(), "0001-01-01T00:00:00.000Z");
    assert.equal(dateOf({ $typeName: "google.protobuf.Timestamp", seconds: TIMESTAMP_SECONDS[0] - 1n, nanos: 0 }).getTime(),
      Number(TIMESTAMP_SECONDS[0]) * 1000);
    assert.equal(dateOf({ $typeName: "google.protobuf.Timestamp", seconds: 5n, nanos: 2_000_000_000 }).getTime(), 5999);
  });

  test("a server's text is one printable line of at most 300 characters, the credential masked", () => {
    assert.equal(clean(`denied for ${SECRET}\nsecond line`, SECRET), "denied for ***");
    assert.equal(clean("bell\u0007 tab\t nul\u0000 rtl\u202e", ""), "bell? tab? nul? rtl?");
    const long = clean(`${"y".repeat(10_000_000)}`, SECRET);
    assert.equal(long, `${"y".repeat(SAID_CHARS)}...`);
    // A credential cut in half by the bound is still not shown.
    const split = clean(`${"z".repeat(SAID_CHARS - 5)}${SECRET}`, SECRET);
    assert.ok(!split.includes(SECRET.slice(0, 6)), split);
  });
});

describe("Worker against a hostile server", () => {
  let server: FakeServer;
  let worker: Worker | undefined;
  let running: Promise<void> | undefined;
  let clock: FakeClock;
  let lines: Lines;

  beforeEach(async () => {
    server = new FakeServer();
    await server.start();
    clock = new FakeClock(MINUTE);
    lines = new Lines();
  });

  afterEach(async () => {
    await stopBoth(worker, running, server);
    worker = undefined;
    running = undefined;
  });

  function start(options: Partial<WorkerOptions> = {}, handlers: Record<string, (ctx: JobContext) => unknown> = {}): Worker {
    worker = new Worker({
      address: server.address,
      credential: SECRET,
      workerId: "w1",
      slots: 2,
      reconnectInitialBackoffMs: 200,
      reconnectMaxBackoffMs: 15_000,
      welcomeTimeoutMs: 600_000,
      logger: lines,
      clock,
      random: () => 0.5,
      ...options,
    });
    worker.handler("echo", (ctx) => ctx.payload);
    for (const [name, handle] of Object.entries(handlers)) worker.handler(name, handle);
    running = worker.run();
    return worker;
  }

  /** The next stream, its hello read and welcomed. */
  async function welcomed(intervalMs = INTERVAL, serverId = "fake"): Promise<FakeStream> {
    const stream = await server.nextStream();
    await stream.expect("hello");
    welcome(stream, intervalMs, serverId);
    return stream;
  }

  /** A handler `block` that returns once the gate opens, and the gate. */
  function blocking(): [Record<string, (ctx: JobContext) => unknown>, () => void] {
    const release = gate();
    return [{ block: async (ctx) => { await release.promise; return `blocked ${ctx.executionId}`; } }, release.open];
  }

  for (const [name, change, said] of BEYOND) {
    test(`an assignment past a bound (${name}) ends the stream, nothing of its message taken`, async () => {
      const w = start();
      const first = await welcomed();
      await eventually(() => w.sessions === 1, "welcomed");
      const bad = assignment("bad:e");
      change(bad);
      assign(first, assignment("good:e"), bad);
      const second = await server.nextStream();
      const hello = await second.expect("hello");
      assert.deepEqual(hello.inFlight, [], "nothing of the message was taken");
      assert.deepEqual(results(first), []);
      assert.deepEqual([w.inFlight(), w.unacked()], [[], []]);
      welcome(second);
      assign(second, assignment("after:e", "echo", { payload: new TextEncoder().encode("y") }));
      const { results: after } = await second.expect("result");
      assert.equal(new TextDecoder().decode(after[0]!.output), "y", "the next stream serves");
      const warned = lines.at("warn");
      assert.ok(warned.some((m) => m.includes(`protocol error: an assignment`) && m.includes(said)), warned.join("\n"));
      assert.ok(warned.every((m) => m.length < 1000));
    });
  }

  test("timestamps out of range are taken, and a deadline out of range never comes", async () => {
    const [handlers, release] = blocking();
    const w = start({ serverSilenceIntervals: 1_000_000 }, handlers);
    const stream = await welcomed();
    const never = assignment("never:e", "block");
    seconds("deadlineAt", 2n ** 62n)(never);
    seconds("nominalAt", -(2n ** 62n), -1)(never);
    const past = assignment("past:e", "block");
    seconds("deadlineAt", -(2n ** 62n))(past);
    assign(stream, never, past);
    const { results: first } = await stream.expect("result");
    assert.deepEqual(first.map((r) => [r.executionId, r.outcome]), [["past:e", ResultOutcome.TIMED_OUT]]);
    assert.match(first[0]!.error, /at its deadline 0001-01-01T00:00:00.000Z$/);
    clock.advance(365 * 24 * 3600 * 1000);
    assert.deepEqual(w.inFlight().map((e) => e.executionId), ["never:e"]);
    release();
    const { results: second } = await stream.expect("result");
    assert.deepEqual(second.map((r) => [r.executionId, r.outcome]), [["never:e", ResultOutcome.SUCCEEDED]]);
    assert.equal(w.sessions, 1);
  });

  test("a message over the receive limit ends the stream; the next one serves", async () => {
    const w = start();
    const first = await welcomed();
    await eventually(() => w.sessions === 1, "welcomed");
    assign(first, assignment("huge:e", "echo", { payload: new Uint8Array(MAX_RECEIVE_BYTES) }));
    const second = await welcomed();
    await eventually(() => w.sessions === 2, "welcomed again");
    assert.deepEqual([w.inFlight(), w.unacked()], [[], []]);
    assign(second, assignment("after:e"));
    await second.expect("result");
    assert.ok(lines.at("warn").some((m) => m.includes("RESOURCE_EXHAUSTED")), lines.at("warn").join("\n"));
  });

  test("an assignment at every bound is taken and runs", async () => {
    start();
    const stream = await welcomed();
    const id = "e".repeat(MAX_ID_CHARS);
    assign(stream, assignment(id, "echo", {
      jobId: "j".repeat(MAX_ID_CHARS),
      tenant: "t".repeat(MAX_ID_CHARS),
      traceparent: "0".repeat(MAX_ID_CHARS),
      payload: new Uint8Array(MAX_PAYLOAD_BYTES),
    }));
    const { results: sent } = await stream.expect("result");
    assert.deepEqual(sent.map((r) => [r.executionId, r.outcome]), [[id, ResultOutcome.SUCCEEDED]]);
  });

  test("refusals a server never acks stay bounded, and real results are kept", async () => {
    const [handlers, release] = blocking();
    const w = start({}, handlers);
    const unacked = (w as unknown as { unackedResults: Map<string, unknown> }).unackedResults;
    let peak = 0;
    const set = unacked.set.bind(unacked);
    unacked.set = (key, value) => { set(key, value); peak = Math.max(peak, unacked.size); return unacked; };
    const real = ["real0:e", "real1:e", "held0:e", "held1:e", "held2:e", "held3:e"];
    let stream = await welcomed();
    assign(stream, assignment("real0:e", "echo", { payload: new TextEncoder().encode("kept") }),
      assignment("real1:e", "echo", { payload: new TextEncoder().encode("kept") }));
    await eventually(() => w.unacked().length === 2, "two real results");
    assign(stream, ...[0, 1, 2, 3].map((i) => assignment(`held${i}:e`, "block")));
    await eventually(() => w.inFlight().length === 4, "twice the slots held");
    let sent = 0;
    for (let index = 1; sent < 10 * (MAX_REFUSED + 1); index += 1) {
      assign(stream, ...Array.from({ length: MAX_REFUSED + 1 }, (_, i) => assignment(`over${sent + i}:e`)));
      sent += MAX_REFUSED + 1;
      stream = await welcomed(); // the worker ended the stream (a protocol error) and opens the next one
      await eventually(() => w.sessions === index + 1, "the next stream is welcomed");
      assert.ok(unacked.size <= MAX_REFUSED + real.length);
    }
    const last = stream;
    const hello = last.received[0]!.message;
    assert.equal(hello.case, "hello");
    assert.deepEqual(new Set(hello.case === "hello" ? hello.value.inFlight.map((e) => e.executionId) : []), new Set(real),
      "refusals forgotten, real work kept");
    const resent = await last.expect("result");
    assert.deepEqual(resent.results.map((r) => new TextDecoder().decode(r.output)), ["kept", "kept"]);
    release();
    await eventually(() => results(last).length === 6, "the held attempts' results");
    assert.ok(peak <= MAX_REFUSED + real.length, `peak ${peak}`);
    const breach = `protocol error: more than ${MAX_REFUSED} assignments beyond the credit unacknowledged`;
    const ended = lines.all.filter((l) => l.message.includes(breach));
    assert.equal(ended.length, 10, "each batch ended its stream (a line a failure: WARNING or DEBUG)");
    assert.ok(lines.at("warn").length < 5, lines.at("warn").join("\n"));
    assert.ok(lines.at("error").length < 5, "refusals are one ERROR line a minute");
  });

  test("results a server never acks stop at a hello's worth, then are refused", async () => {
    const w = start({ slots: 100 });
    const stream = await welcomed();
    // Rounds of 100 quick attempts (within twice the slots each time), none acknowledged.
    for (let round = 0; round < MAX_IN_FLIGHT / 100; round += 1) {
      assign(stream, ...Array.from({ length: 100 }, (_, i) => assignment(`e${round}-${i}:e`)));
      await eventually(() => w.unacked().length === (round + 1) * 100 && w.inFlight().length === 0, "the round's results");
    }
    const credit = stream.received.reduce((sum, r) => sum + (r.message.case === "credit" ? r.message.value.credits : 0), 100);
    assert.ok(credit <= MAX_IN_FLIGHT, `credit ${credit} past what a hello lists`);
    assign(stream, assignment("more:e"));
    await eventually(() => results(stream).some((r) => r.executionId === "more:e"), "the refusal");
    const refused = results(stream).find((r) => r.executionId === "more:e")!;
    assert.equal(refused.outcome, ResultOutcome.FAILED_RETRYABLE);
    assert.match(refused.error, /over capacity/);
    assert.equal(w.unacked().length, MAX_IN_FLIGHT + 1);
    assert.equal(w.sessions, 1);
  });

  test("refusals a server acks never end the stream", async () => {
    const [handlers, release] = blocking();
    const w = start({}, handlers);
    const stream = await welcomed();
    assign(stream, ...[0, 1, 2, 3].map((i) => assignment(`held${i}:e`, "block")));
    await eventually(() => w.inFlight().length === 4, "twice the slots held");
    for (let batch = 0; batch < 3; batch += 1) {
      assign(stream, ...Array.from({ length: MAX_REFUSED / 2 }, (_, i) => assignment(`over${batch}-${i}:e`)));
      await eventually(() => w.unacked().length === MAX_REFUSED / 2, "refused");
      stream.send({ case: "ack", value: { acks: w.unacked().map((e) => ({ ...e, accepted: true })) } });
      await eventually(() => w.unacked().length === 0, "acked");
    }
    assert.equal(w.sessions, 1);
    release();
    assert.deepEqual(lines.at("warn"), []);
  });

  test("a heartbeat interval of a millisecond is raised to the floor with one warning", async () => {
    clock = new FakeClock(); // nothing jumps: the floor's heartbeats wait for the test
    const w = start({ serverSilenceIntervals: 1000 });
    const stream = await welcomed(1);
    await eventually(() => w.sessions === 1, "welcomed");
    clock.advance(MIN_HEARTBEAT_INTERVAL_MS * 0.9);
    assign(stream, assignment("e:1"));
    await stream.expect("result");
    assert.equal(heartbeats(stream), 0);
    clock.advance(MIN_HEARTBEAT_INTERVAL_MS * 0.2);
    await stream.expect("heartbeat");
    assert.deepEqual(lines.at("warn"), [`server fake announced a heartbeat interval of 0.001s; using ${MIN_HEARTBEAT_INTERVAL_MS / 1000}s`]);
  });

  test("a heartbeat interval of a year is lowered to the ceiling, for heartbeats and the silence watch", async () => {
    const year = 365 * 24 * 3600 * 1000;
    clock = new FakeClock();
    const w = start({ serverSilenceIntervals: 3 });
    const first = await welcomed(year);
    await eventually(() => w.sessions === 1, "welcomed");
    clock.advance(MAX_HEARTBEAT_INTERVAL_MS);
    await first.expect("heartbeat");
    clock.advance(2 * MAX_HEARTBEAT_INTERVAL_MS); // the server said nothing for three intervals
    await first.halfClosed;
    clock.advance(15_000); // the reconnect's backoff
    await server.nextStream();
    assert.equal(lines.at("warn")[0], `server fake announced a heartbeat interval of ${year / 1000}s; using ${MAX_HEARTBEAT_INTERVAL_MS / 1000}s`);
  });

  test("a heartbeat interval out of range or out of bounds in a loop is a line a minute", async () => {
    const w = start();
    const first = await server.nextStream();
    await first.expect("hello");
    first.send({ case: "welcome", value: { serverId: "fake", heartbeatInterval: { seconds: 2n ** 62n, nanos: 0 } } });
    for (let index = 0; index < 30; index += 1) {
      const stream = await welcomed(1e9);
      await eventually(() => w.sessions === index + 1, "welcomed");
      stream.end();
    }
    await server.nextStream();
    const waited = clock.monotonicMs() - 1_000_000;
    const said = lines.at("warn").filter((m) => m.includes("announced a heartbeat interval"));
    assert.ok(said.length >= 1 && said.length <= 1 + Math.floor(waited / MINUTE), `${waited}: ${said.length}`);
    assert.ok(lines.all.some((l) => l.message.includes("protocol error: the welcome's heartbeat_interval is out of range")));
  });

  test("a drain deadline out of range is a protocol error, not a busy wait", async () => {
    const w = start();
    const first = await welcomed();
    await eventually(() => w.sessions === 1, "welcomed");
    first.send({ case: "drain", value: { reason: `restarting\n${"x".repeat(100_000)}`, deadlineAt: { seconds: 2n ** 62n, nanos: 0 } } });
    await server.nextStream();
    assert.ok(lines.all.some((l) => l.message.includes("protocol error: the drain's deadline_at is out of range")));
  });

  test("a server welcoming and draining in a loop is a line a kind a minute", async () => {
    clock = new FakeClock(500); // the backoff after a stream that worked jumps; heartbeats wait for the test
    const w = start();
    const streams = 40;
    for (let index = 0; index < streams; index += 1) {
      const stream = await welcomed(10_000);
      await eventually(() => w.sessions === index + 1, "welcomed");
      clock.advance(10_000); // the stream lasted its heartbeat interval: it worked
      stream.send({ case: "drain", value: { reason: `restarting\n${"x".repeat(100_000)}`, deadlineAt: timestampFromDate(new Date(clock.now().getTime() + 30_000)) } });
      await stream.halfClosed;
    }
    await server.nextStream();
    const waited = clock.monotonicMs() - 1_000_000;
    const info = lines.at("info");
    for (const kind of ["server fake drains: restarting", "drained: every attempt decided and acknowledged", `stream to ${server.address} closed; reconnecting`]) {
      const said = info.filter((m) => m.startsWith(kind));
      assert.ok(said.length >= 1 && said.length <= 1 + Math.floor(waited / MINUTE), `${kind}: ${said.length} in ${waited} ms`);
      assert.equal(said.length + lines.at("debug").filter((m) => m.startsWith(kind)).length, streams, kind);
    }
    assert.ok(lines.all.every((l) => !l.message.includes("xxx")));
    assert.deepEqual(lines.at("warn"), []);
  });

  test("a cancel of many entries costs one pass and cancels each attempt once", async () => {
    const [handlers, release] = blocking();
    const w = start({ slots: 1000, cancelGraceMs: 0 }, handlers);
    const stream = await welcomed();
    assign(stream, ...Array.from({ length: 1000 }, (_, i) => assignment(`job${i}:e`, "block")));
    await eventually(() => w.inFlight().length === 1000, "1000 held");
    const named = Array.from({ length: 100 }, (_, i) => `job${i * 10}:e`);
    const executions = [
      ...Array.from({ length: 200_000 }, (_, i) => ({ executionId: `none${i}:e`, delivery: 0 })),
      ...[...named, ...named, ...named].map((executionId) => ({ executionId, delivery: 0 })),
    ];
    stream.send({ case: "cancel", value: { executions, reason: `stop\n${"r".repeat(1_000_000)}` } });
    await eventually(() => results(stream).length === 100, "the named attempts canceled");
    assert.deepEqual(new Set(results(stream).map((r) => r.executionId)), new Set(named));
    assert.ok(results(stream).every((r) => r.outcome === ResultOutcome.CANCELED && r.error.length < 2000));
    assert.equal(w.inFlight().length, 900);
    release();
  });

  test("a welcome rejecting many entries costs one pass and stops each attempt named, unreported", async () => {
    const [handlers, release] = blocking();
    const w = start({ slots: 1000, cancelGraceMs: 0 }, handlers);
    const first = await welcomed();
    assign(first, ...Array.from({ length: 1000 }, (_, i) => assignment(`job${i}:e`, "block")));
    await eventually(() => w.inFlight().length === 1000, "1000 held");
    first.fail(Code.Unavailable, "restarting");
    const second = await server.nextStream();
    await second.expect("hello");
    const named = Array.from({ length: 100 }, (_, i) => `job${i * 10}:e`);
    second.send({
      case: "welcome",
      value: {
        serverId: "fake",
        heartbeatInterval: durationFromMs(INTERVAL),
        rejected: [
          ...Array.from({ length: 200_000 }, (_, i) => ({ executionId: `none${i}:e`, delivery: 0 })),
          ...[...named, ...named, ...named].map((executionId) => ({ executionId, delivery: 1 })),
        ],
      },
    });
    await eventually(() => w.inFlight().length === 900, "the named attempts stopped");
    assert.ok(w.inFlight().every((e) => !named.includes(e.executionId)));
    release();
    await eventually(() => results(second).length === 900, "the others' results");
    assert.ok(results(second).every((r) => !named.includes(r.executionId)), "a rejected attempt is never reported");
  });

  test("rejected acks are a line a minute, and only for results held", async () => {
    const w = start({ slots: 300 });
    const stream = await welcomed();
    assign(stream, ...Array.from({ length: 300 }, (_, i) => assignment(`job${i}:e`)));
    await eventually(() => w.unacked().length === 300, "300 results");
    const nobody = Array.from({ length: 1000 }, (_, i) => ({ executionId: `nobody${i}:e`, delivery: 1, accepted: false, reason: "no" }));
    stream.send({ case: "ack", value: { acks: nobody } });
    stream.send({ case: "ack", value: { acks: w.unacked().map((e) => ({ ...e, accepted: false, reason: `stale\n${SECRET}` })) } });
    await eventually(() => w.unacked().length === 0, "every result acked");
    const said = lines.all.filter((l) => l.message.includes("rejected the result"));
    assert.equal(said.length, 300, "a line for each result held, none for ids the worker never reported");
    assert.equal(said.filter((l) => l.level === "warn").length, 1);
    assert.ok(said.every((l) => !l.message.includes(SECRET) && !l.message.includes("nobody")));
  });

  test("an outage is one WARNING, then lines after 1, 3, 7 and 15 minutes, and one INFO once a stream lasted", async () => {
    const w = start();
    const details = `store restarting for ${SECRET}\u0007\n${"d".repeat(10_000)}`;
    while (clock.monotonicMs() - 1_000_000 < 16 * MINUTE) {
      const stream = await server.nextStream();
      stream.fail(Code.Unavailable, details);
    }
    const warned = lines.at("warn");
    // The details' first line, printable, cut to 300 characters, the credential masked (the
    // transport itself may already have made the line break a space).
    const first = `stream to ${server.address}: connecting failed, server unavailable: `;
    assert.ok(warned[0]!.startsWith(`${first}UNAVAILABLE: store restarting for ***?`), warned[0]);
    assert.ok(warned[0]!.endsWith("...; reconnecting") || warned[0]!.endsWith("***?; reconnecting"), warned[0]);
    assert.ok(warned[0]!.length <= first.length + SAID_CHARS + "...; reconnecting".length, warned[0]);
    assert.deepEqual(warned.slice(1).map((m) => m.match(/still failing for (\d+) s/)?.[1]).map((s) => Math.floor(Number(s) / MINUTE * 1000)),
      [1, 3, 7, 15], warned.join("\n"));
    assert.ok(lines.at("debug").length > 100, "each failed reconnect between is DEBUG");
    assert.ok(lines.all.every((l) => !l.message.includes(SECRET) && l.message.length < 500));
    const stream = await welcomed();
    await eventually(() => w.sessions === 1, "welcomed");
    assert.ok(!lines.at("info").some((m) => m.includes("recovered")), "not before the stream lasted");
    clock.advance(INTERVAL);
    await stream.expect("heartbeat");
    assert.ok(lines.at("info").some((m) => m.startsWith(`stream to ${server.address}: recovered after `)), lines.at("info").join("\n"));
  });

  test("a stream ending within a heartbeat interval of its welcome does not reset the backoff", async () => {
    start({ reconnectInitialBackoffMs: 7, reconnectMaxBackoffMs: 7 * 2 ** 5, random: () => 1 });
    for (let index = 0; index < 6; index += 1) {
      const stream = await welcomed();
      stream.end();
    }
    const worked = await welcomed();
    await eventually(() => worker!.sessions === 7, "welcomed");
    clock.advance(INTERVAL);
    await worked.expect("heartbeat");
    worked.end();
    await server.nextStream();
    const backoffs = clock.waits.filter((ms) => [7, 14, 28, 56, 112, 224].includes(ms));
    assert.deepEqual(backoffs, [14, 28, 56, 112, 224, 224, 7], "doubling while streams end at once; quick after one that lasted");
  });
});

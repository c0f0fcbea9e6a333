/** One attempt's outcome: success, thrown errors, PermanentError, deadline, cancel before a slot. */

import assert from "node:assert/strict";
import dns from "node:dns";
import { describe, test } from "node:test";

import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";

import { Attempt, PermanentError, encodeOutput, truncateUtf8, type Handler } from "../../src/attempt.js";
import { systemClock } from "../../src/clock.js";
import { AssignmentSchema, ResultOutcome, type ExecutionResult } from "../../src/gen/tickwheel/v1/worker_pb.js";
import { Semaphore } from "../../src/sync.js";

function attemptOf(handler: Handler, options: { deadlineAt?: Date; name?: string; url?: string } = {}): Attempt {
  const assignment = create(AssignmentSchema, {
    executionId: "job_1:2030-01-01T00:00:00Z",
    jobId: "job_1",
    attempt: 2,
    delivery: 3,
    payload: new TextEncoder().encode('{"n": 1}'),
    target: options.url === undefined
      ? { kind: { case: "handler", value: { name: options.name ?? "h" } } }
      : { kind: { case: "http", value: { url: options.url, method: "POST" } } },
    ...(options.deadlineAt ? { deadlineAt: timestampFromDate(options.deadlineAt) } : {}),
  });
  return new Attempt(assignment, { handlers: new Map([["h", handler]]), clock: systemClock, cancelGraceMs: 50 });
}

async function outcome(attempt: Attempt, slots = new Semaphore(1)): Promise<ExecutionResult[]> {
  const results: ExecutionResult[] = [];
  await attempt.run(slots, (_a, result) => results.push(result));
  return results;
}

describe("Attempt", () => {
  test("the handler sees its context and its return value is the output", async () => {
    const [result] = await outcome(attemptOf((ctx) => ({ key: ctx.idempotencyKey, n: ctx.payloadJson<{ n: number }>().n, attempt: ctx.attempt, delivery: ctx.delivery })));
    assert.equal(result!.outcome, ResultOutcome.SUCCEEDED);
    assert.deepEqual(JSON.parse(new TextDecoder().decode(result!.output)), { key: "job_1:2030-01-01T00:00:00Z", n: 1, attempt: 2, delivery: 3 });
    assert.equal(result!.attempt, 2);
    assert.equal(result!.delivery, 3);
  });

  test("a thrown error is retryable, a PermanentError is not, a missing handler is permanent", async () => {
    const [retryable] = await outcome(attemptOf(() => { throw new TypeError("bad thing"); }));
    assert.equal(retryable!.outcome, ResultOutcome.FAILED_RETRYABLE);
    assert.equal(retryable!.error, "TypeError: bad thing");
    const [rejected] = await outcome(attemptOf(async () => Promise.reject("a string")));
    assert.equal(rejected!.error, "a string");
    const [permanent] = await outcome(attemptOf(async () => { throw new PermanentError("never works"); }));
    assert.equal(permanent!.outcome, ResultOutcome.FAILED_PERMANENT);
    assert.equal(permanent!.error, "never works");
    const [missing] = await outcome(attemptOf(() => "x", { name: "other" }));
    assert.equal(missing!.outcome, ResultOutcome.FAILED_PERMANENT);
    assert.match(missing!.error, /no handler named "other" in this worker \(it serves: h\)/);
  });

  test("an HTTP target is permanent, and nothing of it is looked up or run", async () => {
    // Only the Python worker runs HTTP targets (this one's hello says http: false), so a
    // tenant's name server never holds this worker's slots or libuv's threads.
    const lookups: string[] = [];
    const { lookup } = dns; // what net, http and fetch look names up with
    dns.lookup = ((host: string) => void lookups.push(host)) as unknown as typeof dns.lookup;
    let ran = false;
    try {
      const [result] = await outcome(attemptOf(() => void (ran = true), { url: "https://hangs.example.invalid/hook" }));
      assert.equal(result!.outcome, ResultOutcome.FAILED_PERMANENT);
      assert.equal(result!.error, "this worker does not run HTTP targets");
    } finally {
      dns.lookup = lookup;
    }
    assert.deepEqual(lookups, []);
    assert.equal(ran, false);
  });

  test("the deadline aborts the signal and reports TIMED_OUT", async () => {
    let reason: unknown;
    const [result] = await outcome(attemptOf(async (ctx) => {
      await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve(), { once: true }));
      reason = ctx.signal.reason;
    }, { deadlineAt: new Date(Date.now() + 30) }));
    assert.equal(result!.outcome, ResultOutcome.TIMED_OUT);
    assert.match(result!.error, /still running at its deadline/);
    assert.equal(reason, "deadline passed");
  });

  test("canceled while waiting for a slot: CANCELED without running", async () => {
    const slots = new Semaphore(0);
    let ran = false;
    const attempt = attemptOf(() => void (ran = true));
    const pending = outcome(attempt, slots);
    attempt.cancel("replaced");
    const [result] = await pending;
    assert.equal(result!.outcome, ResultOutcome.CANCELED);
    assert.equal(result!.error, "canceled before it started: replaced");
    assert.equal(ran, false);
  });

  test("a handler ignoring its cancel keeps the slot until it settles", async () => {
    const slots = new Semaphore(1);
    let finish!: () => void;
    const attempt = attemptOf(() => new Promise<void>((resolve) => (finish = resolve)));
    const results: ExecutionResult[] = [];
    const running = attempt.run(slots, (_a, r) => results.push(r));
    await new Promise((resolve) => setTimeout(resolve, 5));
    attempt.cancel("stop");
    const probe = new AbortController();
    const second = slots.acquire(probe.signal);
    const state = await Promise.race([second.then(() => "acquired"), new Promise((r) => setTimeout(() => r("waiting"), 150))]);
    assert.equal(state, "waiting", "the slot is still held after CANCELED was decided");
    assert.equal(results[0]?.outcome, ResultOutcome.CANCELED);
    finish();
    await running;
    assert.equal(await second, true);
  });

  test("output and error text are bounded", () => {
    assert.equal(truncateUtf8("é".repeat(10), 5), "éé");
    assert.equal(truncateUtf8("abc", 5), "abc");
    assert.deepEqual(encodeOutput(undefined), new Uint8Array());
    assert.equal(new TextDecoder().decode(encodeOutput({ big: 10n })), '{"big":"10"}');
  });
});

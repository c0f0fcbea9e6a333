/**
 * One assignment, from receipt until its handler has really stopped.
 *
 * {@link Attempt.run} waits for a slot, starts the named handler, and decides
 * the outcome exactly once, reporting it through a callback the moment it is
 * known:
 *
 * - the handler settles -> its outcome (returns: SUCCEEDED; throws
 *   {@link PermanentError}: FAILED_PERMANENT; throws anything else:
 *   FAILED_RETRYABLE);
 * - the server cancels -> `ctx.signal` aborts, the handler gets the cancel
 *   grace to settle on its own, then CANCELED;
 * - `deadlineAt` passes -> `ctx.signal` aborts, TIMED_OUT at once.
 *
 * JavaScript cannot stop a function from outside: a handler still running
 * after the outcome is decided keeps its slot until it settles, so the
 * worker never runs more than `slots` handlers at once even when one ignores
 * its signal. A rejected attempt (the server gave the execution to someone
 * else) stops the same way but reports nothing.
 */

import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";

import { dateOf } from "./bounds.js";
import type { Clock } from "./clock.js";
import { ExecutionOrigin } from "./gen/tickwheel/v1/execution_pb.js";
import {
  ExecutionResultSchema,
  ResultOutcome,
  type Assignment,
  type ExecutionResult,
} from "./gen/tickwheel/v1/worker_pb.js";
import type { Semaphore } from "./sync.js";

export const ERROR_MAX_BYTES = 4096;
export const OUTPUT_MAX_BYTES = 16 * 1024;
export const PROGRESS_MAX_CHARS = 256;
export const HANDLER_NAME = /^[A-Za-z0-9_.:-]{1,200}$/;

const PERMANENT = Symbol.for("tickwheel.PermanentError");

/**
 * Thrown by a handler for a failure that retrying cannot fix. The attempt is
 * reported FAILED_PERMANENT and the execution is dead-lettered without
 * further attempts (its payload is kept for replay).
 */
export class PermanentError extends Error {
  override name = "PermanentError";
  readonly [PERMANENT] = true;
}

function isPermanent(error: unknown): boolean {
  return typeof error === "object" && error !== null && (error as Record<symbol, unknown>)[PERMANENT] === true;
}

/**
 * What a handler knows about the attempt it runs. `executionId` is the
 * idempotency key: retries (`attempt` + 1) and re-deliveries after a worker
 * or server died (`delivery` + 1) keep it, so a handler whose effect must
 * happen once records it under this key.
 */
export interface JobContext {
  /** The idempotency key, stable across attempts and deliveries. */
  readonly executionId: string;
  /** Same as `executionId`; the `Idempotency-Key` an HTTP target sees. */
  readonly idempotencyKey: string;
  /** The job this execution belongs to. */
  readonly jobId: string;
  /** The job's tenant. */
  readonly tenant: string;
  /** The attempt number, from 1; a retry after a failure increments it. */
  readonly attempt: number;
  /** How many times this attempt has been handed out, from 1. */
  readonly delivery: number;
  /** The occurrence's nominal instant: what the schedule names. */
  readonly nominalAt: Date;
  /** Nominal plus jitter: the earliest instant it could start. */
  readonly dueAt: Date;
  /** When the attempt is abandoned and reported TIMED_OUT; undefined: no limit. */
  readonly deadlineAt: Date | undefined;
  /** The payload, as given at creation (or by the trigger). */
  readonly payload: Uint8Array;
  /** The handler name the job targets. */
  readonly handler: string;
  /** W3C trace context of the dispatch, empty when there is none. */
  readonly traceparent: string;
  /** How many missed occurrences this execution stands for (misfire run_once). */
  readonly missedCount: number;
  /** How the execution came to exist (scheduled, trigger, backfill). */
  readonly origin: ExecutionOrigin;
  /**
   * Aborts when the attempt must stop: the server canceled it, its deadline
   * passed, or the worker is stopping. `signal.reason` says why. Pass it to
   * `fetch` and friends, or check `signal.aborted` between steps.
   */
  readonly signal: AbortSignal;
  /** The last progress reported through {@link heartbeat}. */
  readonly progress: string;
  /**
   * Records progress; the worker's next heartbeat carries it to the server.
   * Liveness does not depend on this call: the worker heartbeats every
   * execution it runs at the server's interval. Progress is cut to 256
   * characters; an empty or omitted `progress` keeps the previous one.
   */
  heartbeat(progress?: string): void;
  /** The payload decoded as UTF-8. */
  payloadText(): string;
  /** The payload parsed as JSON (throws on invalid JSON). */
  payloadJson<T = unknown>(): T;
}

/** A handler: returns the output (or a promise of it); see {@link encodeOutput}. */
export type Handler = (ctx: JobContext) => unknown;

/** `(execution id, delivery)` as one string key: one hand-out of one execution. */
export type Key = string;

export function keyOf(executionId: string, delivery: number): Key {
  return `${delivery}:${executionId}`;
}

class Context implements JobContext {
  readonly executionId: string;
  readonly jobId: string;
  readonly tenant: string;
  readonly attempt: number;
  readonly delivery: number;
  readonly nominalAt: Date;
  readonly dueAt: Date;
  readonly deadlineAt: Date | undefined;
  readonly payload: Uint8Array;
  readonly handler: string;
  readonly traceparent: string;
  readonly missedCount: number;
  readonly origin: ExecutionOrigin;
  readonly controller = new AbortController();
  progress = "";

  constructor(a: Assignment) {
    this.executionId = a.executionId;
    this.jobId = a.jobId;
    this.tenant = a.tenant;
    this.attempt = a.attempt;
    this.delivery = a.delivery;
    this.nominalAt = a.nominalAt ? dateOf(a.nominalAt) : new Date(0);
    this.dueAt = a.dueAt ? dateOf(a.dueAt) : this.nominalAt;
    this.deadlineAt = a.deadlineAt ? dateOf(a.deadlineAt) : undefined;
    this.payload = a.payload;
    this.handler = a.target?.kind.case === "handler" ? a.target.kind.value.name : "";
    this.traceparent = a.traceparent;
    this.missedCount = a.missedCount;
    this.origin = a.origin;
  }

  get idempotencyKey(): string {
    return this.executionId;
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  heartbeat(progress = ""): void {
    if (progress) {
      this.progress = Array.from(progress).slice(0, PROGRESS_MAX_CHARS).join("");
    }
  }

  payloadText(): string {
    return new TextDecoder().decode(this.payload);
  }

  payloadJson<T = unknown>(): T {
    return JSON.parse(this.payloadText()) as T;
  }

  abort(reason: string): void {
    if (!this.controller.signal.aborted) {
      this.controller.abort(reason);
    }
  }
}

/**
 * A handler's return value as output bytes: a `Uint8Array` as is, a string
 * as UTF-8, `undefined`/`null` as empty, anything else as JSON (falling back
 * to `String(value)` when it cannot be serialised).
 */
export function encodeOutput(value: unknown): Uint8Array {
  if (value === undefined || value === null) {
    return new Uint8Array();
  }
  if (value instanceof Uint8Array) {
    return value;
  }
  if (typeof value === "string") {
    return new TextEncoder().encode(value);
  }
  let text: string | undefined;
  try {
    text = JSON.stringify(value, (_key, v: unknown) => (typeof v === "bigint" ? v.toString() : v));
  } catch {
    text = undefined;
  }
  return new TextEncoder().encode(text ?? String(value));
}

/** `text` cut to at most `limit` UTF-8 bytes, never inside a character. */
export function truncateUtf8(text: string, limit: number): string {
  const bytes = new TextEncoder().encode(text);
  if (bytes.length <= limit) {
    return text;
  }
  let end = limit;
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) {
    end -= 1; // a continuation byte: back to the start of its character
  }
  return new TextDecoder().decode(bytes.subarray(0, end));
}

/** How a thrown value reads in a result's error text. */
function describe(error: unknown): string {
  if (error instanceof Error) {
    return error.message ? `${error.name}: ${error.message}` : error.name;
  }
  return String(error);
}

type Settled = { ok: true; value: unknown } | { ok: false; error: unknown };
type Report = (attempt: Attempt, result: ExecutionResult) => void;

export interface AttemptOptions {
  handlers: ReadonlyMap<string, Handler>;
  clock: Clock;
  cancelGraceMs: number;
  onHandlerError?: (attempt: Attempt, error: unknown) => void;
}

/** One hand-out (`key`) held by the worker. */
export class Attempt {
  readonly key: Key;
  readonly assignment: Assignment;
  /** True once the outcome is known (reported, unless rejected). */
  decided = false;
  rejected = false;

  private readonly context: Context;
  private readonly stop = new AbortController();
  private readonly abandonment = new AbortController();
  private stopReason = "";
  private startedAt: Date | undefined;
  private cancelGraceMs: number;

  constructor(assignment: Assignment, private readonly options: AttemptOptions) {
    this.assignment = assignment;
    this.key = keyOf(assignment.executionId, assignment.delivery);
    this.context = new Context(assignment);
    this.cancelGraceMs = options.cancelGraceMs;
  }

  get executionId(): string {
    return this.assignment.executionId;
  }

  get delivery(): number {
    return this.assignment.delivery;
  }

  get progress(): string {
    return this.context.progress;
  }

  /** The context the handler sees. */
  get ctx(): JobContext {
    return this.context;
  }

  /** Stop the attempt and report CANCELED. No effect once decided. */
  cancel(reason: string): void {
    if (!this.decided && !this.stop.signal.aborted) {
      this.stopReason = reason || "canceled by the server";
      this.stop.abort();
    }
  }

  /** Stop the attempt without reporting: it is no longer this worker's. */
  reject(reason: string): void {
    if (!this.decided) {
      this.rejected = true;
      this.cancelGraceMs = 0;
      this.cancel(reason);
    }
  }

  /**
   * The worker stops: reject the attempt and stop waiting for its handler,
   * so {@link run} returns at once. A handler that ignores its signal may
   * still be running after that.
   */
  abandon(reason: string): void {
    this.reject(reason);
    this.context.abort(reason);
    this.abandonment.abort();
  }

  /** Runs to the end; `report` is called at most once, with the outcome. */
  async run(slots: Semaphore, report: Report): Promise<void> {
    const deadline = new AbortController();
    const deadlineTimer = this.deadlineTimer(deadline);
    const acquiring = new AbortController();
    const waits = [this.stop.signal, deadline.signal];
    const onStopOrDeadline = () => acquiring.abort();
    for (const s of waits) s.addEventListener("abort", onStopOrDeadline, { once: true });
    try {
      const acquired = await slots.acquire(acquiring.signal);
      for (const s of waits) s.removeEventListener("abort", onStopOrDeadline);
      if (!acquired || this.stop.signal.aborted || deadline.signal.aborted) {
        if (acquired) slots.release();
        if (this.stop.signal.aborted) {
          this.decide(report, ResultOutcome.CANCELED, `canceled before it started: ${this.stopReason}`);
        } else {
          this.decide(report, ResultOutcome.TIMED_OUT, "deadline passed before a slot was free");
        }
        return;
      }
      try {
        await this.runWithSlot(deadline.signal, report);
      } finally {
        slots.release();
      }
    } finally {
      for (const s of waits) s.removeEventListener("abort", onStopOrDeadline);
      deadlineTimer.cancel();
    }
  }

  private async runWithSlot(deadline: AbortSignal, report: Report): Promise<void> {
    this.startedAt = this.options.clock.now();
    const target = this.assignment.target?.kind;
    if (target?.case !== "handler") {
      this.decide(report, ResultOutcome.FAILED_PERMANENT,
        target?.case === "http" ? "this worker does not run HTTP targets" : "the assignment has no target");
      return;
    }
    const handler = this.options.handlers.get(target.value.name);
    if (handler === undefined) {
      const served = [...this.options.handlers.keys()].sort().join(", ") || "none";
      this.decide(report, ResultOutcome.FAILED_PERMANENT,
        `no handler named ${JSON.stringify(target.value.name)} in this worker (it serves: ${served})`);
      return;
    }
    let settled: Settled | undefined;
    const work: Promise<Settled> = Promise.resolve()
      .then(() => handler(this.context))
      .then((value): Settled => ({ ok: true, value }), (error: unknown): Settled => ({ ok: false, error }))
      .then((outcome) => (settled = outcome));
    const which = await Promise.race([
      work.then(() => "work" as const),
      onAbort(this.stop.signal, "stop" as const),
      onAbort(deadline, "deadline" as const),
    ]);
    if (which === "work" && settled !== undefined) {
      this.decideFrom(settled, report);
    } else if (which === "stop") {
      this.context.abort(`canceled: ${this.stopReason}`);
      if (this.cancelGraceMs > 0 && settled === undefined) {
        const grace = new AbortController();
        await Promise.race([work, this.options.clock.sleep(this.cancelGraceMs, grace.signal)]);
        grace.abort();
      }
      this.decide(report, ResultOutcome.CANCELED, `canceled: ${this.stopReason}`);
    } else {
      this.context.abort("deadline passed");
      const at = this.context.deadlineAt?.toISOString() ?? "?";
      this.decide(report, ResultOutcome.TIMED_OUT, `attempt still running at its deadline ${at}`);
    }
    if (settled === undefined) {
      // The slot stays taken until the handler has really stopped, unless the worker is stopping.
      await Promise.race([work, onAbort(this.abandonment.signal, "abandoned" as const)]);
    }
  }

  private decideFrom(settled: Settled, report: Report): void {
    if (settled.ok) {
      this.decide(report, ResultOutcome.SUCCEEDED, "", encodeOutput(settled.value));
    } else if (isPermanent(settled.error)) {
      const error = settled.error as Error;
      this.decide(report, ResultOutcome.FAILED_PERMANENT, error.message || error.name);
    } else {
      this.options.onHandlerError?.(this, settled.error);
      this.decide(report, ResultOutcome.FAILED_RETRYABLE, describe(settled.error));
    }
  }

  private decide(report: Report, outcome: ResultOutcome, error = "", output: Uint8Array = new Uint8Array()): void {
    if (this.decided) {
      return;
    }
    this.decided = true;
    if (this.rejected) {
      return;
    }
    const a = this.assignment;
    const result = create(ExecutionResultSchema, {
      executionId: a.executionId,
      delivery: a.delivery,
      attempt: a.attempt,
      outcome,
      error: truncateUtf8(error, ERROR_MAX_BYTES),
      output: output.subarray(0, OUTPUT_MAX_BYTES),
      finishedAt: timestampFromDate(this.options.clock.now()),
      ...(this.startedAt !== undefined ? { startedAt: timestampFromDate(this.startedAt) } : {}),
    });
    report(this, result);
  }

  private deadlineTimer(deadline: AbortController): { cancel(): void } {
    const deadlineAt = this.context.deadlineAt;
    if (deadlineAt === undefined) {
      return { cancel: () => undefined };
    }
    const stopWaiting = new AbortController();
    const left = Math.max(1, deadlineAt.getTime() - this.options.clock.now().getTime());
    void this.options.clock.sleep(left, stopWaiting.signal).then(() => {
      if (!stopWaiting.signal.aborted) deadline.abort();
    });
    return { cancel: () => stopWaiting.abort() };
  }
}

/** Resolves with `value` when `signal` aborts (at once if it has). */
function onAbort<T>(signal: AbortSignal, value: T): Promise<T> {
  return new Promise((resolve) => {
    if (signal.aborted) {
      resolve(value);
    } else {
      signal.addEventListener("abort", () => resolve(value), { once: true });
    }
  });
}

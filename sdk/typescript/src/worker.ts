/**
 * The worker: holds one `WorkerService.Pull` stream at a time and keeps it
 * up, running the named handlers this Node process registered. The same
 * protocol as the Python worker runtime (`tickwheel_worker.runtime`).
 *
 * Per stream (a *session*) the worker sends `hello` (with the executions it
 * still runs or holds an unacked result for, on a reconnect: a server counts
 * a result only from the stream that holds its delivery, so the new stream
 * must re-attach those too), waits for `welcome`, then:
 *
 * - **credit**: `hello.slots` is the stream's initial credit. The worker
 *   tracks the credit the server still holds and grants more only while
 *   `held + outstanding < slots`, where `held` counts every assignment it has
 *   not finished with (waiting for a slot, running, or decided but with a
 *   handler that has not yet settled). After a reconnect the executions
 *   still running are held while the server's credit restarts at `slots`;
 *   the worker never runs more than `slots` handlers at once (a semaphore),
 *   lets the surplus wait for a slot, and grants nothing until
 *   `held + outstanding` is back under `slots`. Anything beyond `2 * slots`
 *   held (a server ignoring credit) is answered FAILED_RETRYABLE at once;
 *   more than {@link MAX_REFUSED} such answers unacknowledged end the stream
 *   as a protocol error and are forgotten (the server hands those
 *   executions out again; the results of real attempts are kept and sent on
 *   the next stream).
 * - **heartbeats**: every `welcome.heartbeatInterval`, listing every
 *   execution not yet decided, with its progress. An interval outside the
 *   bounds a server's configuration takes (50 ms to 300 s) is clamped into
 *   them, with a WARNING.
 * - **results**: sent when each attempt's outcome is known, batched, and kept
 *   until acked; after a reconnect every unacked result is sent again (the
 *   server's result handling is idempotent). An ack forgets the execution.
 * - **cancel**: the attempt is stopped and reported CANCELED;
 *   **welcome.rejected**: stopped and not reported (it is someone else's now).
 * - **drain**: no more credit; when every attempt is decided and every
 *   result acked, or at the drain deadline, the worker closes the stream and
 *   reconnects (attempts still running then are re-reported in the next
 *   hello).
 * - **server liveness**: any message from the server counts; after
 *   `serverSilenceIntervals` heartbeat intervals of silence the server is
 *   presumed dead and the worker reconnects.
 *
 * Each reconnect tries the next of the configured addresses (one, or a list
 * of servers). Reconnects wait {@link reconnectDelayMs} (full jitter,
 * doubling per stream that got no welcome or ended within a heartbeat
 * interval of it, capped). A server that refuses the worker
 * (UNAUTHENTICATED, PERMISSION_DENIED, INVALID_ARGUMENT, UNIMPLEMENTED) ends
 * {@link Worker.run} with {@link WorkerFatalError}, logged as an ERROR.
 *
 * **Logs** are the Python worker's ("./outages.js"): an outage of the
 * stream is one WARNING when it begins, `still failing` lines after 1, 3,
 * 7, 15 minutes and then every 15, DEBUG for each failed reconnect
 * between, one INFO once a stream lasted a heartbeat interval; what a
 * server can make the worker say at will (a second welcome, duplicate or
 * surplus assignments, rejected results, drains, an interval out of
 * bounds) is one line of each kind a minute, the rest DEBUG. A server's
 * texts are cut to one printable line of 300 characters, the credential
 * masked ({@link clean}). A cancel or a welcome's `rejected` list costs one
 * pass over the attempts at most.
 *
 * Nothing is queued without bound: outgoing messages are computed from state
 * (results pending, credit owed, heartbeat due) by one writer, which the
 * HTTP/2 stream pulls from only as fast as it can send, and state is bounded
 * by the executions held (at most `2 * slots` attempts, their unacknowledged
 * results, together at most {@link MAX_IN_FLIGHT}) plus at most
 * {@link MAX_REFUSED} refusals. What each holds is
 * bounded too: an assignment with a field out of the bounds of
 * "./bounds.js" (an id, a handler name, a payload, an HTTP target) ends the
 * stream as a protocol error before anything of its message is taken; a
 * message over {@link MAX_RECEIVE_BYTES} fails the stream; a cancel's
 * reason is cut to 1024 characters; timestamps are read clamped into
 * protobuf's range, and a drain deadline out of it is a protocol error.
 *
 * ```ts
 * const worker = new Worker({ address: "127.0.0.1:50051", credential: process.env.TICKWHEEL_WORKER_CREDENTIAL! });
 * worker.handler("reports.nightly", async (ctx) => {
 *   ctx.heartbeat("rendering");
 *   return await render(ctx.payloadJson(), { signal: ctx.signal });
 * });
 * process.once("SIGTERM", () => void worker.stop(30_000));
 * await worker.run();
 * ```
 */

import { randomBytes } from "node:crypto";
import { hostname } from "node:os";

import { create } from "@bufbuild/protobuf";
import { durationMs, timestampDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient } from "@connectrpc/connect";

import { Attempt, HANDLER_NAME, keyOf, type Handler, type Key } from "./attempt.js";
import { reconnectDelayMs } from "./backoff.js";
import {
  assignmentBreach,
  CANCEL_REASON_CHARS,
  clampHeartbeatIntervalMs,
  clean,
  firstChars,
  validTimestamp,
} from "./bounds.js";
import { systemClock, type Clock } from "./clock.js";
import { TickwheelError } from "./errors.js";
import {
  ExecutionResultSchema,
  PullRequestSchema,
  ResultOutcome,
  WorkerService,
  type Assignment,
  type ExecutionResult,
  type InFlightExecution,
  type PullRequest,
  type PullResponse,
  type ResultAck,
  type ServerWelcome,
} from "./gen/tickwheel/v1/worker_pb.js";
import type { TlsOptions } from "./options.js";
import { Limited, OutageLog, STILL_EVERY_MS } from "./outages.js";
import { Broadcast, Semaphore, Wakeup, whenAborted } from "./sync.js";
import { checkCredential, connect } from "./transport.js";
import { VERSION } from "./version.js";

export { PermanentError, type Handler, type JobContext } from "./attempt.js";

const FATAL_CODES: ReadonlySet<Code> = new Set([
  Code.Unauthenticated,
  Code.PermissionDenied,
  Code.InvalidArgument,
  Code.Unimplemented,
]);
const REMEDY: ReadonlyMap<Code, string> = new Map([
  [Code.Unauthenticated, "the credential is unknown or was revoked: issue a new one"],
  [Code.PermissionDenied, "the credential does not allow this"],
  [Code.Unimplemented, "is the address a Tickwheel server?"],
]);
const RESULTS_PER_MESSAGE = 100;
/**
 * The most refusals of assignments beyond the credit held unacknowledged;
 * one more ends the stream as a protocol error (a server that ignores the
 * credit and never acks would grow them without end). As the Python worker's.
 */
export const MAX_REFUSED = 1000;
/**
 * The largest message the worker reads, as the Python worker's: an
 * assignment batch can carry 100 payloads of 64 KiB and more. A larger one
 * fails the stream (RESOURCE_EXHAUSTED, an outage: the worker reconnects).
 */
export const MAX_RECEIVE_BYTES = 64 * 1024 * 1024;
/** protobuf's Duration range, either way (10 000 years). */
const DURATION_SECONDS = 315_576_000_000n;
/** Milliseconds a clean close waits for the last write and for the server to end the stream. */
const CLOSE_TIMEOUT_MS = 1000;
const WORKER_ID = /^[A-Za-z0-9_.:-]{1,128}$/;
const MAX_SLOTS = 10_000;
/**
 * The most `hello.inFlight` entries a server takes. No credit is granted past
 * what a hello lists (attempts and unacknowledged results), and an assignment
 * arriving past it is refused: a server that never acks cannot grow results.
 */
export const MAX_IN_FLIGHT = 20_000;

/** Where the worker reports what happens to it. */
export interface Logger {
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string, error?: unknown): void;
}

/** Warnings and errors to stderr; info and debug dropped. */
export const stderrLogger: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: (message) => console.error(`tickwheel worker: ${message}`),
  error: (message, error) => console.error(`tickwheel worker: ${message}`, ...(error === undefined ? [] : [error])),
};

/** How a worker connects and what it runs. The constructor throws on bad values. */
export interface WorkerOptions {
  /**
   * Required. The server's `host:port` (or an `http(s)://` URL), or several:
   * each reconnect tries the next one in turn, so a worker whose server died
   * re-attaches its executions on another.
   */
  address: string | readonly string[];
  /** Required. The worker credential, sent as `authorization: Bearer <credential>`. */
  credential: string;
  /** Stable for this process across reconnects; 1-128 of `[A-Za-z0-9_.:-]`. Default `<host>-<pid>-<6 hex>`. */
  workerId?: string;
  /** Handlers run at once (1 to 10 000); also the initial credit of every stream. Default 4. */
  slots?: number;
  /** TLS options; unset connects in plaintext. */
  tls?: TlsOptions;
  /** The first reconnect waits uniform in [0, this] ms. Default 200. */
  reconnectInitialBackoffMs?: number;
  /** The reconnect backoff (doubling per failed attempt, full jitter) never exceeds this. Default 15 000 ms. */
  reconnectMaxBackoffMs?: number;
  /** Between heartbeats when the welcome does not say. Default 5000 ms. */
  defaultHeartbeatIntervalMs?: number;
  /** The server is presumed dead after this many heartbeat intervals without a message from it. Default 3. */
  serverSilenceIntervals?: number;
  /** How long to wait for the welcome after hello, connecting included. Default 10 000 ms. */
  welcomeTimeoutMs?: number;
  /** How long a canceled handler has to settle on its own before CANCELED is reported. Default 2000 ms. */
  cancelGraceMs?: number;
  /** Default {@link stderrLogger}. */
  logger?: Logger;
  /** Default the system clock (tests substitute their own). */
  clock?: Clock;
  /** Uniform in [0, 1): reconnect jitter (tests). */
  random?: () => number;
}

/** The server refused this worker; retrying with the same configuration cannot help. */
export class WorkerFatalError extends Error {
  override name = "WorkerFatalError";
  constructor(message: string, readonly code: Code, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** The stream ended or the server went silent: reconnect. */
class SessionLost extends Error {
  override name = "SessionLost";
}

/** `<hostname>-<pid>-<6 random hex>`: unique per process, readable in logs. */
export function defaultWorkerId(): string {
  const host = hostname().replace(/[^A-Za-z0-9_.:-]/g, "-") || "worker";
  const suffix = `-${process.pid}-${randomBytes(3).toString("hex")}`;
  return host.slice(0, 128 - suffix.length) + suffix;
}

/** The state of one Pull stream. */
class Session {
  /** Ends the call and every loop of this session. */
  readonly controller = new AbortController();
  readonly wake = new Wakeup();
  /** Results (keys into the worker's unacked results) not yet written to this stream, in order. */
  readonly unsent = new Set<Key>();
  intervalMs: number;
  lastSeen: number;
  /** Credit the server holds for this worker on this stream. */
  outstanding: number;
  heartbeatDue = false;
  draining = false;
  drainDeadline: Date | undefined;
  /** Set on a clean end: the writer flushes, half-closes and stops. */
  closing = false;
  serverId = "";
  /** Resolves true once the welcome is applied, false when the session ends first. */
  readonly welcomed: Promise<boolean>;
  /** Resolves when the writer has half-closed (or stopped). */
  readonly writerDone: Promise<void>;
  private markWelcomed!: (welcomed: boolean) => void;
  private markWriterDone!: () => void;

  constructor(intervalMs: number, lastSeen: number, credit: number) {
    this.intervalMs = intervalMs;
    this.lastSeen = lastSeen;
    this.outstanding = credit;
    this.welcomed = new Promise((resolve) => (this.markWelcomed = resolve));
    this.writerDone = new Promise((resolve) => (this.markWriterDone = resolve));
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  welcome(): void {
    this.markWelcomed(true);
  }

  writerStopped(): void {
    this.markWriterDone();
  }

  end(): void {
    this.markWelcomed(false);
    this.controller.abort();
    this.wake.wake();
  }
}

/**
 * A worker process's connection to Tickwheel and the executions it runs.
 * Register handlers with {@link handler}, then `await run()`;
 * `await stop(graceMs)` from elsewhere ends it. A Worker runs once.
 */
export class Worker {
  readonly workerId: string;
  readonly slots: number;
  /** How many streams were welcomed so far. */
  sessions = 0;

  private readonly addresses: readonly string[];
  /** Index into `addresses` of the server the current (or next) stream uses. */
  private addressIndex = 0;
  private readonly credential: string;
  private readonly tls: TlsOptions | undefined;
  private readonly reconnectInitialBackoffMs: number;
  private readonly reconnectMaxBackoffMs: number;
  private readonly defaultHeartbeatIntervalMs: number;
  private readonly serverSilenceIntervals: number;
  private readonly welcomeTimeoutMs: number;
  private readonly cancelGraceMs: number;
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly random: () => number;

  private readonly handlers = new Map<string, Handler>();
  private readonly attempts = new Map<Key, Attempt>();
  private readonly running = new Map<Key, Promise<void>>();
  private readonly unackedResults = new Map<Key, ExecutionResult>();
  /** The keys in `unackedResults` of refusals of assignments beyond the credit (at most {@link MAX_REFUSED}). */
  private readonly refused = new Set<Key>();
  private readonly slotSemaphore: Semaphore;
  private readonly maxHeld: number;
  private readonly shutdown = new AbortController();
  /** Notified on every change of state that someone may wait for. */
  private readonly change = new Broadcast();
  private session: Session | undefined;
  private welcomedThisRound = false;
  /** When the current stream counts as having worked (its welcome plus a heartbeat interval). */
  private healthyAt: number | undefined;
  /** Failed streams and reconnects: a line an outage, not one a try. */
  private readonly outages: OutageLog;
  /** What a server's messages make the worker log, one line a kind a minute. */
  private readonly limited: Limited;
  /** When the last "connected" line was INFO. */
  private saidConnectedAt: number | undefined;
  private started = false;
  private stopping = false;
  private finished = false;
  private readonly done: Promise<void>;
  private markDone!: () => void;

  constructor(options: WorkerOptions) {
    const credential = checkCredential("credential", options.credential);
    if (credential === undefined) {
      throw new TypeError("credential is required (a worker credential)");
    }
    const addresses = typeof options.address === "string" ? [options.address] : [...(options.address ?? [])];
    if (addresses.length === 0 || addresses.some((address) => typeof address !== "string" || address === "")) {
      throw new TypeError("address is required (host:port of a Tickwheel server, or a non-empty list of them)");
    }
    this.addresses = addresses;
    this.credential = credential;
    this.tls = options.tls;
    this.workerId = options.workerId ?? defaultWorkerId();
    if (!WORKER_ID.test(this.workerId)) {
      throw new TypeError("workerId must be 1 to 128 characters of [A-Za-z0-9_.:-]");
    }
    this.slots = options.slots ?? 4;
    if (!Number.isInteger(this.slots) || this.slots < 1 || this.slots > MAX_SLOTS) {
      throw new RangeError(`slots must be an integer between 1 and ${MAX_SLOTS}, not ${this.slots}`);
    }
    this.reconnectInitialBackoffMs = positive("reconnectInitialBackoffMs", options.reconnectInitialBackoffMs ?? 200);
    this.reconnectMaxBackoffMs = options.reconnectMaxBackoffMs ?? 15_000;
    if (!(this.reconnectMaxBackoffMs >= this.reconnectInitialBackoffMs)) {
      throw new RangeError("reconnectMaxBackoffMs must be >= reconnectInitialBackoffMs");
    }
    this.defaultHeartbeatIntervalMs = positive("defaultHeartbeatIntervalMs", options.defaultHeartbeatIntervalMs ?? 5000);
    this.serverSilenceIntervals = options.serverSilenceIntervals ?? 3;
    if (!(this.serverSilenceIntervals >= 1)) {
      throw new RangeError("serverSilenceIntervals must be >= 1");
    }
    this.welcomeTimeoutMs = positive("welcomeTimeoutMs", options.welcomeTimeoutMs ?? 10_000);
    this.cancelGraceMs = options.cancelGraceMs ?? 2000;
    if (!(this.cancelGraceMs >= 0)) {
      throw new RangeError("cancelGraceMs must be >= 0");
    }
    this.log = options.logger ?? stderrLogger;
    this.clock = options.clock ?? systemClock;
    this.random = options.random ?? Math.random;
    this.slotSemaphore = new Semaphore(this.slots);
    this.maxHeld = 2 * this.slots;
    this.outages = new OutageLog(this.log, `stream to ${addresses.join(",")}`, this.clock);
    this.limited = new Limited(this.log, this.clock);
    this.done = new Promise((resolve) => (this.markDone = resolve));
  }

  // --- public surface -------------------------------------------------------------

  /**
   * Registers `handle` under `name` (1 to 200 of `[A-Za-z0-9_.:-]`); its
   * name goes in every hello. Registering a name twice throws, so two
   * modules cannot silently shadow each other. Returns the worker, for
   * chaining. Handlers must be registered before {@link run}.
   */
  handler(name: string, handle: Handler): this {
    if (!HANDLER_NAME.test(name)) {
      throw new TypeError(`handler name ${JSON.stringify(name)} must be 1 to 200 characters of [A-Za-z0-9_.:-]`);
    }
    if (typeof handle !== "function") {
      throw new TypeError(`handler ${JSON.stringify(name)} must be a function`);
    }
    if (this.handlers.has(name)) {
      throw new TypeError(`handler ${JSON.stringify(name)} is already registered`);
    }
    if (this.started) {
      throw new Error("register handlers before run(): the server learns them from the hello");
    }
    this.handlers.set(name, handle);
    return this;
  }

  /** True while a stream is open and welcomed. */
  get connected(): boolean {
    return this.session !== undefined;
  }

  /** The id of the server the current stream is welcomed by, or empty. */
  get serverId(): string {
    return this.session?.serverId ?? "";
  }

  /** True while the current stream's server is draining (no new work is taken). */
  get draining(): boolean {
    return this.session?.draining ?? false;
  }

  /** Every attempt not yet decided. */
  inFlight(): InFlight[] {
    return [...this.attempts.values()]
      .filter((a) => !a.decided)
      .map((a) => ({ executionId: a.executionId, delivery: a.delivery }));
  }

  /** Results reported but not yet acknowledged by a server. */
  unacked(): InFlight[] {
    return [...this.unackedResults.values()].map((r) => ({ executionId: r.executionId, delivery: r.delivery }));
  }

  /**
   * Resolves once a stream is welcomed (at once if one is). Rejects when
   * `timeoutMs` passes first, or when the worker has finished.
   */
  async whenConnected(timeoutMs?: number): Promise<void> {
    const deadline = timeoutMs === undefined ? undefined : this.clock.monotonicMs() + timeoutMs;
    while (!this.connected) {
      if (this.finished) {
        throw new Error("the worker has stopped");
      }
      const left = deadline === undefined ? undefined : deadline - this.clock.monotonicMs();
      if (left !== undefined && left <= 0) {
        throw new Error(`the worker did not connect to ${this.address} within ${timeoutMs} ms`);
      }
      await this.waitForChange(left);
    }
  }

  /**
   * Connects, serves, reconnects, until {@link stop}.
   *
   * Rejects with {@link WorkerFatalError} when the server refuses the worker,
   * and with a TypeError when no handler is registered. On return every
   * attempt has been told to stop (handlers that ignore their signal may
   * still be running).
   */
  async run(): Promise<void> {
    if (this.started) {
      throw new Error("a Worker runs once");
    }
    if (this.handlers.size === 0) {
      throw new TypeError("the worker has no handler: nothing to run");
    }
    this.started = true;
    let failures = 0;
    try {
      while (!this.shutdown.signal.aborted) {
        this.welcomedThisRound = false;
        this.healthyAt = undefined;
        try {
          await this.runSession();
          if (this.welcomedThisRound && !this.streamWorked() && !this.shutdown.signal.aborted) {
            throw new SessionLost("the server ended the stream within a heartbeat interval of its welcome");
          }
          if (this.welcomedThisRound && !this.shutdown.signal.aborted) {
            this.limited.say("closed", "info", `stream to ${this.address} closed; reconnecting`);
          }
        } catch (error) {
          this.classify(error);
        }
        // A stream that lasted a heartbeat interval worked: the next connect is quick
        // again. One ended sooner (a welcome, then at once a close, a drain or an error,
        // in a loop) backs off as a refused connect does, and its outage goes on.
        failures = this.streamWorked() ? 0 : failures + 1;
        if (this.shutdown.signal.aborted) {
          break;
        }
        this.addressIndex = (this.addressIndex + 1) % this.addresses.length;
        const delay = reconnectDelayMs(failures, {
          initialMs: this.reconnectInitialBackoffMs,
          capMs: this.reconnectMaxBackoffMs,
          random: this.random,
        });
        await this.clock.sleep(delay, this.shutdown.signal);
      }
    } finally {
      this.shutdown.abort();
      await this.abandonAll();
      this.finished = true;
      this.change.notify();
      this.markDone();
    }
  }

  /**
   * Stops taking work, lets in-flight attempts finish, then ends {@link run}.
   *
   * Waits up to `graceMs` until every attempt is decided and every result
   * acknowledged (reconnecting meanwhile if the stream drops), then closes
   * the stream and stops what still runs without reporting it: the server
   * re-delivers those, and any result left unacknowledged, to another
   * worker. Resolves when {@link run} has returned.
   */
  async stop(graceMs = 30_000): Promise<void> {
    this.stopping = true;
    this.session?.wake.wake();
    if (!this.started) {
      this.shutdown.abort();
      return;
    }
    const deadline = this.clock.monotonicMs() + graceMs;
    while (!this.finished) {
      const left = deadline - this.clock.monotonicMs();
      if (this.quiet() || left <= 0) {
        break;
      }
      await this.waitForChange(left);
    }
    this.shutdown.abort();
    this.change.notify();
    this.session?.wake.wake();
    await this.done;
  }

  // --- one stream -------------------------------------------------------------------

  /** The server the current (or next) stream connects to. */
  private get address(): string {
    return this.addresses[this.addressIndex] ?? "";
  }

  /** The last stream was welcomed and lasted a heartbeat interval. */
  private streamWorked(): boolean {
    return this.healthyAt !== undefined && this.clock.monotonicMs() >= this.healthyAt;
  }

  /** What failed, in a log line: the stream a server welcomed, or a connect (and to which server, of several). */
  private stage(): string {
    const stage = this.welcomedThisRound ? "the stream" : "connecting";
    return this.addresses.length > 1 ? `${stage} (${this.address})` : stage;
  }

  /**
   * A stream's end: an outage of the server's (one line an outage, see
   * {@link OutageLog}), a refusal (WorkerFatalError), or a defect of the
   * worker's own (an ERROR each time; the worker keeps serving).
   */
  private classify(error: unknown): void {
    if (error instanceof SessionLost) {
      this.outages.failed(this.stage(), clean(error.message, this.credential));
      return;
    }
    if (error instanceof ConnectError) {
      const status = TickwheelError.from(error);
      const said = clean(status.message, this.credential);
      if (FATAL_CODES.has(status.code)) {
        this.log.error(
          `${this.address} refused the worker ${this.workerId}: ${said}; stopping ` +
            `(${REMEDY.get(status.code) ?? "check its configuration"})`,
        );
        throw new WorkerFatalError(`${this.address} refused the worker: ${said}`, status.code, { cause: error });
      }
      this.outages.failed(this.stage(), said);
      return;
    }
    // A runtime bug must not kill the worker: keep serving.
    this.log.error(`stream to ${this.address} failed`, error);
  }

  private async runSession(): Promise<void> {
    // A new connection per stream, so a reconnect resolves the address again.
    const connection = connect(this.address, this.tls, [], {
      connectTimeoutMs: this.welcomeTimeoutMs,
      readMaxBytes: MAX_RECEIVE_BYTES,
    });
    const session = new Session(this.defaultHeartbeatIntervalMs, this.clock.monotonicMs(), this.slots);
    try {
      const client = createClient(WorkerService, connection.transport);
      const responses = client.pull(this.requests(session), {
        signal: session.signal,
        headers: { authorization: `Bearer ${this.credential}`, "x-tickwheel-sdk": `typescript/${VERSION}` },
      });
      const iterator = responses[Symbol.asyncIterator]();
      const welcome = await this.handshake(iterator);
      if (welcome === undefined) {
        return; // the worker is stopping
      }
      session.intervalMs = this.heartbeatIntervalMs(welcome);
      session.lastSeen = this.clock.monotonicMs();
      session.serverId = clean(welcome.serverId, this.credential);
      for (const attempt of this.matching(welcome.rejected)) {
        attempt.reject("the server gave this execution to another worker");
      }
      for (const key of this.unackedResults.keys()) {
        session.unsent.add(key);
      }
      this.session = session;
      this.welcomedThisRound = true;
      this.healthyAt = session.lastSeen + session.intervalMs;
      this.sessions += 1;
      session.welcome();
      session.wake.wake();
      this.change.notify();
      // Through an outage (streams welcomed, then ended at once, in a loop) this line too
      // is one a minute; the outage's end is logged once a stream lasted (see tick).
      const now = this.clock.monotonicMs();
      const quiet = this.outages.down && this.saidConnectedAt !== undefined && now - this.saidConnectedAt < STILL_EVERY_MS;
      if (!quiet) this.saidConnectedAt = now;
      this.log[quiet ? "debug" : "info"](
        `worker ${this.workerId} connected to server ${session.serverId} ` +
          `(${welcome.reattached.length} in flight, ${session.unsent.size} results to resend)`,
      );
      await this.serve(session, iterator);
    } finally {
      if (this.session === session) {
        this.session = undefined;
      }
      session.end();
      connection.close();
      this.change.notify();
    }
  }

  /** Reads the welcome within `welcomeTimeoutMs`; undefined when the worker starts stopping meanwhile. */
  private async handshake(iterator: AsyncIterator<PullResponse>): Promise<ServerWelcome | undefined> {
    const timer = new AbortController();
    const shutdown = whenAborted(this.shutdown.signal);
    const first = iterator.next();
    try {
      const which = await Promise.race([
        first.then((result) => ({ kind: "message" as const, result })),
        this.clock.sleep(this.welcomeTimeoutMs, timer.signal).then(() => ({ kind: "timeout" as const })),
        shutdown.promise.then(() => ({ kind: "shutdown" as const })),
      ]);
      if (which.kind === "shutdown") {
        first.catch(() => undefined); // the call is canceled next
        return undefined;
      }
      if (which.kind === "timeout") {
        first.catch(() => undefined);
        throw new SessionLost(`no welcome within ${this.welcomeTimeoutMs} ms`);
      }
      const { result } = which;
      if (result.done) {
        throw new SessionLost("the server closed the stream before its welcome");
      }
      const message = result.value.message;
      if (message.case !== "welcome") {
        throw new SessionLost(`protocol error: expected welcome, got ${message.case ?? "nothing"}`);
      }
      return message.value;
    } finally {
      timer.abort();
      shutdown.dispose();
    }
  }

  /**
   * The welcome's heartbeat interval, clamped into the bounds a server's
   * configuration takes ({@link clampHeartbeatIntervalMs}) with a WARNING;
   * the default when it has none.
   */
  private heartbeatIntervalMs(welcome: ServerWelcome): number {
    const duration = welcome.heartbeatInterval;
    if (duration === undefined) return this.defaultHeartbeatIntervalMs;
    if (duration.seconds < -DURATION_SECONDS || duration.seconds > DURATION_SECONDS ||
        duration.nanos <= -1_000_000_000 || duration.nanos >= 1_000_000_000) {
      throw new SessionLost("protocol error: the welcome's heartbeat_interval is out of range");
    }
    const interval = durationMs(duration);
    if (!(interval > 0)) return this.defaultHeartbeatIntervalMs;
    const clamped = clampHeartbeatIntervalMs(interval);
    if (clamped !== interval) {
      this.limited.say(
        "heartbeat interval",
        "warn",
        `server ${clean(welcome.serverId, this.credential)} announced a heartbeat interval of ${interval / 1000}s; ` +
          `using ${clamped / 1000}s`,
      );
    }
    return clamped;
  }

  /**
   * Runs the stream's loops until one fails (thrown) or the session ends
   * cleanly. A clean end (drain complete, or the worker stops) half-closes
   * the stream after the last pending write and gives the server up to
   * {@link CLOSE_TIMEOUT_MS} to end its side, so it sees a finished stream
   * rather than a canceled one.
   */
  private async serve(session: Session, iterator: AsyncIterator<PullResponse>): Promise<void> {
    const reader = this.readLoop(session, iterator);
    const watcher = this.watchServer(session);
    const ticker = this.tick(session);
    const until = this.untilSessionEnds(session);
    for (const loop of [reader, watcher, ticker, until]) {
      loop.catch(() => undefined); // each is awaited below or ended with the session
    }
    await Promise.race([reader, watcher, until]);
    session.closing = true;
    session.wake.wake();
    const timer = new AbortController();
    try {
      const closeTimeout = this.clock.sleep(CLOSE_TIMEOUT_MS, timer.signal).then(() => "timeout" as const);
      const first = await Promise.race([session.writerDone.then(() => "written" as const), closeTimeout]);
      if (first === "written") {
        await Promise.race([reader.catch(() => undefined), closeTimeout]);
      }
    } finally {
      timer.abort();
    }
  }

  /** Every message the worker writes on one stream, computed from state when the stream can take it. */
  private async *requests(session: Session): AsyncGenerator<PullRequest> {
    try {
      yield create(PullRequestSchema, { message: { case: "hello", value: this.hello() } });
      if (!(await session.welcomed)) {
        return;
      }
      const signal = session.signal;
      for (;;) {
        await session.wake.wait(signal);
        if (signal.aborted) {
          return;
        }
        while (session.unsent.size > 0) {
          const batch: ExecutionResult[] = [];
          for (const key of session.unsent) {
            if (batch.length >= RESULTS_PER_MESSAGE) break;
            session.unsent.delete(key);
            const result = this.unackedResults.get(key);
            if (result !== undefined) batch.push(result);
          }
          if (batch.length > 0) {
            yield create(PullRequestSchema, { message: { case: "result", value: { results: batch } } });
          }
          if (signal.aborted) return;
        }
        const credit = this.grantable(session);
        if (credit > 0) {
          session.outstanding += credit;
          yield create(PullRequestSchema, { message: { case: "credit", value: { credits: credit } } });
        }
        if (session.closing || signal.aborted) {
          return; // half-close
        }
        if (session.heartbeatDue) {
          session.heartbeatDue = false;
          yield create(PullRequestSchema, { message: { case: "heartbeat", value: { executions: this.progress() } } });
        }
      }
    } finally {
      session.writerStopped();
    }
  }

  private async readLoop(session: Session, iterator: AsyncIterator<PullResponse>): Promise<void> {
    for (;;) {
      const next = await iterator.next();
      if (next.done) {
        if (session.closing) return;
        throw new SessionLost("the server closed the stream");
      }
      session.lastSeen = this.clock.monotonicMs();
      const message = next.value.message;
      switch (message.case) {
        case "assignment": {
          const assignments = message.value.assignments;
          for (const assignment of assignments) {
            // Nothing of a message is taken unless all of it is in bounds.
            const breach = assignmentBreach(assignment);
            if (breach !== undefined) throw new SessionLost(`protocol error: ${breach}`);
          }
          for (const assignment of assignments) {
            this.accept(session, assignment);
          }
          break;
        }
        case "cancel": {
          const reason = firstChars(message.value.reason, CANCEL_REASON_CHARS);
          for (const attempt of this.matching(message.value.executions)) {
            attempt.cancel(reason);
          }
          break;
        }
        case "ack":
          this.applyAcks(session, message.value.acks);
          break;
        case "drain": {
          const deadline = message.value.deadlineAt;
          if (deadline !== undefined) {
            if (!validTimestamp(deadline)) {
              throw new SessionLost("protocol error: the drain's deadline_at is out of range");
            }
            session.drainDeadline = timestampDate(deadline);
          }
          session.draining = true;
          this.limited.say("drains", "info", `server ${session.serverId} drains: ${clean(message.value.reason, this.credential)}`);
          this.change.notify();
          break;
        }
        case "welcome":
          this.limited.say("welcome", "warn", `ignoring a second welcome from server ${session.serverId}`);
          break;
        default:
          break; // server heartbeat: seeing it was the point
      }
      session.wake.wake();
    }
  }

  private async tick(session: Session): Promise<void> {
    const signal = session.signal;
    while (!signal.aborted) {
      await this.clock.sleep(session.intervalMs, signal);
      if (signal.aborted) return;
      this.outages.ok(); // the stream lasted a heartbeat interval: an outage is over
      session.heartbeatDue = true;
      session.wake.wake();
    }
  }

  private async watchServer(session: Session): Promise<void> {
    const signal = session.signal;
    const limit = session.intervalMs * this.serverSilenceIntervals;
    while (!signal.aborted) {
      const left = session.lastSeen + limit - this.clock.monotonicMs();
      if (left <= 0) {
        throw new SessionLost(`no message from the server for ${limit} ms: presumed dead`);
      }
      await this.clock.sleep(left, signal);
    }
  }

  /** Resolves when the worker shuts down, when a drain is complete, or when the session ends. */
  private async untilSessionEnds(session: Session): Promise<void> {
    while (!this.shutdown.signal.aborted && !session.signal.aborted) {
      let left: number | undefined;
      if (session.draining) {
        if (this.quiet()) {
          this.limited.say("drained", "info", "drained: every attempt decided and acknowledged");
          return;
        }
        if (session.drainDeadline !== undefined) {
          left = session.drainDeadline.getTime() - this.clock.now().getTime();
          if (left <= 0) {
            this.limited.say("drained", "info", `drain deadline passed with ${this.inFlight().length} in flight`);
            return;
          }
        }
      }
      await this.waitForChange(left);
    }
  }

  // --- state ----------------------------------------------------------------------

  private hello() {
    return {
      workerId: this.workerId,
      version: VERSION,
      handlers: [...this.handlers.keys()].sort(),
      http: false,
      slots: this.slots,
      inFlight: this.helloInFlight(),
    };
  }

  /** Every attempt not yet decided, then every result not yet acked: the new stream re-attaches them all. */
  private helloInFlight(): InFlight[] {
    const held = new Map<Key, InFlight>();
    for (const entry of [...this.inFlight(), ...this.unacked()]) {
      held.set(keyOf(entry.executionId, entry.delivery), entry);
    }
    return [...held.values()].slice(0, MAX_IN_FLIGHT);
  }

  private progress() {
    return [...this.attempts.values()]
      .filter((a) => !a.decided)
      .map((a) => ({ executionId: a.executionId, delivery: a.delivery, progress: a.progress }));
  }

  private grantable(session: Session): number {
    if (this.stopping || session.draining || session.closing || this.shutdown.signal.aborted) {
      return 0;
    }
    const held = this.attempts.size;
    // Never so much that a hello could not list everything held.
    return Math.max(0, Math.min(this.slots - held, MAX_IN_FLIGHT - held - this.unackedResults.size) - session.outstanding);
  }

  /** Nothing left to report: every attempt decided and every result acknowledged. */
  private quiet(): boolean {
    if (this.unackedResults.size > 0) return false;
    for (const attempt of this.attempts.values()) {
      if (!attempt.decided) return false;
    }
    return true;
  }

  /** Resolves on the next change of state, or after `timeoutMs`. */
  private async waitForChange(timeoutMs: number | undefined): Promise<void> {
    const changed = this.change.changed();
    if (timeoutMs === undefined) {
      await changed;
      return;
    }
    const timer = new AbortController();
    try {
      await Promise.race([changed, this.clock.sleep(timeoutMs, timer.signal)]);
    } finally {
      timer.abort();
    }
  }

  /**
   * Attempts of `executions`, each once; delivery 0 matches every delivery.
   * One pass over the attempts at most, however many entries a server sends
   * (a scan an entry would let one message cost entries times attempts).
   */
  private matching(executions: readonly InFlightExecution[]): Attempt[] {
    const found = new Map<Key, Attempt>();
    let byId: Map<string, Attempt[]> | undefined;
    for (const execution of executions) {
      if (execution.delivery) {
        const attempt = this.attempts.get(keyOf(execution.executionId, execution.delivery));
        if (attempt !== undefined) found.set(attempt.key, attempt);
        continue;
      }
      if (byId === undefined) {
        byId = new Map();
        for (const attempt of this.attempts.values()) {
          const same = byId.get(attempt.executionId);
          if (same === undefined) byId.set(attempt.executionId, [attempt]);
          else same.push(attempt);
        }
      }
      for (const attempt of byId.get(execution.executionId) ?? []) found.set(attempt.key, attempt);
    }
    return [...found.values()];
  }

  private accept(session: Session, assignment: Assignment): void {
    const key = keyOf(assignment.executionId, assignment.delivery);
    session.outstanding = Math.max(0, session.outstanding - 1);
    if (this.attempts.has(key)) {
      this.limited.say("duplicate", "warn", `duplicate assignment ${assignment.executionId}#${assignment.delivery} ignored`);
      return;
    }
    if (this.unackedResults.has(key)) {
      session.unsent.add(key); // finished, but the server did not see the result yet
      return;
    }
    // Beyond twice the slots held, or once attempts and unacknowledged results fill a hello (a
    // server that never acks; the credit never gets there): refused, so that neither grows
    // without bound.
    if (this.attempts.size >= this.maxHeld || this.attempts.size + this.unackedResults.size >= MAX_IN_FLIGHT) {
      this.limited.say(
        "beyond credit",
        "error",
        `assignment ${assignment.executionId}#${assignment.delivery} beyond this worker's credit; refused`,
      );
      if (!this.refused.has(key) && this.refused.size >= MAX_REFUSED) {
        this.forgetRefused(session);
        throw new SessionLost(`protocol error: more than ${MAX_REFUSED} assignments beyond the credit unacknowledged`);
      }
      this.refused.add(key);
      this.record(key, create(ExecutionResultSchema, {
        executionId: assignment.executionId,
        delivery: assignment.delivery,
        attempt: assignment.attempt,
        outcome: ResultOutcome.FAILED_RETRYABLE,
        error: `worker ${this.workerId} over capacity: the assignment exceeded its credit`,
      }));
      return;
    }
    const attempt = new Attempt(assignment, {
      handlers: this.handlers,
      clock: this.clock,
      cancelGraceMs: this.cancelGraceMs,
      onHandlerError: (a, error) =>
        this.log.warn(`handler for ${a.executionId}#${a.delivery} failed: ${error instanceof Error ? error.stack ?? error.message : String(error)}`),
    });
    this.attempts.set(key, attempt);
    this.running.set(key, this.hold(attempt));
  }

  private async hold(attempt: Attempt): Promise<void> {
    try {
      await attempt.run(this.slotSemaphore, (a, result) => this.record(a.key, result));
    } catch (error) {
      // A runtime bug must still end in a result.
      this.log.error(`attempt ${attempt.executionId}#${attempt.delivery} failed inside the worker`, error);
      if (!attempt.decided && !attempt.rejected) {
        attempt.decided = true;
        const a = attempt.assignment;
        this.record(attempt.key, create(ExecutionResultSchema, {
          executionId: a.executionId,
          delivery: a.delivery,
          attempt: a.attempt,
          outcome: ResultOutcome.FAILED_RETRYABLE,
          error: `worker error: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`,
        }));
      }
    } finally {
      this.attempts.delete(attempt.key);
      this.running.delete(attempt.key);
      this.session?.wake.wake(); // a slot is free: maybe credit
      this.change.notify();
    }
  }

  private record(key: Key, result: ExecutionResult): void {
    this.unackedResults.set(key, result);
    if (this.session !== undefined) {
      this.session.unsent.add(key);
      this.session.wake.wake();
    }
    this.change.notify();
  }

  /**
   * Drops every refusal not yet acknowledged (the server hands those
   * executions out again once their deliveries time out); the results of
   * real attempts stay.
   */
  private forgetRefused(session: Session): void {
    for (const key of this.refused) {
      this.unackedResults.delete(key);
      session.unsent.delete(key);
    }
    this.refused.clear();
    this.change.notify();
  }

  private applyAcks(session: Session, acks: ResultAck[]): void {
    for (const ack of acks) {
      const key = keyOf(ack.executionId, ack.delivery);
      const held = this.unackedResults.get(key);
      this.unackedResults.delete(key);
      this.refused.delete(key);
      session.unsent.delete(key);
      if (!ack.accepted && held !== undefined) {
        // Only for a result held: the ids of the line are then the worker's own, bounded.
        this.limited.say(
          "result rejected",
          "warn",
          `server rejected the result for ${held.executionId}#${held.delivery}: ${clean(ack.reason, this.credential)}`,
        );
      }
    }
    this.change.notify();
  }

  /** Stops every attempt without reporting (the server re-delivers them). */
  private async abandonAll(): Promise<void> {
    for (const attempt of this.attempts.values()) {
      attempt.abandon("the worker stopped");
    }
    await Promise.allSettled([...this.running.values()]);
  }
}

/** One hand-out of one execution. */
export interface InFlight {
  executionId: string;
  delivery: number;
}

function positive(name: string, value: number): number {
  if (!(value > 0) || !Number.isFinite(value)) {
    throw new RangeError(`${name} must be a positive number of milliseconds`);
  }
  return value;
}

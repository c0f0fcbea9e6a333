/**
 * An example worker serving the handler `echo-ts` until SIGTERM.
 *
 *     TICKWHEEL_ADDRESS=127.0.0.1:50051 TICKWHEEL_WORKER_CREDENTIAL=tww_... examples/worker/run
 *     examples/worker/run --dev .tickwheel      # beside `tickwheel dev --data .tickwheel`
 *
 * `echo-ts` answers with its payload. A payload that is a JSON object with
 * an integer `"sleep_ms"` makes it wait that long first (stopping at once
 * when the execution is canceled or times out: `ctx.signal` aborts);
 * `"fail": "retryable"` or `"permanent"` then makes it fail that way. It
 * prints one JSON line per event on stdout (`started`, `canceled`,
 * `finished`); logs go to stderr. SIGTERM drains: no new work, in-flight
 * handlers finish (30 s at most), then the process exits 0.
 * `TICKWHEEL_ADDRESS` may list several servers, comma-separated: each
 * reconnect tries the next. The same contract as the Go, Java and Python
 * examples (`sdk/<lang>/examples/worker`).
 */

import { readFileSync } from "node:fs";
import { join } from "node:path";

import { PermanentError, Worker, WorkerFatalError, type JobContext } from "../../src/index.js";

const HANDLER = "echo-ts";
const DRAIN_MS = 30_000;
const MAX_SLEEP_MS = 6 * 3600 * 1000; // a job runs six hours at most

function emit(event: string, ctx: JobContext, fields: Record<string, unknown> = {}): void {
  process.stdout.write(`${JSON.stringify({ event, execution_id: ctx.executionId, ...fields })}\n`);
}

/** The payload's `sleep_ms` and `fail`, when it is a JSON object carrying them. */
function instructions(payload: Uint8Array): { sleepMs: number; fail: string } {
  let spec: unknown;
  try {
    spec = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(payload));
  } catch {
    return { sleepMs: 0, fail: "" };
  }
  if (typeof spec !== "object" || spec === null || Array.isArray(spec)) return { sleepMs: 0, fail: "" };
  const { sleep_ms: sleep, fail } = spec as Record<string, unknown>;
  const sleepMs = Number.isInteger(sleep) ? Math.max(0, Math.min(sleep as number, MAX_SLEEP_MS)) : 0;
  return { sleepMs, fail: fail === "retryable" || fail === "permanent" ? fail : "" };
}

/** Resolves after `ms`, or with false at once when `signal` aborts. */
function wait(ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(false);
    const timer = setTimeout(() => resolve(true), ms);
    signal.addEventListener("abort", () => { clearTimeout(timer); resolve(false); }, { once: true });
  });
}

async function echo(ctx: JobContext): Promise<Uint8Array> {
  emit("started", ctx, { delivery: ctx.delivery, attempt: ctx.attempt });
  try {
    const { sleepMs, fail } = instructions(ctx.payload);
    if (sleepMs > 0 && !(await wait(sleepMs, ctx.signal))) {
      emit("canceled", ctx);
      throw new Error(`stopped: ${String(ctx.signal.reason)}`); // the worker reports CANCELED or TIMED_OUT
    }
    if (fail === "permanent") throw new PermanentError("asked to fail");
    if (fail === "retryable") throw new Error("asked to fail");
    return ctx.payload;
  } finally {
    emit("finished", ctx);
  }
}

/** The address list and credential: `--dev DIR`, or the environment. */
function settings(argv: string[]): { addresses: string[]; credential: string } {
  const dev = argv[0] === "--dev" ? argv[1] : argv.find((arg) => arg.startsWith("--dev="))?.slice("--dev=".length);
  if (dev !== undefined) {
    const saved = JSON.parse(readFileSync(join(dev, "dev-credentials.json"), "utf-8")) as Record<string, unknown>;
    return { addresses: [String(saved["address"] ?? "")], credential: String(saved["worker_credential"] ?? "") };
  }
  const addresses = (process.env["TICKWHEEL_ADDRESS"] ?? "").split(",").map((a) => a.trim()).filter((a) => a !== "");
  return { addresses, credential: process.env["TICKWHEEL_WORKER_CREDENTIAL"] ?? "" };
}

const { addresses, credential } = settings(process.argv.slice(2));
if (addresses.length === 0 || addresses[0] === "" || credential === "") {
  process.stderr.write("error: set TICKWHEEL_ADDRESS and TICKWHEEL_WORKER_CREDENTIAL, or pass --dev DIR\n");
  process.exit(2);
}
const worker = new Worker({ address: addresses, credential, slots: Number(process.env["TICKWHEEL_SLOTS"] ?? 4) });
worker.handler(HANDLER, echo);
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => void worker.stop(DRAIN_MS));
}
process.stderr.write(`worker ${worker.workerId} serving ${HANDLER} on ${addresses.join(",")}\n`);
try {
  await worker.run();
} catch (error) {
  if (error instanceof WorkerFatalError) {
    process.stderr.write(`error: ${error.message}\n`);
    process.exit(1);
  }
  throw error;
}
process.stderr.write("worker stopped\n");

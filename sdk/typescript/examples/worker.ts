/**
 * A worker serving the handler `example.greet` until SIGINT or SIGTERM.
 *
 *     TICKWHEEL_ADDRESS=127.0.0.1:50051 TICKWHEEL_WORKER_CREDENTIAL=tww_... \
 *       node dist/examples/worker.js
 *
 * The handler reports progress (carried by the worker's heartbeats), stops
 * early when its signal aborts (the execution was canceled or timed out),
 * and uses the execution id as its idempotency key.
 */

import { PermanentError, Worker, type JobContext } from "../src/index.js";

const worker = new Worker({
  address: process.env["TICKWHEEL_ADDRESS"] ?? "127.0.0.1:50051",
  credential: process.env["TICKWHEEL_WORKER_CREDENTIAL"] ?? "",
  slots: 8,
});

const greeted = new Set<string>(); // stands in for a table keyed by idempotency key

worker.handler("example.greet", async (ctx: JobContext) => {
  let name: string;
  try {
    name = ctx.payloadJson<{ name: string }>().name;
  } catch {
    throw new PermanentError("the payload is not {\"name\": ...} JSON"); // retrying cannot help
  }
  if (greeted.has(ctx.idempotencyKey)) {
    return `already greeted ${name}`; // a re-delivery: the effect happened once
  }
  for (let step = 1; step <= 3; step += 1) {
    if (ctx.signal.aborted) throw new Error(`stopped: ${String(ctx.signal.reason)}`);
    ctx.heartbeat(`step ${step} of 3`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  greeted.add(ctx.idempotencyKey);
  return `hello, ${name} (attempt ${ctx.attempt})`;
});

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => void worker.stop(30_000));
}
const running = worker.run();
worker.whenConnected(30_000).then(
  () => console.log(`worker ${worker.workerId} connected to ${worker.serverId}; serving example.greet`),
  () => undefined, // run() says why
);
await running; // rejects with WorkerFatalError when the server refuses the credential
console.log("worker stopped");

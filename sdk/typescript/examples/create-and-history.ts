/**
 * Creates a one-off job a few seconds ahead, waits for it to run, and prints
 * its history; also previews a cron job's next runs in a time zone.
 *
 *     TICKWHEEL_ADDRESS=127.0.0.1:50051 TICKWHEEL_API_KEY=twk_... \
 *       node dist/examples/create-and-history.js
 *
 * With `tickwheel dev` the job's handler, `echo`, runs in the built-in worker;
 * set TICKWHEEL_HANDLER to target a handler of your own worker
 * (examples/worker.ts serves `example.greet`).
 */

import { ExecutionStatus, TickwheelClient, TickwheelError, cronJob, onceJob, retryPolicy } from "../src/index.js";

const address = process.env["TICKWHEEL_ADDRESS"] ?? "127.0.0.1:50051";
const apiKey = process.env["TICKWHEEL_API_KEY"];
const handler = process.env["TICKWHEEL_HANDLER"] ?? "echo";

const client = new TickwheelClient({ address, apiKey });
try {
  const nightly = cronJob("nightly-report", "0 2 * * *", "Europe/London", { handler });
  const preview = await client.previewSchedule({ job: nightly }, { count: 3 });
  console.log(`"0 2 * * *" in Europe/London next runs at ${preview.fires.map((f) => f.localTime).join(", ")}`);

  const at = new Date(Date.now() + 3000);
  const { job } = await client.createJob(
    onceJob("example-once", at, { handler, payload: JSON.stringify({ name: "Ada" }), retry: retryPolicy({ maxAttempts: 3 }) }),
  );
  console.log(`created ${job!.id}, due at ${at.toISOString()}`);

  const ended = new Set([ExecutionStatus.SUCCEEDED, ExecutionStatus.DEAD, ExecutionStatus.CANCELED]);
  for (let waited = 0; waited < 60_000; waited += 500) {
    const { executions } = await client.listExecutions(job!.id);
    if (executions.length > 0 && executions.every((e) => ended.has(e.status))) break;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  for await (const execution of client.iterExecutions(job!.id)) {
    console.log(`${execution.id} ${ExecutionStatus[execution.status]} after ${execution.attempts.length} attempt(s)`);
    for (const attempt of execution.attempts) {
      console.log(`  attempt ${attempt.attempt} (delivery ${attempt.delivery}) on ${attempt.workerId}${attempt.error ? `: ${attempt.error}` : ""}`);
    }
  }
} catch (error) {
  if (error instanceof TickwheelError) {
    console.error(error.message); // CODE: field: description
    for (const v of error.fieldViolations) console.error(`  ${v.field}: ${v.description}`);
    process.exitCode = 1;
  } else {
    throw error;
  }
} finally {
  client.close();
}

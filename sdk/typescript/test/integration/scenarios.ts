/**
 * End-to-end scenarios against a real server, driven by
 * tests/integration/test_sdk_typescript.py:
 *
 *     node dist/test/integration/scenarios.js <scenario> '<json config>'
 *
 * The config carries `address`, `apiKey`, `workerCredential` and the
 * scenario's own settings. Each scenario prints one JSON object on stdout
 * (what it saw, for the Python test to assert on) and exits 0, or prints
 * `{"error": ...}` and exits 1.
 */

import {
  ExecutionStatus,
  PermanentError,
  TickwheelClient,
  TickwheelError,
  Worker,
  codeName,
  cronJob,
  onceJob,
  retryPolicy,
  tlsFromFiles,
  type Execution,
  type Handler,
  type JobContext,
  type TlsOptions,
} from "../../src/index.js";

interface Config {
  address: string;
  apiKey: string;
  workerCredential: string;
  /** Seconds from now to the one-off job's instant. */
  leadSeconds?: number;
  /** How long the long job runs, in milliseconds. */
  runMs?: number;
  /** How often the long job reports progress, in milliseconds. */
  progressEveryMs?: number;
  /** How long to wait for the execution to end, in milliseconds. */
  waitMs?: number;
  /** How many jobs the batch scenario creates, and which one is invalid. */
  count?: number;
  badIndex?: number;
  /** PEM files: the CA that signs the server's certificate, and the client's certificate and key. */
  tls?: { ca?: string; cert?: string; key?: string };
}

function tlsOf(config: Config): { tls?: TlsOptions } {
  return config.tls === undefined ? {} : { tls: tlsFromFiles(config.tls) };
}

interface Invocation {
  executionId: string;
  idempotencyKey: string;
  jobId: string;
  attempt: number;
  delivery: number;
  nominalAt: string;
  payload: string;
  startedAt: number;
  endedAt?: number;
  progressReports?: number;
  aborted?: boolean;
}

const TERMINAL = new Set([ExecutionStatus.SUCCEEDED, ExecutionStatus.DEAD, ExecutionStatus.CANCELED]);

function describeExecution(e: Execution) {
  return {
    id: e.id,
    jobId: e.jobId,
    status: ExecutionStatus[e.status],
    attempt: e.attempt,
    delivery: e.delivery,
    reapCount: e.reapCount,
    error: e.error,
    deadReason: e.deadReason,
    attempts: e.attempts.map((a) => ({
      attempt: a.attempt,
      delivery: a.delivery,
      status: a.status,
      workerId: a.workerId,
      error: a.error,
    })),
  };
}

function invocationOf(ctx: JobContext): Invocation {
  return {
    executionId: ctx.executionId,
    idempotencyKey: ctx.idempotencyKey,
    jobId: ctx.jobId,
    attempt: ctx.attempt,
    delivery: ctx.delivery,
    nominalAt: ctx.nominalAt.toISOString(),
    payload: ctx.payloadText(),
    startedAt: Date.now(),
  };
}

/** Polls the job's history through the client until its execution has ended. */
async function untilEnded(client: TickwheelClient, jobId: string, waitMs: number): Promise<Execution[]> {
  const deadline = Date.now() + waitMs;
  let history: Execution[] = [];
  while (Date.now() < deadline) {
    history = [];
    for await (const execution of client.iterExecutions(jobId)) {
      history.push(execution);
    }
    if (history.length > 0 && history.every((e) => TERMINAL.has(e.status))) {
      return history;
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`job ${jobId} did not end within ${waitMs} ms: ${JSON.stringify(history.map(describeExecution))}`);
}

/**
 * Starts a worker serving `handler` under `name`, creates a one-off job for
 * it `leadSeconds` ahead, waits for the execution to end, and returns what
 * the worker and the job's history saw.
 */
async function runOneOff(
  config: Config,
  workerId: string,
  name: string,
  handler: Handler,
  job: { payload: string; retry?: ReturnType<typeof retryPolicy>; timeoutMs?: number },
) {
  const client = new TickwheelClient({ address: config.address, apiKey: config.apiKey, ...tlsOf(config) });
  const worker = new Worker({
    ...tlsOf(config),
    address: config.address,
    credential: config.workerCredential,
    workerId,
    slots: 2,
    cancelGraceMs: 500,
  });
  worker.handler(name, handler);
  const running = worker.run();
  try {
    await Promise.race([worker.whenConnected(20_000), running.then(() => { throw new Error("the worker stopped"); })]);
    const at = new Date(Date.now() + (config.leadSeconds ?? 3) * 1000);
    const created = await client.createJob(
      onceJob(`ts-${name}`, at, {
        handler: name,
        payload: job.payload,
        ...(job.retry !== undefined ? { retry: job.retry } : {}),
        ...(job.timeoutMs !== undefined ? { timeoutMs: job.timeoutMs } : {}),
      }),
    );
    const jobId = created.job!.id;
    const history = await untilEnded(client, jobId, config.waitMs ?? 60_000);
    const got = await client.getJob(jobId);
    return {
      jobId,
      created: created.created,
      onceAt: at.toISOString(),
      jobState: got.job?.state,
      runCount: Number(got.job?.runCount ?? 0n),
      executions: history.map(describeExecution),
      workerId,
      sessions: worker.sessions,
    };
  } finally {
    await worker.stop(5000);
    await running.catch(() => undefined);
    client.close();
  }
}

const scenarios: Record<string, (config: Config) => Promise<unknown>> = {
  /** A handler job runs once on time; its history is read back through the client. */
  async "run-and-history"(config) {
    const invocations: Invocation[] = [];
    const outcome = await runOneOff(config, "ts-run", "ts.echo", async (ctx) => {
      invocations.push(invocationOf(ctx));
      return { echoed: ctx.payloadText(), attempt: ctx.attempt };
    }, { payload: "hello from typescript" });
    return { ...outcome, invocations };
  },

  /** A job longer than the server's heartbeat timeout, reporting progress as it goes, completes once. */
  async heartbeat(config) {
    const invocations: Invocation[] = [];
    const runMs = config.runMs ?? 3000;
    const every = config.progressEveryMs ?? 200;
    const outcome = await runOneOff(config, "ts-heartbeat", "ts.long", async (ctx) => {
      const seen = invocationOf(ctx);
      invocations.push(seen);
      seen.progressReports = 0;
      const until = Date.now() + runMs;
      while (Date.now() < until && !ctx.signal.aborted) {
        await new Promise((resolve) => setTimeout(resolve, every));
        seen.progressReports += 1;
        ctx.heartbeat(`step ${seen.progressReports}`);
      }
      seen.aborted = ctx.signal.aborted;
      seen.endedAt = Date.now();
      return "done";
    }, { payload: "long", timeoutMs: 60_000 });
    return { ...outcome, invocations };
  },

  /** A handler that throws on attempt 1 succeeds on attempt 2. */
  async retry(config) {
    const invocations: Invocation[] = [];
    const outcome = await runOneOff(config, "ts-retry", "ts.flaky", async (ctx) => {
      invocations.push(invocationOf(ctx));
      if (ctx.attempt === 1) {
        throw new Error("first attempt fails on purpose");
      }
      return "second time lucky";
    }, { payload: "flaky", retry: retryPolicy({ maxAttempts: 3, initialBackoffMs: 100, maxBackoffMs: 200 }) });
    return { ...outcome, invocations };
  },

  /** A PermanentError dead-letters the execution after one attempt. */
  async permanent(config) {
    const invocations: Invocation[] = [];
    const outcome = await runOneOff(config, "ts-permanent", "ts.broken", async (ctx) => {
      invocations.push(invocationOf(ctx));
      throw new PermanentError("the payload can never work");
    }, { payload: "broken", retry: retryPolicy({ maxAttempts: 3, initialBackoffMs: 100, maxBackoffMs: 200 }) });
    return { ...outcome, invocations };
  },

  /** Over mutual TLS: a job runs in the worker; clients without the client certificate are refused. */
  async tls(config) {
    const invocations: Invocation[] = [];
    const outcome = await runOneOff(config, "ts-tls", "ts.tls", (ctx) => {
      invocations.push(invocationOf(ctx));
      return "over tls";
    }, { payload: "tls" });
    const refusals: Record<string, string> = {};
    const others: Record<string, TlsOptions | undefined> = {
      withoutCertificate: tlsFromFiles({ ...(config.tls?.ca ? { ca: config.tls.ca } : {}) }),
      plaintext: undefined,
    };
    for (const [name, tls] of Object.entries(others)) {
      const other = new TickwheelClient({ address: config.address, apiKey: config.apiKey, retries: 0, timeoutMs: 5000, ...(tls ? { tls } : {}) });
      try {
        await other.listJobs();
        refusals[name] = "accepted";
      } catch (error) {
        refusals[name] = error instanceof TickwheelError ? error.codeName : String(error);
      } finally {
        other.close();
      }
    }
    return { ...outcome, invocations, refusals };
  },

  /** A wrong API key: the client's error carries UNAUTHENTICATED. */
  async "wrong-key"(config) {
    const client = new TickwheelClient({ address: config.address, apiKey: "twk_wrong_0000000000000000000000", retries: 0 });
    try {
      await client.listJobs();
      return { error: "listJobs succeeded with a wrong API key" };
    } catch (error) {
      return describeError(error);
    } finally {
      client.close();
    }
  },

  /** An invalid cron expression: INVALID_ARGUMENT naming the field, from the BadRequest details. */
  async "invalid-cron"(config) {
    const client = new TickwheelClient({ address: config.address, apiKey: config.apiKey });
    try {
      await client.createJob(cronJob("bad-cron", "61 * * * *", "UTC", { handler: "ts.echo" }));
      return { error: "createJob accepted 61 * * * *" };
    } catch (error) {
      const listed = await client.listJobs();
      return { ...describeError(error), jobsAfter: listed.jobs.length };
    } finally {
      client.close();
    }
  },

  /**
   * createJobs of `count` one-off jobs a year ahead, the one at index
   * `badIndex` with an invalid cron expression, each with a stable request
   * id; then the same jobs again with the same ids.
   */
  async batch(config) {
    const client = new TickwheelClient({ address: config.address, apiKey: config.apiKey });
    try {
      const count = config.count ?? 1001;
      const badIndex = config.badIndex ?? 1000;
      const at = new Date(Date.now() + 365 * 24 * 3600 * 1000);
      const jobs = Array.from({ length: count }, (_, i) =>
        i === badIndex ? cronJob(`batch-${i}`, "61 * * * *", "UTC", { handler: "ts.echo" }) : onceJob(`batch-${i}`, at, { handler: "ts.echo" }),
      );
      const requestIds = jobs.map((_, i) => `ts-batch-${i}`);
      const describe = (results: Awaited<ReturnType<TickwheelClient["createJobs"]>>) =>
        results.map((r) =>
          r.error === undefined ? { requestId: r.requestId, jobId: r.job.id, name: r.job.name, created: r.created } : { requestId: r.requestId, ...describeError(r.error) },
        );
      const first = describe(await client.createJobs(jobs, { requestIds }));
      const again = describe(await client.createJobs(jobs, { requestIds }));
      let listed = 0;
      for await (const _ of client.iterJobs({ namePrefix: "batch-", pageSize: 1000 })) listed += 1;
      return { first, again, listed };
    } finally {
      client.close();
    }
  },

  /**
   * Three one-off jobs a year ahead, then updateJobs (a rename of each at
   * version 1, a second rename of the first at the stale version 1) and
   * deleteJobs (the second, an unknown id, the second again).
   */
  async batchChanges(config) {
    const client = new TickwheelClient({ address: config.address, apiKey: config.apiKey });
    try {
      const at = new Date(Date.now() + 365 * 24 * 3600 * 1000);
      const created = await client.createJobs([0, 1, 2].map((i) => onceJob(`change-${i}`, at, { handler: "ts.echo" })));
      const ids = created.map((r) => r.job!.id);
      const updated = await client.updateJobs(
        [...ids.map((id) => ({ id, version: 1n, name: `renamed-${id}` })), { id: ids[0]!, version: 1n, name: "stale" }],
        { updateMask: ["name"] },
      );
      const deleted = await client.deleteJobs([ids[1]!, "job_unknown", ids[1]!]);
      const left: string[] = [];
      for await (const job of client.iterJobs({ pageSize: 100 })) left.push(job.name);
      return {
        ids,
        updated: updated.map((r) => (r.error === undefined ? { name: r.job.name, version: Number(r.job.version) } : describeError(r.error))),
        deleted: deleted.map((r) => (r.error === undefined ? { canceled: Number(r.canceledExecutions) } : describeError(r.error))),
        left: left.sort(),
      };
    } finally {
      client.close();
    }
  },

  /** Preview of the next runs of an unsaved cron job in a zone. */
  async preview(config) {
    const client = new TickwheelClient({ address: config.address, apiKey: config.apiKey });
    try {
      const job = cronJob("preview", "30 2 * * *", "Europe/London", { handler: "ts.echo", exact: true });
      const preview = await client.previewSchedule({ job }, { after: new Date("2027-03-27T00:00:00Z"), count: 3 });
      return {
        tzdataVersion: preview.tzdataVersion,
        fires: preview.fires.map((f) => ({ localTime: f.localTime, note: f.note })),
      };
    } finally {
      client.close();
    }
  },
};

function describeError(error: unknown) {
  if (!(error instanceof TickwheelError)) {
    throw error;
  }
  return {
    code: error.code,
    codeName: codeName(error.code),
    message: error.message,
    serverMessage: error.serverMessage,
    fieldViolations: error.fieldViolations.map((v) => ({ field: v.field, description: v.description })),
  };
}

async function main(): Promise<number> {
  const [name, raw] = process.argv.slice(2);
  const scenario = name === undefined ? undefined : scenarios[name];
  if (scenario === undefined || raw === undefined) {
    process.stdout.write(JSON.stringify({ error: `usage: scenarios.js <${Object.keys(scenarios).join("|")}> '<json config>'` }) + "\n");
    return 2;
  }
  try {
    const result = await scenario(JSON.parse(raw) as Config);
    process.stdout.write(JSON.stringify(result) + "\n");
    return 0;
  } catch (error) {
    process.stdout.write(JSON.stringify({ error: error instanceof Error ? error.stack ?? error.message : String(error) }) + "\n");
    return 1;
  }
}

process.exitCode = await main();

/**
 * A scripted WorkerService for the worker's protocol tests: a real gRPC
 * (HTTP/2) server from connect-node whose Pull streams the test drives one
 * message at a time.
 */

import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";

import {
  PullResponseSchema,
  WorkerService,
  type PullRequest,
  type PullResponse,
} from "../../src/gen/tickwheel/v1/worker_pb.js";
import type { Worker } from "../../src/worker.js";

type Kind = NonNullable<PullRequest["message"]["case"]>;
type Payload<K extends Kind> = Extract<PullRequest["message"], { case: K }> extends { value: infer V } ? V : never;
type Outgoing = { response: PullResponse } | { end: true } | { error: ConnectError };

/** An unbounded queue with one consumer: tests only. */
class Queue<T> {
  private readonly items: T[] = [];
  private waiter: ((item: T) => void) | undefined;

  push(item: T): void {
    const waiter = this.waiter;
    if (waiter !== undefined) {
      this.waiter = undefined;
      waiter(item);
    } else {
      this.items.push(item);
    }
  }

  shift(): Promise<T> {
    const item = this.items.shift();
    if (item !== undefined) return Promise.resolve(item);
    return new Promise((resolve) => (this.waiter = resolve));
  }
}

/** One Pull stream as the test sees it. */
export class FakeStream {
  /** Every message received, in order. */
  readonly received: PullRequest[] = [];
  readonly authorization: string | null;
  private readonly inbox = new Queue<PullRequest | undefined>();
  private readonly outbox = new Queue<Outgoing>();
  private ended = false;
  /** Resolves when the worker half-closed its side (its request stream ended). */
  readonly halfClosed: Promise<void>;
  private markHalfClosed!: () => void;

  constructor(requests: AsyncIterable<PullRequest>, context: HandlerContext) {
    this.authorization = context.requestHeader.get("authorization");
    this.halfClosed = new Promise((resolve) => (this.markHalfClosed = resolve));
    void (async () => {
      try {
        for await (const request of requests) {
          this.received.push(request);
          this.inbox.push(request);
        }
      } catch {
        // the stream was canceled
      }
      this.markHalfClosed();
      this.inbox.push(undefined);
      this.end(); // as the real server does once the worker's side is finished

    })();
  }

  /**
   * The next message of `kind`, skipping (but recording) others; rejects
   * after `timeoutMs` or when the worker closes its side first.
   */
  async expect<K extends Kind>(kind: K, timeoutMs = 30_000): Promise<Payload<K>> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const left = deadline - Date.now();
      let timer: NodeJS.Timeout | undefined;
      const next = await Promise.race([
        this.inbox.shift(),
        new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), Math.max(0, left)))),
      ]);
      clearTimeout(timer);
      if (next === "timeout") throw new Error(`no ${kind} within ${timeoutMs} ms`);
      if (next === undefined) throw new Error(`the worker closed the stream before sending ${kind}`);
      if (next.message.case === kind) {
        return next.message.value as unknown as Payload<K>;
      }
    }
  }

  send(message: MessageInitShape<typeof PullResponseSchema>["message"]): void {
    this.outbox.push({ response: create(PullResponseSchema, { message }) });
  }

  /** Ends the stream with OK. */
  end(): void {
    this.outbox.push({ end: true });
  }

  /** Ends the stream with an error status. */
  fail(code: Code, message: string): void {
    this.outbox.push({ error: new ConnectError(message, code) });
  }

  async *responses(): AsyncGenerator<PullResponse> {
    while (!this.ended) {
      const next = await this.outbox.shift();
      if ("end" in next) {
        this.ended = true;
        return;
      }
      if ("error" in next) {
        this.ended = true;
        throw next.error;
      }
      yield next.response;
    }
  }
}

/** A WorkerService on a free loopback port whose streams arrive in {@link nextStream}. */
export class FakeServer {
  private readonly streams = new Queue<FakeStream>();
  private server: http2.Http2Server | undefined;
  private readonly sessions = new Set<http2.ServerHttp2Session>();
  address = "";

  async start(): Promise<void> {
    const handler = connectNodeAdapter({
      routes: (router) =>
        router.service(WorkerService, {
          pull: (requests, context) => {
            const stream = new FakeStream(requests, context);
            this.streams.push(stream);
            return stream.responses();
          },
        }),
    });
    this.server = http2.createServer(handler);
    this.server.on("session", (session: http2.ServerHttp2Session) => {
      this.sessions.add(session);
      session.once("close", () => this.sessions.delete(session));
    });
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
    this.address = `127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** The next Pull stream a worker opens; rejects after `timeoutMs`. */
  async nextStream(timeoutMs = 30_000): Promise<FakeStream> {
    let timer: NodeJS.Timeout | undefined;
    const stream = await Promise.race([
      this.streams.shift(),
      new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), timeoutMs))),
    ]);
    clearTimeout(timer);
    if (stream === undefined) throw new Error(`no Pull stream within ${timeoutMs} ms`);
    return stream;
  }

  async stop(): Promise<void> {
    const server = this.server;
    if (server === undefined) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      // Sessions left open by a test would keep close() waiting.
      for (const session of this.sessions) session.destroy();
    });
  }
}

/** A test's teardown: stops `worker` (if one was started) at once, waits for its run, stops `server`. */
export async function stopBoth(worker: Worker | undefined, running: Promise<void> | undefined, server: FakeServer): Promise<void> {
  if (worker !== undefined) {
    await worker.stop(0);
    await running?.catch(() => undefined);
  }
  await server.stop();
}

/**
 * One HTTP/2 connection to a server, as a Connect gRPC transport that the
 * caller can close.
 */

import type { Interceptor, Transport } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";

import { baseUrl, checkTls, http2TlsOptions, type TlsOptions } from "./options.js";

export interface Connection {
  readonly transport: Transport;
  readonly url: string;
  /** Closes the HTTP/2 session; calls in progress fail with CANCELLED or UNAVAILABLE. */
  close(): void;
}

/**
 * A gRPC (HTTP/2) transport to `address` with its own session, so that
 * {@link Connection.close} releases it and a new connection resolves the
 * address again. `interceptors` run on every call; a message from the
 * server over `readMaxBytes` (default Connect's, about 4 GiB) fails the call
 * with RESOURCE_EXHAUSTED.
 */
export function connect(
  address: string,
  tls: TlsOptions | undefined,
  interceptors: Interceptor[],
  options: { connectTimeoutMs?: number; readMaxBytes?: number } = {},
): Connection {
  if (tls !== undefined) {
    checkTls(tls);
  }
  const url = baseUrl(address, tls);
  const sessionManager = new Http2SessionManager(
    url,
    {
      // A broken connection is noticed by a ping rather than by a call
      // waiting out its deadline.
      pingIntervalMs: 30_000,
      pingTimeoutMs: 10_000,
      ...(options.connectTimeoutMs !== undefined ? { connectTimeoutMs: options.connectTimeoutMs } : {}),
    },
    tls !== undefined ? http2TlsOptions(tls) : {},
  );
  const transport = createGrpcTransport({
    baseUrl: url,
    sessionManager,
    interceptors,
    ...(options.readMaxBytes !== undefined ? { readMaxBytes: options.readMaxBytes } : {}),
  });
  return {
    transport,
    url,
    close: () => sessionManager.abort(),
  };
}

/** Throws a TypeError unless `value` can be sent as a bearer credential. */
export function checkCredential(name: string, value: string | undefined): string | undefined {
  if (value === undefined || value === "") {
    return undefined;
  }
  if (typeof value !== "string" || /[\r\n\0]/.test(value) || value.trim() !== value) {
    throw new TypeError(`${name} must be a single-line string without surrounding spaces`);
  }
  return value;
}

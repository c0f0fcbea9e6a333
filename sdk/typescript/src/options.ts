/**
 * Typed connection options shared by the client and the worker: TLS and
 * retries. Both are validated when they are built, so a bad option fails at
 * construction, not on the first call.
 */

import { readFileSync } from "node:fs";
import type { SecureClientSessionOptions } from "node:http2";

import { Code } from "@connectrpc/connect";

/**
 * TLS for the connection to the server. Without it (`tls: undefined`) the
 * SDK connects in plaintext (`http://`), as `tickwheel dev` expects.
 */
export interface TlsOptions {
  /** PEM CA bundle that signs the server's certificate; unset uses Node's default roots. */
  readonly ca?: string | Uint8Array;
  /** PEM client certificate chain, for servers that require mutual TLS. Given together with `key`. */
  readonly cert?: string | Uint8Array;
  /** PEM private key of `cert`. */
  readonly key?: string | Uint8Array;
  /** Overrides the host name checked against the server's certificate (SNI too); unset checks the address's host. */
  readonly serverName?: string;
}

/** Reads PEM files into {@link TlsOptions}. Throws when a file cannot be read or only one of cert and key is given. */
export function tlsFromFiles(files: {
  ca?: string;
  cert?: string;
  key?: string;
  serverName?: string;
}): TlsOptions {
  const options: TlsOptions = {
    ...(files.ca ? { ca: readFileSync(files.ca) } : {}),
    ...(files.cert ? { cert: readFileSync(files.cert) } : {}),
    ...(files.key ? { key: readFileSync(files.key) } : {}),
    ...(files.serverName ? { serverName: files.serverName } : {}),
  };
  checkTls(options);
  return options;
}

/** Throws a TypeError when the options cannot describe a TLS connection. */
export function checkTls(tls: TlsOptions): void {
  if ((tls.cert === undefined) !== (tls.key === undefined)) {
    throw new TypeError("TlsOptions: cert and key go together");
  }
  if (tls.serverName !== undefined && tls.serverName.trim() === "") {
    throw new TypeError("TlsOptions: serverName must not be empty");
  }
}

/** The `node:http2` connect options these TLS options describe. */
export function http2TlsOptions(tls: TlsOptions): SecureClientSessionOptions {
  const pem = (value: string | Uint8Array) => (typeof value === "string" ? value : Buffer.from(value));
  return {
    ...(tls.ca !== undefined ? { ca: pem(tls.ca) } : {}),
    ...(tls.cert !== undefined ? { cert: pem(tls.cert) } : {}),
    ...(tls.key !== undefined ? { key: pem(tls.key) } : {}),
    ...(tls.serverName !== undefined ? { servername: tls.serverName } : {}),
  };
}

/**
 * The base URL of a server: `host:port` becomes `http://host:port`, or
 * `https://host:port` with TLS; a URL with a scheme is kept, and must agree
 * with the TLS setting.
 */
export function baseUrl(address: string, tls: TlsOptions | undefined): string {
  if (!address || address.trim() !== address) {
    throw new TypeError("address is required (host:port), without surrounding spaces");
  }
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(address)?.[1]?.toLowerCase();
  if (scheme === undefined) {
    if (!/^(\[[0-9a-fA-F:.]+\]|[^:/\s]+):\d{1,5}$/.test(address)) {
      throw new TypeError(`address ${JSON.stringify(address)} is not host:port`);
    }
    return `${tls ? "https" : "http"}://${address}`;
  }
  if (scheme !== "http" && scheme !== "https") {
    throw new TypeError(`address ${JSON.stringify(address)}: only http:// and https:// are supported`);
  }
  if ((scheme === "https") !== (tls !== undefined)) {
    throw new TypeError(`address ${JSON.stringify(address)}: https:// needs tls options and http:// excludes them`);
  }
  return address.replace(/\/+$/, "");
}

/**
 * How a call that failed with a retryable status is retried.
 *
 * Only calls that are safe to repeat are ever retried: reads, dry runs, and
 * writes made idempotent by a request id (CreateJob, TriggerJob). Other writes
 * (UpdateJob, DeleteJob, ...) fail on the first error, because a reply lost
 * after the server committed would otherwise apply them twice.
 *
 * Retry `n` (from 1) waits a uniformly random time in
 * `[0, min(maxBackoffMs, initialBackoffMs * 2^(n-1))]` (full jitter), and
 * never past the call's overall deadline.
 */
export interface RetryOptions {
  /** Attempts in total, including the first; 1 disables retries. Default 5. */
  readonly maxAttempts: number;
  /** Milliseconds: the upper bound of the first retry's wait. Default 200. */
  readonly initialBackoffMs: number;
  /** Milliseconds: the cap of any single wait. Default 5000. */
  readonly maxBackoffMs: number;
  /**
   * Status codes that may be retried. Default UNAVAILABLE only: the request
   * did not reach a server that could act on it, or the connection broke.
   */
  readonly retryableCodes: ReadonlySet<Code>;
}

/** Five attempts, waits bounded by 0.2 s, 0.4 s, 0.8 s, 1.6 s; UNAVAILABLE only. */
export const DEFAULT_RETRY: RetryOptions = Object.freeze({
  maxAttempts: 5,
  initialBackoffMs: 200,
  maxBackoffMs: 5000,
  retryableCodes: new Set([Code.Unavailable]),
});

/**
 * Accepts partial {@link RetryOptions} (missing fields from
 * {@link DEFAULT_RETRY}), a number of retries after the first attempt (0
 * disables retries), or `null` (no retries). Throws a TypeError on values
 * that cannot work.
 */
export function retryOptions(value: Partial<RetryOptions> | number | null | undefined): RetryOptions {
  if (value === undefined) {
    return DEFAULT_RETRY;
  }
  if (value === null) {
    return { ...DEFAULT_RETRY, maxAttempts: 1 };
  }
  if (typeof value === "number") {
    if (!Number.isInteger(value) || value < 0) {
      throw new TypeError(`retries must be a non-negative integer, not ${value}`);
    }
    return { ...DEFAULT_RETRY, maxAttempts: value + 1 };
  }
  const merged: RetryOptions = { ...DEFAULT_RETRY, ...value };
  if (!Number.isInteger(merged.maxAttempts) || merged.maxAttempts < 1) {
    throw new TypeError("RetryOptions.maxAttempts must be an integer of at least 1");
  }
  if (!(merged.initialBackoffMs >= 0) || !(merged.maxBackoffMs >= merged.initialBackoffMs)) {
    throw new TypeError("RetryOptions: need 0 <= initialBackoffMs <= maxBackoffMs");
  }
  return merged;
}

/**
 * The wait before retry number `retry` (1 for the first retry), in
 * milliseconds. Pure given `random`:
 * `random() * min(maxBackoffMs, initialBackoffMs * 2^(retry-1))`.
 */
export function backoffMs(retry: RetryOptions, n: number, random: () => number = Math.random): number {
  if (!Number.isInteger(n) || n < 1) {
    throw new RangeError("retry counts from 1");
  }
  const ceiling = Math.min(retry.maxBackoffMs, retry.initialBackoffMs * 2 ** Math.min(n - 1, 62));
  return random() * ceiling;
}

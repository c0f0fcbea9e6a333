/**
 * What the worker keeps of a server's messages, bounded (pure).
 *
 * A worker holds up to `2 * slots` assignments (and their unacknowledged
 * results) for as long as they run, so every string, byte string and
 * repeated field of one is bounded before the worker takes it: a broken or
 * hostile server could otherwise make it hold ids of megabytes, payloads of
 * the whole message each, or timestamps no clock can wait for. The bounds
 * are far above what a server that keeps the contract sends; an assignment
 * past one is a protocol error, which ends the stream, and nothing of its
 * message is taken. Timestamps are fixed-size and not checked: one out of
 * protobuf's range is read as the nearest instant in it ({@link dateOf}),
 * and a deadline out of range never comes. The Python (`tickwheel_worker.bounds`), Go and Java
 * workers keep the same bounds, counting characters as code points as this one does; the four
 * SDK READMEs share one table of them.
 *
 * Also here: what the worker makes of a server's texts before it logs them
 * ({@link clean}), and the heartbeat interval a welcome may announce
 * ({@link clampHeartbeatIntervalMs}).
 */

import type { Timestamp } from "@bufbuild/protobuf/wkt";

import type { Assignment } from "./gen/tickwheel/v1/worker_pb.js";

/** The longest execution id, job id, tenant or traceparent an assignment may carry. */
export const MAX_ID_CHARS = 1024;
/** The longest handler name: the contract's (`HandlerTarget.name`, 1 to 200 characters). */
export const MAX_HANDLER_CHARS = 200;
/** The largest payload: a job's reaches the server in a request of at most 4 MiB (gRPC's default). */
export const MAX_PAYLOAD_BYTES = 4 * 1024 * 1024;
/** An HTTP target's URL, method and headers (count; names and values in all), as the contract bounds them. */
export const MAX_URL_CHARS = 2048;
export const MAX_METHOD_CHARS = 16;
export const MAX_HEADERS = 32;
export const MAX_HEADERS_CHARS = 16 * 1024;
/** protobuf's Timestamp range: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z. */
export const TIMESTAMP_SECONDS: readonly [bigint, bigint] = [-62_135_596_800n, 253_402_300_799n];

/** The shortest heartbeat interval a welcome may announce (a server refuses to start outside these). */
export const MIN_HEARTBEAT_INTERVAL_MS = 50;
/** The longest heartbeat interval a welcome may announce. */
export const MAX_HEARTBEAT_INTERVAL_MS = 300_000;

/** The most characters of a server's text (status details, a drain's reason, its id) a log line repeats. */
export const SAID_CHARS = 300;
/** What a canceled attempt keeps of the server's reason (its result's error is bounded too). */
export const CANCEL_REASON_CHARS = 1024;

/** `ms` within [{@link MIN_HEARTBEAT_INTERVAL_MS}, {@link MAX_HEARTBEAT_INTERVAL_MS}]. */
export function clampHeartbeatIntervalMs(ms: number): number {
  return Math.min(MAX_HEARTBEAT_INTERVAL_MS, Math.max(MIN_HEARTBEAT_INTERVAL_MS, ms));
}

/** Characters (code points, as Python counts them) of `text`. */
export function codePoints(text: string): number {
  let count = 0;
  for (let i = 0; i < text.length; i += 1) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) i += 1;
    }
    count += 1;
  }
  return count;
}

/** The first `limit` characters (code points) of `text`. */
export function firstChars(text: string, limit: number): string {
  if (text.length <= limit) return text;
  let end = 0;
  for (let count = 0; count < limit && end < text.length; count += 1) {
    const unit = text.charCodeAt(end);
    end += unit >= 0xd800 && unit <= 0xdbff && end + 1 < text.length && (text.charCodeAt(end + 1) & 0xfc00) === 0xdc00 ? 2 : 1;
  }
  return text.slice(0, end);
}

/** Characters of `text` when over `limit`, else undefined (a length in UTF-16 units is never below one in code points). */
function over(text: string, limit: number): number | undefined {
  if (text.length <= limit) return undefined;
  const chars = codePoints(text);
  return chars > limit ? chars : undefined;
}

/** True when `ts` lies in protobuf's Timestamp range. */
export function validTimestamp(ts: Timestamp): boolean {
  return ts.seconds >= TIMESTAMP_SECONDS[0] && ts.seconds <= TIMESTAMP_SECONDS[1] && ts.nanos >= 0 && ts.nanos < 1_000_000_000;
}

/**
 * `ts` as a Date; one out of protobuf's range (a broken server's) as the
 * nearest instant in it, as the Python worker reads it: no Invalid Date
 * reaches a handler or a deadline.
 */
export function dateOf(ts: Timestamp): Date {
  const seconds = ts.seconds < TIMESTAMP_SECONDS[0] ? TIMESTAMP_SECONDS[0] : ts.seconds > TIMESTAMP_SECONDS[1] ? TIMESTAMP_SECONDS[1] : ts.seconds;
  const nanos = Math.min(Math.max(ts.nanos, 0), 999_999_999);
  return new Date(Number(seconds) * 1000 + Math.floor(nanos / 1_000_000));
}

/** What of `a` is out of bounds, as the end of a protocol error's line; undefined when nothing is. */
export function assignmentBreach(a: Assignment): string | undefined {
  if (a.executionId.length === 0) {
    return "an assignment with an execution id of 0 characters";
  }
  const id = over(a.executionId, MAX_ID_CHARS);
  if (id !== undefined) {
    return `an assignment with an execution id of ${id} characters`;
  }
  for (const [name, text] of [["job id", a.jobId], ["tenant", a.tenant], ["traceparent", a.traceparent]] as const) {
    const chars = over(text, MAX_ID_CHARS);
    if (chars !== undefined) return `an assignment with a ${name} of ${chars} characters`;
  }
  if (a.payload.length > MAX_PAYLOAD_BYTES) {
    return `an assignment with a payload of ${a.payload.length} bytes`;
  }
  const kind = a.target?.kind;
  if (kind?.case === "handler") {
    const chars = over(kind.value.name, MAX_HANDLER_CHARS);
    if (chars !== undefined) return `an assignment with a handler name of ${chars} characters`;
  } else if (kind?.case === "http") {
    const http = kind.value;
    const url = over(http.url, MAX_URL_CHARS);
    if (url !== undefined) return `an assignment with an HTTP URL of ${url} characters`;
    const method = over(http.method, MAX_METHOD_CHARS);
    if (method !== undefined) return `an assignment with an HTTP method of ${method} characters`;
    const names = Object.keys(http.headers);
    if (names.length > MAX_HEADERS) return `an assignment with ${names.length} HTTP headers`;
    let units = 0;
    for (const name of names) units += name.length + (http.headers[name] ?? "").length;
    if (units > MAX_HEADERS_CHARS) {
      let chars = 0;
      for (const name of names) chars += codePoints(name) + codePoints(http.headers[name] ?? "");
      if (chars > MAX_HEADERS_CHARS) return `an assignment with HTTP headers of ${chars} characters`;
    }
  }
  return undefined;
}

const LINE_BREAK = /[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]/;
/** Not printable as Python's `str.isprintable` sees it: Other and Separator categories, but the space. */
const UNPRINTABLE = /(?! )[\p{C}\p{Z}]/gu;

/**
 * `text` from a server, fit for a log line: its first line, printable, at
 * most {@link SAID_CHARS} characters (then `...`), the worker's credential
 * masked (a server may echo it).
 */
export function clean(text: string, credential: string): string {
  // A server's text may run to megabytes: only its head is looked at.
  let head = firstChars(text, SAID_CHARS + credential.length + 1).split(LINE_BREAK)[0] ?? "";
  if (credential) head = head.split(credential).join("***");
  head = firstChars(head, SAID_CHARS + 1).replace(UNPRINTABLE, "?");
  return codePoints(head) <= SAID_CHARS ? head : `${firstChars(head, SAID_CHARS)}...`;
}

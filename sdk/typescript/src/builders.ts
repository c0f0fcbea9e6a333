/**
 * Typed helpers that build `tickwheel.v1` messages for the common cases.
 *
 * What only the server can judge (a cron expression's syntax, whether a zone
 * exists) stays on the server, which answers INVALID_ARGUMENT naming the
 * field. What can be checked locally (exactly one target, a valid instant,
 * known policy names, non-negative durations) throws a TypeError or
 * RangeError here.
 *
 * ```ts
 * const job = cronJob("nightly-report", "0 2 * * *", "Europe/London", { handler: "reports.nightly" });
 * ```
 */

import { create } from "@bufbuild/protobuf";
import { DurationSchema, timestampFromDate, type Duration, type Timestamp } from "@bufbuild/protobuf/wkt";

import {
  ConcurrencyKeySchema,
  DstGapPolicy,
  DstPolicySchema,
  DstRepeatPolicy,
  ExecutionStatus,
  JobSchema,
  JobState,
  MisfirePolicy,
  OverlapPolicy,
  RetryPolicySchema,
  TargetSchema,
  type DstPolicy,
  type Job,
  type RetryPolicy,
  type Schedule,
  type Target,
} from "./gen/tickwheel/v1/job_pb.js";
import { CalendarSchema, type Calendar, type Weekday } from "./gen/tickwheel/v1/calendar_pb.js";

/** An instant: a `Date` (always an instant in JavaScript) or a protobuf `Timestamp`. */
export type TimestampLike = Date | Timestamp;

/** A `Timestamp` from a valid `Date` (stored as UTC). */
export function timestamp(value: TimestampLike): Timestamp {
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) {
      throw new RangeError("invalid Date");
    }
    return timestampFromDate(value);
  }
  if (value?.$typeName === "google.protobuf.Timestamp") {
    return value;
  }
  throw new TypeError("expected a Date or a google.protobuf.Timestamp");
}

/** A `Duration` from a non-negative number of milliseconds (or a `Duration` as is). */
export function duration(value: number | Duration): Duration {
  if (typeof value !== "number") {
    if (value?.$typeName === "google.protobuf.Duration") {
      return value;
    }
    throw new TypeError("expected milliseconds or a google.protobuf.Duration");
  }
  if (!Number.isFinite(value) || value < 0) {
    throw new RangeError(`a duration must be a non-negative number of milliseconds, not ${value}`);
  }
  const whole = Math.floor(value / 1000);
  return create(DurationSchema, { seconds: BigInt(whole), nanos: Math.round((value - whole * 1000) * 1e6) });
}

type EnumObject = Record<string, string | number>;

function enumValue<E extends number>(enumObject: EnumObject, value: string | E, what: string): E {
  if (typeof value === "number") {
    if (typeof enumObject[value] !== "string" || value === 0) {
      throw new RangeError(`unknown ${what} ${value}`);
    }
    return value;
  }
  const name = String(value).trim().toUpperCase().replace(/-/g, "_");
  const found = enumObject[name];
  if (typeof found !== "number" || found === 0) {
    const choices = Object.keys(enumObject)
      .filter((k) => Number.isNaN(Number(k)) && k !== "UNSPECIFIED")
      .map((k) => k.toLowerCase())
      .join(", ");
    throw new RangeError(`unknown ${what} ${JSON.stringify(value)}; one of: ${choices}`);
  }
  return found as E;
}

export type OverlapName = "skip" | "queue_one" | "allow" | "replace";
export type MisfireName = "run_once" | "run_all" | "skip";
export type JobStateName = "active" | "paused" | "completed";
export type ExecutionStatusName = "scheduled" | "waiting" | "running" | "succeeded" | "dead" | "canceled";
export type DstGapName = "auto" | "shift" | "skip";
export type DstRepeatName = "auto" | "once" | "both";

/** `"skip"`, `"queue_one"`, `"allow"` or `"replace"` (or the enum value). */
export function overlapPolicy(value: OverlapName | OverlapPolicy): OverlapPolicy {
  return enumValue(OverlapPolicy, value, "overlap policy");
}

/** `"run_once"`, `"run_all"` or `"skip"` (or the enum value). */
export function misfirePolicy(value: MisfireName | MisfirePolicy): MisfirePolicy {
  return enumValue(MisfirePolicy, value, "misfire policy");
}

/** `"active"`, `"paused"` or `"completed"` (or the enum value). */
export function jobState(value: JobStateName | JobState): JobState {
  return enumValue(JobState, value, "job state");
}

/** `"scheduled"`, `"waiting"`, `"running"`, `"succeeded"`, `"dead"` or `"canceled"` (or the enum value). */
export function executionStatus(value: ExecutionStatusName | ExecutionStatus): ExecutionStatus {
  return enumValue(ExecutionStatus, value, "execution status");
}

/**
 * A DST policy: `gap` one of `auto`/`shift`/`skip`, `repeat` one of
 * `auto`/`once`/`both`; unset leaves the server default (auto).
 */
export function dstPolicy(gap?: DstGapName | DstGapPolicy, repeat?: DstRepeatName | DstRepeatPolicy): DstPolicy {
  return create(DstPolicySchema, {
    ...(gap !== undefined ? { gap: enumValue(DstGapPolicy, gap, "DST gap policy") } : {}),
    ...(repeat !== undefined ? { repeat: enumValue(DstRepeatPolicy, repeat, "DST repeat policy") } : {}),
  });
}

/**
 * A job's retry policy. Unset fields take the server defaults (5 attempts,
 * 1 s base, 1 h cap); `maxAttempts: 1` disables retries. Attempt n >= 2
 * waits uniform in `[0, min(maxBackoff, initialBackoff * 2^(n-2))]`.
 */
export function retryPolicy(options: { maxAttempts?: number; initialBackoffMs?: number; maxBackoffMs?: number } = {}): RetryPolicy {
  const { maxAttempts = 0, initialBackoffMs, maxBackoffMs } = options;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 0) {
    throw new RangeError(`maxAttempts must be a non-negative integer, not ${maxAttempts}`);
  }
  return create(RetryPolicySchema, {
    maxAttempts,
    ...(initialBackoffMs !== undefined ? { initialBackoff: duration(initialBackoffMs) } : {}),
    ...(maxBackoffMs !== undefined ? { maxBackoff: duration(maxBackoffMs) } : {}),
  });
}

/** POST (or `method`) the payload to `url`. */
export function httpTarget(url: string, options: { method?: string; headers?: Record<string, string> } = {}): Target {
  return create(TargetSchema, {
    kind: { case: "http", value: { url, method: options.method ?? "", headers: { ...(options.headers ?? {}) } } },
  });
}

/** Run the handler a worker registered under `name`. */
export function handlerTarget(name: string): Target {
  return create(TargetSchema, { kind: { case: "handler", value: { name } } });
}

/** Options every kind of job takes. Durations are milliseconds. */
export interface JobOptions {
  /** Run the handler a worker registered under this name. Exactly one of `handler` and `url`. */
  handler?: string;
  /** POST the payload to this URL. Exactly one of `handler` and `url`. */
  url?: string;
  /** HTTP method for `url` (default POST). */
  method?: string;
  /** Extra HTTP headers for `url`. */
  headers?: Record<string, string>;
  /** Bytes handed to the target; a string is sent as UTF-8. */
  payload?: Uint8Array | string;
  /** A stable delay in `[0, jitterMs)` after the nominal instant. */
  jitterMs?: number;
  /** How long one attempt may run (default 5 min, at most 6 h). */
  timeoutMs?: number;
  /** Retries after a failed attempt; see {@link retryPolicy}. */
  retry?: RetryPolicy;
  /** What to do with occurrences missed by more than the misfire threshold (default run_once). */
  misfire?: MisfireName | MisfirePolicy;
  /** An occurrence later than this at claim time is missed (default 60 s). */
  misfireThresholdMs?: number;
  /** Alert when an occurrence has not started this long after its due instant (default 5 min; 0 disables). */
  latenessThresholdMs?: number;
  /** At most `limit` executions of all jobs naming a key run at once: `{ "db-migrations": 1 }`. */
  concurrencyKeys?: Record<string, number>;
  /** Free-form labels for search and grouping. */
  labels?: Record<string, string>;
}

/** Options of a recurring job. */
export interface CronJobOptions extends JobOptions {
  /** No jitter at all (excludes `jitterMs`). */
  exact?: boolean;
  /** No occurrence is nominally before this instant. */
  startAt?: TimestampLike;
  /** No occurrence is nominally at or after this instant. */
  endAt?: TimestampLike;
  /** The job completes after this many occurrences; 0 means unlimited. */
  maxRuns?: number | bigint;
  /** What happens when an occurrence comes due while the previous one runs (default skip). */
  overlap?: OverlapName | OverlapPolicy;
  /** Wall times skipped by a spring-forward jump (default auto). */
  dstGap?: DstGapName | DstGapPolicy;
  /** Wall times repeated in a fall-back transition (default auto). */
  dstRepeat?: DstRepeatName | DstRepeatPolicy;
}

/** Options of a one-off job at a local wall time. */
export interface LocalJobOptions extends JobOptions {
  dstGap?: DstGapName | DstGapPolicy;
  dstRepeat?: DstRepeatName | DstRepeatPolicy;
}

function target(options: JobOptions): Target {
  if ((options.handler === undefined) === (options.url === undefined)) {
    throw new TypeError("give exactly one target: handler or url");
  }
  if (options.handler !== undefined) {
    if (options.method !== undefined || options.headers !== undefined) {
      throw new TypeError("method and headers apply to url targets only");
    }
    return handlerTarget(options.handler);
  }
  return httpTarget(options.url as string, {
    ...(options.method !== undefined ? { method: options.method } : {}),
    ...(options.headers !== undefined ? { headers: options.headers } : {}),
  });
}

/** `value` as bytes; a string is encoded as UTF-8. */
export function payloadBytes(value: Uint8Array | string | undefined): Uint8Array {
  if (value === undefined) {
    return new Uint8Array();
  }
  return typeof value === "string" ? new TextEncoder().encode(value) : value;
}

function job(name: string, schedule: Schedule["kind"], options: CronJobOptions): Job {
  if (options.exact && options.jitterMs !== undefined) {
    throw new TypeError("exact and jitterMs exclude each other");
  }
  const maxRuns = BigInt(options.maxRuns ?? 0);
  if (maxRuns < 0n) {
    throw new RangeError("maxRuns must not be negative");
  }
  const message = create(JobSchema, {
    name,
    schedule: { kind: schedule },
    target: target(options),
    payload: payloadBytes(options.payload),
    maxRuns,
    labels: { ...(options.labels ?? {}) },
    concurrencyKeys: Object.entries(options.concurrencyKeys ?? {}).map(([key, limit]) =>
      create(ConcurrencyKeySchema, { key, limit }),
    ),
  });
  if (options.exact) {
    message.jitter = { $typeName: "tickwheel.v1.Jitter", exact: true };
  } else if (options.jitterMs !== undefined) {
    message.jitter = { $typeName: "tickwheel.v1.Jitter", exact: false, window: duration(options.jitterMs) };
  }
  if (options.startAt !== undefined) message.startAt = timestamp(options.startAt);
  if (options.endAt !== undefined) message.endAt = timestamp(options.endAt);
  if (options.timeoutMs !== undefined) message.timeout = duration(options.timeoutMs);
  if (options.retry !== undefined) message.retryPolicy = options.retry;
  if (options.overlap !== undefined) message.overlapPolicy = overlapPolicy(options.overlap);
  if (options.misfire !== undefined) message.misfirePolicy = misfirePolicy(options.misfire);
  if (options.misfireThresholdMs !== undefined) message.misfireThreshold = duration(options.misfireThresholdMs);
  if (options.latenessThresholdMs !== undefined) message.latenessThreshold = duration(options.latenessThresholdMs);
  if (options.dstGap !== undefined || options.dstRepeat !== undefined) {
    message.dstPolicy = dstPolicy(options.dstGap, options.dstRepeat);
  }
  return message;
}

/**
 * A recurring job: five-field cron `expression` in IANA zone `timeZone`
 * (`"UTC"` for UTC), calling exactly one of `handler` or `url`.
 *
 * Unset options take the server's defaults (jitter in [0, 60 s) from the job
 * id, 5 attempts, overlap `skip`, misfire `run_once`); `exact: true` turns
 * jitter off.
 */
export function cronJob(name: string, expression: string, timeZone: string, options: CronJobOptions): Job {
  return job(name, { case: "cron", value: { $typeName: "tickwheel.v1.CronSchedule", expression, timeZone } }, options);
}

/**
 * A one-off job at the instant `at`, calling exactly one of `handler` or
 * `url`. No jitter unless `jitterMs` is given. An instant already past runs
 * at once when within the misfire threshold (default 60 s), otherwise as the
 * misfire policy says.
 */
export function onceJob(name: string, at: TimestampLike, options: JobOptions): Job {
  return job(name, { case: "onceAt", value: timestamp(at) }, options);
}

/**
 * A one-off job at a local wall time (`"2027-03-28T02:30:00"`, no offset) in
 * IANA zone `timeZone`, resolved by the DST policy when that wall time is
 * skipped or repeated. Otherwise as {@link onceJob}.
 */
export function localJob(name: string, localTime: string, timeZone: string, options: LocalJobOptions): Job {
  return job(name, { case: "local", value: { $typeName: "tickwheel.v1.LocalTimeSchedule", localTime, timeZone } }, options);
}

// --- calendars ----------------------------------------------------------------

/** A weekday by name, whole or its first three letters, any case. */
export type WeekdayName =
  | "monday" | "tuesday" | "wednesday" | "thursday" | "friday" | "saturday" | "sunday"
  | "mon" | "tue" | "wed" | "thu" | "fri" | "sat" | "sun";

const DAY_NAMES = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"] as const;

/**
 * The `Weekday` of an ISO number (1 Monday to 7 Sunday), a `Weekday` value or
 * a name (`"mon"`, `"Friday"`, any case). RangeError for anything else.
 */
export function weekday(value: WeekdayName | Weekday | number | string): Weekday {
  let number: number | undefined;
  if (typeof value === "number") {
    number = value;
  } else if (typeof value === "string") {
    const name = value.trim().toLowerCase();
    const index = DAY_NAMES.findIndex((day) => day === name || day.slice(0, 3) === name);
    number = index < 0 ? undefined : index + 1;
  }
  if (number === undefined || !Number.isInteger(number) || number < 1 || number > 7) {
    throw new RangeError(`not a weekday: ${JSON.stringify(value)} (1 Monday to 7 Sunday, or a name such as "mon")`);
  }
  return number as Weekday;
}

/** A calendar date: `"YYYY-MM-DD"`, or a `Date` (its UTC calendar date). */
export type DateLike = Date | string;

function dateText(value: DateLike): string {
  if (typeof value === "string") {
    return value;
  }
  if (!(value instanceof Date) || Number.isNaN(value.getTime())) {
    throw new TypeError("a date is a \"YYYY-MM-DD\" string or a valid Date");
  }
  return value.toISOString().slice(0, 10);
}

/** Options of {@link calendar}. */
export interface CalendarOptions {
  /** The business days, as names or ISO numbers (empty or unset: Monday to Friday). */
  businessDays?: (WeekdayName | Weekday | number | string)[];
  /** Dates that are not business days (at most 10 000, 1900 to 2200; the server folds duplicates). */
  holidays?: DateLike[];
  /** Business days that end early (as bounded as `holidays`). */
  halfDays?: DateLike[];
}

/**
 * A `Calendar` to create or update: `name`, its IANA `timeZone`, business
 * days, holidays and half-days. The server judges the name, the zone and
 * each date (INVALID_ARGUMENT naming e.g. `calendar.holidays[3]`); a bad
 * weekday or a `Date` that is not one throws here.
 *
 * ```ts
 * await client.createCalendar(calendar("uk-banks", "Europe/London", { holidays: ["2027-12-27", "2027-12-28"] }));
 * ```
 */
export function calendar(name: string, timeZone: string, options: CalendarOptions = {}): Calendar {
  return create(CalendarSchema, {
    name,
    timeZone,
    businessDays: (options.businessDays ?? []).map((day) => weekday(day)),
    holidays: (options.holidays ?? []).map(dateText),
    halfDays: (options.halfDays ?? []).map(dateText),
  });
}

/**
 * The worker's lines through an outage of its server, and the lines a
 * server can make it write at will: the same as the Python worker's
 * (`tickwheel.shared.outages.OutageLog` and the runtime's `_Limited`).
 *
 * {@link OutageLog}: one WARNING when an outage begins (what failed and the
 * server's error, cleaned), a `still failing` WARNING a minute later, then
 * after gaps that double up to 15 minutes (lines at 1, 3, 7, 15, 30...
 * minutes), DEBUG for each failure in between, and one INFO with the
 * outage's duration once a stream lasted a heartbeat interval. A relapse
 * within a minute of the last WARNING is DEBUG, and so is its recovery.
 *
 * {@link Limited}: each kind of line a server causes with its messages (a
 * duplicate assignment, one beyond the credit, a second welcome, a drain)
 * at its level at most once a minute, the rest DEBUG, counted in the next
 * line of that kind.
 */

import type { Clock } from "./clock.js";

/** Milliseconds from an outage's first line to its first `still failing` line. */
export const STILL_EVERY_MS = 60_000;
/** Milliseconds between two `still failing` lines at most. */
export const STILL_AT_MOST_MS = 900_000;

export type Level = "debug" | "info" | "warn" | "error";

/** Where lines go: the worker's {@link Logger} (declared in worker.ts) fits. */
export interface Lines {
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string, error?: unknown): void;
}

/** The failures of a worker's streams, logged as above. */
export class OutageLog {
  /** When the current outage began (monotonic ms); undefined when none. */
  downSince: number | undefined;
  private warnedAt: number | undefined;
  private gap = STILL_EVERY_MS;
  private announced = false;
  private failures = 0;

  constructor(
    private readonly log: Lines,
    readonly component: string,
    private readonly clock: Clock,
    private readonly then = "reconnecting",
  ) {}

  get down(): boolean {
    return this.downSince !== undefined;
  }

  /** `what` failed with the server's error `said` (already cleaned). */
  failed(what: string, said: string): void {
    const now = this.clock.monotonicMs();
    this.failures += 1;
    if (this.downSince === undefined) {
      this.downSince = now;
      this.failures = 1;
      this.gap = STILL_EVERY_MS;
      const quiet = this.warnedAt !== undefined && now - this.warnedAt < STILL_EVERY_MS;
      this.announced = !quiet;
      if (quiet) {
        this.log.debug(`${this.component}: ${what} failed again: ${said}`);
        return;
      }
      this.warnedAt = now;
      this.log.warn(`${this.component}: ${what} failed, server unavailable: ${said}; ${this.then}`);
    } else if (this.warnedAt === undefined || now - this.warnedAt >= this.gap) {
      if (this.announced) this.gap = Math.min(this.gap * 2, STILL_AT_MOST_MS);
      this.warnedAt = now;
      this.announced = true;
      const lasted = Math.round((now - this.downSince) / 1000);
      this.log.warn(
        `${this.component}: still failing for ${lasted} s (${this.failures} failures), server unavailable: ` +
          `${what} failed: ${said}; ${this.then}`,
      );
    } else {
      this.log.debug(`${this.component}: ${what} failed: ${said}`);
    }
  }

  /** A stream worked: log the recovery if an outage was on. */
  ok(): void {
    if (this.downSince === undefined) return;
    const lasted = Math.round((this.clock.monotonicMs() - this.downSince) / 1000);
    const line = `${this.component}: recovered after ${lasted} s (${this.failures} failures)`;
    if (this.announced) this.log.info(line);
    else this.log.debug(line);
    this.downSince = undefined;
    this.failures = 0;
  }
}

/** Lines of a kind a server causes at will: one a minute at their level, the rest DEBUG. */
export class Limited {
  private readonly saidAt = new Map<string, number>();
  private readonly unsaid = new Map<string, number>();

  constructor(private readonly log: Lines, private readonly clock: Clock) {}

  /** Logs `message` as a line of `kind` at `level` or, within a minute of the last such line, at DEBUG. */
  say(kind: string, level: Level, message: string): void {
    const now = this.clock.monotonicMs();
    const saidAt = this.saidAt.get(kind);
    if (saidAt !== undefined && now - saidAt < STILL_EVERY_MS) {
      this.unsaid.set(kind, (this.unsaid.get(kind) ?? 0) + 1);
      this.log.debug(message);
      return;
    }
    this.saidAt.set(kind, now);
    const unsaid = this.unsaid.get(kind) ?? 0;
    this.unsaid.delete(kind);
    const line = unsaid ? `${message} (${unsaid} more since the last such line, at DEBUG)` : message;
    this.log[level](line);
  }
}

/**
 * A {@link Clock} that moves only when told to, for the worker's tests:
 * `sleep` waits until {@link FakeClock.advance} moves the clock past its end
 * (or its signal aborts). Waits shorter than `jumpBelowMs` pass at once, the
 * clock moving by them (a worker's reconnect backoff), so hundreds of
 * reconnects take a fraction of a second and nothing sleeps on wall time.
 */

import type { Clock } from "../../src/clock.js";

interface Sleeper {
  at: number;
  wake: () => void;
}

export class FakeClock implements Clock {
  private mono = 1_000_000;
  private wall = Date.parse("2027-01-01T00:00:00Z");
  private readonly sleepers = new Set<Sleeper>();
  /** Every wait asked for, in ms, in order. */
  readonly waits: number[] = [];

  constructor(private readonly jumpBelowMs = 0) {}

  now(): Date {
    return new Date(this.wall);
  }

  monotonicMs(): number {
    return this.mono;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    this.waits.push(ms);
    if (signal?.aborted) return Promise.resolve();
    if (!(ms > 0) || ms < this.jumpBelowMs) {
      if (ms > 0) this.advance(ms);
      return new Promise((resolve) => setImmediate(resolve));
    }
    return new Promise((resolve) => {
      const sleeper: Sleeper = {
        at: this.mono + ms,
        wake: () => {
          this.sleepers.delete(sleeper);
          signal?.removeEventListener("abort", sleeper.wake);
          resolve();
        },
      };
      this.sleepers.add(sleeper);
      signal?.addEventListener("abort", sleeper.wake, { once: true });
    });
  }

  /** Moves both clocks by `ms` and wakes the sleepers due. */
  advance(ms: number): void {
    this.mono += ms;
    this.wall += ms;
    for (const sleeper of [...this.sleepers]) {
      if (sleeper.at <= this.mono) sleeper.wake();
    }
  }
}

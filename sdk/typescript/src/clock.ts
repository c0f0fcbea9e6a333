/**
 * Time as a dependency: everything in the SDK that reads the time or waits
 * takes a {@link Clock}, so tests can substitute their own.
 */

export interface Clock {
  /** The wall-clock instant. */
  now(): Date;
  /** Milliseconds on a clock that never goes back; only differences mean anything. */
  monotonicMs(): number;
  /**
   * Resolves after `ms` milliseconds, or as soon as `signal` aborts (never
   * rejects): callers check the signal when they care which happened.
   */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** Resolves after `ms` milliseconds or when `signal` aborts, whichever is first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve();
      return;
    }
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, Math.max(0, ms));
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** The process's clocks: `Date` and `performance.now()`. */
export const systemClock: Clock = {
  now: () => new Date(),
  monotonicMs: () => performance.now(),
  sleep,
};

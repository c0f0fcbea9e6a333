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

/** The longest delay `setTimeout` takes; a longer one fires at once (Node warns, then waits 1 ms). */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Resolves after `ms` milliseconds or when `signal` aborts, whichever is
 * first. A wait longer than {@link MAX_TIMER_MS} (a deadline years ahead)
 * is waited in parts; `Infinity` waits until `signal` aborts.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve();
      return;
    }
    let left = Number.isNaN(ms) ? 0 : Math.max(0, ms);
    let timer: ReturnType<typeof setTimeout>;
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const wait = () => {
      const part = Math.min(left, MAX_TIMER_MS);
      left -= part;
      timer = setTimeout(left > 0 ? wait : done, part);
    };
    wait();
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** The process's clocks: `Date` and `performance.now()`. */
export const systemClock: Clock = {
  now: () => new Date(),
  monotonicMs: () => performance.now(),
  sleep,
};

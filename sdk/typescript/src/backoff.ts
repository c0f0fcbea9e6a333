/** Reconnect backoff: full jitter, capped (a pure function). */

/**
 * Milliseconds to wait before reconnect attempt number `failures + 1`.
 *
 * Uniform in `[0, min(capMs, initialMs * 2^failures)]` ("full jitter"), so a
 * fleet of workers that lost the same server does not reconnect in step.
 * `failures` counts consecutive attempts that never got a welcome; it is 0
 * right after a session that did, so a drained worker comes back quickly.
 */
export function reconnectDelayMs(
  failures: number,
  options: { initialMs: number; capMs: number; random?: () => number },
): number {
  if (!Number.isInteger(failures) || failures < 0) {
    throw new RangeError("failures must be an integer >= 0");
  }
  const ceiling = Math.min(options.capMs, options.initialMs * 2 ** Math.min(failures, 62));
  return (options.random ?? Math.random)() * ceiling;
}

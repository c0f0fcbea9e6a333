/** What the worker's tests wait on: a gate a test opens, and a condition polled with a bound. */

/** A promise with its resolve, for handlers the test releases. */
export function gate<T = void>(): { promise: Promise<T>; open: (value: T) => void } {
  let open!: (value: T) => void;
  const promise = new Promise<T>((resolve) => (open = resolve));
  return { promise, open };
}

/**
 * Resolves once `check` holds, polling while the fake server and the worker
 * run; rejects after `timeoutMs` (a bound on a wait, never what decides a test).
 */
export async function eventually(check: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/**
 * The few synchronisation primitives the worker needs on one event loop: a
 * wake-up flag, a broadcast of "something changed", and a semaphore whose
 * waits can be abandoned.
 */

/** A level-triggered wake-up: `wake()` sets it, `wait()` returns once it is set and clears it. */
export class Wakeup {
  private set = false;
  private waiter: (() => void) | undefined;

  wake(): void {
    this.set = true;
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter?.();
  }

  /** Resolves when woken (at once if already woken) or when `signal` aborts. One waiter at a time. */
  async wait(signal: AbortSignal): Promise<void> {
    if (!this.set && !signal.aborted) {
      await new Promise<void>((resolve) => {
        const done = () => {
          signal.removeEventListener("abort", done);
          this.waiter = undefined;
          resolve();
        };
        this.waiter = done;
        signal.addEventListener("abort", done, { once: true });
      });
    }
    this.set = false;
  }
}

/** A broadcast: every `changed()` promise taken before `notify()` resolves on it. */
export class Broadcast {
  private resolve!: () => void;
  private promise: Promise<void>;

  constructor() {
    this.promise = this.next();
  }

  private next(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.resolve = resolve;
    });
  }

  /** A promise for the next notification. */
  changed(): Promise<void> {
    return this.promise;
  }

  notify(): void {
    const resolve = this.resolve;
    this.promise = this.next();
    resolve();
  }
}

/** A counting semaphore handing permits out in arrival order. */
export class Semaphore {
  private readonly waiters: Array<(acquired: boolean) => void> = [];

  constructor(private permits: number) {}

  /**
   * Resolves true once a permit is taken, or false when `signal` aborted
   * first (then no permit is held).
   */
  acquire(signal: AbortSignal): Promise<boolean> {
    if (signal.aborted) {
      return Promise.resolve(false);
    }
    if (this.permits > 0) {
      this.permits -= 1;
      return Promise.resolve(true);
    }
    return new Promise<boolean>((resolve) => {
      const waiter = (acquired: boolean) => {
        signal.removeEventListener("abort", onAbort);
        resolve(acquired);
      };
      const onAbort = () => {
        const index = this.waiters.indexOf(waiter);
        if (index !== -1) {
          this.waiters.splice(index, 1);
          waiter(false);
        }
      };
      this.waiters.push(waiter);
      signal.addEventListener("abort", onAbort, { once: true });
    });
  }

  release(): void {
    const next = this.waiters.shift();
    if (next !== undefined) {
      next(true); // the permit passes straight to the next waiter
    } else {
      this.permits += 1;
    }
  }
}

/**
 * A promise that resolves when `signal` aborts (at once if it has), and a
 * `dispose` that removes its listener: for waits on long-lived signals, which
 * must not collect one listener per wait.
 */
export function whenAborted(signal: AbortSignal): { promise: Promise<void>; dispose(): void } {
  let listener: (() => void) | undefined;
  const promise = new Promise<void>((resolve) => {
    if (signal.aborted) {
      resolve();
      return;
    }
    listener = () => resolve();
    signal.addEventListener("abort", listener, { once: true });
  });
  return {
    promise,
    dispose: () => {
      if (listener !== undefined) signal.removeEventListener("abort", listener);
    },
  };
}

package dev.tickwheel.worker;

import java.time.Duration;

/** The worker's reconnect backoff: full jitter, doubling, capped (a pure function). */
final class Backoff {
  private Backoff() {}

  /**
   * The wait before reconnect attempt {@code failures + 1}: {@code u * min(cap, initial *
   * 2^failures)} for {@code u} drawn uniformly from [0, 1) ("full jitter", so a fleet of workers
   * that lost the same server does not reconnect in step). {@code failures} counts consecutive
   * streams that got no welcome; it is 0 right after one that did, so a drained worker comes back
   * quickly.
   *
   * @throws IllegalArgumentException when {@code failures < 0} or {@code u} is outside [0, 1)
   */
  static Duration reconnectDelay(int failures, Duration initial, Duration cap, double u) {
    if (failures < 0) {
      throw new IllegalArgumentException("failures must be >= 0");
    }
    if (!(u >= 0 && u < 1)) {
      throw new IllegalArgumentException("u must be in [0, 1)");
    }
    long first = initial.toNanos();
    long most = cap.toNanos();
    // Doubling past the cap would overflow; stop as soon as it reaches it.
    long ceiling = failures < 62 && first <= (most >> failures) ? first << failures : most;
    return Duration.ofNanos((long) (u * ceiling));
  }
}

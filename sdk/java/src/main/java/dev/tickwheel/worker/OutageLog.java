package dev.tickwheel.worker;

import java.lang.System.Logger.Level;
import java.time.Clock;
import java.time.Duration;

/**
 * The failures of the worker's streams through an outage of its server, as the Python worker's
 * {@code tickwheel.shared.outages.OutageLog}: one WARNING when the outage begins (what failed and
 * why), a "still failing" WARNING {@link #STILL_EVERY} later, then after gaps doubling up to
 * {@link #STILL_AT_MOST} (lines at 1, 3, 7 and 15 minutes, then every 15), DEBUG for the failures
 * in between, and one INFO with its duration once a stream lasted a heartbeat interval ({@link
 * #ok}). A relapse within {@link #STILL_EVERY} of the last WARNING is DEBUG, and so is its
 * recovery. Used by the thread in {@link Worker#run()} only.
 */
final class OutageLog {
  /** From an outage's first line to its first "still failing" line. */
  static final Duration STILL_EVERY = Duration.ofMinutes(1);
  /** The longest gap between two "still failing" lines. */
  static final Duration STILL_AT_MOST = Duration.ofMinutes(15);

  private final System.Logger log;
  private final String component;
  private final Clock clock;
  /** When the current outage began (the clock's millis); -1 when none is on. */
  private long downSince = -1;
  private long warnedAt = -1;
  private long gap = STILL_EVERY.toMillis();
  private boolean announced;
  private int failures;

  OutageLog(System.Logger log, String component, Clock clock) {
    this.log = log;
    this.component = component;
    this.clock = clock;
  }

  boolean down() {
    return downSince >= 0;
  }

  /** Logs that {@code what} ("connecting", "the stream") failed, with {@code why} (said). */
  void failed(String what, String why) {
    long now = clock.millis();
    failures++;
    if (downSince < 0) {
      downSince = now;
      failures = 1;
      gap = STILL_EVERY.toMillis();
      if (warnedAt >= 0 && now - warnedAt < STILL_EVERY.toMillis()) {
        announced = false;
        log.log(Level.DEBUG, "{0}: {1} failed again: {2}", component, what, why);
        return;
      }
      announced = true;
      warnedAt = now;
      log.log(
          Level.WARNING,
          "{0}: {1} failed, server unavailable: {2}; reconnecting",
          component,
          what,
          why);
    } else if (warnedAt < 0 || now - warnedAt >= gap) {
      if (announced) {
        gap = Math.min(2 * gap, STILL_AT_MOST.toMillis());
      }
      announced = true;
      warnedAt = now;
      log.log(
          Level.WARNING,
          "{0}: still failing for {1} s ({2} failures), server unavailable: {3} failed: {4};"
              + " reconnecting",
          component,
          Long.toString((now - downSince) / 1000),
          Integer.toString(failures),
          what,
          why);
    } else {
      log.log(Level.DEBUG, "{0}: {1} failed: {2}", component, what, why);
    }
  }

  /** A stream lasted a heartbeat interval: logs the recovery if an outage was on. */
  void ok() {
    if (downSince < 0) {
      return;
    }
    log.log(
        announced ? Level.INFO : Level.DEBUG,
        "{0}: recovered after {1} s ({2} failures)",
        component,
        Long.toString((clock.millis() - downSince) / 1000),
        Integer.toString(failures));
    downSince = -1;
    failures = 0;
  }
}

package dev.tickwheel.worker;

import java.lang.System.Logger.Level;
import java.text.MessageFormat;
import java.time.Clock;
import java.util.HashMap;
import java.util.Map;

/**
 * Lines a broken or hostile server causes at will, one per message it sends (a duplicate
 * assignment, one beyond the credit, a second welcome, a drain): each kind at its level at most
 * once a {@link OutageLog#STILL_EVERY}, the rest DEBUG, counted in the next line of that kind.
 * Guarded by the worker's lock.
 */
final class Limited {
  private final System.Logger log;
  private final Clock clock;
  private final Map<String, Long> saidAt = new HashMap<>();
  private final Map<String, Integer> unsaid = new HashMap<>();

  Limited(System.Logger log, Clock clock) {
    this.log = log;
    this.clock = clock;
  }

  /** Logs {@code format} (a MessageFormat) of {@code kind} at {@code level}, or at DEBUG. */
  void log(String kind, Level level, String format, Object... args) {
    long now = clock.millis();
    Long at = saidAt.get(kind);
    String text = MessageFormat.format(format, args);
    if (at != null && now - at < OutageLog.STILL_EVERY.toMillis()) {
      unsaid.merge(kind, 1, Integer::sum);
      log.log(Level.DEBUG, text);
      return;
    }
    saidAt.put(kind, now);
    Integer more = unsaid.remove(kind);
    log.log(
        level,
        more == null ? text : text + " (" + more + " more since the last such line, at DEBUG)");
  }
}

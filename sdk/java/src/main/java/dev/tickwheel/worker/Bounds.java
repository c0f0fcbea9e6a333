package dev.tickwheel.worker;

import com.google.protobuf.Timestamp;
import dev.tickwheel.v1.Assignment;
import dev.tickwheel.v1.HttpTarget;
import java.time.Instant;
import java.util.Map;

/**
 * What the worker keeps of a server's assignment, bounded field by field: the bounds of the Python
 * worker ({@code tickwheel_worker.bounds}), the TypeScript worker ({@code src/bounds.ts}) and the
 * Go worker, in characters (code points). A worker holds up to {@code 2 * slots} assignments and
 * their unacknowledged results for as long as they run, so a broken or hostile server could
 * otherwise make it hold ids of megabytes or payloads of the whole receive limit each. The bounds
 * are far above what a server that keeps the contract sends; an assignment past one is a protocol
 * error, which ends the stream, and nothing of its message is taken.
 */
final class Bounds {
  /**
   * The longest execution id (at least 1 character), job id, tenant or traceparent an assignment
   * may carry (the server makes execution ids of at most 256 characters, tenant names of 63).
   */
  static final int MAX_ID_CHARS = 1024;

  /** The contract's bound of a handler name. */
  static final int MAX_HANDLER_CHARS = 200;

  /** A job's payload reaches the server in a request of at most 4 MiB (gRPC's default). */
  static final int MAX_PAYLOAD_BYTES = 4 * 1024 * 1024;

  /**
   * An HTTP target's URL, method and headers (count; names and values in all), as the contract
   * bounds them. This worker runs no HTTP target (it says {@code http: false}), but it holds the
   * assignment until it has answered it.
   */
  static final int MAX_URL_CHARS = 2048;

  static final int MAX_METHOD_CHARS = 16;
  static final int MAX_HEADERS = 32;
  static final int MAX_HEADERS_CHARS = 16 * 1024;

  /** protobuf's Timestamp range: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z. */
  static final long MIN_TIMESTAMP_SECONDS = -62_135_596_800L;

  static final long MAX_TIMESTAMP_SECONDS = 253_402_300_799L;

  /** protobuf's Duration range: 10 000 years either way. */
  static final long MAX_DURATION_SECONDS = 315_576_000_000L;

  private Bounds() {}

  /** The characters of {@code text} when more than {@code limit}, else -1. */
  private static int over(String text, int limit) {
    int characters = ServerText.characters(text, limit);
    return characters > limit ? characters : -1;
  }

  /**
   * What of {@code a} is out of bounds, as the end of a protocol error's line (the other workers'
   * words); null when nothing is.
   */
  static String breach(Assignment a) {
    if (a.getExecutionId().isEmpty()) {
      return "an assignment with an execution id of 0 characters";
    }
    String[][] fields = {
      {"an execution id", a.getExecutionId()},
      {"a job id", a.getJobId()},
      {"a tenant", a.getTenant()},
      {"a traceparent", a.getTraceparent()},
    };
    for (String[] field : fields) {
      int characters = over(field[1], MAX_ID_CHARS);
      if (characters >= 0) {
        return "an assignment with " + field[0] + " of " + characters + " characters";
      }
    }
    if (a.getPayload().size() > MAX_PAYLOAD_BYTES) {
      return "an assignment with a payload of " + a.getPayload().size() + " bytes";
    }
    if (a.getTarget().hasHandler()) {
      int characters = over(a.getTarget().getHandler().getName(), MAX_HANDLER_CHARS);
      if (characters >= 0) {
        return "an assignment with a handler name of " + characters + " characters";
      }
    } else if (a.getTarget().hasHttp()) {
      return httpBreach(a.getTarget().getHttp());
    }
    return null;
  }

  private static String httpBreach(HttpTarget http) {
    int url = over(http.getUrl(), MAX_URL_CHARS);
    if (url >= 0) {
      return "an assignment with an HTTP URL of " + url + " characters";
    }
    int method = over(http.getMethod(), MAX_METHOD_CHARS);
    if (method >= 0) {
      return "an assignment with an HTTP method of " + method + " characters";
    }
    Map<String, String> headers = http.getHeadersMap();
    if (headers.size() > MAX_HEADERS) {
      return "an assignment with " + headers.size() + " HTTP headers";
    }
    long units = 0;
    for (Map.Entry<String, String> e : headers.entrySet()) {
      units += e.getKey().length() + e.getValue().length();
    }
    if (units > MAX_HEADERS_CHARS) {
      long characters = 0;
      for (Map.Entry<String, String> e : headers.entrySet()) {
        characters +=
            e.getKey().codePointCount(0, e.getKey().length())
                + e.getValue().codePointCount(0, e.getValue().length());
      }
      if (characters > MAX_HEADERS_CHARS) {
        return "an assignment with HTTP headers of " + characters + " characters";
      }
    }
    return null;
  }

  /** True when {@code t} lies in protobuf's Timestamp range. */
  static boolean valid(Timestamp t) {
    return t.getSeconds() >= MIN_TIMESTAMP_SECONDS
        && t.getSeconds() <= MAX_TIMESTAMP_SECONDS
        && t.getNanos() >= 0
        && t.getNanos() <= 999_999_999;
  }

  /** True when {@code d} lies in protobuf's Duration range. */
  static boolean valid(com.google.protobuf.Duration d) {
    return Math.abs(d.getSeconds()) <= MAX_DURATION_SECONDS
        && d.getNanos() > -1_000_000_000
        && d.getNanos() < 1_000_000_000;
  }

  /**
   * {@code t} as an Instant; one out of protobuf's range (a broken server's) as the nearest instant
   * in it, as the other workers read it: a year-1 deadline has passed, one beyond 9999 never comes.
   */
  static Instant instant(Timestamp t) {
    long seconds = Math.max(MIN_TIMESTAMP_SECONDS, Math.min(MAX_TIMESTAMP_SECONDS, t.getSeconds()));
    return Instant.ofEpochSecond(seconds, Math.max(0, Math.min(999_999_999, t.getNanos())));
  }
}

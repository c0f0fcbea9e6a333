package dev.tickwheel;

import com.google.protobuf.Timestamp;
import dev.tickwheel.v1.CronSchedule;
import dev.tickwheel.v1.HandlerTarget;
import dev.tickwheel.v1.HttpTarget;
import dev.tickwheel.v1.Jitter;
import dev.tickwheel.v1.Job;
import dev.tickwheel.v1.LocalTimeSchedule;
import dev.tickwheel.v1.RetryPolicy;
import dev.tickwheel.v1.Schedule;
import dev.tickwheel.v1.Target;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;

/**
 * Builders of the common {@code dev.tickwheel.v1} messages in one line.
 *
 * <p>The job builders return a {@link Job.Builder} with the name, schedule and target set, so the
 * rest reads as protobuf code does: {@code Jobs.cron(...).setRetryPolicy(Jobs.retry(...))
 * .setOverlapPolicy(OverlapPolicy.OVERLAP_POLICY_QUEUE_ONE).build()}. Unset fields take the
 * server's defaults (jitter in [0, 60 s) for cron jobs and none for one-off jobs, 5 attempts,
 * overlap skip, misfire run-once).
 *
 * <p>They only assemble messages: validation that needs the schedule engine (is this cron
 * expression valid, is this zone known) stays on the server, which answers INVALID_ARGUMENT
 * naming the field.
 */
public final class Jobs {
  private Jobs() {}

  /**
   * A recurring job: the five-field cron {@code expression} in the IANA {@code zone} ({@code
   * "UTC"} for UTC), calling {@code target}.
   */
  public static Job.Builder cron(String name, String expression, String zone, Target target) {
    return Job.newBuilder()
        .setName(name)
        .setSchedule(
            Schedule.newBuilder()
                .setCron(CronSchedule.newBuilder().setExpression(expression).setTimeZone(zone)))
        .setTarget(target);
  }

  /**
   * A one-off job at the instant {@code at}. An instant already past runs at once when within the
   * misfire threshold (default 60 s), otherwise as the misfire policy says.
   */
  public static Job.Builder once(String name, Instant at, Target target) {
    return Job.newBuilder()
        .setName(name)
        .setSchedule(Schedule.newBuilder().setOnceAt(timestamp(at)))
        .setTarget(target);
  }

  /**
   * A one-off job at a local wall time ({@code "2027-03-28T02:30:00"}, no offset) in the IANA
   * {@code zone}, resolved by the job's DST policy when that wall time is skipped or repeated.
   */
  public static Job.Builder local(String name, String localTime, String zone, Target target) {
    return Job.newBuilder()
        .setName(name)
        .setSchedule(
            Schedule.newBuilder()
                .setLocal(LocalTimeSchedule.newBuilder().setLocalTime(localTime).setTimeZone(zone)))
        .setTarget(target);
  }

  /** A target that runs the handler a worker registered under {@code name}. */
  public static Target handler(String name) {
    return Target.newBuilder().setHandler(HandlerTarget.newBuilder().setName(name)).build();
  }

  /** A target that POSTs the payload to {@code url}. */
  public static Target http(String url) {
    return http("", url, Map.of());
  }

  /**
   * A target that sends the payload to {@code url} with {@code method} (empty means POST) and
   * extra {@code headers}.
   */
  public static Target http(String method, String url, Map<String, String> headers) {
    return Target.newBuilder()
        .setHttp(HttpTarget.newBuilder().setUrl(url).setMethod(method).putAllHeaders(headers))
        .build();
  }

  /**
   * A retry policy: {@code maxAttempts} in total (1 disables retries), attempt n &ge; 2 waiting
   * uniformly in [0, min(maxBackoff, initialBackoff·2^(n-2))]. A zero or null value takes the
   * server's default (5 attempts, 1 s, 1 h).
   */
  public static RetryPolicy retry(int maxAttempts, Duration initialBackoff, Duration maxBackoff) {
    RetryPolicy.Builder policy = RetryPolicy.newBuilder().setMaxAttempts(maxAttempts);
    if (initialBackoff != null && !initialBackoff.isZero()) {
      policy.setInitialBackoff(duration(initialBackoff));
    }
    if (maxBackoff != null && !maxBackoff.isZero()) {
      policy.setMaxBackoff(duration(maxBackoff));
    }
    return policy.build();
  }

  /** Jitter of a stable delay in [0, window) from a hash of the job id. */
  public static Jitter jitter(Duration window) {
    return Jitter.newBuilder().setWindow(duration(window)).build();
  }

  /** No jitter: the due instant is the nominal instant. */
  public static Jitter exact() {
    return Jitter.newBuilder().setExact(true).build();
  }

  /** A protobuf {@code Timestamp} of an instant. */
  public static Timestamp timestamp(Instant instant) {
    return Timestamp.newBuilder()
        .setSeconds(instant.getEpochSecond())
        .setNanos(instant.getNano())
        .build();
  }

  /** The instant of a protobuf {@code Timestamp}. */
  public static Instant instant(Timestamp timestamp) {
    return Instant.ofEpochSecond(timestamp.getSeconds(), timestamp.getNanos());
  }

  /** A protobuf {@code Duration} of a {@link Duration}. */
  public static com.google.protobuf.Duration duration(Duration duration) {
    long seconds = duration.getSeconds();
    int nanos = duration.getNano(); // always >= 0; protobuf wants the sign of the seconds
    if (seconds < 0 && nanos > 0) {
      seconds += 1;
      nanos -= 1_000_000_000;
    }
    return com.google.protobuf.Duration.newBuilder().setSeconds(seconds).setNanos(nanos).build();
  }

  /** The {@link Duration} of a protobuf {@code Duration}. */
  public static Duration duration(com.google.protobuf.Duration duration) {
    return Duration.ofSeconds(duration.getSeconds(), duration.getNanos());
  }
}

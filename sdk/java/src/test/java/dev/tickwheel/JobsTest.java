package dev.tickwheel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickwheel.v1.CronSchedule;
import dev.tickwheel.v1.HandlerTarget;
import dev.tickwheel.v1.Job;
import dev.tickwheel.v1.OverlapPolicy;
import dev.tickwheel.v1.RetryPolicy;
import dev.tickwheel.v1.Schedule;
import dev.tickwheel.v1.Target;
import java.time.Duration;
import java.time.Instant;
import java.time.ZonedDateTime;
import java.time.ZoneId;
import java.util.Map;
import org.junit.jupiter.api.Test;

class JobsTest {
  @Test
  void cronJobWithPolicies() {
    Job got =
        Jobs.cron("nightly-report", "0 2 * * *", "Europe/London", Jobs.handler("reports.nightly"))
            .setRetryPolicy(Jobs.retry(3, Duration.ofSeconds(1), Duration.ofMinutes(1)))
            .setOverlapPolicy(OverlapPolicy.OVERLAP_POLICY_QUEUE_ONE)
            .setJitter(Jobs.exact())
            .build();
    Job want =
        Job.newBuilder()
            .setName("nightly-report")
            .setSchedule(
                Schedule.newBuilder()
                    .setCron(
                        CronSchedule.newBuilder()
                            .setExpression("0 2 * * *")
                            .setTimeZone("Europe/London")))
            .setTarget(
                Target.newBuilder().setHandler(HandlerTarget.newBuilder().setName("reports.nightly")))
            .setRetryPolicy(
                RetryPolicy.newBuilder()
                    .setMaxAttempts(3)
                    .setInitialBackoff(com.google.protobuf.Duration.newBuilder().setSeconds(1))
                    .setMaxBackoff(com.google.protobuf.Duration.newBuilder().setSeconds(60)))
            .setOverlapPolicy(OverlapPolicy.OVERLAP_POLICY_QUEUE_ONE)
            .setJitter(dev.tickwheel.v1.Jitter.newBuilder().setExact(true))
            .build();
    assertEquals(want, got);
  }

  @Test
  void retryLeavesZeroBackoffsToTheServer() {
    RetryPolicy policy = Jobs.retry(1, Duration.ZERO, null);
    assertEquals(1, policy.getMaxAttempts());
    assertFalse(policy.hasInitialBackoff());
    assertFalse(policy.hasMaxBackoff());
  }

  @Test
  void onceJobAtAnInstantWithAnHttpTarget() {
    Instant at = ZonedDateTime.of(2027, 3, 28, 1, 30, 0, 500, ZoneId.of("Europe/Paris")).toInstant();
    Job job =
        Jobs.once("ping", at, Jobs.http("PUT", "https://example.com/hook", Map.of("X-Team", "a")))
            .setJitter(Jobs.jitter(Duration.ofSeconds(5)))
            .build();
    assertEquals(at, Jobs.instant(job.getSchedule().getOnceAt()));
    assertEquals(500, job.getSchedule().getOnceAt().getNanos());
    assertEquals("PUT", job.getTarget().getHttp().getMethod());
    assertEquals("a", job.getTarget().getHttp().getHeadersMap().get("X-Team"));
    assertEquals(Duration.ofSeconds(5), Jobs.duration(job.getJitter().getWindow()));
    assertTrue(Jobs.http("https://example.com/a").getHttp().getMethod().isEmpty());
  }

  @Test
  void localJob() {
    Job job =
        Jobs.local("wake", "2027-03-28T02:30:00", "Europe/Berlin", Jobs.handler("echo")).build();
    assertEquals("2027-03-28T02:30:00", job.getSchedule().getLocal().getLocalTime());
    assertEquals("Europe/Berlin", job.getSchedule().getLocal().getTimeZone());
  }

  @Test
  void durationsKeepTheSignOfTheSeconds() {
    com.google.protobuf.Duration negative = Jobs.duration(Duration.ofMillis(-1500));
    assertEquals(-1, negative.getSeconds());
    assertEquals(-500_000_000, negative.getNanos());
    assertEquals(Duration.ofMillis(-1500), Jobs.duration(negative));
  }
}

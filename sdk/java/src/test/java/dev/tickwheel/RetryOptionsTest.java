package dev.tickwheel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.grpc.Status;
import java.time.Duration;
import java.util.Set;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.api.Test;

class RetryOptionsTest {
  @ParameterizedTest(name = "retry {0}, u {1}: {2} ms")
  @CsvSource({
    "1, 0.0, 0",
    "1, 0.5, 100",
    "2, 0.5, 200",
    "5, 0.5, 1600",
    "6, 0.5, 2500", // 6.4 s capped at 5 s
    "200, 0.5, 2500",
  })
  void backoffIsFullJitterUnderADoublingCap(int retry, double u, long millis) {
    assertEquals(Duration.ofMillis(millis), RetryOptions.DEFAULT.backoff(retry, u));
  }

  @Test
  void badOptionsFailWhenBuilt() {
    assertThrows(
        IllegalArgumentException.class,
        () -> new RetryOptions(0, Duration.ZERO, Duration.ZERO, Set.of()));
    assertThrows(
        IllegalArgumentException.class,
        () -> new RetryOptions(2, Duration.ofSeconds(2), Duration.ofSeconds(1), Set.of()));
    assertThrows(IllegalArgumentException.class, () -> RetryOptions.DEFAULT.backoff(0, 0.5));
    assertEquals(Set.of(Status.Code.UNAVAILABLE), RetryOptions.attempts(3).retryableCodes());
  }
}

package dev.tickwheel.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.time.Duration;
import org.junit.jupiter.api.Test;

class BackoffTest {
  private static final Duration INITIAL = Duration.ofMillis(200);
  private static final Duration CAP = Duration.ofSeconds(15);

  private static Duration delay(int failures, double u) {
    return Backoff.reconnectDelay(failures, INITIAL, CAP, u);
  }

  @Test
  void theCeilingDoublesPerFailureUpToTheCap() {
    double almostOne = Math.nextDown(1.0);
    long[][] table = {
      // failures, ceiling in ms
      {0, 200}, {1, 400}, {2, 800}, {3, 1600}, {6, 12_800}, {7, 15_000}, {62, 15_000},
      {Integer.MAX_VALUE, 15_000},
    };
    for (long[] row : table) {
      Duration top = delay((int) row[0], almostOne);
      assertEquals(row[1], Math.round(top.toNanos() / 1e6), "failures " + row[0]);
      assertEquals(Duration.ZERO, delay((int) row[0], 0.0), "full jitter starts at zero");
    }
    assertEquals(Duration.ofMillis(300), delay(2, 0.375));
  }

  @Test
  void badInputsAreRefused() {
    assertThrows(IllegalArgumentException.class, () -> delay(-1, 0.5));
    assertThrows(IllegalArgumentException.class, () -> delay(0, 1.0));
    assertThrows(IllegalArgumentException.class, () -> delay(0, -0.1));
    assertThrows(IllegalArgumentException.class, () -> delay(0, Double.NaN));
  }
}

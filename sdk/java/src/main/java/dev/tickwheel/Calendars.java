package dev.tickwheel;

import dev.tickwheel.v1.Calendar;
import dev.tickwheel.v1.Weekday;
import java.time.DayOfWeek;
import java.time.LocalDate;
import java.util.Collection;
import java.util.List;
import java.util.Objects;

/**
 * Builders of business-day {@link Calendar}s in one line.
 *
 * <p>{@code Calendars.of("uk-banks", "Europe/London", Calendars.MONDAY_TO_FRIDAY, holidays,
 * List.of())} returns a {@link Calendar.Builder} with every field set, to create with {@link
 * TickwheelClient#createCalendar(Calendar)} or to update. Weekdays are {@link DayOfWeek}s (whose
 * ISO numbers are the proto's) and dates {@link LocalDate}s, so a weekday or a date that does not
 * exist cannot be written. What only the server judges (the zone, the bounds: at most 10 000
 * holidays, 1900 to 2200) it answers with INVALID_ARGUMENT naming the field ({@code
 * calendar.holidays[3]}).
 */
public final class Calendars {
  private Calendars() {}

  /** Monday to Friday: what an empty {@code business_days} means to the server too. */
  public static final List<DayOfWeek> MONDAY_TO_FRIDAY =
      List.of(
          DayOfWeek.MONDAY, DayOfWeek.TUESDAY, DayOfWeek.WEDNESDAY, DayOfWeek.THURSDAY, DayOfWeek.FRIDAY);

  /** The proto's weekday of {@code day}. */
  public static Weekday weekday(DayOfWeek day) {
    return Weekday.forNumber(Objects.requireNonNull(day, "day").getValue());
  }

  /** The {@link DayOfWeek} of a proto weekday; IllegalArgumentException for an unset or unknown one. */
  public static DayOfWeek dayOfWeek(Weekday weekday) {
    int number = Objects.requireNonNull(weekday, "weekday").getNumber();
    if (number < 1 || number > 7) {
      throw new IllegalArgumentException("not a weekday: " + weekday);
    }
    return DayOfWeek.of(number);
  }

  /** A calendar named {@code name} in the IANA {@code zone}, Monday to Friday, no holidays. */
  public static Calendar.Builder of(String name, String zone) {
    return Calendar.newBuilder().setName(name).setTimeZone(zone);
  }

  /**
   * A calendar named {@code name} in the IANA {@code zone}: its {@code businessDays} (empty:
   * Monday to Friday), {@code holidays} (not business days) and {@code halfDays} (business days
   * that end early), dates as {@code YYYY-MM-DD}.
   */
  public static Calendar.Builder of(
      String name,
      String zone,
      Collection<DayOfWeek> businessDays,
      Collection<LocalDate> holidays,
      Collection<LocalDate> halfDays) {
    Calendar.Builder builder = of(name, zone);
    businessDays.forEach(day -> builder.addBusinessDays(weekday(day)));
    holidays.forEach(date -> builder.addHolidays(Objects.requireNonNull(date, "holiday").toString()));
    halfDays.forEach(date -> builder.addHalfDays(Objects.requireNonNull(date, "half day").toString()));
    return builder;
  }
}

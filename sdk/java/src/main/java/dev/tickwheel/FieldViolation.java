package dev.tickwheel;

/**
 * One invalid field of a request, from a {@code google.rpc.BadRequest}.
 *
 * @param field the path within the request ({@code job.schedule.cron.expression})
 * @param description what is wrong with it
 */
public record FieldViolation(String field, String description) {
  @Override
  public String toString() {
    return field.isEmpty() ? description : field + ": " + description;
  }
}

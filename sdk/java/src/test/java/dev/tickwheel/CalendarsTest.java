package dev.tickwheel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.Any;
import com.google.protobuf.FieldMask;
import com.google.protobuf.Message;
import com.google.rpc.BadRequest;
import dev.tickwheel.v1.Calendar;
import dev.tickwheel.v1.CreateCalendarRequest;
import dev.tickwheel.v1.CreateCalendarResponse;
import dev.tickwheel.v1.DeleteCalendarRequest;
import dev.tickwheel.v1.DeleteCalendarResponse;
import dev.tickwheel.v1.GetCalendarRequest;
import dev.tickwheel.v1.GetCalendarResponse;
import dev.tickwheel.v1.ListCalendarsRequest;
import dev.tickwheel.v1.ListCalendarsResponse;
import dev.tickwheel.v1.SchedulerServiceGrpc;
import dev.tickwheel.v1.UpdateCalendarRequest;
import dev.tickwheel.v1.UpdateCalendarResponse;
import dev.tickwheel.v1.Weekday;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.protobuf.StatusProto;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.time.DayOfWeek;
import java.time.Duration;
import java.time.LocalDate;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The calendar helpers against a scripted in-process SchedulerService: the builder, the request
 * each method sends, the retry rule of each (a create carries a request id and reads are retried;
 * an update or a delete never is), paging, and errors with their field violations.
 */
class CalendarsTest {
  /** Answers calendar RPCs, popping the next failure queued for a method first. */
  static final class FakeCalendars extends SchedulerServiceGrpc.SchedulerServiceImplBase {
    final Map<String, Deque<StatusRuntimeException>> failures = new HashMap<>();
    final List<String> methods = new ArrayList<>();
    final List<Message> requests = new ArrayList<>();

    void fail(String method, StatusRuntimeException... errors) {
      failures.computeIfAbsent(method, m -> new ArrayDeque<>()).addAll(List.of(errors));
    }

    private <T> boolean failed(String method, Message request, StreamObserver<T> replies) {
      methods.add(method);
      requests.add(request);
      Deque<StatusRuntimeException> queue = failures.get(method);
      if (queue != null && !queue.isEmpty()) {
        replies.onError(queue.poll());
        return true;
      }
      return false;
    }

    private static <T> void reply(StreamObserver<T> replies, T reply) {
      replies.onNext(reply);
      replies.onCompleted();
    }

    @Override
    public void createCalendar(
        CreateCalendarRequest request, StreamObserver<CreateCalendarResponse> replies) {
      if (!failed("CreateCalendar", request, replies)) {
        Calendar stored = request.getCalendar().toBuilder().setVersion(1).build();
        reply(replies, CreateCalendarResponse.newBuilder().setCalendar(stored).setCreated(true).build());
      }
    }

    @Override
    public void getCalendar(GetCalendarRequest request, StreamObserver<GetCalendarResponse> replies) {
      if (!failed("GetCalendar", request, replies)) {
        reply(
            replies,
            GetCalendarResponse.newBuilder()
                .setCalendar(Calendar.newBuilder().setName(request.getName()).setVersion(2))
                .build());
      }
    }

    @Override
    public void listCalendars(
        ListCalendarsRequest request, StreamObserver<ListCalendarsResponse> replies) {
      if (!failed("ListCalendars", request, replies)) {
        int page = request.getPageToken().isEmpty() ? 0 : Integer.parseInt(request.getPageToken());
        reply(
            replies,
            ListCalendarsResponse.newBuilder()
                .addCalendars(Calendar.newBuilder().setName("cal-" + (page * 2)))
                .addCalendars(Calendar.newBuilder().setName("cal-" + (page * 2 + 1)))
                .setNextPageToken(page < 2 ? String.valueOf(page + 1) : "")
                .build());
      }
    }

    @Override
    public void updateCalendar(
        UpdateCalendarRequest request, StreamObserver<UpdateCalendarResponse> replies) {
      if (!failed("UpdateCalendar", request, replies)) {
        Calendar calendar = request.getCalendar();
        reply(
            replies,
            UpdateCalendarResponse.newBuilder()
                .setCalendar(calendar.toBuilder().setVersion(calendar.getVersion() + 1))
                .build());
      }
    }

    @Override
    public void deleteCalendar(
        DeleteCalendarRequest request, StreamObserver<DeleteCalendarResponse> replies) {
      if (!failed("DeleteCalendar", request, replies)) {
        reply(replies, DeleteCalendarResponse.getDefaultInstance());
      }
    }
  }

  private final FakeCalendars fake = new FakeCalendars();
  private final List<Duration> waits = new ArrayList<>();
  private Server server;
  private ManagedChannel channel;

  @BeforeEach
  void start() throws IOException {
    String name = InProcessServerBuilder.generateName();
    server = InProcessServerBuilder.forName(name).directExecutor().addService(fake).build().start();
    channel = InProcessChannelBuilder.forName(name).directExecutor().build();
  }

  @AfterEach
  void stop() {
    channel.shutdownNow();
    server.shutdownNow();
  }

  private TickwheelClient client() {
    return TickwheelClient.builder(channel).random(() -> 0.5).sleeper(waits::add).build();
  }

  private static StatusRuntimeException unavailable() {
    return Status.UNAVAILABLE.withDescription("connection reset").asRuntimeException();
  }

  @Test
  void theBuilderSetsEveryFieldFromDaysAndDates() {
    Calendar calendar =
        Calendars.of(
                "uk-banks",
                "Europe/London",
                List.of(DayOfWeek.MONDAY, DayOfWeek.SATURDAY, DayOfWeek.SUNDAY),
                List.of(LocalDate.of(2027, 12, 27), LocalDate.of(2027, 12, 28)),
                List.of(LocalDate.of(2027, 12, 24)))
            .build();
    assertEquals("uk-banks", calendar.getName());
    assertEquals("Europe/London", calendar.getTimeZone());
    assertEquals(
        List.of(Weekday.WEEKDAY_MONDAY, Weekday.WEEKDAY_SATURDAY, Weekday.WEEKDAY_SUNDAY),
        calendar.getBusinessDaysList());
    assertEquals(List.of("2027-12-27", "2027-12-28"), calendar.getHolidaysList());
    assertEquals(List.of("2027-12-24"), calendar.getHalfDaysList());
    assertEquals(5, Calendars.MONDAY_TO_FRIDAY.size());
    for (DayOfWeek day : DayOfWeek.values()) {
      assertEquals(day, Calendars.dayOfWeek(Calendars.weekday(day)));
    }
    assertThrows(
        IllegalArgumentException.class, () -> Calendars.dayOfWeek(Weekday.WEEKDAY_UNSPECIFIED));
    assertTrue(Calendars.of("plain", "UTC").build().getBusinessDaysList().isEmpty());
  }

  @Test
  void aCreateCarriesOneGeneratedRequestIdAcrossItsRetries() {
    fake.fail("CreateCalendar", unavailable(), unavailable());
    CreateCalendarResponse created =
        client().createCalendar(Calendars.of("uk", "Europe/London").addHolidays("2027-12-27").build());

    assertTrue(created.getCreated());
    assertEquals(1, created.getCalendar().getVersion());
    assertEquals(3, fake.requests.size());
    String requestId = ((CreateCalendarRequest) fake.requests.get(0)).getRequestId();
    assertEquals(36, requestId.length(), "a UUID: " + requestId);
    for (Message request : fake.requests) {
      assertEquals(requestId, ((CreateCalendarRequest) request).getRequestId());
    }
    assertEquals(List.of(Duration.ofMillis(100), Duration.ofMillis(200)), waits);

    client()
        .createCalendar(
            CreateCalendarRequest.newBuilder()
                .setCalendar(Calendars.of("given", "UTC"))
                .setRequestId("cal-req-1")
                .build());
    assertEquals("cal-req-1", ((CreateCalendarRequest) fake.requests.get(3)).getRequestId());
  }

  @Test
  void readsAreRetriedAndAnUpdateOrADeleteIsNeverRepeated() {
    TickwheelClient client = client();
    fake.fail("GetCalendar", unavailable());
    fake.fail("ListCalendars", unavailable());
    assertEquals("uk", client.getCalendar("uk").getCalendar().getName());
    client.listCalendars(ListCalendarsRequest.newBuilder().setPageSize(2).build());
    assertEquals(List.of("GetCalendar", "GetCalendar", "ListCalendars", "ListCalendars"), fake.methods);

    fake.methods.clear();
    fake.fail("UpdateCalendar", unavailable());
    fake.fail("DeleteCalendar", unavailable());
    Calendar current = Calendars.of("uk", "Europe/London").setVersion(4).build();
    UpdateCalendarRequest update =
        UpdateCalendarRequest.newBuilder()
            .setCalendar(current)
            .setUpdateMask(FieldMask.newBuilder().addPaths("holidays"))
            .build();
    DeleteCalendarRequest delete = DeleteCalendarRequest.newBuilder().setName("uk").setVersion(4).build();
    TickwheelException updateError = assertThrows(TickwheelException.class, () -> client.updateCalendar(update));
    TickwheelException deleteError = assertThrows(TickwheelException.class, () -> client.deleteCalendar(delete));
    assertEquals(Status.Code.UNAVAILABLE, updateError.code());
    assertEquals(Status.Code.UNAVAILABLE, deleteError.code());
    assertEquals(List.of("UpdateCalendar", "DeleteCalendar"), fake.methods, "one attempt each");

    assertEquals(5, client.updateCalendar(update).getCalendar().getVersion());
    client.deleteCalendar(delete);
    assertEquals(update, fake.requests.get(fake.requests.size() - 2));
    assertEquals(delete, fake.requests.get(fake.requests.size() - 1));
  }

  @Test
  void calendarsWalksEveryPage() {
    List<String> names = new ArrayList<>();
    for (Calendar calendar : client().calendars(ListCalendarsRequest.newBuilder().setPageSize(2).build())) {
      names.add(calendar.getName());
    }
    assertEquals(List.of("cal-0", "cal-1", "cal-2", "cal-3", "cal-4", "cal-5"), names);
    List<String> tokens = new ArrayList<>();
    for (Message request : fake.requests) {
      tokens.add(((ListCalendarsRequest) request).getPageToken());
    }
    assertEquals(List.of("", "1", "2"), tokens);
  }

  @Test
  void aRefusalCarriesItsCodeAndFieldViolationsAndIsNotRetried() {
    BadRequest bad =
        BadRequest.newBuilder()
            .addFieldViolations(
                BadRequest.FieldViolation.newBuilder()
                    .setField("calendar.holidays[0]")
                    .setDescription("not a date"))
            .build();
    fake.fail(
        "CreateCalendar",
        StatusProto.toStatusRuntimeException(
            com.google.rpc.Status.newBuilder()
                .setCode(Status.Code.INVALID_ARGUMENT.value())
                .setMessage("invalid calendar")
                .addDetails(Any.pack(bad))
                .build()));
    fake.fail("GetCalendar", Status.NOT_FOUND.withDescription("calendar 'gone' not found").asRuntimeException());
    TickwheelClient client = client();

    TickwheelException invalid =
        assertThrows(
            TickwheelException.class,
            () -> client.createCalendar(Calendars.of("bad", "UTC").addHolidays("2027-02-30").build()));
    assertEquals("INVALID_ARGUMENT", invalid.codeName());
    assertEquals(List.of(new FieldViolation("calendar.holidays[0]", "not a date")), invalid.fieldViolations());
    TickwheelException missing = assertThrows(TickwheelException.class, () -> client.getCalendar("gone"));
    assertEquals(Status.Code.NOT_FOUND, missing.code());
    assertEquals(List.of("CreateCalendar", "GetCalendar"), fake.methods);
    assertFalse(waits.iterator().hasNext(), "neither was retried");
  }
}

package dev.tickwheel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.Any;
import com.google.protobuf.Message;
import com.google.rpc.BadRequest;
import dev.tickwheel.v1.AdminServiceGrpc;
import dev.tickwheel.v1.Alert;
import dev.tickwheel.v1.GetTenantRequest;
import dev.tickwheel.v1.GetTenantResponse;
import dev.tickwheel.v1.RecomputeSchedulesRequest;
import dev.tickwheel.v1.Tenant;
import dev.tickwheel.v1.UpdateTenantRequest;
import dev.tickwheel.v1.WatchAlertsRequest;
import dev.tickwheel.v1.WatchAlertsResponse;
import io.grpc.Context;
import io.grpc.Contexts;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.protobuf.StatusProto;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The AdminService client against an in-process server that answers every unary RPC with its
 * empty response, or with the failures a test queued for it: the admin token, the retry rule of
 * every RPC, error mapping, and WatchAlerts.
 */
class TickwheelAdminClientTest {
  private static final Context.Key<String> AUTHORIZATION = Context.key("authorization");
  private static final Set<String> REPEATABLE =
      Set.of(
          "ClusterStatus",
          "GetTenant",
          "ListTenants",
          "ListApiKeys",
          "ListWorkerCredentials",
          "SearchJobs",
          "SearchExecutions",
          "ListAlerts");

  private final Map<String, Deque<StatusRuntimeException>> failures = new HashMap<>();
  private final Map<String, List<Message>> calls = Collections.synchronizedMap(new HashMap<>());
  private final List<String> authorizations = Collections.synchronizedList(new ArrayList<>());
  private final List<Duration> waits = new ArrayList<>();
  private final List<WatchAlertsResponse> alerts = new ArrayList<>();
  private StatusRuntimeException alertsEnd;
  private Server server;
  private ManagedChannel channel;

  @BeforeEach
  void start() throws IOException {
    String name = InProcessServerBuilder.generateName();
    ServerServiceDefinition.Builder service =
        ServerServiceDefinition.builder(AdminServiceGrpc.getServiceDescriptor());
    for (MethodDescriptor<?, ?> method : AdminServiceGrpc.getServiceDescriptor().getMethods()) {
      addMethod(service, method);
    }
    ServerInterceptor readAuthorization =
        new ServerInterceptor() {
          @Override
          public <Q, R> ServerCall.Listener<Q> interceptCall(
              ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
            String value =
                headers.get(Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER));
            return Contexts.interceptCall(
                Context.current().withValue(AUTHORIZATION, value), call, headers, next);
          }
        };
    server =
        InProcessServerBuilder.forName(name)
            .directExecutor()
            .addService(ServerInterceptors.intercept(service.build(), readAuthorization))
            .build()
            .start();
    channel = InProcessChannelBuilder.forName(name).directExecutor().build();
  }

  @SuppressWarnings("unchecked")
  private <Q, R> void addMethod(ServerServiceDefinition.Builder service, MethodDescriptor<Q, R> m) {
    String method = m.getBareMethodName();
    R empty =
        (R) ((MethodDescriptor.PrototypeMarshaller<R>) m.getResponseMarshaller()).getMessagePrototype();
    if (m.getType() == MethodDescriptor.MethodType.SERVER_STREAMING) {
      service.addMethod(
          m,
          ServerCalls.asyncServerStreamingCall(
              (Q request, StreamObserver<R> replies) -> {
                record(method, (Message) request);
                for (WatchAlertsResponse alert : alerts) {
                  replies.onNext((R) alert);
                }
                if (alertsEnd != null) {
                  replies.onError(alertsEnd);
                } else {
                  replies.onCompleted();
                }
              }));
      return;
    }
    service.addMethod(
        m,
        ServerCalls.asyncUnaryCall(
            (Q request, StreamObserver<R> replies) -> {
              record(method, (Message) request);
              Deque<StatusRuntimeException> queue = failures.get(method);
              if (queue != null && !queue.isEmpty()) {
                replies.onError(queue.poll());
                return;
              }
              replies.onNext(empty);
              replies.onCompleted();
            }));
  }

  private void record(String method, Message request) {
    calls.computeIfAbsent(method, k -> Collections.synchronizedList(new ArrayList<>())).add(request);
    authorizations.add(String.valueOf(AUTHORIZATION.get()));
  }

  private void fail(String method, StatusRuntimeException... errors) {
    failures.computeIfAbsent(method, m -> new ArrayDeque<>()).addAll(List.of(errors));
  }

  private int calls(String method) {
    return calls.getOrDefault(method, List.of()).size();
  }

  @AfterEach
  void stop() {
    channel.shutdownNow();
    server.shutdownNow();
  }

  /** A client whose jitter draw is pinned at 0.5 and whose waits are recorded, not slept. */
  private TickwheelAdminClient.Builder client() {
    return TickwheelAdminClient.builder(channel).random(() -> 0.5).sleeper(waits::add);
  }

  private static StatusRuntimeException unavailable() {
    return Status.UNAVAILABLE.withDescription("connection reset").asRuntimeException();
  }

  /** Calls the client's method for {@code rpc} (its name in lower camel case) with {@code request}. */
  private static Object call(TickwheelAdminClient client, String rpc, Message request)
      throws Throwable {
    String name = Character.toLowerCase(rpc.charAt(0)) + rpc.substring(1);
    Method method = TickwheelAdminClient.class.getMethod(name, request.getClass());
    try {
      return method.invoke(client, request);
    } catch (InvocationTargetException e) {
      throw e.getCause();
    }
  }

  @Test
  void everyAdminRpcHasARetryDecisionAndAClientMethod() throws Exception {
    Set<String> unary =
        AdminServiceGrpc.getServiceDescriptor().getMethods().stream()
            .filter(m -> m.getType() == MethodDescriptor.MethodType.UNARY)
            .map(MethodDescriptor::getBareMethodName)
            .collect(Collectors.toCollection(TreeSet::new));
    Set<String> decided =
        AdminRpcs.ALL.stream()
            .map(AdminRpcs.Rpc::method)
            .collect(Collectors.toCollection(TreeSet::new));
    assertEquals(unary, decided, "decide for each AdminService RPC whether it may be retried");
    assertEquals(AdminRpcs.ALL.size(), decided.size(), "one entry per RPC");
  }

  @Test
  void readsAreRetriedOnUnavailableAndWritesNever() throws Throwable {
    TickwheelAdminClient admin = client().adminToken("adm_secret").build();
    for (MethodDescriptor<?, ?> m : AdminServiceGrpc.getServiceDescriptor().getMethods()) {
      if (m.getType() != MethodDescriptor.MethodType.UNARY) {
        continue;
      }
      String rpc = m.getBareMethodName();
      Message request =
          (Message)
              ((MethodDescriptor.PrototypeMarshaller<?>) m.getRequestMarshaller())
                  .getMessagePrototype();
      fail(rpc, unavailable());
      if (REPEATABLE.contains(rpc)) {
        call(admin, rpc, request);
        assertEquals(2, calls(rpc), rpc + " is a read: retried");
      } else {
        TickwheelException error =
            assertThrows(TickwheelException.class, () -> call(admin, rpc, request), rpc);
        assertEquals(Status.Code.UNAVAILABLE, error.code());
        assertEquals(1, calls(rpc), rpc + " is a write without a request id: never retried");
        failures.remove(rpc);
      }
    }
    assertTrue(authorizations.stream().allMatch("Bearer adm_secret"::equals), authorizations.toString());
  }

  @Test
  void recomputeSchedulesIsRetriedOnlyAsADryRun() {
    TickwheelAdminClient admin = client().build();
    fail("RecomputeSchedules", unavailable());
    admin.recomputeSchedules(RecomputeSchedulesRequest.newBuilder().setDryRun(true).build());
    assertEquals(2, calls("RecomputeSchedules"));
    fail("RecomputeSchedules", unavailable());
    assertThrows(
        TickwheelException.class,
        () -> admin.recomputeSchedules(RecomputeSchedulesRequest.newBuilder().addZones("Europe/London").build()));
    assertEquals(3, calls("RecomputeSchedules"));
  }

  @Test
  void retriesFollowTheRetryOptions() {
    fail("GetTenant", unavailable(), unavailable(), unavailable(), unavailable(), unavailable());
    TickwheelAdminClient admin = client().build();
    TickwheelException error =
        assertThrows(
            TickwheelException.class,
            () -> admin.getTenant(GetTenantRequest.newBuilder().setName("acme").build()));
    assertEquals(Status.Code.UNAVAILABLE, error.code());
    assertEquals(5, calls("GetTenant"));
    assertEquals(
        List.of(Duration.ofMillis(100), Duration.ofMillis(200), Duration.ofMillis(400), Duration.ofMillis(800)),
        waits);

    waits.clear();
    fail("GetTenant", unavailable());
    TickwheelAdminClient once = client().retry(RetryOptions.NONE).build();
    assertThrows(TickwheelException.class, () -> once.getTenant(GetTenantRequest.getDefaultInstance()));
    assertEquals(6, calls("GetTenant"));
    assertTrue(waits.isEmpty());

    fail("GetTenant", Status.NOT_FOUND.withDescription("no tenant acme").asRuntimeException());
    TickwheelException missing =
        assertThrows(TickwheelException.class, () -> admin.getTenant(GetTenantRequest.getDefaultInstance()));
    assertEquals(Status.Code.NOT_FOUND, missing.code());
    assertEquals(7, calls("GetTenant"), "NOT_FOUND is not retried");
  }

  @Test
  void invalidArgumentCarriesTheFieldViolations() {
    BadRequest bad =
        BadRequest.newBuilder()
            .addFieldViolations(
                BadRequest.FieldViolation.newBuilder()
                    .setField("tenant.weight")
                    .setDescription("must be between 1 and 1000"))
            .build();
    fail(
        "UpdateTenant",
        StatusProto.toStatusRuntimeException(
            com.google.rpc.Status.newBuilder()
                .setCode(Status.Code.INVALID_ARGUMENT.value())
                .setMessage("invalid tenant")
                .addDetails(Any.pack(bad))
                .build()));
    TickwheelException error =
        assertThrows(
            TickwheelException.class,
            () ->
                client()
                    .build()
                    .updateTenant(
                        UpdateTenantRequest.newBuilder()
                            .setTenant(Tenant.newBuilder().setName("acme").setWeight(0))
                            .build()));
    assertEquals(Status.Code.INVALID_ARGUMENT, error.code());
    assertEquals(
        List.of(new FieldViolation("tenant.weight", "must be between 1 and 1000")),
        error.fieldViolations());
  }

  @Test
  void watchAlertsStreamsAndMapsTheStreamsFailure() {
    alerts.add(WatchAlertsResponse.newBuilder().setAlert(Alert.newBuilder().setId("a1")).build());
    alerts.add(WatchAlertsResponse.newBuilder().setAlert(Alert.newBuilder().setId("a2")).build());
    alertsEnd = Status.UNAVAILABLE.withDescription("server stopping").asRuntimeException();
    TickwheelAdminClient admin = client().adminToken("adm_secret").build();
    List<String> seen = new ArrayList<>();
    try (TickwheelAdminClient.AlertStream stream =
        admin.watchAlerts(WatchAlertsRequest.newBuilder().setIncludeOpen(true).build())) {
      TickwheelException error =
          assertThrows(
              TickwheelException.class,
              () -> {
                while (stream.hasNext()) {
                  seen.add(stream.next().getAlert().getId());
                }
              });
      assertEquals(Status.Code.UNAVAILABLE, error.code());
    }
    assertEquals(List.of("a1", "a2"), seen);
    assertEquals(1, calls("WatchAlerts"), "a stream is never retried");
    assertEquals(List.of("Bearer adm_secret"), authorizations);
  }

  @Test
  void optionsAreCheckedWhenSet() {
    assertThrows(IllegalArgumentException.class, () -> TickwheelAdminClient.builder(""));
    assertThrows(
        IllegalArgumentException.class,
        () -> TickwheelAdminClient.builder("127.0.0.1:1").adminToken("a\nb"));
    assertThrows(
        IllegalArgumentException.class,
        () -> TickwheelAdminClient.builder("127.0.0.1:1").timeout(Duration.ZERO));
    GetTenantResponse unused = GetTenantResponse.getDefaultInstance();
    assertFalse(unused.hasTenant());
  }
}

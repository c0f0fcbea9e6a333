package dev.tickwheel;

import dev.tickwheel.AdminRpcs.Rpc;
import dev.tickwheel.v1.ClusterStatusRequest;
import dev.tickwheel.v1.ClusterStatusResponse;
import dev.tickwheel.v1.CreateTenantRequest;
import dev.tickwheel.v1.CreateTenantResponse;
import dev.tickwheel.v1.DrainServerRequest;
import dev.tickwheel.v1.DrainServerResponse;
import dev.tickwheel.v1.GetTenantRequest;
import dev.tickwheel.v1.GetTenantResponse;
import dev.tickwheel.v1.IssueApiKeyRequest;
import dev.tickwheel.v1.IssueApiKeyResponse;
import dev.tickwheel.v1.IssueWorkerCredentialRequest;
import dev.tickwheel.v1.IssueWorkerCredentialResponse;
import dev.tickwheel.v1.ListAlertsRequest;
import dev.tickwheel.v1.ListAlertsResponse;
import dev.tickwheel.v1.ListApiKeysRequest;
import dev.tickwheel.v1.ListApiKeysResponse;
import dev.tickwheel.v1.ListTenantsRequest;
import dev.tickwheel.v1.ListTenantsResponse;
import dev.tickwheel.v1.ListWorkerCredentialsRequest;
import dev.tickwheel.v1.ListWorkerCredentialsResponse;
import dev.tickwheel.v1.PauseTenantRequest;
import dev.tickwheel.v1.PauseTenantResponse;
import dev.tickwheel.v1.RecomputeSchedulesRequest;
import dev.tickwheel.v1.RecomputeSchedulesResponse;
import dev.tickwheel.v1.ResumeTenantRequest;
import dev.tickwheel.v1.ResumeTenantResponse;
import dev.tickwheel.v1.RevokeApiKeyRequest;
import dev.tickwheel.v1.RevokeApiKeyResponse;
import dev.tickwheel.v1.RevokeWorkerCredentialRequest;
import dev.tickwheel.v1.RevokeWorkerCredentialResponse;
import dev.tickwheel.v1.RotateApiKeyRequest;
import dev.tickwheel.v1.RotateApiKeyResponse;
import dev.tickwheel.v1.SearchExecutionsRequest;
import dev.tickwheel.v1.SearchExecutionsResponse;
import dev.tickwheel.v1.SearchJobsRequest;
import dev.tickwheel.v1.SearchJobsResponse;
import dev.tickwheel.v1.UpdateTenantRequest;
import dev.tickwheel.v1.UpdateTenantResponse;
import dev.tickwheel.v1.AdminServiceGrpc;
import dev.tickwheel.v1.AdminServiceGrpc.AdminServiceBlockingStub;
import dev.tickwheel.v1.WatchAlertsRequest;
import dev.tickwheel.v1.WatchAlertsResponse;
import io.grpc.Channel;
import io.grpc.ChannelCredentials;
import io.grpc.Context;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.ManagedChannelRegistry;
import io.grpc.Metadata;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.MetadataUtils;
import java.time.Duration;
import java.util.Iterator;
import java.util.Objects;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.DoubleSupplier;

/**
 * A blocking AdminService client for one Tickwheel server address: the operators' API (tenants,
 * API keys, worker credentials, cross-tenant search, drains, alerts).
 *
 * <p>Each call carries {@code authorization: Bearer <admin token>} (a tenant API key gets
 * PERMISSION_DENIED) within the client's deadline, and returns the response message unchanged. A
 * failed call throws {@link TickwheelException} with the status code and the BadRequest field
 * violations, as {@link TickwheelClient} does.
 *
 * <p>Retries follow {@link RetryOptions} (UNAVAILABLE by default, exponential backoff with full
 * jitter, within the deadline) for the calls safe to repeat, and only those: the reads
 * (ClusterStatus, GetTenant, ListTenants, ListApiKeys, ListWorkerCredentials, SearchJobs,
 * SearchExecutions, ListAlerts) and RecomputeSchedules as a dry run. AdminService writes carry no
 * request id, so every other write fails on its first error: a reply lost after the server
 * committed would otherwise apply it twice (a second key issued) or answer a misleading error.
 * {@link #watchAlerts} is a stream and is never retried.
 *
 * <pre>{@code
 * try (TickwheelAdminClient admin =
 *     TickwheelAdminClient.builder("127.0.0.1:50051").adminToken(token).build()) {
 *   Tenant acme = admin.getTenant(GetTenantRequest.newBuilder().setName("acme").build()).getTenant();
 * }
 * }</pre>
 *
 * <p>It is safe to share between threads. Close it to close the channel it opened.
 */
public final class TickwheelAdminClient implements AutoCloseable {
  private static final String USER_AGENT = "tickwheel-java";
  private static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

  private final ManagedChannel ownedChannel;
  private final AdminServiceBlockingStub stub;
  private final Duration timeout;
  private final RetryOptions retry;
  private final Calls.Sleeper sleeper;
  private final DoubleSupplier random;

  private TickwheelAdminClient(Builder builder) {
    Channel channel = builder.channel;
    if (channel == null) {
      ChannelCredentials credentials =
          builder.tls == null
              ? InsecureChannelCredentials.create()
              : builder.tls.channelCredentials();
      ManagedChannelBuilder<?> channelBuilder;
      try {
        channelBuilder = Grpc.newChannelBuilder(builder.address, credentials);
      } catch (ManagedChannelRegistry.ProviderNotFoundException e) {
        throw new IllegalArgumentException("cannot open a channel: " + e.getMessage(), e);
      }
      channelBuilder.userAgent(USER_AGENT);
      if (builder.tls != null) {
        builder.tls.serverName().ifPresent(channelBuilder::overrideAuthority);
      }
      ownedChannel = channelBuilder.build();
      channel = ownedChannel;
    } else {
      ownedChannel = null;
    }
    AdminServiceBlockingStub blocking = AdminServiceGrpc.newBlockingStub(channel);
    if (builder.adminToken != null) {
      Metadata headers = new Metadata();
      headers.put(AUTHORIZATION, "Bearer " + builder.adminToken);
      blocking = blocking.withInterceptors(MetadataUtils.newAttachHeadersInterceptor(headers));
    }
    this.stub = blocking;
    this.timeout = builder.timeout;
    this.retry = builder.retry;
    this.sleeper = builder.sleeper;
    this.random = builder.random;
  }

  /** A builder for a client of {@code address} ({@code host:port}). */
  public static Builder builder(String address) {
    Objects.requireNonNull(address, "address");
    if (address.isEmpty()) {
      throw new IllegalArgumentException("an address (host:port) is required");
    }
    return new Builder(address, null);
  }

  /**
   * A builder for a client over an existing channel, which the client shares and does not close
   * (TLS options do not apply: the channel has its own).
   */
  public static Builder builder(Channel channel) {
    return new Builder(null, Objects.requireNonNull(channel, "channel"));
  }

  /** How long each call may take in total, retries and waits included; null means no deadline. */
  public Duration timeout() {
    return timeout;
  }

  /** The retry options in force. */
  public RetryOptions retryOptions() {
    return retry;
  }

  /** Closes the channel the client opened (not one it was given), waiting up to 5 s. */
  @Override
  public void close() {
    if (ownedChannel == null) {
      return;
    }
    ownedChannel.shutdown();
    try {
      if (!ownedChannel.awaitTermination(5, TimeUnit.SECONDS)) {
        ownedChannel.shutdownNow();
      }
    } catch (InterruptedException e) {
      ownedChannel.shutdownNow();
      Thread.currentThread().interrupt();
    }
  }

  // --- AdminService -------------------------------------------------------------------------

  /** The cluster as the answering server sees it: servers, partitions, queues. Retried. */
  public ClusterStatusResponse clusterStatus(ClusterStatusRequest request) {
    return invoke(AdminRpcs.CLUSTER_STATUS, request);
  }

  /** Creates a tenant and its first API key (the secret is returned once). Never retried. */
  public CreateTenantResponse createTenant(CreateTenantRequest request) {
    return invoke(AdminRpcs.CREATE_TENANT, request);
  }

  /** One tenant and its job count; NOT_FOUND for an unknown name. Retried. */
  public GetTenantResponse getTenant(GetTenantRequest request) {
    return invoke(AdminRpcs.GET_TENANT, request);
  }

  /** One page of tenants by name. Retried. */
  public ListTenantsResponse listTenants(ListTenantsRequest request) {
    return invoke(AdminRpcs.LIST_TENANTS, request);
  }

  /**
   * Changes a tenant's weight, concurrency cap or quotas; a non-zero {@code tenant.version} must equal the stored one
   * (FAILED_PRECONDITION otherwise). The mask path {@code quotas} sets all four quotas (one left 0 back to its
   * default); {@code quotas.max_jobs} and the like change that quota alone. Never retried.
   */
  public UpdateTenantResponse updateTenant(UpdateTenantRequest request) {
    return invoke(AdminRpcs.UPDATE_TENANT, request);
  }

  /** Stops creating and handing out the tenant's executions. Never retried. */
  public PauseTenantResponse pauseTenant(PauseTenantRequest request) {
    return invoke(AdminRpcs.PAUSE_TENANT, request);
  }

  /** Resumes a paused tenant. Never retried. */
  public ResumeTenantResponse resumeTenant(ResumeTenantRequest request) {
    return invoke(AdminRpcs.RESUME_TENANT, request);
  }

  /** Issues a new API key for a tenant (the secret is returned once). Never retried. */
  public IssueApiKeyResponse issueApiKey(IssueApiKeyRequest request) {
    return invoke(AdminRpcs.ISSUE_API_KEY, request);
  }

  /** Issues a replacement key; the old one keeps working for the grace. Never retried. */
  public RotateApiKeyResponse rotateApiKey(RotateApiKeyRequest request) {
    return invoke(AdminRpcs.ROTATE_API_KEY, request);
  }

  /** Revokes an API key at once. Never retried. */
  public RevokeApiKeyResponse revokeApiKey(RevokeApiKeyRequest request) {
    return invoke(AdminRpcs.REVOKE_API_KEY, request);
  }

  /** A tenant's API keys (never their secrets). Retried. */
  public ListApiKeysResponse listApiKeys(ListApiKeysRequest request) {
    return invoke(AdminRpcs.LIST_API_KEYS, request);
  }

  /** Issues a worker credential (the secret is returned once). Never retried. */
  public IssueWorkerCredentialResponse issueWorkerCredential(IssueWorkerCredentialRequest request) {
    return invoke(AdminRpcs.ISSUE_WORKER_CREDENTIAL, request);
  }

  /** Revokes a worker credential; streams using it are closed. Never retried. */
  public RevokeWorkerCredentialResponse revokeWorkerCredential(RevokeWorkerCredentialRequest request) {
    return invoke(AdminRpcs.REVOKE_WORKER_CREDENTIAL, request);
  }

  /** Worker credentials (never their secrets). Retried. */
  public ListWorkerCredentialsResponse listWorkerCredentials(ListWorkerCredentialsRequest request) {
    return invoke(AdminRpcs.LIST_WORKER_CREDENTIALS, request);
  }

  /** Jobs across tenants, one page. Retried. */
  public SearchJobsResponse searchJobs(SearchJobsRequest request) {
    return invoke(AdminRpcs.SEARCH_JOBS, request);
  }

  /** Executions across tenants, one page. Retried. */
  public SearchExecutionsResponse searchExecutions(SearchExecutionsRequest request) {
    return invoke(AdminRpcs.SEARCH_EXECUTIONS, request);
  }

  /** Moves a server's partitions and workers away, for rolling restarts. Never retried. */
  public DrainServerResponse drainServer(DrainServerRequest request) {
    return invoke(AdminRpcs.DRAIN_SERVER, request);
  }

  /** Alerts, newest first, one page. Retried. */
  public ListAlertsResponse listAlerts(ListAlertsRequest request) {
    return invoke(AdminRpcs.LIST_ALERTS, request);
  }

  /** Recomputes stored next runs after a time-zone database change. Retried only as a dry run. */
  public RecomputeSchedulesResponse recomputeSchedules(RecomputeSchedulesRequest request) {
    return invoke(AdminRpcs.RECOMPUTE_SCHEDULES, request);
  }

  /**
   * Alerts as they are raised and resolved, until {@link AlertStream#close()}: no deadline, never
   * retried. The stream's failure (UNAVAILABLE when the server goes away) is thrown from {@code
   * hasNext()}/{@code next()} as a {@link TickwheelException}; watch again to resume (with
   * {@code include_open} to see what is open now).
   */
  public AlertStream watchAlerts(WatchAlertsRequest request) {
    Context.CancellableContext context = Context.current().withCancellation();
    try {
      Iterator<WatchAlertsResponse> responses = context.call(() -> stub.watchAlerts(request));
      return new AlertStream(context, responses);
    } catch (StatusRuntimeException e) {
      context.cancel(e);
      throw TickwheelException.from(e);
    } catch (Exception e) {
      context.cancel(e);
      throw new IllegalStateException(e);
    }
  }

  /** The alerts of one {@link #watchAlerts} call; close it to end the call. */
  public static final class AlertStream implements Iterator<WatchAlertsResponse>, AutoCloseable {
    private final Context.CancellableContext context;
    private final Iterator<WatchAlertsResponse> responses;

    private AlertStream(Context.CancellableContext context, Iterator<WatchAlertsResponse> responses) {
      this.context = context;
      this.responses = responses;
    }

    /** Blocks until the next alert or the end of the stream. */
    @Override
    public boolean hasNext() {
      try {
        return responses.hasNext();
      } catch (StatusRuntimeException e) {
        throw TickwheelException.from(e);
      }
    }

    @Override
    public WatchAlertsResponse next() {
      try {
        return responses.next();
      } catch (StatusRuntimeException e) {
        throw TickwheelException.from(e);
      }
    }

    /** Cancels the call. */
    @Override
    public void close() {
      context.cancel(null);
    }
  }

  private <Req, Resp> Resp invoke(Rpc<Req, Resp> rpc, Req request) {
    return Calls.invoke(
        stub, rpc.send(), rpc.repeatable(), request, timeout, retry, sleeper, random);
  }

  /** Options of a {@link TickwheelAdminClient}, checked as they are set. */
  public static final class Builder {
    private final String address;
    private final Channel channel;
    private String adminToken;
    private TlsOptions tls;
    private Duration timeout = Duration.ofSeconds(10);
    private RetryOptions retry = RetryOptions.DEFAULT;
    private Calls.Sleeper sleeper = duration -> TimeUnit.NANOSECONDS.sleep(duration.toNanos());
    private DoubleSupplier random = () -> ThreadLocalRandom.current().nextDouble();

    private Builder(String address, Channel channel) {
      this.address = address;
      this.channel = channel;
    }

    /**
     * The admin token sent as {@code authorization: Bearer <token>} on every call; without one
     * the server answers UNAUTHENTICATED.
     */
    public Builder adminToken(String adminToken) {
      if (adminToken != null && !adminToken.isEmpty()) {
        if (!adminToken.equals(adminToken.strip())
            || adminToken.chars().anyMatch(c -> c < 0x20 || c == 0x7f)) {
          throw new IllegalArgumentException(
              "the admin token must be one line without surrounding spaces");
        }
        this.adminToken = adminToken;
      } else {
        this.adminToken = null;
      }
      return this;
    }

    /** Connects over TLS, or mutual TLS (the default is plaintext). */
    public Builder tls(TlsOptions tls) {
      this.tls = tls;
      return this;
    }

    /**
     * How long each call may take in total, retries and their waits included (default 10 s);
     * null means no deadline.
     */
    public Builder timeout(Duration timeout) {
      if (timeout != null && (timeout.isNegative() || timeout.isZero())) {
        throw new IllegalArgumentException("the timeout must be positive, or null for none");
      }
      this.timeout = timeout;
      return this;
    }

    /** Replaces {@link RetryOptions#DEFAULT}; {@link RetryOptions#NONE} disables retries. */
    public Builder retry(RetryOptions retry) {
      this.retry = Objects.requireNonNull(retry, "retry");
      return this;
    }

    Builder sleeper(Calls.Sleeper sleeper) {
      this.sleeper = sleeper;
      return this;
    }

    Builder random(DoubleSupplier random) {
      this.random = random;
      return this;
    }

    /** The client; it opens its channel now and connects on the first call. */
    public TickwheelAdminClient build() {
      return new TickwheelAdminClient(this);
    }
  }
}

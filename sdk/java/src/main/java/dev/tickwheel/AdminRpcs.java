package dev.tickwheel;

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
import dev.tickwheel.v1.AdminServiceGrpc.AdminServiceBlockingStub;
import java.util.List;
import java.util.function.BiFunction;
import java.util.function.Predicate;

/**
 * Every unary AdminService RPC once: its name, how the blocking stub sends it, and whether an
 * attempt that failed with a retryable status may be sent again with this request. The rule, the
 * same as the Python SDK's: reads are repeated; RecomputeSchedules only as a dry run; every other
 * write never, because AdminService writes carry no request id, so a reply lost after the server
 * committed would apply them twice or answer a misleading error (a second key issued, ALREADY_EXISTS
 * for the tenant just created). A test checks that {@link #ALL} covers every unary RPC of the
 * service (WatchAlerts, a stream, is never retried), so a new one forces a decision.
 */
final class AdminRpcs {
  private AdminRpcs() {}

  /** One unary RPC of AdminService. */
  record Rpc<Req, Resp>(
      String method,
      BiFunction<AdminServiceBlockingStub, Req, Resp> send,
      Predicate<Req> repeatable) {}

  private static <Req, Resp> Rpc<Req, Resp> rpc(
      String method,
      BiFunction<AdminServiceBlockingStub, Req, Resp> send,
      Predicate<Req> repeatable) {
    return new Rpc<>(method, send, repeatable);
  }

  private static <T> Predicate<T> always() {
    return request -> true;
  }

  private static <T> Predicate<T> never() {
    return request -> false;
  }

  /** Reads. */
  static final Rpc<ClusterStatusRequest, ClusterStatusResponse> CLUSTER_STATUS =
      rpc("ClusterStatus", AdminServiceBlockingStub::clusterStatus, always());
  /** A repeat would answer ALREADY_EXISTS for a tenant a lost attempt created. */
  static final Rpc<CreateTenantRequest, CreateTenantResponse> CREATE_TENANT =
      rpc("CreateTenant", AdminServiceBlockingStub::createTenant, never());
  static final Rpc<GetTenantRequest, GetTenantResponse> GET_TENANT =
      rpc("GetTenant", AdminServiceBlockingStub::getTenant, always());
  static final Rpc<ListTenantsRequest, ListTenantsResponse> LIST_TENANTS =
      rpc("ListTenants", AdminServiceBlockingStub::listTenants, always());
  static final Rpc<UpdateTenantRequest, UpdateTenantResponse> UPDATE_TENANT =
      rpc("UpdateTenant", AdminServiceBlockingStub::updateTenant, never());
  static final Rpc<PauseTenantRequest, PauseTenantResponse> PAUSE_TENANT =
      rpc("PauseTenant", AdminServiceBlockingStub::pauseTenant, never());
  static final Rpc<ResumeTenantRequest, ResumeTenantResponse> RESUME_TENANT =
      rpc("ResumeTenant", AdminServiceBlockingStub::resumeTenant, never());
  /** Each attempt would issue a key. */
  static final Rpc<IssueApiKeyRequest, IssueApiKeyResponse> ISSUE_API_KEY =
      rpc("IssueApiKey", AdminServiceBlockingStub::issueApiKey, never());
  static final Rpc<RotateApiKeyRequest, RotateApiKeyResponse> ROTATE_API_KEY =
      rpc("RotateApiKey", AdminServiceBlockingStub::rotateApiKey, never());
  static final Rpc<RevokeApiKeyRequest, RevokeApiKeyResponse> REVOKE_API_KEY =
      rpc("RevokeApiKey", AdminServiceBlockingStub::revokeApiKey, never());
  static final Rpc<ListApiKeysRequest, ListApiKeysResponse> LIST_API_KEYS =
      rpc("ListApiKeys", AdminServiceBlockingStub::listApiKeys, always());
  static final Rpc<IssueWorkerCredentialRequest, IssueWorkerCredentialResponse> ISSUE_WORKER_CREDENTIAL =
      rpc("IssueWorkerCredential", AdminServiceBlockingStub::issueWorkerCredential, never());
  static final Rpc<RevokeWorkerCredentialRequest, RevokeWorkerCredentialResponse> REVOKE_WORKER_CREDENTIAL =
      rpc("RevokeWorkerCredential", AdminServiceBlockingStub::revokeWorkerCredential, never());
  static final Rpc<ListWorkerCredentialsRequest, ListWorkerCredentialsResponse> LIST_WORKER_CREDENTIALS =
      rpc("ListWorkerCredentials", AdminServiceBlockingStub::listWorkerCredentials, always());
  static final Rpc<SearchJobsRequest, SearchJobsResponse> SEARCH_JOBS =
      rpc("SearchJobs", AdminServiceBlockingStub::searchJobs, always());
  static final Rpc<SearchExecutionsRequest, SearchExecutionsResponse> SEARCH_EXECUTIONS =
      rpc("SearchExecutions", AdminServiceBlockingStub::searchExecutions, always());
  static final Rpc<DrainServerRequest, DrainServerResponse> DRAIN_SERVER =
      rpc("DrainServer", AdminServiceBlockingStub::drainServer, never());
  static final Rpc<ListAlertsRequest, ListAlertsResponse> LIST_ALERTS =
      rpc("ListAlerts", AdminServiceBlockingStub::listAlerts, always());
  static final Rpc<RecomputeSchedulesRequest, RecomputeSchedulesResponse> RECOMPUTE_SCHEDULES =
      rpc("RecomputeSchedules", AdminServiceBlockingStub::recomputeSchedules, RecomputeSchedulesRequest::getDryRun);

  static final List<Rpc<?, ?>> ALL =
      List.of(
          CLUSTER_STATUS,
          CREATE_TENANT,
          GET_TENANT,
          LIST_TENANTS,
          UPDATE_TENANT,
          PAUSE_TENANT,
          RESUME_TENANT,
          ISSUE_API_KEY,
          ROTATE_API_KEY,
          REVOKE_API_KEY,
          LIST_API_KEYS,
          ISSUE_WORKER_CREDENTIAL,
          REVOKE_WORKER_CREDENTIAL,
          LIST_WORKER_CREDENTIALS,
          SEARCH_JOBS,
          SEARCH_EXECUTIONS,
          DRAIN_SERVER,
          LIST_ALERTS,
          RECOMPUTE_SCHEDULES);
}

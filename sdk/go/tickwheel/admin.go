package tickwheel

import (
	"context"
	"errors"
	"io"
	"iter"

	"google.golang.org/grpc/metadata"

	tickwheelv1 "github.com/tickwheel/tickwheel/sdk/go/gen/tickwheel/v1"
)

// AdminClient is an AdminService client: the operators' API (tenants, API
// keys, worker credentials, cluster status, searches across tenants,
// draining a server, alerts). Every call carries the admin token of
// [WithAdminToken] as "authorization: Bearer <token>": without one the
// server answers UNAUTHENTICATED, and a tenant API key gets
// PERMISSION_DENIED.
//
// Calls have the scheduler client's deadline, retry rules and error mapping:
// a failure is an [*Error]; UNAVAILABLE is retried only for the calls said
// to be "Retried" below (reads, and RecomputeSchedules when it is a dry
// run), because every admin write either has no request id (a retry after a
// lost reply would issue a second key, or answer ALREADY_EXISTS for the
// tenant the first attempt created) or names a version that the first
// attempt moved on. It is safe for concurrent use.
type AdminClient struct {
	client *Client
	admin  tickwheelv1.AdminServiceClient
	owned  bool
}

// NewAdmin returns an AdminService client for address with its own
// connection; give it [WithAdminToken]. Close it when done.
func NewAdmin(address string, options ...Option) (*AdminClient, error) {
	client, err := New(address, options...)
	if err != nil {
		return nil, err
	}
	admin := client.Admin()
	admin.owned = true
	return admin, nil
}

// Admin returns an AdminService client over this client's connection,
// carrying its [WithAdminToken] token (the API key goes only to
// SchedulerService). Closing the Client closes it too.
func (c *Client) Admin() *AdminClient {
	return &AdminClient{client: c, admin: tickwheelv1.NewAdminServiceClient(c.conn)}
}

// Close closes the connection when the AdminClient came from [NewAdmin];
// one from [Client.Admin] shares its Client's connection and leaves it open.
func (a *AdminClient) Close() error {
	if a.owned {
		return a.client.Close()
	}
	return nil
}

// ClusterStatus returns the cluster as the answering server sees it:
// servers, partitions and the deepest tenant queues. Retried.
func (a *AdminClient) ClusterStatus(ctx context.Context, request *tickwheelv1.ClusterStatusRequest) (*tickwheelv1.ClusterStatusResponse, error) {
	return a.admin.ClusterStatus(ctx, request)
}

// CreateTenant creates a tenant and its first API key, whose secret the
// reply holds once. ALREADY_EXISTS when the name is taken. Never retried.
func (a *AdminClient) CreateTenant(ctx context.Context, request *tickwheelv1.CreateTenantRequest) (*tickwheelv1.CreateTenantResponse, error) {
	return a.admin.CreateTenant(ctx, request)
}

// GetTenant returns one tenant and its job count. Retried.
func (a *AdminClient) GetTenant(ctx context.Context, request *tickwheelv1.GetTenantRequest) (*tickwheelv1.GetTenantResponse, error) {
	return a.admin.GetTenant(ctx, request)
}

// ListTenants returns one page of tenants by name; [AdminClient.Tenants]
// walks every page. Retried.
func (a *AdminClient) ListTenants(ctx context.Context, request *tickwheelv1.ListTenantsRequest) (*tickwheelv1.ListTenantsResponse, error) {
	return a.admin.ListTenants(ctx, request)
}

// UpdateTenant changes a tenant's weight, concurrency cap or quotas
// (FAILED_PRECONDITION when Tenant.Version is stale; 0 skips the check).
// The mask path "quotas" sets all four quotas (one left 0 back to its
// default); "quotas.max_jobs" and the like change that quota alone.
// Never retried.
func (a *AdminClient) UpdateTenant(ctx context.Context, request *tickwheelv1.UpdateTenantRequest) (*tickwheelv1.UpdateTenantResponse, error) {
	return a.admin.UpdateTenant(ctx, request)
}

// PauseTenant stops creating and handing out the tenant's executions.
// Never retried.
func (a *AdminClient) PauseTenant(ctx context.Context, request *tickwheelv1.PauseTenantRequest) (*tickwheelv1.PauseTenantResponse, error) {
	return a.admin.PauseTenant(ctx, request)
}

// ResumeTenant resumes a paused tenant. Never retried.
func (a *AdminClient) ResumeTenant(ctx context.Context, request *tickwheelv1.ResumeTenantRequest) (*tickwheelv1.ResumeTenantResponse, error) {
	return a.admin.ResumeTenant(ctx, request)
}

// IssueApiKey issues a new API key for a tenant; the secret is in the reply
// once. Never retried (a retry would issue a second key).
func (a *AdminClient) IssueApiKey(ctx context.Context, request *tickwheelv1.IssueApiKeyRequest) (*tickwheelv1.IssueApiKeyResponse, error) {
	return a.admin.IssueApiKey(ctx, request)
}

// RotateApiKey issues a replacement key; the old one keeps working for the
// grace. Never retried.
func (a *AdminClient) RotateApiKey(ctx context.Context, request *tickwheelv1.RotateApiKeyRequest) (*tickwheelv1.RotateApiKeyResponse, error) {
	return a.admin.RotateApiKey(ctx, request)
}

// RevokeApiKey revokes an API key at once. Never retried.
func (a *AdminClient) RevokeApiKey(ctx context.Context, request *tickwheelv1.RevokeApiKeyRequest) (*tickwheelv1.RevokeApiKeyResponse, error) {
	return a.admin.RevokeApiKey(ctx, request)
}

// ListApiKeys lists one page of a tenant's keys that have not expired,
// never their secrets; follow NextPageToken for the rest. Retried.
func (a *AdminClient) ListApiKeys(ctx context.Context, request *tickwheelv1.ListApiKeysRequest) (*tickwheelv1.ListApiKeysResponse, error) {
	return a.admin.ListApiKeys(ctx, request)
}

// IssueWorkerCredential issues a worker credential for tenants (and
// handlers, HTTP); the secret is in the reply once. Never retried.
func (a *AdminClient) IssueWorkerCredential(ctx context.Context, request *tickwheelv1.IssueWorkerCredentialRequest) (*tickwheelv1.IssueWorkerCredentialResponse, error) {
	return a.admin.IssueWorkerCredential(ctx, request)
}

// RevokeWorkerCredential revokes a worker credential; streams using it are
// closed. Never retried.
func (a *AdminClient) RevokeWorkerCredential(ctx context.Context, request *tickwheelv1.RevokeWorkerCredentialRequest) (*tickwheelv1.RevokeWorkerCredentialResponse, error) {
	return a.admin.RevokeWorkerCredential(ctx, request)
}

// ListWorkerCredentials lists one page of the worker credentials not
// revoked, never their secrets; follow NextPageToken for the rest. Retried.
func (a *AdminClient) ListWorkerCredentials(ctx context.Context, request *tickwheelv1.ListWorkerCredentialsRequest) (*tickwheelv1.ListWorkerCredentialsResponse, error) {
	return a.admin.ListWorkerCredentials(ctx, request)
}

// SearchJobs returns one page of jobs across tenants, by id. A filtered page
// may be short or empty and still carry a token (its scan stopped before the
// end): follow NextPageToken until it is empty. Retried.
func (a *AdminClient) SearchJobs(ctx context.Context, request *tickwheelv1.SearchJobsRequest) (*tickwheelv1.SearchJobsResponse, error) {
	return a.admin.SearchJobs(ctx, request)
}

// SearchExecutions returns one page of executions across tenants, newest
// nominal instant first. Retried.
func (a *AdminClient) SearchExecutions(ctx context.Context, request *tickwheelv1.SearchExecutionsRequest) (*tickwheelv1.SearchExecutionsResponse, error) {
	return a.admin.SearchExecutions(ctx, request)
}

// DrainServer moves a server's partitions and workers away, for rolling
// restarts. Never retried.
func (a *AdminClient) DrainServer(ctx context.Context, request *tickwheelv1.DrainServerRequest) (*tickwheelv1.DrainServerResponse, error) {
	return a.admin.DrainServer(ctx, request)
}

// ListAlerts returns one page of alerts, newest first. Retried.
func (a *AdminClient) ListAlerts(ctx context.Context, request *tickwheelv1.ListAlertsRequest) (*tickwheelv1.ListAlertsResponse, error) {
	return a.admin.ListAlerts(ctx, request)
}

// RecomputeSchedules recomputes stored next runs after a time-zone
// database change. Retried only when DryRun (a dry run changes nothing).
func (a *AdminClient) RecomputeSchedules(ctx context.Context, request *tickwheelv1.RecomputeSchedulesRequest) (*tickwheelv1.RecomputeSchedulesResponse, error) {
	return a.admin.RecomputeSchedules(ctx, request)
}

// Tenants yields every tenant ListTenants would list for request, across
// pages.
func (a *AdminClient) Tenants(ctx context.Context, request *tickwheelv1.ListTenantsRequest) iter.Seq2[*tickwheelv1.Tenant, error] {
	return pages(ctx, request, a.ListTenants, (*tickwheelv1.ListTenantsResponse).GetTenants)
}

// WatchAlerts yields alerts as they are raised, seen again and resolved
// (with request.IncludeOpen, every open one first), until the loop stops or
// ctx is done. It has no deadline (the client's timeout does not apply) and
// is never retried: a dropped stream yields its *Error (UNAVAILABLE) and
// ends the sequence; the caller watches again. Ending the loop, or ctx,
// cancels the stream.
func (a *AdminClient) WatchAlerts(ctx context.Context, request *tickwheelv1.WatchAlertsRequest) iter.Seq2[*tickwheelv1.Alert, error] {
	return func(yield func(*tickwheelv1.Alert, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		if token := a.client.settings.adminToken; token != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		}
		stream, err := a.admin.WatchAlerts(ctx, request)
		if err != nil {
			yield(nil, AsError(err))
			return
		}
		for {
			event, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				yield(nil, AsError(err))
				return
			}
			if !yield(event.GetAlert(), nil) {
				return
			}
		}
	}
}

package tickwheel

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	tickwheelv1 "github.com/tickwheel/tickwheel/sdk/go/gen/tickwheel/v1"
)

// fakeAdmin answers AdminService from a script, as fakeScheduler does.
type fakeAdmin struct {
	tickwheelv1.UnimplementedAdminServiceServer

	mu       sync.Mutex
	failures map[string][]error
	requests map[string][]proto.Message
	auth     []string
	alerts   []*tickwheelv1.Alert
	watchErr error
}

func (f *fakeAdmin) record(ctx context.Context, method string, request proto.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.requests == nil {
		f.requests = map[string][]proto.Message{}
	}
	f.requests[method] = append(f.requests[method], proto.Clone(request))
	md, _ := metadata.FromIncomingContext(ctx)
	f.auth = append(f.auth, strings.Join(md.Get("authorization"), ","))
	if queue := f.failures[method]; len(queue) > 0 {
		f.failures[method] = queue[1:]
		return queue[0]
	}
	return nil
}

func (f *fakeAdmin) calls(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests[method])
}

func (f *fakeAdmin) GetTenant(ctx context.Context, r *tickwheelv1.GetTenantRequest) (*tickwheelv1.GetTenantResponse, error) {
	if err := f.record(ctx, "GetTenant", r); err != nil {
		return nil, err
	}
	return &tickwheelv1.GetTenantResponse{Tenant: &tickwheelv1.Tenant{Name: r.GetName()}, JobCount: 3}, nil
}

func (f *fakeAdmin) CreateTenant(ctx context.Context, r *tickwheelv1.CreateTenantRequest) (*tickwheelv1.CreateTenantResponse, error) {
	if err := f.record(ctx, "CreateTenant", r); err != nil {
		return nil, err
	}
	return &tickwheelv1.CreateTenantResponse{Tenant: r.GetTenant(), ApiKey: &tickwheelv1.IssuedSecret{Id: "key_1", Secret: "twk_s"}}, nil
}

func (f *fakeAdmin) IssueApiKey(ctx context.Context, r *tickwheelv1.IssueApiKeyRequest) (*tickwheelv1.IssueApiKeyResponse, error) {
	if err := f.record(ctx, "IssueApiKey", r); err != nil {
		return nil, err
	}
	return &tickwheelv1.IssueApiKeyResponse{}, nil
}

func (f *fakeAdmin) DrainServer(ctx context.Context, r *tickwheelv1.DrainServerRequest) (*tickwheelv1.DrainServerResponse, error) {
	if err := f.record(ctx, "DrainServer", r); err != nil {
		return nil, err
	}
	return &tickwheelv1.DrainServerResponse{}, nil
}

func (f *fakeAdmin) ListTenants(ctx context.Context, r *tickwheelv1.ListTenantsRequest) (*tickwheelv1.ListTenantsResponse, error) {
	if err := f.record(ctx, "ListTenants", r); err != nil {
		return nil, err
	}
	if r.GetPageToken() == "" {
		return &tickwheelv1.ListTenantsResponse{Tenants: []*tickwheelv1.Tenant{{Name: "acme"}}, NextPageToken: "p2"}, nil
	}
	return &tickwheelv1.ListTenantsResponse{Tenants: []*tickwheelv1.Tenant{{Name: "zeta"}}}, nil
}

func (f *fakeAdmin) RecomputeSchedules(ctx context.Context, r *tickwheelv1.RecomputeSchedulesRequest) (*tickwheelv1.RecomputeSchedulesResponse, error) {
	if err := f.record(ctx, "RecomputeSchedules", r); err != nil {
		return nil, err
	}
	return &tickwheelv1.RecomputeSchedulesResponse{}, nil
}

func (f *fakeAdmin) WatchAlerts(r *tickwheelv1.WatchAlertsRequest, stream grpc.ServerStreamingServer[tickwheelv1.WatchAlertsResponse]) error {
	if err := f.record(stream.Context(), "WatchAlerts", r); err != nil {
		return err
	}
	for _, alert := range f.alerts {
		if err := stream.Send(&tickwheelv1.WatchAlertsResponse{Alert: alert}); err != nil {
			return err
		}
	}
	return f.watchErr
}

// serveBoth starts a fake SchedulerService and AdminService on one
// in-memory listener and returns a client for it, with retry waits recorded
// instead of slept.
func serveBoth(t *testing.T, admin *fakeAdmin, options ...Option) (*Client, *fakeScheduler, *[]time.Duration) {
	t.Helper()
	listener := bufconn.Listen(1 << 20)
	server := grpc.NewServer()
	scheduler := &fakeScheduler{}
	tickwheelv1.RegisterSchedulerServiceServer(server, scheduler)
	tickwheelv1.RegisterAdminServiceServer(server, admin)
	go func() { _ = server.Serve(listener) }()
	t.Cleanup(server.Stop)
	var waits []time.Duration
	pinned := func(s *settings) error {
		s.rand = func() float64 { return 0.5 }
		s.sleep = func(_ <-chan struct{}, d time.Duration) bool { waits = append(waits, d); return true }
		return nil
	}
	dialer := grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return listener.DialContext(ctx) })
	client, err := New("passthrough:///bufnet", append([]Option{pinned, WithDialOptions(dialer)}, options...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client, scheduler, &waits
}

func TestAdminCallsCarryTheAdminTokenAndSchedulerCallsTheAPIKey(t *testing.T) {
	admin := &fakeAdmin{}
	client, scheduler, _ := serveBoth(t, admin, WithAPIKey("twk_tenant"), WithAdminToken("twa_operator"))
	reply, err := client.Admin().GetTenant(context.Background(), &tickwheelv1.GetTenantRequest{Name: "acme"})
	if err != nil || reply.GetTenant().GetName() != "acme" || reply.GetJobCount() != 3 {
		t.Fatalf("GetTenant = %v, %v", reply, err)
	}
	if _, err := client.GetJob(context.Background(), &tickwheelv1.GetJobRequest{Id: "job_01"}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(admin.auth, "|") != "Bearer twa_operator" {
		t.Fatalf("AdminService saw authorization %q", admin.auth)
	}
	if strings.Join(scheduler.auth, "|") != "Bearer twk_tenant" {
		t.Fatalf("SchedulerService saw authorization %q: the admin token must never reach it", scheduler.auth)
	}
}

func TestAdminReadsAreRetriedAndAdminWritesAreNot(t *testing.T) {
	admin := &fakeAdmin{failures: map[string][]error{
		"GetTenant":          {unavailable(), unavailable()},
		"CreateTenant":       {unavailable()},
		"IssueApiKey":        {unavailable()},
		"DrainServer":        {unavailable()},
		"RecomputeSchedules": {unavailable(), unavailable()},
	}}
	client, _, waits := serveBoth(t, admin, WithAdminToken("twa_operator"))
	ctx := context.Background()
	a := client.Admin()
	if _, err := a.GetTenant(ctx, &tickwheelv1.GetTenantRequest{Name: "acme"}); err != nil || admin.calls("GetTenant") != 3 {
		t.Fatalf("GetTenant: %v after %d calls; want success after 3", err, admin.calls("GetTenant"))
	}
	if want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}; !equalDurations(*waits, want) {
		t.Fatalf("waits = %v, want %v (the scheduler client's backoff)", *waits, want)
	}
	writes := []struct {
		method string
		call   func() error
	}{
		{"CreateTenant", func() error {
			_, err := a.CreateTenant(ctx, &tickwheelv1.CreateTenantRequest{Tenant: &tickwheelv1.Tenant{Name: "acme"}})
			return err
		}},
		{"IssueApiKey", func() error {
			_, err := a.IssueApiKey(ctx, &tickwheelv1.IssueApiKeyRequest{Tenant: "acme"})
			return err
		}},
		{"DrainServer", func() error {
			_, err := a.DrainServer(ctx, &tickwheelv1.DrainServerRequest{ServerId: "s1"})
			return err
		}},
		// A real recompute writes; only a dry run (below) may be repeated.
		{"RecomputeSchedules", func() error {
			_, err := a.RecomputeSchedules(ctx, &tickwheelv1.RecomputeSchedulesRequest{})
			return err
		}},
	}
	for _, w := range writes {
		err := w.call()
		var failure *Error
		if !errors.As(err, &failure) || failure.Code != codes.Unavailable || admin.calls(w.method) != 1 {
			t.Fatalf("%s: err %v after %d calls; want an *Error UNAVAILABLE after 1", w.method, err, admin.calls(w.method))
		}
	}
	if _, err := a.RecomputeSchedules(ctx, &tickwheelv1.RecomputeSchedulesRequest{DryRun: true}); err != nil {
		t.Fatalf("dry-run RecomputeSchedules: %v", err)
	}
	if got := admin.calls("RecomputeSchedules"); got != 3 {
		t.Fatalf("RecomputeSchedules reached the server %d times, want 3 (1 + a dry run retried once)", got)
	}
}

func TestAnRPCTheRetryTableDoesNotListIsNeverRetried(t *testing.T) {
	if mayRepeat("/tickwheel.v1.AdminService/SomethingNew", &tickwheelv1.GetTenantRequest{}) {
		t.Fatal("an RPC missing from the table must not be repeated")
	}
	if !mayRepeat(tickwheelv1.AdminService_GetTenant_FullMethodName, &tickwheelv1.GetTenantRequest{}) {
		t.Fatal("GetTenant is a read: it may be repeated")
	}
	client, err := New("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, again := client.retryDelay("/tickwheel.v1.AdminService/SomethingNew", nil, &Error{Code: codes.Unavailable}, 1, time.Time{}, false); again {
		t.Fatal("retryDelay retried an RPC the table does not list")
	}
}

func TestAdminErrorsCarryTheFieldViolations(t *testing.T) {
	bad, err := status.New(codes.InvalidArgument, "invalid tenant").WithDetails(&errdetails.BadRequest{
		FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "tenant.name", Description: "must start with a letter"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	admin := &fakeAdmin{failures: map[string][]error{"CreateTenant": {bad.Err()}}}
	client, _, _ := serveBoth(t, admin, WithAdminToken("twa_operator"))
	_, err = client.Admin().CreateTenant(context.Background(), &tickwheelv1.CreateTenantRequest{Tenant: &tickwheelv1.Tenant{Name: "9x"}})
	var failure *Error
	if !errors.As(err, &failure) || len(failure.FieldViolations) != 1 || failure.FieldViolations[0].Field != "tenant.name" {
		t.Fatalf("err = %#v", err)
	}
	if got := err.Error(); got != "INVALID_ARGUMENT: tenant.name: must start with a letter (invalid tenant)" {
		t.Fatalf("Error() = %q", got)
	}
}

func TestNewAdminTenantsAndWatchAlerts(t *testing.T) {
	admin := &fakeAdmin{
		alerts:   []*tickwheelv1.Alert{{Id: "a1"}, {Id: "a2"}},
		watchErr: status.Error(codes.Unavailable, "server going away"),
	}
	listener := bufconn.Listen(1 << 20)
	server := grpc.NewServer()
	tickwheelv1.RegisterAdminServiceServer(server, admin)
	go func() { _ = server.Serve(listener) }()
	t.Cleanup(server.Stop)
	dialer := grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return listener.DialContext(ctx) })
	a, err := NewAdmin("passthrough:///bufnet", WithAdminToken("twa_operator"), WithDialOptions(dialer))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	var names []string
	for tenant, err := range a.Tenants(context.Background(), &tickwheelv1.ListTenantsRequest{}) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tenant.GetName())
	}
	if strings.Join(names, ",") != "acme,zeta" {
		t.Fatalf("tenants = %v", names)
	}

	var ids []string
	var last error
	for alert, err := range a.WatchAlerts(context.Background(), &tickwheelv1.WatchAlertsRequest{IncludeOpen: true}) {
		if err != nil {
			last = err
			continue
		}
		ids = append(ids, alert.GetId())
	}
	if strings.Join(ids, ",") != "a1,a2" {
		t.Fatalf("alerts = %v", ids)
	}
	var failure *Error
	if !errors.As(last, &failure) || failure.Code != codes.Unavailable {
		t.Fatalf("the dropped stream ended with %v, want an *Error UNAVAILABLE", last)
	}
	if admin.calls("WatchAlerts") != 1 {
		t.Fatal("WatchAlerts is never retried")
	}
	for _, auth := range admin.auth {
		if auth != "Bearer twa_operator" {
			t.Fatalf("authorization = %q", auth)
		}
	}
}

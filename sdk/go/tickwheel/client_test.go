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

// fakeScheduler answers from a script: each RPC pops the next error (nil:
// succeed) from failures[method], and records what it received.
type fakeScheduler struct {
	tickwheelv1.UnimplementedSchedulerServiceServer

	mu       sync.Mutex
	failures map[string][]error
	requests map[string][]proto.Message
	auth     []string
	pages    map[string]*tickwheelv1.ListExecutionsResponse // by page token
	jobPages map[string]*tickwheelv1.ListJobsResponse       // by page token
}

func (f *fakeScheduler) record(ctx context.Context, method string, request proto.Message) error {
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

func (f *fakeScheduler) calls(method string) []proto.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[method]
}

func (f *fakeScheduler) CreateJob(ctx context.Context, r *tickwheelv1.CreateJobRequest) (*tickwheelv1.CreateJobResponse, error) {
	if err := f.record(ctx, "CreateJob", r); err != nil {
		return nil, err
	}
	job := proto.CloneOf(r.GetJob())
	job.Id = "job_01"
	return &tickwheelv1.CreateJobResponse{Job: job, Created: true}, nil
}

func (f *fakeScheduler) UpdateJob(ctx context.Context, r *tickwheelv1.UpdateJobRequest) (*tickwheelv1.UpdateJobResponse, error) {
	if err := f.record(ctx, "UpdateJob", r); err != nil {
		return nil, err
	}
	return &tickwheelv1.UpdateJobResponse{Job: r.GetJob()}, nil
}

func (f *fakeScheduler) BackfillJob(ctx context.Context, r *tickwheelv1.BackfillJobRequest) (*tickwheelv1.BackfillJobResponse, error) {
	if err := f.record(ctx, "BackfillJob", r); err != nil {
		return nil, err
	}
	return &tickwheelv1.BackfillJobResponse{}, nil
}

func (f *fakeScheduler) GetJob(ctx context.Context, r *tickwheelv1.GetJobRequest) (*tickwheelv1.GetJobResponse, error) {
	if err := f.record(ctx, "GetJob", r); err != nil {
		return nil, err
	}
	return &tickwheelv1.GetJobResponse{Job: &tickwheelv1.Job{Id: r.GetId()}}, nil
}

func (f *fakeScheduler) PreviewSchedule(ctx context.Context, r *tickwheelv1.PreviewScheduleRequest) (*tickwheelv1.PreviewScheduleResponse, error) {
	if err := f.record(ctx, "PreviewSchedule", r); err != nil {
		return nil, err
	}
	return &tickwheelv1.PreviewScheduleResponse{Fires: []*tickwheelv1.ScheduledFire{{LocalTime: "2027-01-01T02:00:00+00:00"}}}, nil
}

func (f *fakeScheduler) ListExecutions(ctx context.Context, r *tickwheelv1.ListExecutionsRequest) (*tickwheelv1.ListExecutionsResponse, error) {
	if err := f.record(ctx, "ListExecutions", r); err != nil {
		return nil, err
	}
	page, ok := f.pages[r.GetPageToken()]
	if !ok {
		return nil, status.Error(codes.InvalidArgument, "unknown page token")
	}
	return page, nil
}

func (f *fakeScheduler) ListJobs(ctx context.Context, r *tickwheelv1.ListJobsRequest) (*tickwheelv1.ListJobsResponse, error) {
	if err := f.record(ctx, "ListJobs", r); err != nil {
		return nil, err
	}
	page, ok := f.jobPages[r.GetPageToken()]
	if !ok {
		return nil, status.Error(codes.InvalidArgument, "unknown page token")
	}
	return page, nil
}

// serve starts fake on an in-memory listener and returns a client for it.
func serve(t *testing.T, fake tickwheelv1.SchedulerServiceServer, options ...Option) (*Client, *[]time.Duration) {
	t.Helper()
	listener := bufconn.Listen(1 << 20)
	server := grpc.NewServer()
	tickwheelv1.RegisterSchedulerServiceServer(server, fake)
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
	return client, &waits
}

func unavailable() error { return status.Error(codes.Unavailable, "connection reset") }

func TestCreateJobIsRetriedWithOneGeneratedRequestIDAndTheAPIKey(t *testing.T) {
	fake := &fakeScheduler{failures: map[string][]error{"CreateJob": {unavailable(), unavailable()}}}
	client, waits := serve(t, fake, WithAPIKey("twk_a_secret"))
	request := &tickwheelv1.CreateJobRequest{Job: CronJob("report", "0 2 * * *", "UTC", Handler("echo"))}

	reply, err := client.CreateJob(context.Background(), request)
	if err != nil {
		t.Fatal(err)
	}
	if reply.GetJob().GetId() != "job_01" || !reply.GetCreated() {
		t.Fatalf("reply = %v", reply)
	}
	calls := fake.calls("CreateJob")
	if len(calls) != 3 {
		t.Fatalf("CreateJob reached the server %d times, want 3", len(calls))
	}
	id := calls[0].(*tickwheelv1.CreateJobRequest).GetRequestId()
	if len(id) != 36 {
		t.Fatalf("generated request id %q is not a UUID", id)
	}
	for _, call := range calls[1:] {
		if got := call.(*tickwheelv1.CreateJobRequest).GetRequestId(); got != id {
			t.Fatalf("a retry carried request id %q, the first attempt %q", got, id)
		}
	}
	if request.GetRequestId() != "" {
		t.Fatalf("the caller's request was changed: request id %q", request.GetRequestId())
	}
	// Full jitter with the draw pinned at 0.5: half of 0.2 s, then half of 0.4 s.
	if want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}; !equalDurations(*waits, want) {
		t.Fatalf("waits = %v, want %v", *waits, want)
	}
	for _, auth := range fake.auth {
		if auth != "Bearer twk_a_secret" {
			t.Fatalf("authorization = %q", auth)
		}
	}
}

func TestWritesThatAreNotIdempotentAreNeverRetried(t *testing.T) {
	fake := &fakeScheduler{failures: map[string][]error{
		"UpdateJob":   {unavailable()},
		"BackfillJob": {unavailable(), unavailable()},
	}}
	client, _ := serve(t, fake)
	_, err := client.UpdateJob(context.Background(), &tickwheelv1.UpdateJobRequest{Job: &tickwheelv1.Job{Id: "job_01"}})
	if status.Code(err) != codes.Unavailable || len(fake.calls("UpdateJob")) != 1 {
		t.Fatalf("UpdateJob: err %v after %d calls; want UNAVAILABLE after 1", err, len(fake.calls("UpdateJob")))
	}
	// A real backfill writes; a dry run does not, so only the dry run is retried.
	if _, err := client.BackfillJob(context.Background(), &tickwheelv1.BackfillJobRequest{Id: "job_01"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("BackfillJob: err %v", err)
	}
	if _, err := client.BackfillJob(context.Background(), &tickwheelv1.BackfillJobRequest{Id: "job_01", DryRun: true}); err != nil {
		t.Fatalf("dry-run BackfillJob: %v", err)
	}
	if got := len(fake.calls("BackfillJob")); got != 3 {
		t.Fatalf("BackfillJob reached the server %d times, want 3 (1 + a dry run retried once)", got)
	}
}

func TestRetriesStopWhenTheAttemptsAreSpent(t *testing.T) {
	fake := &fakeScheduler{failures: map[string][]error{"GetJob": {
		unavailable(), unavailable(), unavailable(), unavailable(), unavailable(), unavailable(),
	}}}
	client, waits := serve(t, fake)
	_, err := client.GetJob(context.Background(), &tickwheelv1.GetJobRequest{Id: "job_01"})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v", err)
	}
	if got := len(fake.calls("GetJob")); got != DefaultRetry.MaxAttempts {
		t.Fatalf("GetJob reached the server %d times, want %d", got, DefaultRetry.MaxAttempts)
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}
	if !equalDurations(*waits, want) {
		t.Fatalf("waits = %v, want %v", *waits, want)
	}
}

func TestNoRetryPastTheDeadline(t *testing.T) {
	fake := &fakeScheduler{failures: map[string][]error{"GetJob": {unavailable()}}}
	// The first wait (half of 20 s) would end long after the 5 s deadline.
	slow := RetryOptions{MaxAttempts: 5, InitialBackoff: 20 * time.Second, MaxBackoff: time.Minute, RetryableCodes: []codes.Code{codes.Unavailable}}
	client, waits := serve(t, fake, WithRetryOptions(slow), WithTimeout(5*time.Second))
	_, err := client.GetJob(context.Background(), &tickwheelv1.GetJobRequest{Id: "job_01"})
	if status.Code(err) != codes.Unavailable || len(fake.calls("GetJob")) != 1 || len(*waits) != 0 {
		t.Fatalf("err %v after %d calls and waits %v; want UNAVAILABLE after 1 call, no wait", err, len(fake.calls("GetJob")), *waits)
	}
}

func TestOtherCodesAreNotRetried(t *testing.T) {
	fake := &fakeScheduler{failures: map[string][]error{"GetJob": {status.Error(codes.NotFound, "no job job_x")}}}
	client, _ := serve(t, fake)
	_, err := client.GetJob(context.Background(), &tickwheelv1.GetJobRequest{Id: "job_x"})
	if status.Code(err) != codes.NotFound || len(fake.calls("GetJob")) != 1 {
		t.Fatalf("err %v after %d calls", err, len(fake.calls("GetJob")))
	}
	if got := err.Error(); got != "NOT_FOUND: no job job_x" {
		t.Fatalf("Error() = %q", got)
	}
}

func TestInvalidArgumentCarriesTheFieldViolations(t *testing.T) {
	bad, err := status.New(codes.InvalidArgument, "invalid job").WithDetails(&errdetails.BadRequest{
		FieldViolations: []*errdetails.BadRequest_FieldViolation{
			{Field: "job.schedule.cron.expression", Description: "minute 61 is out of range 0-59"},
			{Field: "job.name", Description: "required"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeScheduler{failures: map[string][]error{"CreateJob": {bad.Err()}}}
	client, _ := serve(t, fake)
	_, err = client.CreateJob(context.Background(), &tickwheelv1.CreateJobRequest{Job: CronJob("", "61 * * * *", "UTC", Handler("echo"))})

	var failure *Error
	if !errors.As(err, &failure) {
		t.Fatalf("err %T %v is not an *Error", err, err)
	}
	if failure.Code != codes.InvalidArgument || status.Code(err) != codes.InvalidArgument {
		t.Fatalf("code = %v", failure.Code)
	}
	want := []FieldViolation{
		{"job.schedule.cron.expression", "minute 61 is out of range 0-59"},
		{"job.name", "required"},
	}
	if len(failure.FieldViolations) != 2 || failure.FieldViolations[0] != want[0] || failure.FieldViolations[1] != want[1] {
		t.Fatalf("violations = %v", failure.FieldViolations)
	}
	if len(failure.Details) != 1 {
		t.Fatalf("details = %v", failure.Details)
	}
	if _, ok := failure.Details[0].(*errdetails.BadRequest); !ok {
		t.Fatalf("detail is %T, want *errdetails.BadRequest", failure.Details[0])
	}
	wantText := "INVALID_ARGUMENT: job.schedule.cron.expression: minute 61 is out of range 0-59; job.name: required (invalid job)"
	if err.Error() != wantText {
		t.Fatalf("Error() = %q\nwant      %q", err.Error(), wantText)
	}
	if len(fake.calls("CreateJob")) != 1 {
		t.Fatal("INVALID_ARGUMENT must not be retried")
	}
}

func TestAsErrorOfErrorsWithoutAStatus(t *testing.T) {
	if AsError(nil) != nil {
		t.Fatal("AsError(nil) must be nil")
	}
	if got := AsError(context.DeadlineExceeded).Code; got != codes.DeadlineExceeded {
		t.Fatalf("context.DeadlineExceeded became %v", got)
	}
	if got := AsError(errors.New("boom")); got.Code != codes.Unknown || got.Message != "boom" {
		t.Fatalf("a plain error became %v", got)
	}
}

func TestExecutionsWalksEveryPageWithoutChangingTheRequest(t *testing.T) {
	execution := func(id string) *tickwheelv1.Execution { return &tickwheelv1.Execution{Id: id} }
	fake := &fakeScheduler{pages: map[string]*tickwheelv1.ListExecutionsResponse{
		"":   {Executions: []*tickwheelv1.Execution{execution("e3"), execution("e2")}, NextPageToken: "p2"},
		"p2": {Executions: []*tickwheelv1.Execution{execution("e1")}},
	}}
	client, _ := serve(t, fake)
	request := &tickwheelv1.ListExecutionsRequest{JobId: "job_01", PageSize: 2}
	var ids []string
	for e, err := range client.Executions(context.Background(), request) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.GetId())
	}
	if strings.Join(ids, ",") != "e3,e2,e1" {
		t.Fatalf("ids = %v", ids)
	}
	calls := fake.calls("ListExecutions")
	if len(calls) != 2 || calls[1].(*tickwheelv1.ListExecutionsRequest).GetPageToken() != "p2" ||
		calls[1].(*tickwheelv1.ListExecutionsRequest).GetJobId() != "job_01" {
		t.Fatalf("requests = %v", calls)
	}
	if request.GetPageToken() != "" {
		t.Fatal("the caller's request was changed")
	}
}

// A filtered ListJobs page may be short or empty and still carry a token
// (its scan stopped before the end): Jobs walks on to the last page.
func TestJobsWalksOnPastAnEmptyPageWithAToken(t *testing.T) {
	job := func(id string) *tickwheelv1.Job { return &tickwheelv1.Job{Id: id} }
	fake := &fakeScheduler{jobPages: map[string]*tickwheelv1.ListJobsResponse{
		"":   {NextPageToken: "p2"},
		"p2": {Jobs: []*tickwheelv1.Job{job("job_a")}, NextPageToken: "p3"},
		"p3": {NextPageToken: "p4"},
		"p4": {Jobs: []*tickwheelv1.Job{job("job_b")}},
	}}
	client, _ := serve(t, fake)
	request := &tickwheelv1.ListJobsRequest{NamePrefix: "rare", PageSize: 2}
	var ids []string
	for j, err := range client.Jobs(context.Background(), request) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.GetId())
	}
	if strings.Join(ids, ",") != "job_a,job_b" {
		t.Fatalf("ids = %v", ids)
	}
	calls := fake.calls("ListJobs")
	if len(calls) != 4 || calls[3].(*tickwheelv1.ListJobsRequest).GetPageToken() != "p4" ||
		calls[3].(*tickwheelv1.ListJobsRequest).GetNamePrefix() != "rare" {
		t.Fatalf("requests = %v", calls)
	}
}

func TestExecutionsStopsOnARepeatedPageToken(t *testing.T) {
	fake := &fakeScheduler{pages: map[string]*tickwheelv1.ListExecutionsResponse{
		"":   {NextPageToken: "p2"},
		"p2": {NextPageToken: "p2"},
	}}
	client, _ := serve(t, fake)
	var last error
	for _, err := range client.Executions(context.Background(), &tickwheelv1.ListExecutionsRequest{JobId: "job_01"}) {
		last = err
	}
	if last == nil || !strings.Contains(last.Error(), "same page token") {
		t.Fatalf("last error = %v", last)
	}
}

func TestPreviewSendsTheUnsavedJob(t *testing.T) {
	fake := &fakeScheduler{}
	client, _ := serve(t, fake)
	job := CronJob("report", "0 2 * * *", "Europe/London", Handler("echo"))
	fires, err := client.Preview(context.Background(), job, 3)
	if err != nil || len(fires) != 1 {
		t.Fatalf("fires %v, err %v", fires, err)
	}
	sent := fake.calls("PreviewSchedule")[0].(*tickwheelv1.PreviewScheduleRequest)
	if !proto.Equal(sent.GetJob(), job) || sent.GetCount() != 3 || sent.GetAfter() != nil {
		t.Fatalf("sent %v", sent)
	}
	if _, err := client.NextRuns(context.Background(), "job_01", 2); err != nil {
		t.Fatal(err)
	}
	if got := fake.calls("PreviewSchedule")[1].(*tickwheelv1.PreviewScheduleRequest).GetJobId(); got != "job_01" {
		t.Fatalf("NextRuns sent job id %q", got)
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

package tickwheel

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	tickwheelv1 "github.com/tickwheel/tickwheel/sdk/go/gen/tickwheel/v1"
)

// fakeBatch is fakeScheduler with a BatchCreateJobs that answers from
// answers (in turn; createEvery once they run out) after the scripted
// failures.
type fakeBatch struct {
	fakeScheduler
	answers []func(*tickwheelv1.BatchCreateJobsRequest) *tickwheelv1.BatchCreateJobsResponse
}

func (f *fakeBatch) BatchCreateJobs(ctx context.Context, r *tickwheelv1.BatchCreateJobsRequest) (*tickwheelv1.BatchCreateJobsResponse, error) {
	if err := f.record(ctx, "BatchCreateJobs", r); err != nil {
		return nil, err
	}
	f.mu.Lock()
	answer := createEvery
	if len(f.answers) > 0 {
		answer, f.answers = f.answers[0], f.answers[1:]
	}
	f.mu.Unlock()
	return answer(r), nil
}

func (f *fakeBatch) sent() []*tickwheelv1.BatchCreateJobsRequest {
	var out []*tickwheelv1.BatchCreateJobsRequest
	for _, call := range f.calls("BatchCreateJobs") {
		out = append(out, call.(*tickwheelv1.BatchCreateJobsRequest))
	}
	return out
}

// createEvery creates every item as job_<index in the call>, keeping its name.
func createEvery(r *tickwheelv1.BatchCreateJobsRequest) *tickwheelv1.BatchCreateJobsResponse {
	response := &tickwheelv1.BatchCreateJobsResponse{}
	for i, item := range r.GetItems() {
		response.Results = append(response.Results, jobResult(item, fmt.Sprintf("job_%d", i), true))
	}
	return response
}

func jobResult(item *tickwheelv1.CreateJobRequest, id string, created bool) *tickwheelv1.BatchCreateJobsResult {
	job := &tickwheelv1.Job{Id: id, Name: item.GetJob().GetName()}
	return &tickwheelv1.BatchCreateJobsResult{Result: &tickwheelv1.BatchCreateJobsResult_Job{
		Job: &tickwheelv1.CreateJobResponse{Job: job, Created: created},
	}}
}

func errorResult(t *testing.T, code codes.Code, message string, details ...*anypb.Any) *tickwheelv1.BatchCreateJobsResult {
	t.Helper()
	return &tickwheelv1.BatchCreateJobsResult{Result: &tickwheelv1.BatchCreateJobsResult_Error{
		Error: &rpcstatus.Status{Code: int32(code), Message: message, Details: details},
	}}
}

func batchRequests(n int) []*tickwheelv1.CreateJobRequest {
	at := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	requests := make([]*tickwheelv1.CreateJobRequest, n)
	for i := range requests {
		requests[i] = &tickwheelv1.CreateJobRequest{Job: OnceJob(fmt.Sprintf("job-%d", i), at, Handler("h"))}
	}
	return requests
}

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestCreateJobsSplitsIntoCallsOfAThousandAndKeepsTheOrder(t *testing.T) {
	fake := &fakeBatch{}
	client, _ := serve(t, fake, WithAPIKey("twk_batch"))
	requests := batchRequests(2500)
	requests[7].RequestId = "deploy-7"

	results, err := client.CreateJobs(context.Background(), requests)
	if err != nil {
		t.Fatal(err)
	}
	sent := fake.sent()
	if len(sent) != 3 || len(sent[0].GetItems()) != 1000 || len(sent[1].GetItems()) != 1000 || len(sent[2].GetItems()) != 500 {
		t.Fatalf("calls of %d items", itemCounts(sent))
	}
	if len(results) != 2500 {
		t.Fatalf("%d results for 2500 jobs", len(results))
	}
	seen := map[string]bool{}
	for i, result := range results {
		item := sent[i/1000].GetItems()[i%1000]
		if result.Err != nil || result.Job.GetName() != fmt.Sprintf("job-%d", i) || !result.Created {
			t.Fatalf("result %d = %+v", i, result)
		}
		if result.Job.GetId() != fmt.Sprintf("job_%d", i%1000) || result.RequestID != item.GetRequestId() {
			t.Fatalf("result %d paired with the wrong item: %+v, sent %v", i, result, item)
		}
		if i != 7 && !uuidPattern.MatchString(result.RequestID) {
			t.Fatalf("generated request id %q is not a UUID", result.RequestID)
		}
		seen[result.RequestID] = true
	}
	if len(seen) != 2500 || results[7].RequestID != "deploy-7" {
		t.Fatalf("%d distinct request ids; result 7 has %q", len(seen), results[7].RequestID)
	}
	for i, request := range requests {
		if i != 7 && request.GetRequestId() != "" {
			t.Fatalf("the caller's request %d was changed: request id %q", i, request.GetRequestId())
		}
	}
	for _, auth := range fake.auth {
		if auth != "Bearer twk_batch" {
			t.Fatalf("authorization = %q", auth)
		}
	}
}

func itemCounts(sent []*tickwheelv1.BatchCreateJobsRequest) []int {
	counts := make([]int, len(sent))
	for i, r := range sent {
		counts[i] = len(r.GetItems())
	}
	return counts
}

func TestCreateJobsOfNothingMakesNoCall(t *testing.T) {
	fake := &fakeBatch{}
	client, _ := serve(t, fake)
	results, err := client.CreateJobs(context.Background(), nil)
	if err != nil || len(results) != 0 || len(fake.sent()) != 0 {
		t.Fatalf("results %v, err %v, %d calls", results, err, len(fake.sent()))
	}
}

func TestCreateJobsRetriesACallWithTheSameRequestIDs(t *testing.T) {
	fake := &fakeBatch{}
	fake.failures = map[string][]error{"BatchCreateJobs": {nil, status.Error(codes.Unavailable, "store unavailable")}}
	client, waits := serve(t, fake)

	results, err := client.CreateJobs(context.Background(), batchRequests(1500))
	if err != nil {
		t.Fatal(err)
	}
	sent := fake.sent()
	if counts := itemCounts(sent); len(counts) != 3 || counts[0] != 1000 || counts[1] != 500 || counts[2] != 500 {
		t.Fatalf("calls of %v items, want [1000 500 500]", counts)
	}
	for i := range sent[1].GetItems() {
		if first, retry := sent[1].GetItems()[i].GetRequestId(), sent[2].GetItems()[i].GetRequestId(); first != retry || first == "" {
			t.Fatalf("item %d: the retry carried request id %q, the first attempt %q", i, retry, first)
		}
	}
	if want := []time.Duration{100 * time.Millisecond}; !equalDurations(*waits, want) {
		t.Fatalf("waits = %v, want %v", *waits, want)
	}
	if len(results) != 1500 || results[1499].Job.GetName() != "job-1499" {
		t.Fatalf("%d results, last %+v", len(results), results[len(results)-1])
	}
}

func TestCreateJobsMapsEachRefusedItemToAnErrorWithItsFieldViolations(t *testing.T) {
	bad, err := anypb.New(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
		{Field: "job.schedule.cron.expression", Description: "61 is out of range 0-59"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	quota, err := anypb.New(&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{Subject: "tenant:acme", Description: "max_jobs 2"}}})
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeBatch{answers: []func(*tickwheelv1.BatchCreateJobsRequest) *tickwheelv1.BatchCreateJobsResponse{
		func(r *tickwheelv1.BatchCreateJobsRequest) *tickwheelv1.BatchCreateJobsResponse {
			return &tickwheelv1.BatchCreateJobsResponse{Results: []*tickwheelv1.BatchCreateJobsResult{
				jobResult(r.Items[0], "job_a", true),
				errorResult(t, codes.InvalidArgument, "invalid job", bad),
				errorResult(t, codes.ResourceExhausted, "max_jobs reached", quota),
				jobResult(r.Items[3], "job_b", false),
				errorResult(t, codes.OK, "fine"),
			}}
		},
	}}
	client, _ := serve(t, fake)

	results, err := client.CreateJobs(context.Background(), batchRequests(5))
	if err != nil {
		t.Fatal(err)
	}
	if results[0].Job.GetId() != "job_a" || !results[0].Created || results[0].Err != nil {
		t.Fatalf("result 0 = %+v", results[0])
	}
	var invalid *Error
	if !errors.As(results[1].Err, &invalid) || invalid.Code != codes.InvalidArgument || results[1].Job != nil {
		t.Fatalf("result 1 = %+v", results[1])
	}
	if len(invalid.FieldViolations) != 1 || invalid.FieldViolations[0] != (FieldViolation{"job.schedule.cron.expression", "61 is out of range 0-59"}) {
		t.Fatalf("violations = %v", invalid.FieldViolations)
	}
	if got, want := invalid.Error(), "INVALID_ARGUMENT: job.schedule.cron.expression: 61 is out of range 0-59 (invalid job)"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	var over *Error
	if !errors.As(results[2].Err, &over) || over.Code != codes.ResourceExhausted || len(over.Details) != 1 {
		t.Fatalf("result 2 = %+v", results[2])
	}
	if _, ok := over.Details[0].(*errdetails.QuotaFailure); !ok {
		t.Fatalf("detail is %T", over.Details[0])
	}
	if results[3].Job.GetId() != "job_b" || results[3].Created {
		t.Fatalf("result 3 = %+v", results[3])
	}
	if status.Code(results[4].Err) != codes.Internal {
		t.Fatalf("an error status with code OK became %v", results[4].Err)
	}
	if len(fake.sent()) != 1 {
		t.Fatal("item errors are answers: not retried")
	}
}

func TestCreateJobsRefusesAnAnswerThatDoesNotMatchTheItems(t *testing.T) {
	cases := map[string]struct {
		answer func(*tickwheelv1.BatchCreateJobsRequest) *tickwheelv1.BatchCreateJobsResponse
		want   string
	}{
		"a result missing": {func(r *tickwheelv1.BatchCreateJobsRequest) *tickwheelv1.BatchCreateJobsResponse {
			all := createEvery(r)
			all.Results = all.Results[1:]
			return all
		}, "2 results for 3 items"},
		"a result too many": {func(r *tickwheelv1.BatchCreateJobsRequest) *tickwheelv1.BatchCreateJobsResponse {
			all := createEvery(r)
			all.Results = append(all.Results, all.Results[0])
			return all
		}, "4 results for 3 items"},
		"an empty result": {func(r *tickwheelv1.BatchCreateJobsRequest) *tickwheelv1.BatchCreateJobsResponse {
			all := createEvery(r)
			all.Results[1] = &tickwheelv1.BatchCreateJobsResult{}
			return all
		}, "result 1 has neither a job nor an error"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fake := &fakeBatch{answers: []func(*tickwheelv1.BatchCreateJobsRequest) *tickwheelv1.BatchCreateJobsResponse{createEvery, tc.answer}}
			client, _ := serve(t, fake)
			requests := append(batchRequests(1000), batchRequests(3)...)
			results, err := client.CreateJobs(context.Background(), requests)
			if status.Code(err) != codes.Internal || !regexp.MustCompile(tc.want).MatchString(err.Error()) {
				t.Fatalf("err = %v, want INTERNAL %q", err, tc.want)
			}
			if len(results) != 1000 {
				t.Fatalf("%d results: want those of the first call only", len(results))
			}
		})
	}
}

func TestCreateJobsStopsAtACallThatFailsAsAWhole(t *testing.T) {
	fake := &fakeBatch{}
	fake.failures = map[string][]error{"BatchCreateJobs": {status.Error(codes.Unauthenticated, "bad key")}}
	client, _ := serve(t, fake)
	results, err := client.CreateJobs(context.Background(), batchRequests(1200))
	var failure *Error
	if !errors.As(err, &failure) || failure.Code != codes.Unauthenticated || len(results) != 0 || len(fake.sent()) != 1 {
		t.Fatalf("results %d, err %v after %d calls", len(results), err, len(fake.sent()))
	}
}

func TestBatchCreateJobsFillsAMissingItemRequestID(t *testing.T) {
	fake := &fakeBatch{}
	client, _ := serve(t, fake)
	request := &tickwheelv1.BatchCreateJobsRequest{Items: batchRequests(2)}
	request.Items[1].RequestId = "kept"
	if _, err := client.BatchCreateJobs(context.Background(), request); err != nil {
		t.Fatal(err)
	}
	sent := fake.sent()[0].GetItems()
	if !uuidPattern.MatchString(sent[0].GetRequestId()) || sent[1].GetRequestId() != "kept" || request.Items[0].GetRequestId() != "" {
		t.Fatalf("sent %q, %q; caller's item 0 now %q", sent[0].GetRequestId(), sent[1].GetRequestId(), request.Items[0].GetRequestId())
	}
}

package tickwheel

import (
	"context"
	"fmt"
	"strings"
	"testing"

	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	tickwheelv1 "github.com/tickwheel/tickwheel/sdk/go/gen/tickwheel/v1"
)

// fakeChanges is fakeScheduler with BatchUpdateJobs and BatchDeleteJobs that
// apply every item whose id does not start with "gone" (NOT_FOUND), after
// the scripted failures; short drops each answer's last result.
type fakeChanges struct {
	fakeScheduler
	short bool
}

func notFound() *rpcstatus.Status {
	return &rpcstatus.Status{Code: int32(codes.NotFound), Message: "job not found"}
}

func (f *fakeChanges) BatchUpdateJobs(ctx context.Context, r *tickwheelv1.BatchUpdateJobsRequest) (*tickwheelv1.BatchUpdateJobsResponse, error) {
	if err := f.record(ctx, "BatchUpdateJobs", r); err != nil {
		return nil, err
	}
	response := &tickwheelv1.BatchUpdateJobsResponse{}
	for _, item := range r.GetItems() {
		if strings.HasPrefix(item.GetJob().GetId(), "gone") {
			response.Results = append(response.Results, &tickwheelv1.BatchUpdateJobsResult{Result: &tickwheelv1.BatchUpdateJobsResult_Error{Error: notFound()}})
			continue
		}
		job := &tickwheelv1.Job{Id: item.GetJob().GetId(), Name: item.GetJob().GetName(), Version: item.GetJob().GetVersion() + 1}
		response.Results = append(response.Results, &tickwheelv1.BatchUpdateJobsResult{Result: &tickwheelv1.BatchUpdateJobsResult_Job{Job: &tickwheelv1.UpdateJobResponse{Job: job}}})
	}
	if f.short {
		response.Results = response.Results[:len(response.Results)-1]
	}
	return response, nil
}

func (f *fakeChanges) BatchDeleteJobs(ctx context.Context, r *tickwheelv1.BatchDeleteJobsRequest) (*tickwheelv1.BatchDeleteJobsResponse, error) {
	if err := f.record(ctx, "BatchDeleteJobs", r); err != nil {
		return nil, err
	}
	response := &tickwheelv1.BatchDeleteJobsResponse{}
	for _, item := range r.GetItems() {
		if strings.HasPrefix(item.GetId(), "gone") {
			response.Results = append(response.Results, &tickwheelv1.BatchDeleteJobsResult{Result: &tickwheelv1.BatchDeleteJobsResult_Error{Error: notFound()}})
			continue
		}
		deleted := &tickwheelv1.DeleteJobResponse{CanceledExecutions: int64(len(item.GetId()))}
		response.Results = append(response.Results, &tickwheelv1.BatchDeleteJobsResult{Result: &tickwheelv1.BatchDeleteJobsResult_Deleted{Deleted: deleted}})
	}
	if f.short {
		response.Results = response.Results[:len(response.Results)-1]
	}
	return response, nil
}

func updates(n int) []*tickwheelv1.UpdateJobRequest {
	requests := make([]*tickwheelv1.UpdateJobRequest, n)
	for i := range requests {
		requests[i] = &tickwheelv1.UpdateJobRequest{
			Job:        &tickwheelv1.Job{Id: fmt.Sprintf("job_%d", i), Version: 3, Name: fmt.Sprintf("n%d", i)},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"name"}},
		}
	}
	return requests
}

func TestUpdateJobsGoesInCallsOfAThousandInOrderWithItemErrors(t *testing.T) {
	fake := &fakeChanges{}
	client, _ := serve(t, fake)
	requests := updates(2100)
	requests[5].Job.Id = "gone_5"
	results, err := client.UpdateJobs(context.Background(), requests)
	if err != nil {
		t.Fatal(err)
	}
	calls := fake.calls("BatchUpdateJobs")
	if len(calls) != 3 || len(calls[2].(*tickwheelv1.BatchUpdateJobsRequest).GetItems()) != 100 {
		t.Fatalf("%d calls", len(calls))
	}
	if len(results) != 2100 || results[0].Job.GetVersion() != 4 || results[2099].JobID != "job_2099" {
		t.Fatalf("results %d, first %+v", len(results), results[0])
	}
	var failed *Error
	if !asError(results[5].Err, &failed) || failed.Code != codes.NotFound || results[5].JobID != "gone_5" {
		t.Fatalf("result 5 = %+v", results[5])
	}
}

func asError(err error, target **Error) bool {
	e, ok := err.(*Error)
	*target = e
	return ok
}

func TestBatchChangesAreRetriedWithTheSameItemsOnUnavailable(t *testing.T) {
	fake := &fakeChanges{}
	fake.failures = map[string][]error{"BatchUpdateJobs": {unavailable()}, "BatchDeleteJobs": {unavailable(), unavailable()}}
	client, waits := serve(t, fake)
	if _, err := client.UpdateJobs(context.Background(), updates(2)); err != nil {
		t.Fatal(err)
	}
	results, err := client.DeleteJobs(context.Background(), []*tickwheelv1.DeleteJobRequest{{Id: "a"}, {Id: "b", Version: 2}})
	if err != nil || len(results) != 2 || results[1].CanceledExecutions != 1 {
		t.Fatalf("%v %+v", err, results)
	}
	sentUpdates, sentDeletes := fake.calls("BatchUpdateJobs"), fake.calls("BatchDeleteJobs")
	if len(sentUpdates) != 2 || !proto.Equal(sentUpdates[0], sentUpdates[1]) || len(sentDeletes) != 3 || !proto.Equal(sentDeletes[0], sentDeletes[2]) {
		t.Fatalf("%d update calls, %d delete calls", len(sentUpdates), len(sentDeletes))
	}
	if len(*waits) != 3 {
		t.Fatalf("waits %v", *waits)
	}
}

func TestAnUpdateWithoutAVersionIsNotRetried(t *testing.T) {
	fake := &fakeChanges{}
	fake.failures = map[string][]error{"BatchUpdateJobs": {unavailable()}}
	client, _ := serve(t, fake)
	requests := updates(2)
	requests[1].Job.Version = 0
	_, err := client.UpdateJobs(context.Background(), requests)
	var failed *Error
	if !asError(err, &failed) || failed.Code != codes.Unavailable || len(fake.calls("BatchUpdateJobs")) != 1 {
		t.Fatalf("%v after %d calls", err, len(fake.calls("BatchUpdateJobs")))
	}
}

func TestDeleteJobsMapsEachItemAndRefusesAShortAnswer(t *testing.T) {
	fake := &fakeChanges{}
	client, _ := serve(t, fake)
	results, err := client.DeleteJobs(context.Background(), []*tickwheelv1.DeleteJobRequest{{Id: "gone"}, {Id: "job_1"}, nil})
	if err != nil || results[0].Err == nil || results[1].CanceledExecutions != 5 || results[2].JobID != "" {
		t.Fatalf("%v %+v", err, results)
	}
	fake.short = true
	_, err = client.DeleteJobs(context.Background(), []*tickwheelv1.DeleteJobRequest{{Id: "a"}, {Id: "b"}})
	var failed *Error
	if !asError(err, &failed) || failed.Code != codes.Internal || !strings.Contains(failed.Message, "1 results for 2 items") {
		t.Fatalf("short answer: %v", err)
	}
	if results, err := client.UpdateJobs(context.Background(), nil); err != nil || len(results) != 0 {
		t.Fatalf("no requests: %v %v", results, err)
	}
}

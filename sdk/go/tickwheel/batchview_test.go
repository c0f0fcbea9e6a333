package tickwheel

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	tickwheelv1 "github.com/tickwheel/tickwheel/sdk/go/gen/tickwheel/v1"
)

// fakeBudget refuses a BatchUpdateJobs call of more than limit items as the
// server refuses an answer too large (nothing written); other calls are
// answered as fakeChanges answers them.
type fakeBudget struct {
	fakeChanges
	limit int
}

func answerTooLarge(t *testing.T) error {
	s, err := status.New(codes.InvalidArgument, "items: the answer would be too large").
		WithDetails(&errdetails.ErrorInfo{Reason: AnswerTooLargeReason, Domain: "tickwheel"})
	if err != nil {
		t.Fatal(err)
	}
	return s.Err()
}

func (f *fakeBudget) BatchUpdateJobs(ctx context.Context, r *tickwheelv1.BatchUpdateJobsRequest) (*tickwheelv1.BatchUpdateJobsResponse, error) {
	if len(r.GetItems()) > f.limit {
		if err := f.record(ctx, "BatchUpdateJobs", r); err != nil {
			return nil, err
		}
		s, _ := status.New(codes.InvalidArgument, "items: the answer would be too large").
			WithDetails(&errdetails.ErrorInfo{Reason: AnswerTooLargeReason, Domain: "tickwheel"})
		return nil, s.Err()
	}
	return f.fakeChanges.BatchUpdateJobs(ctx, r)
}

func sizes(calls []proto.Message) ([]int, []tickwheelv1.JobView) {
	var n []int
	var views []tickwheelv1.JobView
	for _, call := range calls {
		r := call.(*tickwheelv1.BatchUpdateJobsRequest)
		n = append(n, len(r.GetItems()))
		views = append(views, r.GetView())
	}
	return n, views
}

func TestUpdateJobsHalvesACallWhoseAnswerIsTooLarge(t *testing.T) {
	fake := &fakeBudget{limit: 300}
	client, _ := serve(t, fake)
	results, err := client.UpdateJobs(context.Background(), updates(1100), WithJobView(tickwheelv1.JobView_JOB_VIEW_BASIC))
	if err != nil {
		t.Fatal(err)
	}
	n, views := sizes(fake.calls("BatchUpdateJobs"))
	if !reflect.DeepEqual(n, []int{1000, 500, 250, 250, 500, 250, 250, 100}) {
		t.Fatalf("calls of %v items", n)
	}
	for _, view := range views {
		if view != tickwheelv1.JobView_JOB_VIEW_BASIC {
			t.Fatalf("views %v", views)
		}
	}
	if len(results) != 1100 {
		t.Fatalf("%d results", len(results))
	}
	for i, result := range results {
		if result.JobID != fmt.Sprintf("job_%d", i) || result.Job.GetName() != fmt.Sprintf("n%d", i) || result.Err != nil {
			t.Fatalf("result %d = %+v", i, result)
		}
	}
}

func TestARefusedSingleItemAndOtherRefusalsAreReturned(t *testing.T) {
	fake := &fakeBudget{limit: 0}
	client, _ := serve(t, fake)
	if _, err := client.UpdateJobs(context.Background(), updates(2)); !IsAnswerTooLarge(err) {
		t.Fatalf("err = %v", err)
	}
	if n, _ := sizes(fake.calls("BatchUpdateJobs")); !reflect.DeepEqual(n, []int{2, 1}) {
		t.Fatalf("calls of %v items", n)
	}
	other := &fakeChanges{}
	other.failures = map[string][]error{"BatchUpdateJobs": {status.Error(codes.InvalidArgument, "items: must hold 1 to 1000")}}
	client, _ = serve(t, other)
	if _, err := client.UpdateJobs(context.Background(), updates(4)); err == nil || IsAnswerTooLarge(err) {
		t.Fatalf("err = %v", err)
	}
	if n, _ := sizes(other.calls("BatchUpdateJobs")); !reflect.DeepEqual(n, []int{4}) {
		t.Fatalf("calls of %v items: another refusal is not halved", n)
	}
	if IsAnswerTooLarge(answerTooLarge(t)) {
		t.Fatal("a raw status is not an *Error: AsError first")
	}
	if !IsAnswerTooLarge(AsError(answerTooLarge(t))) {
		t.Fatal("the reason is not recognised")
	}
}

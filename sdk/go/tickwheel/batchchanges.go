package tickwheel

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	tickwheelv1 "github.com/tickwheel/tickwheel/sdk/go/gen/tickwheel/v1"
)

// UpdateJobResult is what became of one request given to
// [Client.UpdateJobs]: Job as stored after it (at its old version when it
// changed nothing), or Err, the *Error UpdateJob would have returned for it
// alone (NOT_FOUND, FAILED_PRECONDITION for a stale version,
// INVALID_ARGUMENT with FieldViolations relative to the item).
type UpdateJobResult struct {
	JobID string
	Job   *tickwheelv1.Job
	// Nil when the change was applied; otherwise always an *Error.
	Err error
}

// DeleteJobResult is what became of one request given to
// [Client.DeleteJobs]: deleted, with CanceledExecutions (those that had not
// started), or Err, the *Error DeleteJob would have returned for it alone.
// NOT_FOUND after a retried call may mean an earlier attempt deleted it.
type DeleteJobResult struct {
	JobID              string
	CanceledExecutions int64
	// Nil when this request deleted the job; otherwise always an *Error.
	Err error
}

// UpdateJobs applies every request through BatchUpdateJobs and returns one
// result per request, in order. Each request is an UpdateJobRequest (Job
// with Id, the Version last read and the new values of UpdateMask). Requests
// apply in order: a job named twice sees the first change and its new
// version. A refused change does not stop the others. No requests: no call.
//
// The requests go in calls of at most [MaxBatchItems], one after the other,
// each retried on UNAVAILABLE with the client's retry options when every
// item carries a version: a change then applies once, and one that a lost
// attempt applied answers FAILED_PRECONDITION. The error is non-nil when a
// call fails as a whole or the server breaks the contract (INTERNAL); the
// results then hold the calls before it, which took effect. [WithJobView]
// and a call refused for the size of its answer: as [Client.CreateJobs].
func (c *Client) UpdateJobs(ctx context.Context, requests []*tickwheelv1.UpdateJobRequest, opts ...BatchOption) ([]UpdateJobResult, error) {
	results := make([]UpdateJobResult, 0, len(requests))
	view := batchOptionsOf(opts).view
	for start := 0; start < len(requests); start += MaxBatchItems {
		chunk := requests[start:min(start+MaxBatchItems, len(requests))]
		batch := &tickwheelv1.BatchUpdateJobsRequest{Items: make([]*tickwheelv1.UpdateJobRequest, len(chunk))}
		for i, request := range chunk {
			batch.Items[i] = &tickwheelv1.UpdateJobRequest{}
			if request != nil {
				batch.Items[i] = proto.CloneOf(request)
			}
		}
		answered, err := halving(batch.Items, func(items []*tickwheelv1.UpdateJobRequest) ([]UpdateJobResult, error) {
			part := &tickwheelv1.BatchUpdateJobsRequest{Items: items, View: view}
			response, err := c.scheduler.BatchUpdateJobs(ctx, part)
			if err != nil {
				return nil, AsError(err)
			}
			return updateResults(part, response)
		})
		results = append(results, answered...)
		if err != nil {
			return results, err
		}
	}
	return results, nil
}

// updateResults pairs each item of batch with its result in response, in
// order; INTERNAL when the response breaks the contract (as batchResults).
func updateResults(batch *tickwheelv1.BatchUpdateJobsRequest, response *tickwheelv1.BatchUpdateJobsResponse) ([]UpdateJobResult, error) {
	answers := response.GetResults()
	if len(answers) != len(batch.Items) {
		return nil, &Error{Code: codes.Internal, Message: fmt.Sprintf("BatchUpdateJobs answered %d results for %d items", len(answers), len(batch.Items))}
	}
	answered := make([]UpdateJobResult, len(batch.Items))
	for i, item := range batch.Items {
		answered[i].JobID = item.GetJob().GetId()
		switch {
		case answers[i].GetJob().GetJob() != nil:
			answered[i].Job = answers[i].GetJob().GetJob()
		case answers[i].GetError() != nil:
			answered[i].Err = errorOfStatus(answers[i].GetError())
		default:
			return nil, &Error{Code: codes.Internal, Message: fmt.Sprintf("BatchUpdateJobs result %d has neither a job nor an error", i)}
		}
	}
	return answered, nil
}

// DeleteJobs deletes the job of every request through BatchDeleteJobs and
// returns one result per request, in order: NOT_FOUND for an unknown id, one
// named twice or another tenant's; FAILED_PRECONDITION when a non-zero
// Version is stale. Calls of at most [MaxBatchItems], each retried on
// UNAVAILABLE (a delete happens once: a job a lost attempt deleted then
// answers NOT_FOUND). The error is as for [Client.UpdateJobs].
func (c *Client) DeleteJobs(ctx context.Context, requests []*tickwheelv1.DeleteJobRequest) ([]DeleteJobResult, error) {
	results := make([]DeleteJobResult, 0, len(requests))
	for start := 0; start < len(requests); start += MaxBatchItems {
		chunk := requests[start:min(start+MaxBatchItems, len(requests))]
		batch := &tickwheelv1.BatchDeleteJobsRequest{Items: make([]*tickwheelv1.DeleteJobRequest, len(chunk))}
		for i, request := range chunk {
			batch.Items[i] = &tickwheelv1.DeleteJobRequest{}
			if request != nil {
				batch.Items[i] = proto.CloneOf(request)
			}
		}
		response, err := c.scheduler.BatchDeleteJobs(ctx, batch)
		if err != nil {
			return results, AsError(err)
		}
		answers := response.GetResults()
		if len(answers) != len(batch.Items) {
			return results, &Error{Code: codes.Internal, Message: fmt.Sprintf("BatchDeleteJobs answered %d results for %d items", len(answers), len(batch.Items))}
		}
		answered := make([]DeleteJobResult, len(batch.Items))
		for i, item := range batch.Items {
			answered[i].JobID = item.GetId()
			switch {
			case answers[i].GetDeleted() != nil:
				answered[i].CanceledExecutions = answers[i].GetDeleted().GetCanceledExecutions()
			case answers[i].GetError() != nil:
				answered[i].Err = errorOfStatus(answers[i].GetError())
			default:
				return results, &Error{Code: codes.Internal, Message: fmt.Sprintf("BatchDeleteJobs result %d has neither a deletion nor an error", i)}
			}
		}
		results = append(results, answered...)
	}
	return results, nil
}

// BatchUpdateJobs changes up to 1000 jobs in one call, each item an
// UpdateJobRequest, in order, in one transaction. Retried when every item
// carries a version. Prefer [Client.UpdateJobs].
func (c *Client) BatchUpdateJobs(ctx context.Context, request *tickwheelv1.BatchUpdateJobsRequest) (*tickwheelv1.BatchUpdateJobsResponse, error) {
	return c.scheduler.BatchUpdateJobs(ctx, request)
}

// BatchDeleteJobs deletes up to 1000 jobs in one call, each item a
// DeleteJobRequest, in order, in one transaction. Retried. Prefer
// [Client.DeleteJobs].
func (c *Client) BatchDeleteJobs(ctx context.Context, request *tickwheelv1.BatchDeleteJobsRequest) (*tickwheelv1.BatchDeleteJobsResponse, error) {
	return c.scheduler.BatchDeleteJobs(ctx, request)
}

// BatchPauseJobs pauses up to 1000 jobs in one call, each item a
// PauseJobRequest answered as PauseJob would answer it alone. Retried
// (pausing a paused job changes nothing). Set request.View to
// JOB_VIEW_BASIC to answer each job without its definition: a call over jobs
// with large payloads is otherwise refused ([IsAnswerTooLarge]).
func (c *Client) BatchPauseJobs(ctx context.Context, request *tickwheelv1.BatchPauseJobsRequest) (*tickwheelv1.BatchPauseJobsResponse, error) {
	return c.scheduler.BatchPauseJobs(ctx, request)
}

// BatchResumeJobs resumes up to 1000 jobs in one call, each item a
// ResumeJobRequest answered as ResumeJob would answer it alone. Retried
// (resuming an active job changes nothing). request.View: as for
// [Client.BatchPauseJobs].
func (c *Client) BatchResumeJobs(ctx context.Context, request *tickwheelv1.BatchResumeJobsRequest) (*tickwheelv1.BatchResumeJobsResponse, error) {
	return c.scheduler.BatchResumeJobs(ctx, request)
}

// everyItemHasVersion is true for a BatchUpdateJobs request whose every item
// names the version it expects: a repeat cannot apply a change twice.
func everyItemHasVersion(request any) bool {
	r, ok := request.(*tickwheelv1.BatchUpdateJobsRequest)
	if !ok || len(r.GetItems()) == 0 {
		return false
	}
	for _, item := range r.GetItems() {
		if item.GetJob().GetVersion() == 0 {
			return false
		}
	}
	return true
}

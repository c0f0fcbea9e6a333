package tickwheel

import (
	"context"
	"fmt"

	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	tickwheelv1 "github.com/tickwheel/tickwheel/sdk/go/gen/tickwheel/v1"
)

// MaxBatchItems is the most items one BatchCreateJobs call takes.
const MaxBatchItems = 1000

// CreateJobResult is what became of one request given to
// [Client.CreateJobs]: Job as stored and Created (false when its request id
// had been seen and the existing job is returned), or Err, the *Error
// CreateJob would have returned for that request alone (its FieldViolations
// name fields of the item, "job.schedule.cron.expression"). RequestID is the
// id the job was sent with: sending it again with that id is safe.
type CreateJobResult struct {
	RequestID string
	Job       *tickwheelv1.Job
	Created   bool
	// Nil when the job exists; otherwise always an *Error.
	Err error
}

// CreateJobs creates the job of every request through BatchCreateJobs and
// returns one result per request, in order. A refused job does not stop the
// others. No requests: no call, no results.
//
// The requests go in calls of at most [MaxBatchItems], one after the other;
// each call has the client's timeout (ctx bounds them all) and is retried on
// UNAVAILABLE with the client's retry options, resending the same request
// ids. A request without a request id gets a fresh one, once (the caller's
// requests are not changed): set stable ids to make re-running your program
// safe, including after a failure part way.
//
// The error is non-nil when a call fails as a whole (after its retries:
// UNAUTHENTICATED, or UNAVAILABLE past the attempts) or when the server
// answers a call with another number of results than items (INTERNAL). The
// results then hold the requests of the calls before it, which took effect;
// sending the remaining requests again with the same request ids is safe.
//
// [WithJobView] sets how much of each job is answered. A call the server
// refuses because its answer would be too large for the client
// ([IsAnswerTooLarge]: nothing written) is sent again as two halves, with
// the same request ids, until each answer fits.
func (c *Client) CreateJobs(ctx context.Context, requests []*tickwheelv1.CreateJobRequest, opts ...BatchOption) ([]CreateJobResult, error) {
	results := make([]CreateJobResult, 0, len(requests))
	view := batchOptionsOf(opts).view
	for _, batch := range planBatches(requests) {
		answered, err := halving(batch.Items, func(items []*tickwheelv1.CreateJobRequest) ([]CreateJobResult, error) {
			part := &tickwheelv1.BatchCreateJobsRequest{Items: items, View: view}
			response, err := c.scheduler.BatchCreateJobs(ctx, part)
			if err != nil {
				return nil, AsError(err)
			}
			return batchResults(part, response)
		})
		results = append(results, answered...)
		if err != nil {
			return results, err
		}
	}
	return results, nil
}

// planBatches returns the BatchCreateJobs requests that create requests, in
// order, at most MaxBatchItems items each; none for no requests. Each item
// is a copy of its request, with a fresh request id when it had none; a nil
// request becomes an empty item (the server refuses it as the item's error).
func planBatches(requests []*tickwheelv1.CreateJobRequest) []*tickwheelv1.BatchCreateJobsRequest {
	var batches []*tickwheelv1.BatchCreateJobsRequest
	for start := 0; start < len(requests); start += MaxBatchItems {
		chunk := requests[start:min(start+MaxBatchItems, len(requests))]
		items := make([]*tickwheelv1.CreateJobRequest, len(chunk))
		for i, request := range chunk {
			item := &tickwheelv1.CreateJobRequest{}
			if request != nil {
				item = proto.CloneOf(request)
			}
			if item.GetRequestId() == "" {
				item.RequestId = NewRequestID()
			}
			items[i] = item
		}
		batches = append(batches, &tickwheelv1.BatchCreateJobsRequest{Items: items})
	}
	return batches
}

// batchResults pairs each item of batch with its result in response, in
// order. A response with another number of results than items, or a result
// with neither a job nor an error, breaks the contract: it gives an INTERNAL
// *Error rather than pair a job with the wrong item or drop one.
func batchResults(batch *tickwheelv1.BatchCreateJobsRequest, response *tickwheelv1.BatchCreateJobsResponse) ([]CreateJobResult, error) {
	items, answers := batch.GetItems(), response.GetResults()
	if len(answers) != len(items) {
		return nil, &Error{Code: codes.Internal, Message: fmt.Sprintf("BatchCreateJobs answered %d results for %d items", len(answers), len(items))}
	}
	results := make([]CreateJobResult, len(items))
	for i, item := range items {
		results[i].RequestID = item.GetRequestId()
		switch {
		case answers[i].GetJob().GetJob() != nil:
			results[i].Job = answers[i].GetJob().GetJob()
			results[i].Created = answers[i].GetJob().GetCreated()
		case answers[i].GetError() != nil:
			results[i].Err = errorOfStatus(answers[i].GetError())
		default:
			return nil, &Error{Code: codes.Internal, Message: fmt.Sprintf("BatchCreateJobs result %d has neither a job nor an error", i)}
		}
	}
	return results, nil
}

// errorOfStatus is the *Error a google.rpc.Status describes, as [AsError]
// builds it for a failed call. A status with code OK describes no error: it
// gives INTERNAL rather than an error that reads as a success.
func errorOfStatus(s *rpcstatus.Status) *Error {
	if codes.Code(s.GetCode()) == codes.OK {
		return &Error{Code: codes.Internal, Message: "the server sent an error status with code OK: " + s.GetMessage()}
	}
	return AsError(status.ErrorProto(s))
}

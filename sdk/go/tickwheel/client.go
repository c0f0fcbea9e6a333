package tickwheel

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"iter"
	mathrand "math/rand/v2"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	tickwheelv1 "github.com/tickwheel/tickwheel/sdk/go/gen/tickwheel/v1"
)

const userAgent = "tickwheel-go"

// Client is a SchedulerService client for one server address. It is safe
// for concurrent use; Close it when done.
type Client struct {
	conn      *grpc.ClientConn
	scheduler tickwheelv1.SchedulerServiceClient
	settings  settings
}

// New returns a client for address ("host:port"; "127.0.0.1:50051" for
// tickwheel dev). It does not connect until the first call. Options are
// checked here, so a bad one fails now rather than on the first call.
func New(address string, options ...Option) (*Client, error) {
	if address == "" {
		return nil, errors.New("tickwheel: an address (host:port) is required")
	}
	c := &Client{settings: settings{
		timeout: 10 * time.Second,
		retry:   DefaultRetry,
		sleep:   sleepOrDone,
		rand:    mathrand.Float64,
	}}
	for _, option := range options {
		if err := option(&c.settings); err != nil {
			return nil, err
		}
	}
	dial := []grpc.DialOption{
		grpc.WithUserAgent(userAgent),
		grpc.WithChainUnaryInterceptor(c.intercept),
		// gRPC fails calls at once while a connection waits out its reconnect
		// backoff (default 1 s growing to 120 s), so without matching it to
		// the retry policy a retry after a server restart would fail without
		// trying.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay:  max(c.settings.retry.InitialBackoff, 100*time.Millisecond),
				Multiplier: 2,
				Jitter:     0.2,
				MaxDelay:   max(c.settings.retry.MaxBackoff, 100*time.Millisecond),
			},
			MinConnectTimeout: 5 * time.Second,
		}),
	}
	if c.settings.tls == nil {
		dial = append(dial, grpc.WithTransportCredentials(insecure.NewCredentials()))
	} else {
		creds, err := c.settings.tls.transportCredentials()
		if err != nil {
			return nil, err
		}
		dial = append(dial, grpc.WithTransportCredentials(creds))
	}
	conn, err := grpc.NewClient(address, append(dial, c.settings.dialOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("tickwheel: %w", err)
	}
	c.conn = conn
	c.scheduler = tickwheelv1.NewSchedulerServiceClient(conn)
	return c, nil
}

// Close closes the connection.
func (c *Client) Close() error {
	return c.conn.Close()
}

// NewRequestID returns a fresh request id (a random UUID), valid for
// CreateJob and TriggerJob.
func NewRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails on the supported platforms
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// CreateJob creates request.Job and computes its first run; the reply holds
// the job as stored (id, state, next_run_at) and Created, false when the
// request id had been seen and the existing job is returned.
//
// The request id makes the call idempotent for 24 hours. When it is empty a
// fresh one is used (the caller's request is not changed): this call's own
// retries are then safe, but running your program twice creates two jobs, so
// set a stable id where that matters. Retried. INVALID_ARGUMENT names the
// offending field ("job.schedule.cron.expression").
func (c *Client) CreateJob(ctx context.Context, request *tickwheelv1.CreateJobRequest) (*tickwheelv1.CreateJobResponse, error) {
	if request.GetRequestId() == "" {
		request = proto.CloneOf(request)
		request.RequestId = NewRequestID()
	}
	return c.scheduler.CreateJob(ctx, request)
}

// BatchCreateJobs creates up to 1000 jobs in one call: each item of
// request.Items is a CreateJobRequest, and an item without a request id
// gets a fresh one (the caller's request is not changed). The reply holds
// one result per item, in order: the item's CreateJobResponse or its error
// (a google.rpc.Status). Retried. Prefer [Client.CreateJobs], which takes
// any number of jobs and maps each result.
func (c *Client) BatchCreateJobs(ctx context.Context, request *tickwheelv1.BatchCreateJobsRequest) (*tickwheelv1.BatchCreateJobsResponse, error) {
	if !everyItemHasRequestID(request) && len(request.GetItems()) > 0 {
		request = proto.CloneOf(request)
		for _, item := range request.Items {
			if item != nil && item.GetRequestId() == "" {
				item.RequestId = NewRequestID()
			}
		}
	}
	return c.scheduler.BatchCreateJobs(ctx, request)
}

// GetJob returns a job with its last outcome and its upcoming fires
// (request.NextRuns, default 5, at most 100). NOT_FOUND for an unknown id or
// another tenant's job. Retried.
func (c *Client) GetJob(ctx context.Context, request *tickwheelv1.GetJobRequest) (*tickwheelv1.GetJobResponse, error) {
	return c.scheduler.GetJob(ctx, request)
}

// ListJobs returns one page of the tenant's jobs, ordered by id
// (NextPageToken empty on the last page); [Client.Jobs] walks every page.
// A filtered page (state, name prefix) may be short or empty and still
// carry a token: its scan stopped before the end.
// Retried.
func (c *Client) ListJobs(ctx context.Context, request *tickwheelv1.ListJobsRequest) (*tickwheelv1.ListJobsResponse, error) {
	return c.scheduler.ListJobs(ctx, request)
}

// UpdateJob changes the fields of request.Job named in the update mask
// (empty: every mutable field). Job.Id and Job.Version (as last read) are
// required: FAILED_PRECONDITION when the stored version moved on. Executions
// not yet started are canceled. Never retried.
func (c *Client) UpdateJob(ctx context.Context, request *tickwheelv1.UpdateJobRequest) (*tickwheelv1.UpdateJobResponse, error) {
	return c.scheduler.UpdateJob(ctx, request)
}

// DeleteJob deletes the job and cancels its executions that have not
// started; history stays for the retention window. A non-zero Version must
// equal the stored one. Never retried.
func (c *Client) DeleteJob(ctx context.Context, request *tickwheelv1.DeleteJobRequest) (*tickwheelv1.DeleteJobResponse, error) {
	return c.scheduler.DeleteJob(ctx, request)
}

// PauseJob stops creating occurrences and holds the executions that have not
// started until ResumeJob. Never retried.
func (c *Client) PauseJob(ctx context.Context, request *tickwheelv1.PauseJobRequest) (*tickwheelv1.PauseJobResponse, error) {
	return c.scheduler.PauseJob(ctx, request)
}

// ResumeJob resumes a paused job: each occurrence that came due while paused
// (claimed ahead or not) runs late when still within the job's misfire
// threshold (a bounded few, see the proto), the older ones come back as one
// skip range; other held executions are released. Never retried.
func (c *Client) ResumeJob(ctx context.Context, request *tickwheelv1.ResumeJobRequest) (*tickwheelv1.ResumeJobResponse, error) {
	return c.scheduler.ResumeJob(ctx, request)
}

// TriggerJob runs the job now, once per request id: the execution id is
// "<job id>:trigger:<request id>". An empty request id gets a fresh one (the
// caller's request is not changed). Retried.
func (c *Client) TriggerJob(ctx context.Context, request *tickwheelv1.TriggerJobRequest) (*tickwheelv1.TriggerJobResponse, error) {
	if request.GetRequestId() == "" {
		request = proto.CloneOf(request)
		request.RequestId = NewRequestID()
	}
	return c.scheduler.TriggerJob(ctx, request)
}

// BackfillJob creates the occurrences the schedule had in [FromAt, ToAt)
// with their normal ids, so a repeated or overlapping backfill never
// duplicates. DryRun creates nothing and returns what a real run would.
// Retried only when DryRun.
func (c *Client) BackfillJob(ctx context.Context, request *tickwheelv1.BackfillJobRequest) (*tickwheelv1.BackfillJobResponse, error) {
	return c.scheduler.BackfillJob(ctx, request)
}

// PreviewSchedule computes the next fires of a saved job or of an unsaved
// one; [Client.Preview] and [Client.NextRuns] are the one-line forms.
// Retried.
func (c *Client) PreviewSchedule(ctx context.Context, request *tickwheelv1.PreviewScheduleRequest) (*tickwheelv1.PreviewScheduleResponse, error) {
	return c.scheduler.PreviewSchedule(ctx, request)
}

// GetExecution returns one execution with its attempts. Retried.
func (c *Client) GetExecution(ctx context.Context, request *tickwheelv1.GetExecutionRequest) (*tickwheelv1.GetExecutionResponse, error) {
	return c.scheduler.GetExecution(ctx, request)
}

// ListExecutions returns one page of a job's history, newest nominal instant
// first, each execution with its attempts, and the skip ranges overlapping
// the page; [Client.Executions] walks every page. Retried.
func (c *Client) ListExecutions(ctx context.Context, request *tickwheelv1.ListExecutionsRequest) (*tickwheelv1.ListExecutionsResponse, error) {
	return c.scheduler.ListExecutions(ctx, request)
}

// CancelExecution cancels an execution: a waiting one at once, a running one
// through its worker. FAILED_PRECONDITION when it had already ended. Never
// retried.
func (c *Client) CancelExecution(ctx context.Context, request *tickwheelv1.CancelExecutionRequest) (*tickwheelv1.CancelExecutionResponse, error) {
	return c.scheduler.CancelExecution(ctx, request)
}

// ListDeadLetters returns one page of the tenant's dead executions, newest
// first. Retried.
func (c *Client) ListDeadLetters(ctx context.Context, request *tickwheelv1.ListDeadLettersRequest) (*tickwheelv1.ListDeadLettersResponse, error) {
	return c.scheduler.ListDeadLetters(ctx, request)
}

// ReplayDeadLetter starts a fresh attempt series for a DEAD execution, with
// the same id. Never retried.
func (c *Client) ReplayDeadLetter(ctx context.Context, request *tickwheelv1.ReplayDeadLetterRequest) (*tickwheelv1.ReplayDeadLetterResponse, error) {
	return c.scheduler.ReplayDeadLetter(ctx, request)
}

// CreateCalendar creates a business-day calendar of the tenant; the reply
// holds it as stored (version 1) and Created, false when the request id had
// been seen. An empty request id gets a fresh one (the caller's request is
// not changed). ALREADY_EXISTS when the name is taken, RESOURCE_EXHAUSTED
// past 1 000 calendars. Retried.
func (c *Client) CreateCalendar(ctx context.Context, request *tickwheelv1.CreateCalendarRequest) (*tickwheelv1.CreateCalendarResponse, error) {
	if request.GetRequestId() == "" {
		request = proto.CloneOf(request)
		request.RequestId = NewRequestID()
	}
	return c.scheduler.CreateCalendar(ctx, request)
}

// GetCalendar returns a calendar with every holiday and half-day. NOT_FOUND
// for an unknown name or another tenant's. Retried.
func (c *Client) GetCalendar(ctx context.Context, request *tickwheelv1.GetCalendarRequest) (*tickwheelv1.GetCalendarResponse, error) {
	return c.scheduler.GetCalendar(ctx, request)
}

// ListCalendars returns one page of the tenant's calendars by name, without
// their dates (their counts instead). Retried.
func (c *Client) ListCalendars(ctx context.Context, request *tickwheelv1.ListCalendarsRequest) (*tickwheelv1.ListCalendarsResponse, error) {
	return c.scheduler.ListCalendars(ctx, request)
}

// UpdateCalendar replaces the fields in request.UpdateMask (empty: zone,
// business days, holidays and half-days). Calendar.Name and
// Calendar.Version (as last read) are required: FAILED_PRECONDITION when
// the stored version moved on. Never retried.
func (c *Client) UpdateCalendar(ctx context.Context, request *tickwheelv1.UpdateCalendarRequest) (*tickwheelv1.UpdateCalendarResponse, error) {
	return c.scheduler.UpdateCalendar(ctx, request)
}

// DeleteCalendar deletes a calendar; a non-zero Version must equal the
// stored one. Never retried.
func (c *Client) DeleteCalendar(ctx context.Context, request *tickwheelv1.DeleteCalendarRequest) (*tickwheelv1.DeleteCalendarResponse, error) {
	return c.scheduler.DeleteCalendar(ctx, request)
}

// Preview returns the next count fires (0: the server's default, 5) of an
// unsaved job after now: its schedule, DST policy, jitter, start, end and
// max runs are used, and its Id (may be empty) seeds H and jitter.
func (c *Client) Preview(ctx context.Context, job *tickwheelv1.Job, count int32) ([]*tickwheelv1.ScheduledFire, error) {
	reply, err := c.PreviewSchedule(ctx, &tickwheelv1.PreviewScheduleRequest{
		Source: &tickwheelv1.PreviewScheduleRequest_Job{Job: job},
		Count:  count,
	})
	return reply.GetFires(), err
}

// NextRuns returns the next count fires of a saved job after now.
func (c *Client) NextRuns(ctx context.Context, jobID string, count int32) ([]*tickwheelv1.ScheduledFire, error) {
	reply, err := c.PreviewSchedule(ctx, &tickwheelv1.PreviewScheduleRequest{
		Source: &tickwheelv1.PreviewScheduleRequest_JobId{JobId: jobID},
		Count:  count,
	})
	return reply.GetFires(), err
}

// PreviewAfter is Preview from the instant after instead of now.
func (c *Client) PreviewAfter(ctx context.Context, job *tickwheelv1.Job, after time.Time, count int32) ([]*tickwheelv1.ScheduledFire, error) {
	reply, err := c.PreviewSchedule(ctx, &tickwheelv1.PreviewScheduleRequest{
		Source: &tickwheelv1.PreviewScheduleRequest_Job{Job: job},
		After:  timestamppb.New(after),
		Count:  count,
	})
	return reply.GetFires(), err
}

// Executions yields a job's whole history (the executions ListExecutions
// would list for request, newest first), fetching pages as the loop asks for
// them. An error ends the sequence after it is yielded.
func (c *Client) Executions(ctx context.Context, request *tickwheelv1.ListExecutionsRequest) iter.Seq2[*tickwheelv1.Execution, error] {
	return pages(ctx, request, c.ListExecutions, (*tickwheelv1.ListExecutionsResponse).GetExecutions)
}

// Jobs yields every job ListJobs would list for request, across pages.
func (c *Client) Jobs(ctx context.Context, request *tickwheelv1.ListJobsRequest) iter.Seq2[*tickwheelv1.Job, error] {
	return pages(ctx, request, c.ListJobs, (*tickwheelv1.ListJobsResponse).GetJobs)
}

// DeadLetters yields every dead execution ListDeadLetters would list for
// request, across pages.
func (c *Client) DeadLetters(ctx context.Context, request *tickwheelv1.ListDeadLettersRequest) iter.Seq2[*tickwheelv1.Execution, error] {
	return pages(ctx, request, c.ListDeadLetters, (*tickwheelv1.ListDeadLettersResponse).GetExecutions)
}

// pageRequest is a list request: it carries the token of the page it asks for.
type pageRequest interface {
	proto.Message
	GetPageToken() string
}

type pageResponse interface {
	GetNextPageToken() string
}

// pages walks a list RPC: it sends request for the first page, then a copy
// carrying each next_page_token until one is empty. The caller's request is
// not changed.
func pages[Req pageRequest, Resp pageResponse, Item any](
	ctx context.Context,
	request Req,
	list func(context.Context, Req) (Resp, error),
	items func(Resp) []Item,
) iter.Seq2[Item, error] {
	return func(yield func(Item, error) bool) {
		var zero Item
		next := request
		for {
			page, err := list(ctx, next)
			if err != nil {
				yield(zero, err)
				return
			}
			for _, item := range items(page) {
				if !yield(item, nil) {
					return
				}
			}
			token := page.GetNextPageToken()
			if token == "" {
				return
			}
			if token == next.GetPageToken() {
				yield(zero, errors.New("tickwheel: the server returned the same page token twice"))
				return
			}
			next = proto.CloneOf(request)
			message := next.ProtoReflect()
			message.Set(message.Descriptor().Fields().ByName("page_token"), protoreflect.ValueOfString(token))
		}
	}
}

package tickwheel

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	tickwheelv1 "github.com/tickwheel/tickwheel/sdk/go/gen/tickwheel/v1"
)

// repeatable says, for every SchedulerService and AdminService RPC, whether
// an attempt that failed with a retryable status may be sent again with this
// request: only when repeating it cannot apply a change twice (reads,
// writes made idempotent by a request id or by naming their version, dry
// runs). The rule is [mayRepeat]: an RPC missing here is never retried, so
// forgetting one fails safe; a test checks that every RPC of both services
// has an entry, so a new one forces a decision.
var repeatable = map[string]func(request any) bool{
	tickwheelv1.SchedulerService_CreateJob_FullMethodName:       hasRequestID,
	tickwheelv1.SchedulerService_BatchCreateJobs_FullMethodName: everyItemHasRequestID,
	tickwheelv1.SchedulerService_GetJob_FullMethodName:          always,
	tickwheelv1.SchedulerService_ListJobs_FullMethodName:        always,
	tickwheelv1.SchedulerService_UpdateJob_FullMethodName:       never,
	tickwheelv1.SchedulerService_DeleteJob_FullMethodName:       never,
	// A delete happens once and each update names its version: a retried
	// batch applies nothing twice.
	tickwheelv1.SchedulerService_BatchUpdateJobs_FullMethodName: everyItemHasVersion,
	tickwheelv1.SchedulerService_BatchDeleteJobs_FullMethodName: always,
	// A read. (UpdateJob with validate_only writes nothing, but it is
	// UpdateJob, decided above by the RPC: never retried.)
	tickwheelv1.SchedulerService_ListJobRevisions_FullMethodName: always,
	tickwheelv1.SchedulerService_PauseJob_FullMethodName:         never,
	tickwheelv1.SchedulerService_ResumeJob_FullMethodName:        never,
	// Pausing a paused job and resuming an active one change nothing: a
	// retried batch answers those items unchanged.
	tickwheelv1.SchedulerService_BatchPauseJobs_FullMethodName:   always,
	tickwheelv1.SchedulerService_BatchResumeJobs_FullMethodName:  always,
	tickwheelv1.SchedulerService_TriggerJob_FullMethodName:       hasRequestID,
	tickwheelv1.SchedulerService_BackfillJob_FullMethodName:      isDryRun,
	tickwheelv1.SchedulerService_PreviewSchedule_FullMethodName:  always,
	tickwheelv1.SchedulerService_GetExecution_FullMethodName:     always,
	tickwheelv1.SchedulerService_ListExecutions_FullMethodName:   always,
	tickwheelv1.SchedulerService_CancelExecution_FullMethodName:  never,
	tickwheelv1.SchedulerService_ListDeadLetters_FullMethodName:  always,
	tickwheelv1.SchedulerService_ReplayDeadLetter_FullMethodName: never,
	// Calendars as jobs: a create carries a request id, reads are safe, an
	// update or delete is never repeated.
	tickwheelv1.SchedulerService_CreateCalendar_FullMethodName: hasRequestID,
	tickwheelv1.SchedulerService_GetCalendar_FullMethodName:    always,
	tickwheelv1.SchedulerService_ListCalendars_FullMethodName:  always,
	tickwheelv1.SchedulerService_UpdateCalendar_FullMethodName: never,
	tickwheelv1.SchedulerService_DeleteCalendar_FullMethodName: never,

	// AdminService, as the Python SDK decides: its writes carry no request
	// id, so a retry after a lost reply would issue a second key or
	// credential, or answer ALREADY_EXISTS, NOT_FOUND or FAILED_PRECONDITION
	// for a change the first attempt made.
	tickwheelv1.AdminService_ClusterStatus_FullMethodName:          always,
	tickwheelv1.AdminService_CreateTenant_FullMethodName:           never,
	tickwheelv1.AdminService_GetTenant_FullMethodName:              always,
	tickwheelv1.AdminService_ListTenants_FullMethodName:            always,
	tickwheelv1.AdminService_UpdateTenant_FullMethodName:           never,
	tickwheelv1.AdminService_PauseTenant_FullMethodName:            never,
	tickwheelv1.AdminService_ResumeTenant_FullMethodName:           never,
	tickwheelv1.AdminService_IssueApiKey_FullMethodName:            never,
	tickwheelv1.AdminService_RotateApiKey_FullMethodName:           never,
	tickwheelv1.AdminService_RevokeApiKey_FullMethodName:           never,
	tickwheelv1.AdminService_ListApiKeys_FullMethodName:            always,
	tickwheelv1.AdminService_IssueWorkerCredential_FullMethodName:  never,
	tickwheelv1.AdminService_RevokeWorkerCredential_FullMethodName: never,
	tickwheelv1.AdminService_ListWorkerCredentials_FullMethodName:  always,
	tickwheelv1.AdminService_SearchJobs_FullMethodName:             always,
	tickwheelv1.AdminService_SearchExecutions_FullMethodName:       always,
	tickwheelv1.AdminService_DrainServer_FullMethodName:            never,
	tickwheelv1.AdminService_ListAlerts_FullMethodName:             always,
	// A stream: no deadline, no retry (the caller watches again).
	tickwheelv1.AdminService_WatchAlerts_FullMethodName:        never,
	tickwheelv1.AdminService_RecomputeSchedules_FullMethodName: isDryRun,
}

// mayRepeat reports whether request, sent to method (a full gRPC method
// name), may be sent again after an attempt failed with a retryable status.
// False for a method repeatable does not list.
func mayRepeat(method string, request any) bool {
	safe, listed := repeatable[method]
	return listed && safe(request)
}

func always(any) bool { return true }
func never(any) bool  { return false }

func hasRequestID(request any) bool {
	r, ok := request.(interface{ GetRequestId() string })
	return ok && r.GetRequestId() != ""
}

// everyItemHasRequestID is true for a BatchCreateJobs request whose every
// item carries its request id: then a repeat answers each item as before.
func everyItemHasRequestID(request any) bool {
	r, ok := request.(*tickwheelv1.BatchCreateJobsRequest)
	if !ok || len(r.GetItems()) == 0 {
		return false
	}
	for _, item := range r.GetItems() {
		if item.GetRequestId() == "" {
			return false
		}
	}
	return true
}

func isDryRun(request any) bool {
	r, ok := request.(interface{ GetDryRun() bool })
	return ok && r.GetDryRun()
}

// retryDelay is how long to wait before attempt attempt+1, and false to give
// up: when the status is not retryable, the call is not safe to repeat, the
// attempts are spent, or the wait would end past the deadline.
func (c *Client) retryDelay(method string, request any, err *Error, attempt int, deadline time.Time, hasDeadline bool) (time.Duration, bool) {
	retry := c.settings.retry
	if !retry.retryable(err.Code) || !mayRepeat(method, request) || attempt >= retry.MaxAttempts {
		return 0, false
	}
	delay := retry.Backoff(attempt, c.settings.rand())
	if hasDeadline && !time.Now().Add(delay).Before(deadline) {
		return 0, false
	}
	return delay, true
}

// intercept is the client's unary interceptor: it adds the credential
// (the admin token for AdminService, the API key otherwise), bounds
// the call (every attempt and wait) by the client's timeout, retries as
// retryDelay allows, and turns a failure into an *Error.
func (c *Client) intercept(ctx context.Context, method string, request, reply any, conn *grpc.ClientConn, invoke grpc.UnaryInvoker, options ...grpc.CallOption) error {
	if credential := c.settings.credentialFor(method); credential != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+credential)
	}
	if c.settings.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.settings.timeout)
		defer cancel()
	}
	deadline, hasDeadline := ctx.Deadline()
	for attempt := 1; ; attempt++ {
		err := invoke(ctx, method, request, reply, conn, options...)
		if err == nil {
			return nil
		}
		failure := AsError(err)
		delay, again := c.retryDelay(method, request, failure, attempt, deadline, hasDeadline)
		if !again || !c.settings.sleep(ctx.Done(), delay) {
			return failure
		}
	}
}

// sleepOrDone waits d, or until done closes; false when done closed first.
func sleepOrDone(done <-chan struct{}, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-done:
		return false
	}
}

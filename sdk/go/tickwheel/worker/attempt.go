package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	tickwheelv1 "github.com/tickwheel/tickwheel/sdk/go/gen/tickwheel/v1"
)

const (
	errorMaxBytes  = 4096
	outputMaxBytes = 16 * 1024
)

// key is one hand-out of one execution.
type key struct {
	executionID string
	delivery    int32
}

// attempt is one assignment, from receipt until its handler has returned
// (or the worker stopped). Its goroutine (Worker.runAttempt) waits for a
// slot, runs the handler, and decides the outcome exactly once, reporting
// it the moment it is known. decided, rejected and canceled are guarded by
// the Worker's mutex.
type attempt struct {
	key        key
	assignment *tickwheelv1.Assignment
	job        *Job
	// The handler's context; its cause says why it stopped.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// Releases the deadline's timer.
	release context.CancelFunc
	// Closed by reject and abandon: a cancel's grace ends now.
	hurry chan struct{}
	// Closed by abandon: stop waiting for the handler to return.
	abandoned chan struct{}

	decided      bool
	rejected     bool
	canceled     bool
	cancelReason string
	hurried      bool
	wasAbandoned bool
}

func newAttempt(a *tickwheelv1.Assignment) *attempt {
	at := &attempt{
		key:        key{a.GetExecutionId(), a.GetDelivery()},
		assignment: a,
		job:        jobOf(a),
		hurry:      make(chan struct{}),
		abandoned:  make(chan struct{}),
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	at.ctx, at.cancel, at.release = ctx, cancel, func() {}
	if !at.job.DeadlineAt.IsZero() {
		at.ctx, at.release = context.WithDeadlineCause(ctx, at.job.DeadlineAt, ErrTimedOut)
	}
	return at
}

// stop asks the attempt to stop and report CANCELED; no effect once
// decided or already canceled. Called with the Worker's mutex held.
func (at *attempt) stop(reason string) {
	if at.decided || at.canceled {
		return
	}
	if reason == "" {
		reason = "canceled by the server"
	}
	at.canceled, at.cancelReason = true, reason
	at.cancel(fmt.Errorf("%w: %s", ErrCanceled, reason))
}

// reject stops the attempt without reporting it: it is no longer this
// worker's. Called with the Worker's mutex held.
func (at *attempt) reject(cause error) {
	if at.decided {
		return
	}
	at.rejected = true
	at.cancel(cause)
	if !at.hurried {
		at.hurried = true
		close(at.hurry)
	}
}

// abandon rejects the attempt and stops waiting for its handler: the
// worker stops. Called with the Worker's mutex held.
func (at *attempt) abandon() {
	at.reject(ErrWorkerStopped)
	at.cancel(ErrWorkerStopped)
	if !at.wasAbandoned {
		at.wasAbandoned = true
		close(at.abandoned)
	}
}

// settled is how a handler returned.
type settled struct {
	output []byte
	err    error
}

// runAttempt runs at to its end; the outcome is recorded at most once
// (never for a rejected attempt) and at is forgotten when it returns.
func (w *Worker) runAttempt(at *attempt) {
	defer w.running.Done()
	defer w.forget(at)
	defer at.release()

	acquired := false
	select {
	case w.slots <- struct{}{}:
		acquired = true
	case <-at.ctx.Done():
	}
	if at.ctx.Err() != nil {
		if acquired { // the slot came with the stop
			<-w.slots
		}
		w.decideStopped(at, time.Time{})
		return
	}
	defer func() { <-w.slots }()

	startedAt := time.Now()
	handler, ok := w.settings.handlers[at.job.Handler]
	switch {
	case at.assignment.GetTarget().GetHttp() != nil:
		w.decide(at, tickwheelv1.ResultOutcome_RESULT_OUTCOME_FAILED_PERMANENT, "this worker does not run HTTP targets", nil, startedAt)
		return
	case at.assignment.GetTarget().GetHandler() == nil:
		w.decide(at, tickwheelv1.ResultOutcome_RESULT_OUTCOME_FAILED_PERMANENT, "the assignment has no target", nil, startedAt)
		return
	case !ok:
		w.decide(at, tickwheelv1.ResultOutcome_RESULT_OUTCOME_FAILED_PERMANENT,
			fmt.Sprintf("no handler named %q in this worker (it serves: %s)", at.job.Handler, strings.Join(w.handlerNames(), ", ")), nil, startedAt)
		return
	}

	done := make(chan settled, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				w.log.Warn("handler panicked", "execution_id", at.key.executionID, "delivery", at.key.delivery,
					"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				done <- settled{err: fmt.Errorf("panic: %v", p)}
			}
		}()
		output, err := handler(at.ctx, at.job)
		done <- settled{output: output, err: err}
	}()

	var result *settled
	select {
	case r := <-done:
		result = &r
	case <-at.ctx.Done():
	}
	if at.ctx.Err() == nil {
		w.decideFrom(at, *result, startedAt)
		return
	}
	if result == nil && errors.Is(context.Cause(at.ctx), ErrCanceled) && w.settings.cancelGrace > 0 {
		grace := time.NewTimer(w.settings.cancelGrace)
		select {
		case r := <-done:
			result = &r
		case <-grace.C:
		case <-at.hurry:
		}
		grace.Stop()
	}
	w.decideStopped(at, startedAt)
	if result == nil {
		// The slot stays taken until the handler has returned, unless the worker stops.
		select {
		case <-done:
		case <-at.abandoned:
		}
	}
}

// decideFrom decides the outcome of a handler that returned before its
// context was canceled.
func (w *Worker) decideFrom(at *attempt, r settled, startedAt time.Time) {
	var permanent *PermanentError
	switch {
	case r.err == nil:
		w.decide(at, tickwheelv1.ResultOutcome_RESULT_OUTCOME_SUCCEEDED, "", r.output, startedAt)
	case errors.As(r.err, &permanent):
		w.decide(at, tickwheelv1.ResultOutcome_RESULT_OUTCOME_FAILED_PERMANENT, r.err.Error(), nil, startedAt)
	default:
		w.log.Warn("handler failed", "execution_id", at.key.executionID, "delivery", at.key.delivery,
			"attempt", at.job.Attempt, "error", r.err.Error())
		w.decide(at, tickwheelv1.ResultOutcome_RESULT_OUTCOME_FAILED_RETRYABLE, r.err.Error(), nil, startedAt)
	}
}

// decideStopped decides an attempt whose context was canceled: CANCELED
// after a cancel, TIMED_OUT after the deadline, nothing when rejected.
// startedAt is zero when the handler never started.
func (w *Worker) decideStopped(at *attempt, startedAt time.Time) {
	w.mu.Lock()
	reason, canceled := at.cancelReason, at.canceled
	w.mu.Unlock()
	timedOut := errors.Is(context.Cause(at.ctx), ErrTimedOut)
	beforeStart := startedAt.IsZero()
	switch {
	case canceled && beforeStart:
		w.decide(at, tickwheelv1.ResultOutcome_RESULT_OUTCOME_CANCELED, "canceled before it started: "+reason, nil, startedAt)
	case canceled:
		w.decide(at, tickwheelv1.ResultOutcome_RESULT_OUTCOME_CANCELED, "canceled: "+reason, nil, startedAt)
	case timedOut && beforeStart:
		w.decide(at, tickwheelv1.ResultOutcome_RESULT_OUTCOME_TIMED_OUT, "deadline passed before a slot was free", nil, startedAt)
	case timedOut:
		w.decide(at, tickwheelv1.ResultOutcome_RESULT_OUTCOME_TIMED_OUT,
			"attempt still running at its deadline "+at.job.DeadlineAt.UTC().Format(time.RFC3339Nano), nil, startedAt)
	default: // rejected or abandoned: reported by nobody
		w.decide(at, tickwheelv1.ResultOutcome_RESULT_OUTCOME_UNSPECIFIED, "", nil, startedAt)
	}
}

// decide records the outcome once; a rejected attempt is decided but not
// reported. startedAt is zero when the handler never started.
func (w *Worker) decide(at *attempt, outcome tickwheelv1.ResultOutcome, errorText string, output []byte, startedAt time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if at.decided {
		return
	}
	at.decided = true
	if at.rejected || outcome == tickwheelv1.ResultOutcome_RESULT_OUTCOME_UNSPECIFIED {
		return
	}
	result := &tickwheelv1.ExecutionResult{
		ExecutionId: at.key.executionID,
		Delivery:    at.key.delivery,
		Attempt:     at.job.Attempt,
		Outcome:     outcome,
		Error:       cleanText(errorText, errorMaxBytes),
		FinishedAt:  timestamppb.Now(),
	}
	if len(output) > outputMaxBytes {
		output = output[:outputMaxBytes]
	}
	if len(output) > 0 {
		result.Output = append([]byte(nil), output...)
	}
	if !startedAt.IsZero() {
		result.StartedAt = timestamppb.New(startedAt)
	}
	w.recordLocked(at.key, result)
}

func (w *Worker) handlerNames() []string {
	names := make([]string, 0, len(w.settings.handlers))
	for name := range w.settings.handlers {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// cleanText is text as a result's error may carry it: valid UTF-8 (protobuf
// refuses anything else), NUL as U+FFFD (the store refuses NUL), at most
// limit bytes, never cut inside a character.
func cleanText(text string, limit int) string {
	text = strings.ToValidUTF8(text, "\uFFFD")
	text = strings.ReplaceAll(text, "\x00", "\uFFFD")
	if len(text) <= limit {
		return text
	}
	end := limit
	for end > 0 && text[end]&0xC0 == 0x80 {
		end-- // a continuation byte: back to the start of its character
	}
	return text[:end]
}

// cutRunes is text cut to at most limit characters.
func cutRunes(text string, limit int) string {
	if len(text) <= limit {
		return text
	}
	n := 0
	for i := range text {
		if n == limit {
			return text[:i]
		}
		n++
	}
	return text
}

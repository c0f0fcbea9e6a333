package worker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	tickwheelv1 "github.com/tickwheel/tickwheel/sdk/go/gen/tickwheel/v1"
)

// A Handler runs one attempt of an execution whose target names it. It
// returns the output to keep in history (at most 16 KiB; longer is cut), or
// an error: wrapped by [Permanent] the attempt is FAILED_PERMANENT,
// otherwise FAILED_RETRYABLE (a panic too).
//
// ctx is canceled when the attempt must stop: the server canceled it
// (context.Cause wraps [ErrCanceled]), its deadline passed ([ErrTimedOut];
// ctx.Deadline reports it), the server gave it to another worker
// ([ErrRejected]) or the worker stopped ([ErrWorkerStopped]). The runtime
// does not wait for a canceled handler to decide the outcome (a canceled
// one gets the cancel grace), but its slot stays taken until it returns.
type Handler func(ctx context.Context, job *Job) ([]byte, error)

// Why a handler's context was canceled: context.Cause(ctx) is one of these
// (a cancel wraps ErrCanceled with the server's reason).
var (
	ErrCanceled      = errors.New("the execution was canceled")
	ErrTimedOut      = errors.New("the attempt ran past its deadline")
	ErrRejected      = errors.New("the server gave this execution to another worker")
	ErrWorkerStopped = errors.New("the worker stopped")
)

// PermanentError is a handler's failure that retrying cannot fix: the
// attempt is reported FAILED_PERMANENT with Err's text and the execution is
// dead-lettered without further attempts (its payload is kept for replay).
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }

// Unwrap returns the failure itself.
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent marks err as a failure that retrying cannot fix; nil stays nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// progressMaxRunes bounds what a heartbeat carries per execution.
const progressMaxRunes = 256

// Job is what a handler knows about the attempt it runs. ExecutionID is the
// idempotency key: retries (Attempt+1) and re-deliveries after a worker or
// server died (Delivery+1) keep it, so a handler whose effect must happen
// once records it under this key. The fields are the assignment's; do not
// change them.
type Job struct {
	// The idempotency key, stable across attempts and deliveries.
	ExecutionID string
	// The job this execution belongs to.
	JobID string
	// The job's tenant.
	Tenant string
	// The handler name the job targets.
	Handler string
	// The attempt number, from 1; a retry after a failure increments it.
	Attempt int32
	// How many times the execution has been handed out, from 1.
	Delivery int32
	// The occurrence's nominal instant: what the schedule names.
	NominalAt time.Time
	// Nominal plus jitter: the earliest instant it could start.
	DueAt time.Time
	// When the attempt is abandoned and reported TIMED_OUT; zero: no limit.
	DeadlineAt time.Time
	// The payload, as given at creation (or by the trigger).
	Payload []byte
	// W3C trace context of the dispatch; empty when there is none.
	Traceparent string
	// How many missed occurrences this execution stands for (misfire run_once).
	MissedCount int32
	// How the execution came to exist (scheduled, trigger, backfill).
	Origin tickwheelv1.ExecutionOrigin

	mu       sync.Mutex
	progress string
}

// IdempotencyKey is ExecutionID: the Idempotency-Key an HTTP target sees.
func (j *Job) IdempotencyKey() string { return j.ExecutionID }

// Heartbeat records progress; the worker's next heartbeat carries it to the
// server (shown in history). Liveness does not depend on it: the worker
// heartbeats every execution it runs. Progress is cut to 256 characters,
// invalid UTF-8 and NUL become U+FFFD; an empty one keeps the previous.
// Safe from any goroutine.
func (j *Job) Heartbeat(progress string) {
	if progress == "" {
		return
	}
	// Valid UTF-8 (protobuf refuses anything else) without NUL (the store does).
	progress = strings.ReplaceAll(strings.ToValidUTF8(progress, "\uFFFD"), "\x00", "\uFFFD")
	if utf8.RuneCountInString(progress) > progressMaxRunes {
		progress = string([]rune(progress)[:progressMaxRunes])
	}
	j.mu.Lock()
	j.progress = progress
	j.mu.Unlock()
}

// Progress is the last progress given to Heartbeat.
func (j *Job) Progress() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.progress
}

func jobOf(a *tickwheelv1.Assignment) *Job {
	job := &Job{
		ExecutionID: a.GetExecutionId(),
		JobID:       a.GetJobId(),
		Tenant:      a.GetTenant(),
		Handler:     a.GetTarget().GetHandler().GetName(),
		Attempt:     a.GetAttempt(),
		Delivery:    a.GetDelivery(),
		Payload:     a.GetPayload(),
		Traceparent: a.GetTraceparent(),
		MissedCount: a.GetMissedCount(),
		Origin:      a.GetOrigin(),
	}
	if a.GetNominalAt() != nil {
		job.NominalAt = timeOf(a.GetNominalAt())
	}
	job.DueAt = job.NominalAt
	if a.GetDueAt() != nil {
		job.DueAt = timeOf(a.GetDueAt())
	}
	if a.GetDeadlineAt() != nil {
		job.DeadlineAt = timeOf(a.GetDeadlineAt())
	}
	return job
}

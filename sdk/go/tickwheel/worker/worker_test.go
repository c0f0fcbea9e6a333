package worker

// The worker's Pull protocol against a scripted server over real gRPC:
// hello, credit, heartbeats with progress, results kept until acked and
// resent after a reconnect, re-attachment, welcome.rejected, cancel,
// deadlines, drain, Stop, server silence, fatal codes, the address list and
// the reconnect backoff.

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	tickwheelv1 "github.com/tickwheel/tickwheel/sdk/go/gen/tickwheel/v1"
	"github.com/tickwheel/tickwheel/sdk/go/tickwheel"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func assignment(executionID, handler string, delivery int32) *tickwheelv1.Assignment {
	at := timestamppb.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	return &tickwheelv1.Assignment{
		ExecutionId: executionID,
		JobId:       "job_1",
		Tenant:      "acme",
		Attempt:     1,
		Delivery:    delivery,
		Payload:     []byte("payload"),
		NominalAt:   at,
		DueAt:       at,
		Target:      &tickwheelv1.Target{Kind: &tickwheelv1.Target_Handler{Handler: &tickwheelv1.HandlerTarget{Name: handler}}},
	}
}

// started runs a worker on the fake server's first address (then the
// others) and stops it when the test ends.
func started(t *testing.T, f *fakeServer, options ...Option) (*Worker, <-chan error) {
	t.Helper()
	addresses := make([]string, 0, len(f.listeners))
	for address := range f.listeners {
		addresses = append(addresses, address)
	}
	slices.Sort(addresses)
	base := []Option{
		WithWorkerID("w1"), WithSlots(2), WithLogger(quiet), WithDialOptions(f.dialer()),
		WithReconnectBackoff(5*time.Millisecond, 10*time.Millisecond),
	}
	for _, extra := range addresses[1:] {
		base = append(base, WithAddresses("passthrough:///"+extra))
	}
	w, err := New("passthrough:///"+addresses[0], "tww_test_secret", append(base, options...)...)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- w.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = w.Stop(ctx)
	})
	return w, ran
}

// waitFor waits until check holds, woken by the worker's changes.
func waitFor(t *testing.T, w *Worker, what string, check func() bool) {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		changed := w.changed
		w.mu.Unlock()
		if check() {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("not within %v: %s", waitLimit, what)
		}
	}
}

func receive[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("not within %v: %s", waitLimit, what)
		var zero T
		return zero
	}
}

// blocking is a handler that signals when it starts and returns its output
// when released (or its context's cause when canceled, if honour).
type blocking struct {
	started  chan *Job
	release  chan struct{}
	causes   chan error
	honour   bool
	returned chan struct{}
}

func newBlocking(honour bool) *blocking {
	return &blocking{started: make(chan *Job, 10), release: make(chan struct{}), causes: make(chan error, 10), honour: honour, returned: make(chan struct{}, 10)}
}

func (b *blocking) handle(ctx context.Context, job *Job) ([]byte, error) {
	defer func() { b.returned <- struct{}{} }()
	job.Heartbeat("half way")
	b.started <- job
	if b.honour {
		select {
		case <-b.release:
			return []byte("out"), nil
		case <-ctx.Done():
			b.causes <- context.Cause(ctx)
			return nil, context.Cause(ctx)
		}
	}
	<-b.release
	return []byte("out"), nil
}

func results(r *tickwheelv1.PullRequest_Result) []*tickwheelv1.ExecutionResult {
	return r.Result.GetResults()
}

func TestHelloHeartbeatsAResultKeptUntilAckedThenCredit(t *testing.T) {
	f := newFakeServer(t, "a")
	h := newBlocking(false)
	// Heartbeats every 20 ms show progress quickly; the fake server never heartbeats, and a
	// stall of a loaded machine must not make the worker presume it dead and reconnect.
	w, _ := started(t, f, WithServerSilenceIntervals(1000), WithHandler("h", h.handle), WithHandler("b.other", h.handle))
	s := f.next()
	if got := strings.Join(s.metadata.Get("authorization"), ","); got != "Bearer tww_test_secret" {
		t.Fatalf("authorization = %q", got)
	}
	hello := expect[*tickwheelv1.PullRequest_Hello](s).Hello
	if hello.GetWorkerId() != "w1" || !slices.Equal(hello.GetHandlers(), []string{"b.other", "h"}) || hello.GetSlots() != 2 ||
		hello.GetHttp() || len(hello.GetInFlight()) != 0 || hello.GetVersion() != Version {
		t.Fatalf("hello = %v", hello)
	}
	s.welcome(20 * time.Millisecond)
	s.assign(assignment("e1", "h", 1))
	job := receive(t, h.started, "the handler starts")
	if job.ExecutionID != "e1" || job.IdempotencyKey() != "e1" || job.Attempt != 1 || job.Delivery != 1 || string(job.Payload) != "payload" ||
		job.Tenant != "acme" || job.Handler != "h" || !job.NominalAt.Equal(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) || !job.DeadlineAt.IsZero() {
		t.Fatalf("job = %+v", job)
	}
	for {
		beat := expect[*tickwheelv1.PullRequest_Heartbeat](s).Heartbeat
		if len(beat.GetExecutions()) == 1 && beat.GetExecutions()[0].GetProgress() == "half way" {
			if e := beat.GetExecutions()[0]; e.GetExecutionId() != "e1" || e.GetDelivery() != 1 {
				t.Fatalf("heartbeat = %v", beat)
			}
			break
		}
	}
	close(h.release)
	result := results(expect[*tickwheelv1.PullRequest_Result](s))
	if len(result) != 1 || result[0].GetExecutionId() != "e1" || result[0].GetOutcome() != tickwheelv1.ResultOutcome_RESULT_OUTCOME_SUCCEEDED ||
		string(result[0].GetOutput()) != "out" || result[0].GetStartedAt() == nil || result[0].GetFinishedAt() == nil {
		t.Fatalf("result = %v", result)
	}
	// The slot is free and the server holds 1 credit of 2: one more.
	if credit := expect[*tickwheelv1.PullRequest_Credit](s).Credit.GetCredits(); credit != 1 {
		t.Fatalf("credit = %d, want 1", credit)
	}
	if got := w.Unacked(); !slices.Equal(got, []Execution{{"e1", 1}}) {
		t.Fatalf("unacked = %v", got)
	}
	s.ack("e1", 1)
	waitFor(t, w, "the ack forgets the result", func() bool { return len(w.Unacked()) == 0 })
	if s.count("credit") != 1 {
		t.Fatalf("%d credit messages: the server held all it may", s.count("credit"))
	}
}

func TestAResultNotAckedIsSentAgainOnTheNextStream(t *testing.T) {
	f := newFakeServer(t, "a")
	w, _ := started(t, f, WithHandler("h", func(context.Context, *Job) ([]byte, error) { return []byte("x"), nil }))
	first := f.next()
	expect[*tickwheelv1.PullRequest_Hello](first)
	first.welcome(time.Minute)
	first.assign(assignment("e1", "h", 1))
	if r := results(expect[*tickwheelv1.PullRequest_Result](first)); r[0].GetExecutionId() != "e1" {
		t.Fatalf("result = %v", r)
	}
	first.fail(codes.Unavailable, "the server goes away before acking")

	second := f.next()
	hello := expect[*tickwheelv1.PullRequest_Hello](second).Hello
	// Listed, so that the new stream holds it: a server takes a result only from the stream holding its delivery.
	if len(hello.GetInFlight()) != 1 || hello.GetInFlight()[0].GetExecutionId() != "e1" || hello.GetInFlight()[0].GetDelivery() != 1 {
		t.Fatalf("hello.in_flight = %v", hello.GetInFlight())
	}
	second.welcome(time.Minute)
	resent := results(expect[*tickwheelv1.PullRequest_Result](second))
	if resent[0].GetExecutionId() != "e1" || resent[0].GetOutcome() != tickwheelv1.ResultOutcome_RESULT_OUTCOME_SUCCEEDED || string(resent[0].GetOutput()) != "x" {
		t.Fatalf("resent = %v", resent)
	}
	second.ack("e1", 1)
	waitFor(t, w, "the ack on the second stream forgets it", func() bool { return len(w.Unacked()) == 0 })
	if w.Sessions() != 2 {
		t.Fatalf("sessions = %d", w.Sessions())
	}
}

func TestARunningExecutionIsReattachedAfterAReconnectAndReportedThere(t *testing.T) {
	f := newFakeServer(t, "a")
	h := newBlocking(true)
	started(t, f, WithHandler("h", h.handle))
	first := f.next()
	expect[*tickwheelv1.PullRequest_Hello](first)
	first.welcome(time.Minute)
	first.assign(assignment("e1", "h", 3))
	receive(t, h.started, "the handler starts")
	first.fail(codes.Unavailable, "server restart")

	second := f.next()
	hello := expect[*tickwheelv1.PullRequest_Hello](second).Hello
	if len(hello.GetInFlight()) != 1 || hello.GetInFlight()[0].GetExecutionId() != "e1" || hello.GetInFlight()[0].GetDelivery() != 3 {
		t.Fatalf("hello.in_flight = %v", hello.GetInFlight())
	}
	second.welcome(time.Minute)
	close(h.release)
	r := results(expect[*tickwheelv1.PullRequest_Result](second))
	if r[0].GetExecutionId() != "e1" || r[0].GetDelivery() != 3 || r[0].GetOutcome() != tickwheelv1.ResultOutcome_RESULT_OUTCOME_SUCCEEDED {
		t.Fatalf("result = %v", r)
	}
	if first.count("result") != 0 {
		t.Fatal("a result went to the dead stream")
	}
}

func TestAnExecutionTheWelcomeRejectsIsStoppedAndNeverReported(t *testing.T) {
	f := newFakeServer(t, "a")
	h := newBlocking(true)
	w, _ := started(t, f, WithSlots(1), WithHandler("h", h.handle),
		WithHandler("quick", func(context.Context, *Job) ([]byte, error) { return []byte("done"), nil }))
	first := f.next()
	expect[*tickwheelv1.PullRequest_Hello](first)
	first.welcome(time.Minute)
	first.assign(assignment("e1", "h", 1))
	receive(t, h.started, "the handler starts")
	first.fail(codes.Unavailable, "restart")

	second := f.next()
	expect[*tickwheelv1.PullRequest_Hello](second)
	second.welcome(time.Minute, &tickwheelv1.InFlightExecution{ExecutionId: "e1", Delivery: 1})
	if cause := receive(t, h.causes, "the rejected handler's context is canceled"); !errors.Is(cause, ErrRejected) {
		t.Fatalf("cause = %v, want ErrRejected", cause)
	}
	// A result for e1 would have been sent before e2's: e2's alone shows there is none.
	second.assign(assignment("e2", "quick", 1))
	r := results(expect[*tickwheelv1.PullRequest_Result](second))
	if len(r) != 1 || r[0].GetExecutionId() != "e2" || second.count("result") != 1 {
		t.Fatalf("results = %v (%d messages)", r, second.count("result"))
	}
	if got := w.Unacked(); !slices.Equal(got, []Execution{{"e2", 1}}) {
		t.Fatalf("unacked = %v", got)
	}
}

func TestAnUnackedResultTheWelcomeRejectsIsNotSentAgain(t *testing.T) {
	f := newFakeServer(t, "a")
	w, _ := started(t, f, WithHandler("h", func(context.Context, *Job) ([]byte, error) { return []byte("x"), nil }))
	first := f.next()
	expect[*tickwheelv1.PullRequest_Hello](first)
	first.welcome(time.Minute)
	first.assign(assignment("e1", "h", 1), assignment("e2", "h", 1))
	for sent := 0; sent < 2; { // both results, in one message or two
		sent += len(results(expect[*tickwheelv1.PullRequest_Result](first)))
	}
	first.fail(codes.Unavailable, "frozen past the heartbeat timeout")

	second := f.next()
	if n := len(expect[*tickwheelv1.PullRequest_Hello](second).Hello.GetInFlight()); n != 2 {
		t.Fatalf("hello lists %d executions, want both unacked ones", n)
	}
	second.welcome(time.Minute, &tickwheelv1.InFlightExecution{ExecutionId: "e1", Delivery: 1})
	r := results(expect[*tickwheelv1.PullRequest_Result](second))
	if len(r) != 1 || r[0].GetExecutionId() != "e2" {
		t.Fatalf("resent %v, want e2 alone: e1's delivery is someone else's now", r)
	}
	if got := w.Unacked(); !slices.Equal(got, []Execution{{"e2", 1}}) {
		t.Fatalf("unacked = %v", got)
	}
}

func TestCancelCancelsTheContextWithTheReasonAndReportsCanceled(t *testing.T) {
	f := newFakeServer(t, "a")
	h := newBlocking(true)
	started(t, f, WithHandler("h", h.handle))
	s := f.next()
	expect[*tickwheelv1.PullRequest_Hello](s)
	s.welcome(time.Minute)
	s.assign(assignment("e1", "h", 1))
	receive(t, h.started, "the handler starts")
	s.cancel("e1", 1, "by request")
	cause := receive(t, h.causes, "the handler's context is canceled")
	if !errors.Is(cause, ErrCanceled) || !strings.Contains(cause.Error(), "by request") {
		t.Fatalf("cause = %v", cause)
	}
	r := results(expect[*tickwheelv1.PullRequest_Result](s))
	if r[0].GetOutcome() != tickwheelv1.ResultOutcome_RESULT_OUTCOME_CANCELED || r[0].GetError() != "canceled: by request" {
		t.Fatalf("result = %v", r)
	}
}

func TestACanceledHandlerThatIgnoresItIsReportedAfterTheGraceAndKeepsItsSlot(t *testing.T) {
	f := newFakeServer(t, "a")
	h := newBlocking(false) // ignores its context
	w, _ := started(t, f, WithSlots(1), WithCancelGrace(20*time.Millisecond), WithHandler("h", h.handle))
	s := f.next()
	expect[*tickwheelv1.PullRequest_Hello](s)
	s.welcome(time.Minute)
	s.assign(assignment("e1", "h", 1))
	receive(t, h.started, "the handler starts")
	s.cancel("e1", 0, "replaced") // delivery 0: every delivery of e1
	r := results(expect[*tickwheelv1.PullRequest_Result](s))
	if r[0].GetOutcome() != tickwheelv1.ResultOutcome_RESULT_OUTCOME_CANCELED {
		t.Fatalf("result = %v", r)
	}
	s.ack("e1", 1)
	waitFor(t, w, "the ack", func() bool { return len(w.Unacked()) == 0 })
	if len(w.InFlight()) != 0 || s.count("credit") != 0 {
		t.Fatalf("in flight %v, %d credit: the handler still runs, so its slot is taken", w.InFlight(), s.count("credit"))
	}
	close(h.release)
	if credit := expect[*tickwheelv1.PullRequest_Credit](s).Credit.GetCredits(); credit != 1 {
		t.Fatalf("credit = %d once the handler returned", credit)
	}
}

func TestTheDeadlineCancelsTheContextAndReportsTimedOut(t *testing.T) {
	f := newFakeServer(t, "a")
	h := newBlocking(true)
	var seen time.Time
	started(t, f, WithSlots(1), WithHandler("h", func(ctx context.Context, job *Job) ([]byte, error) {
		seen, _ = ctx.Deadline()
		return h.handle(ctx, job)
	}))
	s := f.next()
	expect[*tickwheelv1.PullRequest_Hello](s)
	s.welcome(time.Minute)
	deadline := time.Now().Add(50 * time.Millisecond)
	first := assignment("e1", "h", 1)
	first.DeadlineAt = timestamppb.New(deadline)
	// e2 waits for e1's slot past its own deadline.
	second := assignment("e2", "h", 1)
	second.DeadlineAt = timestamppb.New(deadline.Add(-25 * time.Millisecond))
	s.assign(first)
	job := receive(t, h.started, "the handler starts")
	s.assign(second)
	if !job.DeadlineAt.Equal(deadline) {
		t.Fatalf("job.DeadlineAt = %v, want %v", job.DeadlineAt, deadline)
	}
	if cause := receive(t, h.causes, "the deadline cancels the context"); !errors.Is(cause, ErrTimedOut) {
		t.Fatalf("cause = %v", cause)
	}
	if !seen.Equal(job.DeadlineAt) {
		t.Fatalf("ctx.Deadline() = %v, want %v", seen, job.DeadlineAt)
	}
	outcomes := map[string]*tickwheelv1.ExecutionResult{}
	for len(outcomes) < 2 {
		for _, r := range results(expect[*tickwheelv1.PullRequest_Result](s)) {
			outcomes[r.GetExecutionId()] = r
		}
	}
	if r := outcomes["e1"]; r.GetOutcome() != tickwheelv1.ResultOutcome_RESULT_OUTCOME_TIMED_OUT || !strings.Contains(r.GetError(), "still running at its deadline") {
		t.Fatalf("e1 = %v", r)
	}
	if r := outcomes["e2"]; r.GetOutcome() != tickwheelv1.ResultOutcome_RESULT_OUTCOME_TIMED_OUT || r.GetError() != "deadline passed before a slot was free" || r.GetStartedAt() != nil {
		t.Fatalf("e2 = %v", r)
	}
}

func TestHandlerFailuresMapToTheirOutcomes(t *testing.T) {
	f := newFakeServer(t, "a")
	long := strings.Repeat("é", 3000) // 6000 bytes
	started(t, f, WithSlots(4),
		WithHandler("permanent", func(context.Context, *Job) ([]byte, error) {
			return nil, Permanent(errors.New("asked to fail"))
		}),
		WithHandler("retryable", func(context.Context, *Job) ([]byte, error) {
			return nil, errors.New("nul\x00 and \xff then " + long)
		}),
		WithHandler("panics", func(context.Context, *Job) ([]byte, error) { panic("boom") }),
		WithHandler("big", func(context.Context, *Job) ([]byte, error) { return make([]byte, 20_000), nil }),
	)
	s := f.next()
	expect[*tickwheelv1.PullRequest_Hello](s)
	s.welcome(time.Minute)
	s.assign(assignment("p", "permanent", 1), assignment("r", "retryable", 1), assignment("x", "panics", 1), assignment("u", "unknown", 1))
	s.assign(assignment("b", "big", 1))
	got := map[string]*tickwheelv1.ExecutionResult{}
	for len(got) < 5 {
		for _, r := range results(expect[*tickwheelv1.PullRequest_Result](s)) {
			got[r.GetExecutionId()] = r
		}
	}
	if r := got["p"]; r.GetOutcome() != tickwheelv1.ResultOutcome_RESULT_OUTCOME_FAILED_PERMANENT || r.GetError() != "asked to fail" {
		t.Errorf("permanent: %v", r)
	}
	r := got["r"]
	if r.GetOutcome() != tickwheelv1.ResultOutcome_RESULT_OUTCOME_FAILED_RETRYABLE || len(r.GetError()) > errorMaxBytes ||
		!strings.HasPrefix(r.GetError(), "nul\uFFFD and \uFFFD then é") || strings.ContainsRune(r.GetError(), 0) {
		t.Errorf("retryable: %q (%d bytes)", r.GetError()[:min(40, len(r.GetError()))], len(r.GetError()))
	}
	if r := got["x"]; r.GetOutcome() != tickwheelv1.ResultOutcome_RESULT_OUTCOME_FAILED_RETRYABLE || r.GetError() != "panic: boom" {
		t.Errorf("panic: %v", r)
	}
	if r := got["u"]; r.GetOutcome() != tickwheelv1.ResultOutcome_RESULT_OUTCOME_FAILED_PERMANENT ||
		r.GetError() != `no handler named "unknown" in this worker (it serves: big, panics, permanent, retryable)` {
		t.Errorf("unknown handler: %v", r)
	}
	if r := got["b"]; r.GetOutcome() != tickwheelv1.ResultOutcome_RESULT_OUTCOME_SUCCEEDED || len(r.GetOutput()) != outputMaxBytes {
		t.Errorf("big output: %d bytes", len(r.GetOutput()))
	}
}

func TestDrainStopsCreditAndClosesTheStreamOnceEverythingIsAcked(t *testing.T) {
	f := newFakeServer(t, "a")
	h := newBlocking(false)
	w, _ := started(t, f, WithSlots(1), WithHandler("h", h.handle))
	first := f.next()
	expect[*tickwheelv1.PullRequest_Hello](first)
	first.welcome(time.Minute)
	first.assign(assignment("e1", "h", 1))
	receive(t, h.started, "the handler starts")
	first.drain(time.Now().Add(time.Minute), "restart")
	waitFor(t, w, "the drain is seen", w.Draining)
	close(h.release)
	expect[*tickwheelv1.PullRequest_Result](first)
	first.ack("e1", 1)
	first.waitHalfClosed()
	if first.count("credit") != 0 {
		t.Fatal("credit was granted while draining")
	}
	second := f.next()
	expect[*tickwheelv1.PullRequest_Hello](second)
}

func TestTheDrainDeadlineClosesTheStreamAndTheNextOneReattaches(t *testing.T) {
	f := newFakeServer(t, "a", "b")
	h := newBlocking(true)
	started(t, f, WithHandler("h", h.handle))
	first := f.next()
	expect[*tickwheelv1.PullRequest_Hello](first)
	first.welcome(time.Minute)
	first.assign(assignment("e1", "h", 1))
	receive(t, h.started, "the handler starts")
	first.drain(time.Now().Add(30*time.Millisecond), "restart")
	first.waitHalfClosed()
	second := f.next()
	if second.address != "b" {
		t.Fatalf("after the drain the worker went to %s, want the next address b", second.address)
	}
	hello := expect[*tickwheelv1.PullRequest_Hello](second).Hello
	if len(hello.GetInFlight()) != 1 || hello.GetInFlight()[0].GetExecutionId() != "e1" {
		t.Fatalf("hello.in_flight = %v", hello.GetInFlight())
	}
	select {
	case cause := <-h.causes:
		t.Fatalf("a drain must not stop the handler (cause %v)", cause)
	default:
	}
}

func TestStopDrainsInFlightWorkThenEndsRun(t *testing.T) {
	// What the example worker does on SIGTERM: an in-flight handler (a
	// sleep) finishes, its result is acked, then Run returns nil.
	f := newFakeServer(t, "a")
	sleeping := make(chan struct{})
	w, ran := started(t, f, WithSlots(1), WithHandler("sleep", func(ctx context.Context, _ *Job) ([]byte, error) {
		close(sleeping)
		select {
		case <-time.After(100 * time.Millisecond):
			return []byte("slept"), nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}))
	s := f.next()
	expect[*tickwheelv1.PullRequest_Hello](s)
	s.welcome(time.Minute)
	s.assign(assignment("e1", "sleep", 1))
	receive(t, sleeping, "the handler starts")
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		stopped <- w.Stop(ctx)
	}()
	r := results(expect[*tickwheelv1.PullRequest_Result](s))
	if r[0].GetOutcome() != tickwheelv1.ResultOutcome_RESULT_OUTCOME_SUCCEEDED || string(r[0].GetOutput()) != "slept" {
		t.Fatalf("result = %v", r)
	}
	select {
	case <-stopped:
		t.Fatal("Stop returned before the result was acked")
	default:
	}
	s.ack("e1", 1)
	s.waitHalfClosed()
	if err := receive(t, stopped, "Stop returns"); err != nil {
		t.Fatalf("Stop = %v", err)
	}
	if err := receive(t, ran, "Run returns"); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if s.count("credit") != 0 {
		t.Fatal("credit was granted while stopping")
	}
}

func TestStopPastItsGraceAbandonsWhatRunsUnreported(t *testing.T) {
	f := newFakeServer(t, "a")
	h := newBlocking(true)
	w, ran := started(t, f, WithHandler("h", h.handle))
	s := f.next()
	expect[*tickwheelv1.PullRequest_Hello](s)
	s.welcome(time.Minute)
	s.assign(assignment("e1", "h", 1))
	receive(t, h.started, "the handler starts")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if err := w.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop = %v, want the grace's DeadlineExceeded", err)
	}
	if err := receive(t, ran, "Run returns"); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if cause := receive(t, h.causes, "the handler is told"); !errors.Is(cause, ErrWorkerStopped) {
		t.Fatalf("cause = %v", cause)
	}
	s.waitHalfClosed()
	if s.count("result") != 0 {
		t.Fatal("an abandoned attempt was reported")
	}
}

func TestASilentServerIsPresumedDeadAndTheWorkerReconnects(t *testing.T) {
	f := newFakeServer(t, "a")
	w, _ := started(t, f, WithServerSilenceIntervals(3), WithHandler("h", func(context.Context, *Job) ([]byte, error) { return nil, nil }))
	first := f.next()
	expect[*tickwheelv1.PullRequest_Hello](first)
	first.welcome(10 * time.Millisecond)
	// The worker keeps heartbeating a server that says nothing, then gives up on it.
	expect[*tickwheelv1.PullRequest_Heartbeat](first)
	second := f.next()
	expect[*tickwheelv1.PullRequest_Hello](second)
	second.welcome(time.Minute)
	waitFor(t, w, "the second stream is welcomed", func() bool { return w.Sessions() == 2 })
}

func TestRefusalsEndRunWithAFatalErrorAndOtherFailuresAreRetried(t *testing.T) {
	for _, code := range []codes.Code{codes.Unauthenticated, codes.PermissionDenied, codes.InvalidArgument, codes.Unimplemented} {
		t.Run(tickwheel.CodeName(code), func(t *testing.T) {
			f := newFakeServer(t, "a")
			_, ran := started(t, f, WithHandler("h", func(context.Context, *Job) ([]byte, error) { return nil, nil }))
			// RESOURCE_EXHAUSTED and UNAVAILABLE are worth another try.
			s := f.next()
			expect[*tickwheelv1.PullRequest_Hello](s)
			s.fail(codes.ResourceExhausted, "budget spent")
			s = f.next()
			expect[*tickwheelv1.PullRequest_Hello](s)
			s.fail(codes.Unavailable, "session in doubt")
			s = f.next()
			expect[*tickwheelv1.PullRequest_Hello](s)
			s.fail(code, "the credential is not valid")
			err := receive(t, ran, "Run returns")
			var fatal *FatalError
			if !errors.As(err, &fatal) || status.Code(err) != code || fatal.Address != "passthrough:///a" ||
				!strings.Contains(err.Error(), tickwheel.CodeName(code)+": the credential is not valid") {
				t.Fatalf("Run = %v", err)
			}
		})
	}
}

func TestReconnectsGoRoundTheAddressListWithAGrowingCappedBackoff(t *testing.T) {
	f := newFakeServer(t, "a", "b")
	var mu sync.Mutex
	var waits []time.Duration
	var failures []int
	record := func(s *settings) error {
		s.rand = func() float64 { return 0.5 }
		s.onBackoff = func(n int, d time.Duration) {
			mu.Lock()
			failures = append(failures, n)
			waits = append(waits, d)
			mu.Unlock()
		}
		return nil
	}
	started(t, f, record, WithReconnectBackoff(2*time.Millisecond, 5*time.Millisecond),
		WithHandler("h", func(context.Context, *Job) ([]byte, error) { return nil, nil }))
	var order []string
	for range 4 { // no welcome: each failure doubles the bound, up to the cap
		s := f.next()
		order = append(order, s.address)
		expect[*tickwheelv1.PullRequest_Hello](s)
		s.fail(codes.Unavailable, "down")
	}
	s := f.next()
	order = append(order, s.address)
	expect[*tickwheelv1.PullRequest_Hello](s)
	s.welcome(time.Minute)
	s.fail(codes.Unavailable, "gone at once after a welcome") // within a heartbeat interval: still failing
	s = f.next()
	order = append(order, s.address)
	expect[*tickwheelv1.PullRequest_Hello](s)
	s.welcome(50 * time.Millisecond)
	expect[*tickwheelv1.PullRequest_Heartbeat](s)       // the stream lasted a heartbeat interval: it worked
	s.fail(codes.Unavailable, "gone after a heartbeat") // the bound starts again
	f.next()
	if !slices.Equal(order, []string{"a", "b", "a", "b", "a", "b"}) {
		t.Fatalf("addresses = %v", order)
	}
	mu.Lock()
	defer mu.Unlock()
	wantFailures := []int{1, 2, 3, 4, 5, 0}
	wantWaits := []time.Duration{2 * time.Millisecond, 2500 * time.Microsecond, 2500 * time.Microsecond, 2500 * time.Microsecond, 2500 * time.Microsecond, time.Millisecond}
	if !slices.Equal(failures[:6], wantFailures) || !slices.Equal(waits[:6], wantWaits) {
		t.Fatalf("failures %v waits %v; want %v %v", failures, waits, wantFailures, wantWaits)
	}
}

func TestReconnectDelayIsFullJitterUnderADoublingCap(t *testing.T) {
	initial, most := 200*time.Millisecond, 15*time.Second
	cases := []struct {
		failures int
		u        float64
		want     time.Duration
	}{
		{0, 0, 0},
		{0, 0.5, 100 * time.Millisecond},
		{1, 0.5, 200 * time.Millisecond},
		{3, 0.5, 800 * time.Millisecond},
		{7, 0.5, 7500 * time.Millisecond}, // 25.6 s capped at 15 s
		{1 << 40, 0.999, time.Duration(0.999 * float64(most))},
		{-1, 0.5, 100 * time.Millisecond},
	}
	for _, c := range cases {
		if got := ReconnectDelay(c.failures, initial, most, c.u); got != c.want {
			t.Errorf("ReconnectDelay(%d, %v) = %v, want %v", c.failures, c.u, got, c.want)
		}
	}
	for failures := range 100 {
		if d := ReconnectDelay(failures, initial, most, 0.999999); d < 0 || d > most {
			t.Fatalf("ReconnectDelay(%d) = %v, outside [0, %v]", failures, d, most)
		}
	}
}

func TestAssignmentsBeyondTwiceTheSlotsAreRefusedAtOnce(t *testing.T) {
	f := newFakeServer(t, "a")
	h := newBlocking(false)
	started(t, f, WithSlots(1), WithHandler("h", h.handle))
	s := f.next()
	expect[*tickwheelv1.PullRequest_Hello](s)
	s.welcome(time.Minute)
	s.assign(assignment("e1", "h", 1), assignment("e2", "h", 1), assignment("e3", "h", 1))
	r := results(expect[*tickwheelv1.PullRequest_Result](s))
	if len(r) != 1 || r[0].GetExecutionId() != "e3" || r[0].GetOutcome() != tickwheelv1.ResultOutcome_RESULT_OUTCOME_FAILED_RETRYABLE ||
		!strings.Contains(r[0].GetError(), "over capacity") {
		t.Fatalf("results = %v", r)
	}
	close(h.release)
}

func TestOptionsAreCheckedByNew(t *testing.T) {
	handler := WithHandler("h", func(context.Context, *Job) ([]byte, error) { return nil, nil })
	bad := []struct {
		name                string
		address, credential string
		options             []Option
		want                string
	}{
		{"no address", "", "tww_x", []Option{handler}, "address"},
		{"address list in one string", "a:1,b:2", "tww_x", []Option{handler}, "commas"},
		{"no credential", "a:1", "", []Option{handler}, "credential is required"},
		{"credential with a newline", "a:1", "tww_x\nHost: evil", []Option{handler}, "one line"},
		{"no handler", "a:1", "tww_x", nil, "no handler"},
		{"handler twice", "a:1", "tww_x", []Option{handler, handler}, "twice"},
		{"bad handler name", "a:1", "tww_x", []Option{WithHandler("has space", func(context.Context, *Job) ([]byte, error) { return nil, nil })}, "handler name"},
		{"nil handler", "a:1", "tww_x", []Option{WithHandler("h", nil)}, "nil"},
		{"bad worker id", "a:1", "tww_x", []Option{handler, WithWorkerID(strings.Repeat("x", 129))}, "worker id"},
		{"no slots", "a:1", "tww_x", []Option{handler, WithSlots(0)}, "slots"},
		{"too many slots", "a:1", "tww_x", []Option{handler, WithSlots(MaxSlots + 1)}, "slots"},
		{"backoff cap below base", "a:1", "tww_x", []Option{handler, WithReconnectBackoff(time.Second, time.Millisecond)}, "backoff"},
		{"silence 0", "a:1", "tww_x", []Option{handler, WithServerSilenceIntervals(0)}, "silence"},
		{"certificate without key", "a:1", "tww_x", []Option{handler, WithTLS(tickwheel.TLSOptions{CertificateChain: []byte("x")})}, "go together"},
		{"bad extra address", "a:1", "tww_x", []Option{handler, WithAddresses(" b:2")}, "address"},
	}
	for _, c := range bad {
		if _, err := New(c.address, c.credential, c.options...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one mentioning %q", c.name, err, c.want)
		}
	}
	w, err := New("a:1", "tww_x", handler, WithTLS(tickwheel.TLSOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	if !workerIDPattern.MatchString(w.WorkerID()) {
		t.Fatalf("default worker id %q", w.WorkerID())
	}
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := w.Run(context.Background()); err != nil {
		t.Fatalf("Run after Stop = %v", err)
	}
	if err := w.Run(context.Background()); err == nil {
		t.Fatal("a Worker runs once")
	}
}

func TestHeartbeatProgressIsBoundedAndClean(t *testing.T) {
	job := &Job{}
	job.Heartbeat(strings.Repeat("ü", 300))
	if got := job.Progress(); got != strings.Repeat("ü", 256) {
		t.Fatalf("progress has %d characters, want 256", len([]rune(got)))
	}
	job.Heartbeat("a\x00b\xffc")
	if got := job.Progress(); got != "a\uFFFDb\uFFFDc" {
		t.Fatalf("progress = %q", got)
	}
	job.Heartbeat("")
	if got := job.Progress(); got != "a\uFFFDb\uFFFDc" {
		t.Fatalf("an empty progress replaced the last one: %q", got)
	}
}

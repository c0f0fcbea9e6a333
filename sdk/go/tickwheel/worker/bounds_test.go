package worker

// The worker against a hostile or broken server: a heartbeat interval out
// of bounds, assignments beyond the credit never acknowledged, strings of
// megabytes, cancels of many entries, texts with newlines, control
// characters and the credential, refused reconnects in a loop, and a
// welcome then a close in a loop.

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	tickwheelv1 "github.com/tickwheel/tickwheel/sdk/go/gen/tickwheel/v1"
)

const secret = "tww_test_secret"

// record is one log line as a recording logger kept it.
type record struct {
	level slog.Level
	text  string // the message, then every attribute as key=value
}

// logs keeps every record of the loggers recording to it.
type logs struct {
	mu      sync.Mutex
	records []record
}

// recording is a slog.Handler that keeps every record in its logs.
type recording struct {
	logs  *logs
	attrs []slog.Attr
}

func newRecording() (*logs, *slog.Logger) {
	l := &logs{}
	return l, slog.New(&recording{logs: l})
}

func (r *recording) Enabled(context.Context, slog.Level) bool { return true }

func (r *recording) Handle(_ context.Context, rec slog.Record) error {
	parts := []string{rec.Message}
	for _, a := range r.attrs {
		parts = append(parts, a.String())
	}
	rec.Attrs(func(a slog.Attr) bool {
		parts = append(parts, a.String())
		return true
	})
	r.logs.mu.Lock()
	r.logs.records = append(r.logs.records, record{rec.Level, strings.Join(parts, " ")})
	r.logs.mu.Unlock()
	return nil
}

func (r *recording) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &recording{logs: r.logs, attrs: append(slices.Clone(r.attrs), attrs...)}
}

func (r *recording) WithGroup(string) slog.Handler { return r }

// lines are the texts of the records at level (exactly) containing part.
func (l *logs) lines(level slog.Level, part string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, rec := range l.records {
		if rec.level == level && strings.Contains(rec.text, part) {
			out = append(out, rec.text)
		}
	}
	return out
}

// all is every record's text, a line each.
func (l *logs) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, rec := range l.records {
		b.WriteString(rec.text + "\n")
	}
	return b.String()
}

// clock is a settable clock for the outage and rate-limited lines.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) read() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// onClock makes the worker's log lines read c (the reconnect waits stay real).
func onClock(c *clock) Option {
	return func(s *settings) error {
		s.now = c.read
		return nil
	}
}

func noop(context.Context, *Job) ([]byte, error) { return nil, nil }

func TestAHeartbeatIntervalOutOfBoundsIsClampedWithOneWarningAMinute(t *testing.T) {
	for _, c := range []struct{ announced, want time.Duration }{
		{time.Millisecond, minHeartbeatInterval},
		{365 * 24 * time.Hour, maxHeartbeatInterval},
	} {
		t.Run(c.announced.String(), func(t *testing.T) {
			f := newFakeServer(t, "a")
			logs, logger := newRecording()
			w, _ := started(t, f, WithLogger(logger), WithServerSilenceIntervals(1000), WithHandler("h", noop))
			for i := range 3 { // welcomed again and again, within a minute
				s := f.next()
				expect[*tickwheelv1.PullRequest_Hello](s)
				s.welcome(c.announced)
				waitFor(t, w, "the welcome", func() bool { return w.Sessions() == i+1 })
				w.mu.Lock()
				got := w.session.interval
				w.mu.Unlock()
				if got != c.want {
					t.Fatalf("interval = %v, want %v", got, c.want)
				}
				s.fail(codes.Unavailable, "again")
			}
			f.next()
			if warned := logs.lines(slog.LevelWarn, "heartbeat interval out of bounds"); len(warned) != 1 ||
				!strings.Contains(warned[0], "using="+c.want.String()) {
				t.Fatalf("warnings = %q", warned)
			}
			if quiet := logs.lines(slog.LevelDebug, "heartbeat interval out of bounds"); len(quiet) != 2 {
				t.Fatalf("%d DEBUG lines, want 2", len(quiet))
			}
		})
	}
}

func TestRefusalsANeverAckingServerSendsAreBoundedAndRealResultsKept(t *testing.T) {
	f := newFakeServer(t, "a")
	logs, logger := newRecording()
	h := newBlocking(false)
	quick := func(context.Context, *Job) ([]byte, error) { return []byte("q"), nil }
	w, _ := started(t, f, WithLogger(logger), WithSlots(1), WithHandler("h", h.handle), WithHandler("quick", quick))
	t.Cleanup(func() { close(h.release) })
	s := f.next()
	expect[*tickwheelv1.PullRequest_Hello](s)
	s.welcome(time.Minute)
	s.assign(assignment("q1", "quick", 1))
	if r := results(expect[*tickwheelv1.PullRequest_Result](s)); r[0].GetExecutionId() != "q1" {
		t.Fatalf("results = %v", r)
	}
	s.assign(assignment("e1", "h", 1), assignment("e2", "h", 1)) // 2 * slots held
	receive(t, h.started, "e1 starts")
	refusals := make([]*tickwheelv1.Assignment, maxRefused)
	for i := range refusals {
		refusals[i] = assignment(fmt.Sprintf("r%d", i), "h", 1)
	}
	s.assign(refusals...)
	waitFor(t, w, "every refusal held", func() bool { return len(w.Unacked()) == 1+maxRefused })
	s.assign(assignment("r-last", "h", 1)) // one more, none acknowledged: a protocol error
	next := f.next()
	hello := expect[*tickwheelv1.PullRequest_Hello](next).Hello
	var held []string
	for _, e := range hello.GetInFlight() {
		held = append(held, e.GetExecutionId())
	}
	slices.Sort(held)
	if !slices.Equal(held, []string{"e1", "e2", "q1"}) {
		t.Fatalf("the next hello holds %v: the refusals are forgotten, the real attempts and results kept", held)
	}
	next.welcome(time.Minute)
	if r := results(expect[*tickwheelv1.PullRequest_Result](next)); len(r) != 1 || r[0].GetExecutionId() != "q1" || string(r[0].GetOutput()) != "q" {
		t.Fatalf("results sent again = %v", r)
	}
	if lines := logs.lines(slog.LevelError, "beyond this worker's credit"); len(lines) != 1 {
		t.Fatalf("%d ERROR lines for the refusals, want 1 (the rest at DEBUG)", len(lines))
	}
	if lines := logs.lines(slog.LevelWarn, fmt.Sprintf("protocol error: more than %d assignments beyond the credit", maxRefused)); len(lines) != 1 {
		t.Fatalf("the protocol error was said %d times:\n%s", len(lines), logs.all())
	}
}

func TestRefusalsAServerAcknowledgesNeverEndTheStream(t *testing.T) {
	f := newFakeServer(t, "a")
	h := newBlocking(false)
	w, _ := started(t, f, WithSlots(1), WithHandler("h", h.handle))
	t.Cleanup(func() { close(h.release) })
	s := f.next()
	expect[*tickwheelv1.PullRequest_Hello](s)
	s.welcome(time.Minute)
	s.assign(assignment("e1", "h", 1), assignment("e2", "h", 1))
	receive(t, h.started, "e1 starts")
	for round := range 3 { // 3 * 700 refusals in all, each round acknowledged
		refusals := make([]*tickwheelv1.Assignment, 700)
		acks := make([]*tickwheelv1.ResultAck, 700)
		for i := range refusals {
			id := fmt.Sprintf("r%d-%d", round, i)
			refusals[i] = assignment(id, "h", 1)
			acks[i] = &tickwheelv1.ResultAck{ExecutionId: id, Delivery: 1, Accepted: true}
		}
		s.assign(refusals...)
		waitFor(t, w, "the round's refusals", func() bool { return len(w.Unacked()) == 700 })
		s.send(&tickwheelv1.PullResponse{Message: &tickwheelv1.PullResponse_Ack{Ack: &tickwheelv1.ResultAcks{Acks: acks}}})
		waitFor(t, w, "the round's acks", func() bool { return len(w.Unacked()) == 0 })
	}
	if w.Sessions() != 1 || len(f.streams) != 0 {
		t.Fatalf("the stream ended: %d sessions", w.Sessions())
	}
}

func TestAnAssignmentOverABoundEndsTheStreamAndNothingOfItIsTaken(t *testing.T) {
	long := strings.Repeat("ü", maxIDChars+1) // characters, not bytes: 2050 bytes
	httpTarget := func(a *tickwheelv1.Assignment) *tickwheelv1.HttpTarget {
		http := &tickwheelv1.HttpTarget{Url: "https://example.com/", Method: "POST", Headers: map[string]string{}}
		a.Target = &tickwheelv1.Target{Kind: &tickwheelv1.Target_Http{Http: http}}
		return http
	}
	bad := []struct {
		said string
		set  func(a *tickwheelv1.Assignment)
	}{
		{"an execution id of 0 characters", func(a *tickwheelv1.Assignment) { a.ExecutionId = "" }},
		{"an execution id of 1025 characters", func(a *tickwheelv1.Assignment) { a.ExecutionId = long }},
		{"a job id of 1025 characters", func(a *tickwheelv1.Assignment) { a.JobId = long }},
		{"a tenant of 1025 characters", func(a *tickwheelv1.Assignment) { a.Tenant = long }},
		{"a traceparent of 1025 characters", func(a *tickwheelv1.Assignment) { a.Traceparent = long }},
		{"a handler name of 201 characters", func(a *tickwheelv1.Assignment) {
			a.GetTarget().GetHandler().Name = strings.Repeat("ü", maxHandlerChars+1)
		}},
		{fmt.Sprintf("a payload of %d bytes", maxPayloadBytes+1), func(a *tickwheelv1.Assignment) {
			a.Payload = make([]byte, maxPayloadBytes+1)
		}},
		{"an HTTP URL of 2049 characters", func(a *tickwheelv1.Assignment) {
			httpTarget(a).Url = "https://example.com/" + strings.Repeat("ü", maxURLChars+1-20)
		}},
		{"an HTTP method of 17 characters", func(a *tickwheelv1.Assignment) { httpTarget(a).Method = strings.Repeat("P", 17) }},
		{"33 HTTP headers", func(a *tickwheelv1.Assignment) {
			http := httpTarget(a)
			for i := range maxHeaders + 1 {
				http.Headers[fmt.Sprintf("x-%d", i)] = "v"
			}
		}},
		{"HTTP headers of 16385 characters", func(a *tickwheelv1.Assignment) {
			httpTarget(a).Headers["x-big"] = strings.Repeat("ü", maxHeadersChars+1-5)
		}},
	}
	f := newFakeServer(t, "a")
	logs, logger := newRecording()
	h := newBlocking(false)
	named := strings.Repeat("h", maxHandlerChars) // at the bound: taken
	w, _ := started(t, f, WithLogger(logger), WithHandler("h", h.handle), WithHandler(named, h.handle))
	t.Cleanup(func() { close(h.release) })
	for _, c := range bad {
		s := f.next()
		if hello := expect[*tickwheelv1.PullRequest_Hello](s).Hello; len(hello.GetInFlight()) != 0 {
			t.Fatalf("before %s: the hello holds %v", c.said, hello.GetInFlight())
		}
		s.welcome(time.Minute)
		a := assignment("bad", "h", 1)
		c.set(a)
		s.assign(assignment("ok", "h", 1), a) // the message is refused whole
	}
	s := f.next()
	if hello := expect[*tickwheelv1.PullRequest_Hello](s).Hello; len(hello.GetInFlight()) != 0 {
		t.Fatalf("the hello holds %v", hello.GetInFlight())
	}
	if len(h.started) != 0 {
		t.Fatal("a handler started from a message with a field over its bound")
	}
	s.welcome(time.Minute)
	at := strings.Repeat("ü", maxIDChars) // at the bound: taken
	a := assignment(at, named, 1)
	a.JobId, a.Tenant, a.Traceparent = at, at, at
	a.Payload = make([]byte, maxPayloadBytes) // a message over gRPC's default 4 MiB: received
	s.assign(a)
	job := receive(t, h.started, "the handler starts")
	if job.ExecutionID != at || len(job.Payload) != maxPayloadBytes || job.Handler != named {
		t.Fatalf("execution id of %d characters, payload of %d bytes", len([]rune(job.ExecutionID)), len(job.Payload))
	}
	text := logs.all()
	for _, c := range bad {
		if !strings.Contains(text, "protocol error: an assignment with "+c.said) {
			t.Fatalf("no protocol error for %s:\n%s", c.said, text)
		}
	}
	if strings.Contains(text, long) {
		t.Fatal("a log line repeats the string over the bound")
	}
	if w.Sessions() != len(bad)+1 {
		t.Fatalf("%d sessions", w.Sessions())
	}
}

func TestAnHTTPTargetAtItsBoundsIsAnsweredNotAProtocolError(t *testing.T) {
	f := newFakeServer(t, "a")
	w, _ := started(t, f, WithHandler("h", noop))
	s := f.next()
	expect[*tickwheelv1.PullRequest_Hello](s)
	s.welcome(time.Minute)
	headers := map[string]string{}
	for i := range maxHeaders - 1 {
		headers[fmt.Sprintf("x-%02d", i)] = "v" // 5 characters each
	}
	headers["x-big"] = strings.Repeat("ü", maxHeadersChars-5*(maxHeaders-1)-5)
	a := assignment("http", "h", 1)
	a.Target = &tickwheelv1.Target{Kind: &tickwheelv1.Target_Http{Http: &tickwheelv1.HttpTarget{
		Url: "https://example.com/" + strings.Repeat("u", maxURLChars-20), Method: strings.Repeat("P", maxMethodChars), Headers: headers,
	}}}
	s.assign(a)
	r := results(expect[*tickwheelv1.PullRequest_Result](s))
	if len(r) != 1 || r[0].GetOutcome() != tickwheelv1.ResultOutcome_RESULT_OUTCOME_FAILED_PERMANENT {
		t.Fatalf("results = %v", r)
	}
	if w.Sessions() != 1 {
		t.Fatalf("%d sessions", w.Sessions())
	}
}

func TestTimestampsOutOfRangeAreReadAsTheNearestInstantInIt(t *testing.T) {
	f := newFakeServer(t, "a")
	h := newBlocking(true)
	w, _ := started(t, f, WithHandler("h", h.handle))
	t.Cleanup(func() { close(h.release) })
	s := f.next()
	expect[*tickwheelv1.PullRequest_Hello](s)
	s.welcome(time.Minute)
	// A deadline far past year 9999 (Go's own conversion wraps it round to
	// a year long past): it never comes.
	late := assignment("late", "h", 1)
	late.NominalAt = &timestamppb.Timestamp{Seconds: math.MaxInt64, Nanos: -1}
	late.DeadlineAt = &timestamppb.Timestamp{Seconds: math.MaxInt64 - 1}
	s.assign(late)
	job := receive(t, h.started, "the late one starts")
	last := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	if !job.DeadlineAt.Equal(last) || !job.NominalAt.Equal(last) {
		t.Fatalf("deadline %v, nominal %v", job.DeadlineAt, job.NominalAt)
	}
	w.mu.Lock()
	deadline, ok := w.attempts[key{"late", 1}].ctx.Deadline()
	w.mu.Unlock()
	if !ok || !deadline.Equal(last) {
		t.Fatalf("the context's deadline is %v", deadline)
	}
	// A deadline before year 1 has passed: the attempt times out.
	early := assignment("early", "h", 1)
	early.DeadlineAt = &timestamppb.Timestamp{Seconds: math.MinInt64, Nanos: 2_000_000_000}
	s.assign(early)
	for {
		r := results(expect[*tickwheelv1.PullRequest_Result](s))
		if len(r) == 1 && r[0].GetExecutionId() == "early" {
			if r[0].GetOutcome() != tickwheelv1.ResultOutcome_RESULT_OUTCOME_TIMED_OUT {
				t.Fatalf("result %v", r[0])
			}
			break
		}
	}
	w.mu.Lock()
	_, running := w.attempts[key{"late", 1}]
	w.mu.Unlock()
	if !running || w.Sessions() != 1 {
		t.Fatalf("the late one runs: %v; %d sessions", running, w.Sessions())
	}
}

func TestADrainDeadlineOrHeartbeatIntervalOutOfProtobufsRangeIsAProtocolError(t *testing.T) {
	f := newFakeServer(t, "a")
	logs, logger := newRecording()
	w, _ := started(t, f, WithLogger(logger), WithHandler("h", noop))
	s := f.next()
	expect[*tickwheelv1.PullRequest_Hello](s)
	s.send(&tickwheelv1.PullResponse{Message: &tickwheelv1.PullResponse_Welcome{Welcome: &tickwheelv1.ServerWelcome{
		ServerId: "fake", HeartbeatInterval: &durationpb.Duration{Seconds: 315_576_000_001},
	}}})
	s = f.next()
	expect[*tickwheelv1.PullRequest_Hello](s)
	s.welcome(time.Minute)
	s.send(&tickwheelv1.PullResponse{Message: &tickwheelv1.PullResponse_Drain{Drain: &tickwheelv1.ServerDrain{
		DeadlineAt: &timestamppb.Timestamp{Seconds: maxTimestampSeconds + 1},
	}}})
	f.next()
	text := logs.all()
	for _, said := range []string{"protocol error: the welcome's heartbeat_interval is out of range", "protocol error: the drain's deadline_at is out of range"} {
		if !strings.Contains(text, said) {
			t.Fatalf("no %q:\n%s", said, text)
		}
	}
	if w.Sessions() != 1 {
		t.Fatalf("%d sessions (welcomed)", w.Sessions())
	}
}

func TestAServersTextsAreOneBoundedPrintableLineWithoutTheCredential(t *testing.T) {
	nasty := "boom " + secret + "\x1b[31m\x00" + strings.Repeat("x", 100_000) + "\nsecond line"
	f := newFakeServer(t, "a")
	logs, logger := newRecording()
	h := newBlocking(true)
	w, ran := started(t, f, WithLogger(logger), WithSlots(2), WithCancelGrace(0), WithHandler("h", h.handle))
	s := f.next()
	expect[*tickwheelv1.PullRequest_Hello](s)
	s.send(&tickwheelv1.PullResponse{Message: &tickwheelv1.PullResponse_Welcome{Welcome: &tickwheelv1.ServerWelcome{
		ServerId: nasty, HeartbeatInterval: durationpb.New(time.Minute),
	}}})
	waitFor(t, w, "the welcome", func() bool { return w.Sessions() == 1 })
	id := w.ServerID()
	if !strings.HasPrefix(id, "boom ***?[31m?xxx") || !strings.HasSuffix(id, "x...") || len([]rune(id)) != saidChars+3 {
		t.Fatalf("server id = %q", id)
	}
	// A cancel's reason of a megabyte: the result's error is bounded.
	s.assign(assignment("e1", "h", 1), assignment("e2", "h", 1))
	receive(t, h.started, "e1 starts")
	receive(t, h.started, "e2 starts")
	s.send(&tickwheelv1.PullResponse{Message: &tickwheelv1.PullResponse_Cancel{Cancel: &tickwheelv1.CancelExecutions{
		Executions: []*tickwheelv1.InFlightExecution{{ExecutionId: "e1", Delivery: 1}}, Reason: strings.Repeat("r", 1<<20),
	}}})
	r := results(expect[*tickwheelv1.PullRequest_Result](s))
	if r[0].GetOutcome() != tickwheelv1.ResultOutcome_RESULT_OUTCOME_CANCELED || len(r[0].GetError()) > cancelReasonChars+100 {
		t.Fatalf("result of %d bytes of error: %v", len(r[0].GetError()), r[0].GetOutcome())
	}
	// A rejected result, a second welcome, each five times: a line each.
	for range 5 {
		s.send(&tickwheelv1.PullResponse{Message: &tickwheelv1.PullResponse_Ack{Ack: &tickwheelv1.ResultAcks{Acks: []*tickwheelv1.ResultAck{
			{ExecutionId: "e1", Delivery: 1, Accepted: false, Reason: nasty},
		}}}})
		s.welcome(time.Minute)
	}
	waitFor(t, w, "the rejection forgets the result", func() bool { return len(w.Unacked()) == 0 })
	s.send(&tickwheelv1.PullResponse{Message: &tickwheelv1.PullResponse_Drain{Drain: &tickwheelv1.ServerDrain{Reason: nasty}}})
	waitFor(t, w, "the drain", func() bool { return w.Draining() })
	s.fail(codes.Unavailable, nasty)
	s = f.next()
	expect[*tickwheelv1.PullRequest_Hello](s)
	s.fail(codes.Unauthenticated, nasty)
	err := receive(t, ran, "Run ends")
	if err == nil || strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "second line") || len(err.Error()) > 500 {
		t.Fatalf("Run = %v", err)
	}
	if lines := logs.lines(slog.LevelWarn, "the server rejected a result"); len(lines) != 1 {
		t.Fatalf("%d rejected-result lines, want 1 (the rejection of a result no longer held says nothing)", len(lines))
	}
	if lines := logs.lines(slog.LevelWarn, "ignoring a second welcome"); len(lines) != 1 {
		t.Fatalf("%d second-welcome warnings, want 1", len(lines))
	}
	if lines := logs.lines(slog.LevelDebug, "ignoring a second welcome"); len(lines) != 4 {
		t.Fatalf("%d second-welcome DEBUG lines, want 4", len(lines))
	}
	if len(logs.lines(slog.LevelInfo, "server drains")) != 1 || len(logs.lines(slog.LevelError, "refused the worker")) != 1 {
		t.Fatalf("logs:\n%s", logs.all())
	}
	text := logs.all()
	for _, forbidden := range []string{secret, "\x1b", "\x00", "second line", strings.Repeat("x", saidChars+1)} {
		if strings.Contains(text, forbidden) {
			t.Fatalf("the logs hold %q:\n%.2000s", forbidden, text)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if len(line) > 2000 {
			t.Fatalf("a line of %d bytes: %.300s", len(line), line)
		}
	}
	close(h.release)
}

func TestACancelOfManyEntriesCancelsEachAttemptOnce(t *testing.T) {
	f := newFakeServer(t, "a")
	h := newBlocking(true)
	w, _ := started(t, f, WithSlots(200), WithCancelGrace(0), WithHandler("h", h.handle))
	h.started = make(chan *Job, 200)
	s := f.next()
	expect[*tickwheelv1.PullRequest_Hello](s)
	s.welcome(time.Minute)
	assignments := make([]*tickwheelv1.Assignment, 200)
	for i := range assignments {
		assignments[i] = assignment(fmt.Sprintf("job%d:e", i), "h", 1)
	}
	s.assign(assignments...)
	for range 200 {
		receive(t, h.started, "the handlers start")
	}
	// 100 000 entries naming nothing (delivery 0: every delivery of the id),
	// then every tenth attempt, three times over: a scan an entry would be
	// 2e7 steps.
	var entries []*tickwheelv1.InFlightExecution
	for i := range 100_000 {
		entries = append(entries, &tickwheelv1.InFlightExecution{ExecutionId: fmt.Sprintf("none%d:e", i)})
	}
	for range 3 {
		for i := 0; i < 200; i += 10 {
			entries = append(entries, &tickwheelv1.InFlightExecution{ExecutionId: fmt.Sprintf("job%d:e", i)})
		}
	}
	s.send(&tickwheelv1.PullResponse{Message: &tickwheelv1.PullResponse_Cancel{Cancel: &tickwheelv1.CancelExecutions{Executions: entries, Reason: "stop"}}})
	canceled := map[string]int{}
	for len(canceled) < 20 {
		for _, r := range results(expect[*tickwheelv1.PullRequest_Result](s)) {
			if r.GetOutcome() != tickwheelv1.ResultOutcome_RESULT_OUTCOME_CANCELED {
				t.Fatalf("result %v", r)
			}
			canceled[r.GetExecutionId()]++
		}
	}
	for id, n := range canceled {
		if n != 1 {
			t.Fatalf("%s reported %d times", id, n)
		}
	}
	if got := len(w.InFlight()); got != 180 {
		t.Fatalf("%d in flight, want 180", got)
	}
	close(h.release)
}

func TestAnOutageIsALineThenLinesAfterDoublingGapsThenOneRecovery(t *testing.T) {
	logs, logger := newRecording()
	c := newClock()
	o := outageLog{log: logger, now: c.read}
	for range 241 { // a failure every 10 s for 40 minutes
		o.failed("connecting", "UNAVAILABLE: down")
		c.advance(10 * time.Second)
	}
	o.ok()
	warnings := logs.lines(slog.LevelWarn, "")
	var at []string
	for _, w := range warnings {
		for _, part := range strings.Fields(w) {
			if strings.HasPrefix(part, "for=") {
				at = append(at, strings.TrimPrefix(part, "for="))
			}
		}
	}
	// The first line, then after 1, 3, 7, 15 minutes, then every 15 minutes.
	if len(warnings) != 6 || !strings.HasPrefix(warnings[0], "connecting failed, server unavailable") ||
		!slices.Equal(at, []string{"1m0s", "3m0s", "7m0s", "15m0s", "30m0s"}) {
		t.Fatalf("warnings = %q", warnings)
	}
	if n := len(logs.lines(slog.LevelDebug, "")); n != 241-6 {
		t.Fatalf("%d DEBUG lines", n)
	}
	if recovered := logs.lines(slog.LevelInfo, "recovered"); len(recovered) != 1 || !strings.Contains(recovered[0], "failures=241") ||
		!strings.Contains(recovered[0], "after=40m10s") {
		t.Fatalf("recovered = %q", recovered)
	}
	// A relapse within a minute of the last line is quiet, and so is its recovery.
	logs, logger = newRecording()
	o = outageLog{log: logger, now: c.read}
	o.failed("the stream", "first")
	o.ok()
	o.failed("the stream", "relapse")
	o.ok()
	c.advance(time.Minute)
	o.failed("the stream", "a minute later")
	if warned := logs.lines(slog.LevelWarn, ""); len(warned) != 2 || !strings.Contains(warned[1], "a minute later") {
		t.Fatalf("warnings = %q", warned)
	}
	if len(logs.lines(slog.LevelInfo, "recovered")) != 1 || len(logs.lines(slog.LevelDebug, "recovered")) != 1 {
		t.Fatalf("logs:\n%s", logs.all())
	}
}

func TestRefusedReconnectsInALoopAreAFewLinesThenOneRecovery(t *testing.T) {
	f := newFakeServer(t, "a")
	logs, logger := newRecording()
	c := newClock()
	// Each reconnect wait is 30 s on the lines' clock.
	advancing := func(s *settings) error {
		s.onBackoff = func(int, time.Duration) { c.advance(30 * time.Second) }
		return nil
	}
	started(t, f, WithLogger(logger), onClock(c), advancing, WithHandler("h", noop))
	for range 40 { // 20 minutes
		s := f.next()
		expect[*tickwheelv1.PullRequest_Hello](s)
		s.fail(codes.Unavailable, "restarting "+secret+"\nsecond line")
	}
	s := f.next()
	expect[*tickwheelv1.PullRequest_Hello](s)
	s.welcome(50 * time.Millisecond)
	if len(logs.lines(slog.LevelInfo, "recovered")) != 0 {
		t.Fatal("a welcome is not enough to end an outage")
	}
	expect[*tickwheelv1.PullRequest_Heartbeat](s) // the stream lasted a heartbeat interval
	deadline := time.Now().Add(waitLimit)
	for len(logs.lines(slog.LevelInfo, "recovered")) == 0 && time.Now().Before(deadline) {
		expect[*tickwheelv1.PullRequest_Heartbeat](s)
	}
	recovered := logs.lines(slog.LevelInfo, "recovered")
	if len(recovered) != 1 || !strings.Contains(recovered[0], "failures=40") {
		t.Fatalf("recovered = %q\n%s", recovered, logs.all())
	}
	warnings := logs.lines(slog.LevelWarn, "")
	// The first failure, then after 1, 3, 7 and 15 minutes.
	if len(warnings) != 5 || !strings.Contains(warnings[0], "connecting failed, server unavailable") {
		t.Fatalf("warnings = %q", warnings)
	}
	if text := logs.all(); strings.Contains(text, secret) || strings.Contains(text, "second line") {
		t.Fatalf("logs:\n%s", text)
	}
}

func TestResultsAServerNeverAcknowledgesStopAtAHellosWorthThenAreRefused(t *testing.T) {
	f := newFakeServer(t, "a")
	w, _ := started(t, f, WithSlots(100), WithHandler("h", noop))
	s := f.next()
	expect[*tickwheelv1.PullRequest_Hello](s)
	s.welcome(time.Minute)
	// 200 rounds of 100 quick attempts (within twice the slots each time), none acknowledged.
	for round := range maxHelloEntries / 100 {
		batch := make([]*tickwheelv1.Assignment, 100)
		for i := range batch {
			batch[i] = assignment(fmt.Sprintf("e%d-%d", round, i), "h", 1)
		}
		s.assign(batch...)
		want := (round + 1) * 100
		waitFor(t, w, "the round's results", func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return len(w.unacked) == want && len(w.attempts) == 0
		})
	}
	s.assign(assignment("more", "h", 1))
	for {
		for _, r := range results(expect[*tickwheelv1.PullRequest_Result](s)) {
			if r.GetExecutionId() == "more" {
				if !strings.Contains(r.GetError(), "over capacity") {
					t.Fatalf("result %v", r)
				}
				return
			}
		}
	}
}

func TestAMessageOverTheReceiveLimitEndsTheStreamAndTheNextOneServes(t *testing.T) {
	f := newFakeServer(t, "a")
	logs, logger := newRecording()
	h := newBlocking(false)
	w, _ := started(t, f, WithLogger(logger), WithHandler("h", h.handle))
	t.Cleanup(func() { close(h.release) })
	s := f.next()
	expect[*tickwheelv1.PullRequest_Hello](s)
	s.welcome(time.Minute)
	huge := assignment("huge", "h", 1)
	huge.Payload = make([]byte, maxReceiveBytes) // the message is a little more
	s.assign(huge)
	s = f.next()
	if hello := expect[*tickwheelv1.PullRequest_Hello](s).Hello; len(hello.GetInFlight()) != 0 {
		t.Fatalf("the hello holds %v", hello.GetInFlight())
	}
	s.welcome(time.Minute)
	s.assign(assignment("next", "h", 1))
	if job := receive(t, h.started, "the next stream's assignment starts"); job.ExecutionID != "next" {
		t.Fatalf("started %s", job.ExecutionID)
	}
	if !strings.Contains(logs.all(), "RESOURCE_EXHAUSTED") {
		t.Fatalf("no RESOURCE_EXHAUSTED:\n%s", logs.all())
	}
	if w.Sessions() != 2 {
		t.Fatalf("%d sessions", w.Sessions())
	}
}

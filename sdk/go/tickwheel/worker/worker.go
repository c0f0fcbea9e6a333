package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	tickwheelv1 "github.com/tickwheel/tickwheel/sdk/go/gen/tickwheel/v1"
	"github.com/tickwheel/tickwheel/sdk/go/tickwheel"
)

// Version is this SDK's version, sent in the hello and the x-tickwheel-sdk header.
const Version = "0.1.0"

const (
	// maxHelloEntries is the most hello.in_flight entries a server takes;
	// the worker never holds more attempts and unacknowledged results
	// together, so a hello always lists every one.
	maxHelloEntries = 20_000
	// resultsPerMessage bounds a result message (16 KiB output + 4 KiB error
	// each: about 2 MiB, under the server's 4 MiB).
	resultsPerMessage = 100
	// closeTimeout is how long a clean close waits for the server to end the stream.
	closeTimeout = time.Second
	// maxReceiveBytes: an assignment batch can carry 100 payloads of 64 KiB
	// and more; gRPC's default is 4 MiB.
	maxReceiveBytes = 64 << 20
	// maxRefused is the most refusals of assignments beyond the credit held
	// unacknowledged; one more ends the stream as a protocol error (a server
	// that ignores the credit and never acks would grow them without end).
	maxRefused = 1000
	// cancelReasonChars is what a canceled attempt keeps of the server's reason.
	cancelReasonChars = 1024
)

// fatalCodes are the refusals retrying with the same configuration cannot cure.
var fatalCodes = map[codes.Code]bool{
	codes.Unauthenticated:  true,
	codes.PermissionDenied: true,
	codes.InvalidArgument:  true,
	codes.Unimplemented:    true,
}

// FatalError ends [Worker.Run]: a server refused the worker (a bad
// credential, a handler the credential may not serve, ...). status.Code
// works on it.
type FatalError struct {
	// The server that refused.
	Address string
	// Its answer.
	Err *tickwheel.Error
	// Its answer as Error says it: one printable line, bounded, the credential masked.
	said string
}

func (e *FatalError) Error() string {
	text := e.said
	if text == "" {
		text = said(e.Err.Error(), "")
	}
	return fmt.Sprintf("tickwheel worker: %s refused the worker: %s", e.Address, text)
}

// Unwrap returns the server's answer.
func (e *FatalError) Unwrap() error { return e.Err }

// Execution names one hand-out of one execution.
type Execution struct {
	ExecutionID string
	Delivery    int32
}

// Worker is a worker process's connection to Tickwheel and the executions
// it runs. Build it with [New], then Run it once; Stop (from another
// goroutine) drains and ends it. Its methods are safe for concurrent use.
type Worker struct {
	credential  string
	settings    settings
	log         *slog.Logger
	dialOptions []grpc.DialOption
	// A token per handler running: at most slots at once.
	slots chan struct{}

	// Used by Run's goroutine only.
	outages outageLog
	// When the last "connected" line was INFO (Run's goroutine only).
	saidConnectedAt time.Time

	mu       sync.Mutex
	attempts map[key]*attempt
	unacked  map[key]*tickwheelv1.ExecutionResult
	// The keys in unacked of refusals of assignments beyond the credit (at most maxRefused).
	refused  map[key]struct{}
	limited  limited
	session  *session
	started  bool
	stopping bool
	sessions int
	// Closed (and replaced) on every change someone may wait for.
	changed chan struct{}

	running      sync.WaitGroup
	shutdown     chan struct{}
	shutdownOnce sync.Once
	done         chan struct{}
}

// New returns a worker for the server at address ("host:port", any gRPC
// target) that authenticates with credential (a worker credential, sent as
// "authorization: Bearer <credential>"). It needs at least one
// [WithHandler]; options are checked here. It does not connect until Run.
func New(address, credential string, options ...Option) (*Worker, error) {
	if err := checkAddress(address); err != nil {
		return nil, err
	}
	if err := checkCredential(credential); err != nil {
		return nil, err
	}
	s := defaults()
	s.addresses = []string{address}
	for _, option := range options {
		if err := option(&s); err != nil {
			return nil, err
		}
	}
	if len(s.handlers) == 0 {
		return nil, errors.New("tickwheel worker: no handler (WithHandler): nothing to run")
	}
	if s.workerID == "" {
		s.workerID = DefaultWorkerID()
	}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	dial := []grpc.DialOption{
		grpc.WithUserAgent("tickwheel-go-worker/" + Version),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxReceiveBytes)),
	}
	if s.tls == nil {
		dial = append(dial, grpc.WithTransportCredentials(insecure.NewCredentials()))
	} else {
		creds, err := s.tls.TransportCredentials()
		if err != nil {
			return nil, err
		}
		dial = append(dial, grpc.WithTransportCredentials(creds))
	}
	logger := s.logger.With("worker_id", s.workerID)
	return &Worker{
		credential:  credential,
		settings:    s,
		log:         logger,
		outages:     outageLog{log: logger, now: s.now},
		refused:     map[key]struct{}{},
		limited:     limited{now: s.now, saidAt: map[string]time.Time{}, unsaid: map[string]int{}},
		dialOptions: append(dial, s.dialOptions...),
		slots:       make(chan struct{}, s.slots),
		attempts:    map[key]*attempt{},
		unacked:     map[key]*tickwheelv1.ExecutionResult{},
		changed:     make(chan struct{}),
		shutdown:    make(chan struct{}),
		done:        make(chan struct{}),
	}, nil
}

// WorkerID is the id this worker says hello with.
func (w *Worker) WorkerID() string { return w.settings.workerID }

// ServerID is the id of the server whose welcome the current stream has,
// or empty while none has.
func (w *Worker) ServerID() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.session == nil {
		return ""
	}
	return w.session.serverID
}

// Draining is true while the current stream's server drains (no new work).
func (w *Worker) Draining() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.session != nil && w.session.draining
}

// Sessions is how many streams were welcomed so far.
func (w *Worker) Sessions() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sessions
}

// InFlight lists every attempt not yet decided, by execution id.
func (w *Worker) InFlight() []Execution {
	w.mu.Lock()
	defer w.mu.Unlock()
	return sortedExecutions(w.inFlightLocked())
}

// Unacked lists the results reported but not yet acknowledged by a server.
func (w *Worker) Unacked() []Execution {
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := make([]key, 0, len(w.unacked))
	for k := range w.unacked {
		keys = append(keys, k)
	}
	return sortedExecutions(keys)
}

// Run connects, serves and reconnects until Stop is called or ctx is done,
// and returns nil then; it returns a [*FatalError] when a server refuses
// the worker. ctx being done stops at once, like Stop with no grace. On
// return every attempt has been told to stop (a handler that ignores its
// context may still be running) and none is reported: the server
// re-delivers them. A Worker runs once.
func (w *Worker) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.started {
		w.mu.Unlock()
		return errors.New("tickwheel worker: a Worker runs once")
	}
	w.started = true
	w.mu.Unlock()
	defer close(w.done)
	defer w.abandonAll()
	defer w.stopNow()
	stopWatching := context.AfterFunc(ctx, w.stopNow)
	defer stopWatching()

	failures := 0
	for next := 0; !w.isShutdown(); next = (next + 1) % len(w.settings.addresses) {
		address := w.settings.addresses[next]
		welcomed, worked, err := w.runSession(address)
		if err == nil && welcomed && !worked && !w.isShutdown() {
			err = lost("the server ended the stream within a heartbeat interval of its welcome")
		}
		if err != nil {
			if fatal := w.classify(address, welcomed, err); fatal != nil {
				return fatal
			}
		} else if welcomed && !w.isShutdown() {
			w.mu.Lock()
			w.limited.log(w.log, "closed", slog.LevelInfo, "stream closed; reconnecting", "address", address)
			w.mu.Unlock()
		}
		// A stream that lasted a heartbeat interval worked: the next connect is
		// quick again. One that ended sooner (a welcome, then at once a close, a
		// drain or an error, in a loop) backs off as a refused connect does.
		if worked {
			failures = 0
		} else {
			failures++
		}
		if w.isShutdown() {
			break
		}
		delay := ReconnectDelay(failures, w.settings.reconnectInitialBackoff, w.settings.reconnectMaxBackoff, w.settings.rand())
		if w.settings.onBackoff != nil {
			w.settings.onBackoff(failures, delay)
		}
		timer := time.NewTimer(delay)
		select {
		case <-timer.C:
		case <-w.shutdown:
		}
		timer.Stop()
	}
	return nil
}

// Stop drains the worker: it takes no more work, waits until every attempt
// is decided and every result acknowledged (reconnecting meanwhile if the
// stream drops), or until ctx is done, then closes the stream and ends Run;
// what still runs then is abandoned unreported (the server re-delivers it,
// and any result left unacknowledged, to another worker). It returns when
// Run has returned: nil when everything was drained, ctx's error when the
// grace ran out first. Call it on SIGTERM.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	w.stopping = true
	started := w.started
	w.wakeLocked()
	w.mu.Unlock()
	if !started {
		w.stopNow()
		return nil
	}
	var err error
	for {
		w.mu.Lock()
		quiet, changed := w.quietLocked(), w.changed
		w.mu.Unlock()
		if quiet {
			break
		}
		select {
		case <-changed:
			continue
		case <-w.done:
		case <-ctx.Done():
			err = ctx.Err()
		}
		break
	}
	w.stopNow()
	<-w.done
	return err
}

func (w *Worker) stopNow() {
	w.shutdownOnce.Do(func() { close(w.shutdown) })
}

func (w *Worker) isShutdown() bool {
	select {
	case <-w.shutdown:
		return true
	default:
		return false
	}
}

// classify logs a session's failure, through the outage log (a line an
// outage, not one a reconnect); a *FatalError when it must end Run.
// welcomed: the stream failed after its welcome.
func (w *Worker) classify(address string, welcomed bool, err error) *FatalError {
	stage := "connecting"
	if welcomed {
		stage = "the stream"
	}
	var lostErr *sessionLost
	var badTarget *dialError
	switch {
	case errors.As(err, &lostErr):
		w.outages.failed(stage, said(lostErr.reason, w.credential), "address", address)
	case errors.As(err, &badTarget):
		return &FatalError{Address: address, Err: &tickwheel.Error{Code: codes.InvalidArgument, Message: badTarget.Error()},
			said: said(badTarget.Error(), w.credential)}
	default:
		failure := tickwheel.AsError(err)
		// The status and the first line of its message (Error() would join every line).
		text := said(tickwheel.CodeName(failure.Code)+": "+failure.Message, w.credential)
		if _, ok := status.FromError(err); ok && fatalCodes[failure.Code] {
			w.log.Error("the server refused the worker; stopping", "address", address, "error", text)
			return &FatalError{Address: address, Err: failure, said: text}
		}
		w.outages.failed(stage, text, "address", address)
	}
	return nil
}

// --- state, guarded by mu -----------------------------------------------------------

func (w *Worker) inFlightLocked() []key {
	keys := make([]key, 0, len(w.attempts))
	for k, at := range w.attempts {
		if !at.decided {
			keys = append(keys, k)
		}
	}
	return keys
}

// quietLocked: nothing left to report, every attempt decided and every result acknowledged.
func (w *Worker) quietLocked() bool {
	if len(w.unacked) > 0 {
		return false
	}
	for _, at := range w.attempts {
		if !at.decided {
			return false
		}
	}
	return true
}

// notifyLocked wakes everyone waiting for a change.
func (w *Worker) notifyLocked() {
	close(w.changed)
	w.changed = make(chan struct{})
}

func (w *Worker) wakeLocked() {
	if w.session != nil {
		w.session.wakeUp()
	}
}

func (w *Worker) recordLocked(k key, result *tickwheelv1.ExecutionResult) {
	w.unacked[k] = result
	if w.session != nil {
		w.session.addUnsent(k)
		w.session.wakeUp()
	}
	w.notifyLocked()
}

// forget drops a finished attempt: its slot is free (maybe credit).
func (w *Worker) forget(at *attempt) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.attempts, at.key)
	w.wakeLocked()
	w.notifyLocked()
}

// matchingLocked is the attempts of executions, each once; delivery 0
// matches every delivery. One pass over the attempts at most, however many
// entries a server sends (a scan an entry would let one message cost
// entries times attempts).
func (w *Worker) matchingLocked(executions []*tickwheelv1.InFlightExecution) []*attempt {
	var found []*attempt
	seen := map[key]struct{}{}
	var byID map[string][]*attempt
	add := func(at *attempt) {
		if _, ok := seen[at.key]; !ok {
			seen[at.key] = struct{}{}
			found = append(found, at)
		}
	}
	for _, execution := range executions {
		if execution.GetDelivery() != 0 {
			if at, ok := w.attempts[key{execution.GetExecutionId(), execution.GetDelivery()}]; ok {
				add(at)
			}
			continue
		}
		if byID == nil {
			byID = make(map[string][]*attempt, len(w.attempts))
			for k, at := range w.attempts {
				byID[k.executionID] = append(byID[k.executionID], at)
			}
		}
		for _, at := range byID[execution.GetExecutionId()] {
			add(at)
		}
	}
	return found
}

// rejectLocked stops the attempts the welcome's rejected list names and
// drops their unacknowledged results (a result for a delivery this stream
// does not hold can never count: sending it would only spend the
// credential's budget). One pass over the list, the attempts and the
// results at most.
func (w *Worker) rejectLocked(rejected []*tickwheelv1.InFlightExecution) {
	if len(rejected) == 0 {
		return
	}
	for _, at := range w.matchingLocked(rejected) {
		at.reject(ErrRejected)
	}
	deliveries := make(map[key]struct{}, len(rejected))
	everyDelivery := map[string]struct{}{}
	for _, r := range rejected {
		if r.GetDelivery() == 0 {
			everyDelivery[r.GetExecutionId()] = struct{}{}
		} else {
			deliveries[key{r.GetExecutionId(), r.GetDelivery()}] = struct{}{}
		}
	}
	dropped := 0
	for k := range w.unacked {
		_, one := deliveries[k]
		_, every := everyDelivery[k.executionID]
		if one || every {
			delete(w.unacked, k)
			delete(w.refused, k)
			dropped++
		}
	}
	if dropped > 0 {
		w.log.Warn("results dropped: the server gave their executions to another worker", "results", dropped)
	}
}

// abandonAll stops every attempt without reporting it and waits for their
// goroutines (not for handlers that ignore their context).
func (w *Worker) abandonAll() {
	w.mu.Lock()
	for _, at := range w.attempts {
		at.abandon()
	}
	w.notifyLocked()
	w.mu.Unlock()
	w.running.Wait()
}

func sortedExecutions(keys []key) []Execution {
	out := make([]Execution, len(keys))
	for i, k := range keys {
		out[i] = Execution{k.executionID, k.delivery}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ExecutionID != out[j].ExecutionID {
			return out[i].ExecutionID < out[j].ExecutionID
		}
		return out[i].Delivery < out[j].Delivery
	})
	return out
}

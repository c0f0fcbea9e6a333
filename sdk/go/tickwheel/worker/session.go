package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	tickwheelv1 "github.com/tickwheel/tickwheel/sdk/go/gen/tickwheel/v1"
)

// The heartbeat interval a welcome may set is clamped to these (the bounds
// a server's configuration takes; it refuses to start outside them).
const (
	minHeartbeatInterval = 50 * time.Millisecond
	maxHeartbeatInterval = 5 * time.Minute
)

// sessionLost: the stream ended or the server went silent; reconnect.
type sessionLost struct{ reason string }

func (e *sessionLost) Error() string { return e.reason }

func lost(format string, args ...any) error { return &sessionLost{fmt.Sprintf(format, args...)} }

// dialError: the address cannot be dialed at all (not a valid target).
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }

// session is the state of one Pull stream. Fields other than wake are
// guarded by the Worker's mutex.
type session struct {
	// Signals the writer that there may be something to send (capacity 1).
	wake     chan struct{}
	interval time.Duration
	lastSeen time.Time
	// Credit the server holds for this worker on this stream.
	outstanding int
	// Results (keys into Worker.unacked) not yet written to this stream, in
	// order; unsentSet says which entries of unsent still count.
	unsent        []key
	unsentSet     map[key]struct{}
	heartbeatDue  bool
	draining      bool
	drainDeadline time.Time
	// Set on a clean end: the writer flushes, half-closes and stops.
	closing bool
	// The welcome's server id, fit for a log line (said).
	serverID string
	// When the stream counts as having worked: its welcome plus a heartbeat interval.
	healthyAt time.Time
}

func (s *session) wakeUp() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *session) addUnsent(k key) {
	if _, ok := s.unsentSet[k]; ok {
		return
	}
	s.unsentSet[k] = struct{}{}
	s.unsent = append(s.unsent, k)
}

// runSession holds one stream to address until it ends; welcomed says
// whether the server welcomed it, worked whether the stream then lasted a
// heartbeat interval. A nil error is a clean end (drained, or the worker
// stops).
func (w *Worker) runSession(address string) (welcomed, worked bool, err error) {
	conn, err := grpc.NewClient(address, w.dialOptions...)
	if err != nil {
		return false, false, &dialError{err}
	}
	defer conn.Close()
	md := metadata.Pairs("authorization", "Bearer "+w.credential, "x-tickwheel-sdk", "go/"+Version)
	ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(context.Background(), md))
	defer cancel()

	// Connecting, hello and welcome within the welcome timeout; a stop meanwhile ends it.
	var timedOut atomic.Bool
	timer := time.AfterFunc(w.settings.welcomeTimeout, func() { timedOut.Store(true); cancel() })
	handshaken := make(chan struct{})
	go func() {
		select {
		case <-w.shutdown:
			cancel()
		case <-handshaken:
		}
	}()
	stream, welcome, err := w.handshake(ctx, conn)
	timer.Stop()
	close(handshaken)
	if err != nil {
		switch {
		case w.isShutdown():
			return false, false, nil
		case timedOut.Load():
			return false, false, lost("no welcome within %v", w.settings.welcomeTimeout)
		}
		return false, false, err
	}

	s := &session{
		wake:        make(chan struct{}, 1),
		interval:    w.settings.heartbeatInterval,
		lastSeen:    time.Now(),
		outstanding: w.settings.slots,
		unsentSet:   map[key]struct{}{},
		serverID:    said(welcome.GetServerId(), w.credential),
	}
	if d := welcome.GetHeartbeatInterval(); d != nil && d.CheckValid() != nil {
		return false, false, lost("protocol error: the welcome's heartbeat_interval is out of range")
	}
	w.mu.Lock()
	if d := welcome.GetHeartbeatInterval(); d != nil && d.AsDuration() > 0 {
		// Bounded, so a hostile or broken value neither spins the writer nor
		// turns silence detection off.
		s.interval = min(max(d.AsDuration(), minHeartbeatInterval), maxHeartbeatInterval)
		if s.interval != d.AsDuration() {
			w.limited.log(w.log, "heartbeat interval", slog.LevelWarn, "the server announced a heartbeat interval out of bounds; clamped",
				"server_id", s.serverID, "announced", d.AsDuration().String(), "using", s.interval.String())
		}
	}
	s.healthyAt = s.lastSeen.Add(s.interval)
	w.rejectLocked(welcome.GetRejected())
	resend := make([]key, 0, len(w.unacked))
	for k := range w.unacked {
		resend = append(resend, k)
	}
	sortKeys(resend)
	for _, k := range resend {
		s.addUnsent(k)
	}
	w.session = s
	w.sessions++
	w.notifyLocked()
	w.mu.Unlock()
	s.wakeUp()
	// Through an outage (streams welcomed, then ended at once, in a loop)
	// this line too is one a minute; the outage's end is logged once a
	// stream lasted a heartbeat interval (serve).
	level, now := slog.LevelInfo, w.settings.now()
	if w.outages.down() && !w.saidConnectedAt.IsZero() && now.Sub(w.saidConnectedAt) < stillEvery {
		level = slog.LevelDebug
	} else {
		w.saidConnectedAt = now
	}
	w.log.Log(context.Background(), level, "connected", "address", address, "server_id", s.serverID,
		"reattached", len(welcome.GetReattached()), "rejected", len(welcome.GetRejected()), "results_to_resend", len(resend))
	defer func() {
		w.mu.Lock()
		if w.session == s {
			w.session = nil
		}
		w.notifyLocked()
		w.mu.Unlock()
	}()
	err = w.serve(s, stream, cancel)
	return true, !time.Now().Before(s.healthyAt), err
}

// handshake opens the stream, sends hello and reads the welcome.
func (w *Worker) handshake(ctx context.Context, conn *grpc.ClientConn) (grpc.BidiStreamingClient[tickwheelv1.PullRequest, tickwheelv1.PullResponse], *tickwheelv1.ServerWelcome, error) {
	stream, err := tickwheelv1.NewWorkerServiceClient(conn).Pull(ctx)
	if err != nil {
		return nil, nil, err
	}
	w.mu.Lock()
	hello := w.helloLocked()
	w.mu.Unlock()
	// A failed Send reports io.EOF; the stream's status comes from Recv.
	if err := stream.Send(&tickwheelv1.PullRequest{Message: &tickwheelv1.PullRequest_Hello{Hello: hello}}); err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, err
	}
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return nil, nil, lost("the server closed the stream before its welcome")
	}
	if err != nil {
		return nil, nil, err
	}
	welcome := first.GetWelcome()
	if welcome == nil {
		return nil, nil, lost("protocol error: expected welcome, got %T", first.GetMessage())
	}
	return stream, welcome, nil
}

// serve runs a welcomed stream until it fails (the error) or ends cleanly
// (nil): the reader applies what the server sends, this goroutine is the
// only writer. A clean end (drain complete, or the worker stops)
// half-closes the stream after the last pending write and gives the server
// up to closeTimeout to end its side, so it sees a finished stream rather
// than a canceled one. A watchdog cancels the stream when the server is
// silent too long, or when a stop finds the writer stuck (a server that
// stopped reading), so no path waits on the server forever. The reader has
// returned when serve does.
func (w *Worker) serve(s *session, stream grpc.BidiStreamingClient[tickwheelv1.PullRequest, tickwheelv1.PullResponse], cancel context.CancelFunc) error {
	var readErr error
	readerStopped := make(chan struct{})
	go func() {
		defer close(readerStopped)
		readErr = w.readLoop(s, stream)
	}()
	served := make(chan struct{})
	defer func() {
		close(served)
		cancel()
		<-readerStopped
	}()

	silenceLimit := s.interval * time.Duration(w.settings.serverSilenceIntervals)
	var presumedDead atomic.Bool
	go func() {
		silence := time.NewTimer(silenceLimit)
		defer silence.Stop()
		shutdown := w.shutdown
		var stuck <-chan time.Time
		for {
			select {
			case <-served:
				return
			case <-shutdown:
				shutdown = nil
				stuck = time.After(2 * closeTimeout)
			case <-stuck:
				cancel()
				return
			case <-silence.C:
				w.mu.Lock()
				quietFor := time.Since(s.lastSeen)
				w.mu.Unlock()
				if quietFor >= silenceLimit {
					presumedDead.Store(true)
					cancel()
					return
				}
				silence.Reset(silenceLimit - quietFor)
			}
		}
	}()
	failed := func(err error) error {
		if presumedDead.Load() {
			return lost("no message from the server for %v: presumed dead", silenceLimit)
		}
		return err
	}

	heartbeat := time.NewTicker(s.interval)
	defer heartbeat.Stop()
	var drainTimer *time.Timer
	var drainC <-chan time.Time
	defer func() {
		if drainTimer != nil {
			drainTimer.Stop()
		}
	}()
	for {
		closing, err := w.flush(s, stream)
		if err != nil {
			// The stream broke; its status comes from the reader.
			select {
			case <-readerStopped:
				if readErr != nil {
					return failed(readErr)
				}
			case <-time.After(closeTimeout):
			}
			return failed(lost("sending failed: %v", err))
		}
		if closing {
			break
		}
		select {
		case <-s.wake:
		case <-heartbeat.C:
			w.outages.ok() // the stream lasted a heartbeat interval: an outage is over
			w.mu.Lock()
			s.heartbeatDue = true
			w.mu.Unlock()
		case <-readerStopped:
			if readErr == nil {
				return lost("the server closed the stream")
			}
			return failed(readErr)
		case <-w.shutdown:
			w.mu.Lock()
			s.closing = true
			w.mu.Unlock()
		case <-drainC:
		}
		w.mu.Lock()
		if s.draining && !s.closing {
			switch {
			case w.quietLocked():
				w.limited.log(w.log, "drained", slog.LevelInfo, "drained: every attempt decided and acknowledged", "server_id", s.serverID)
				s.closing = true
			case !s.drainDeadline.IsZero() && !time.Now().Before(s.drainDeadline):
				w.limited.log(w.log, "drained", slog.LevelInfo, "drain deadline passed", "server_id", s.serverID, "in_flight", len(w.inFlightLocked()))
				s.closing = true
			case !s.drainDeadline.IsZero() && drainTimer == nil:
				drainTimer = time.NewTimer(time.Until(s.drainDeadline))
				drainC = drainTimer.C
			}
		}
		w.mu.Unlock()
	}
	select {
	case <-readerStopped:
	case <-time.After(closeTimeout):
	}
	return nil
}

// flush writes what the state asks for: pending results, then credit, then
// (on a clean end) the half-close, or a heartbeat when one is due. It
// reports whether the stream is closing.
func (w *Worker) flush(s *session, stream grpc.BidiStreamingClient[tickwheelv1.PullRequest, tickwheelv1.PullResponse]) (bool, error) {
	for {
		w.mu.Lock()
		batch := w.nextResultsLocked(s)
		w.mu.Unlock()
		if len(batch) == 0 {
			break
		}
		request := &tickwheelv1.PullRequest{Message: &tickwheelv1.PullRequest_Result{Result: &tickwheelv1.WorkerResults{Results: batch}}}
		if err := stream.Send(request); err != nil {
			return false, err
		}
	}
	w.mu.Lock()
	credit := w.grantableLocked(s)
	s.outstanding += credit
	closing := s.closing
	var beat *tickwheelv1.WorkerHeartbeat
	if s.heartbeatDue && !closing {
		s.heartbeatDue = false
		beat = w.heartbeatLocked()
	}
	w.mu.Unlock()
	if credit > 0 {
		request := &tickwheelv1.PullRequest{Message: &tickwheelv1.PullRequest_Credit{Credit: &tickwheelv1.WorkerCredit{Credits: int32(credit)}}}
		if err := stream.Send(request); err != nil {
			return false, err
		}
	}
	if closing {
		return true, stream.CloseSend()
	}
	if beat != nil {
		if err := stream.Send(&tickwheelv1.PullRequest{Message: &tickwheelv1.PullRequest_Heartbeat{Heartbeat: beat}}); err != nil {
			return false, err
		}
	}
	return false, nil
}

// readLoop applies every message from the server until the stream ends:
// nil when the server ended it cleanly, its status otherwise.
func (w *Worker) readLoop(s *session, stream grpc.BidiStreamingClient[tickwheelv1.PullRequest, tickwheelv1.PullResponse]) error {
	for {
		message, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		w.mu.Lock()
		s.lastSeen = time.Now()
		var breach error
		switch m := message.GetMessage().(type) {
		case *tickwheelv1.PullResponse_Assignment:
			breach = w.acceptAllLocked(s, m.Assignment.GetAssignments())
		case *tickwheelv1.PullResponse_Cancel:
			reason := cutRunes(m.Cancel.GetReason(), cancelReasonChars)
			for _, at := range w.matchingLocked(m.Cancel.GetExecutions()) {
				at.stop(reason)
			}
		case *tickwheelv1.PullResponse_Ack:
			w.applyAcksLocked(s, m.Ack.GetAcks())
		case *tickwheelv1.PullResponse_Drain:
			if m.Drain.GetDeadlineAt() != nil && m.Drain.GetDeadlineAt().CheckValid() != nil {
				breach = lost("protocol error: the drain's deadline_at is out of range")
				break
			}
			s.draining = true
			if m.Drain.GetDeadlineAt() != nil {
				s.drainDeadline = m.Drain.GetDeadlineAt().AsTime()
			}
			w.limited.log(w.log, "drains", slog.LevelInfo, "server drains", "server_id", s.serverID,
				"reason", said(m.Drain.GetReason(), w.credential))
			w.notifyLocked()
		case *tickwheelv1.PullResponse_Welcome:
			w.limited.log(w.log, "welcome", slog.LevelWarn, "ignoring a second welcome", "server_id", s.serverID)
		default: // a server heartbeat: seeing it was the point
		}
		w.mu.Unlock()
		s.wakeUp()
		if breach != nil {
			return breach
		}
	}
}

// acceptAllLocked takes an assignment message: a protocol error (nothing
// of it taken) when an assignment of it is out of bounds (assignmentBreach).
func (w *Worker) acceptAllLocked(s *session, assignments []*tickwheelv1.Assignment) error {
	for _, a := range assignments {
		if breach := assignmentBreach(a); breach != "" {
			return lost("protocol error: %s", breach)
		}
	}
	for _, a := range assignments {
		if err := w.acceptLocked(s, a); err != nil {
			return err
		}
	}
	return nil
}

// acceptLocked takes one assignment: a new attempt, or a repeat answered
// from what the worker already has, or a refusal of one beyond the credit;
// a protocol error when more than maxRefused refusals are unacknowledged
// (the refusals are forgotten then: the server hands those executions out
// again; the results of real attempts stay).
func (w *Worker) acceptLocked(s *session, a *tickwheelv1.Assignment) error {
	k := key{a.GetExecutionId(), a.GetDelivery()}
	s.outstanding = max(0, s.outstanding-1)
	if _, ok := w.attempts[k]; ok {
		w.limited.log(w.log, "duplicate", slog.LevelWarn, "duplicate assignment ignored", "execution_id", k.executionID, "delivery", k.delivery)
		return nil
	}
	if _, ok := w.unacked[k]; ok {
		s.addUnsent(k) // finished, but the server did not see the result yet
		return nil
	}
	// Beyond twice the slots held, or once attempts and unacknowledged results
	// fill a hello (a server that never acks; the credit never gets there):
	// refused, so that neither grows without bound.
	if len(w.attempts) >= 2*w.settings.slots || len(w.attempts)+len(w.unacked) >= maxHelloEntries {
		w.limited.log(w.log, "beyond credit", slog.LevelError, "assignment beyond this worker's credit refused",
			"execution_id", k.executionID, "delivery", k.delivery)
		if len(w.refused) >= maxRefused {
			w.forgetRefusedLocked(s)
			return lost("protocol error: more than %d assignments beyond the credit unacknowledged", maxRefused)
		}
		w.refused[k] = struct{}{}
		w.recordLocked(k, &tickwheelv1.ExecutionResult{
			ExecutionId: k.executionID,
			Delivery:    k.delivery,
			Attempt:     a.GetAttempt(),
			Outcome:     tickwheelv1.ResultOutcome_RESULT_OUTCOME_FAILED_RETRYABLE,
			Error:       cleanText(fmt.Sprintf("worker %s over capacity: the assignment exceeded its credit", w.settings.workerID), errorMaxBytes),
		})
		return nil
	}
	at := newAttempt(a)
	w.attempts[k] = at
	w.running.Add(1)
	go w.runAttempt(at)
	return nil
}

// forgetRefusedLocked drops every refusal not yet acknowledged (the server
// hands those executions out again once their deliveries time out); the
// results of real attempts stay.
func (w *Worker) forgetRefusedLocked(s *session) {
	for k := range w.refused {
		delete(w.unacked, k)
		delete(s.unsentSet, k)
	}
	clear(w.refused)
	w.notifyLocked()
}

func (w *Worker) applyAcksLocked(s *session, acks []*tickwheelv1.ResultAck) {
	for _, ack := range acks {
		k := key{ack.GetExecutionId(), ack.GetDelivery()}
		_, held := w.unacked[k]
		delete(w.unacked, k)
		delete(w.refused, k)
		delete(s.unsentSet, k)
		if !ack.GetAccepted() && held {
			w.limited.log(w.log, "result rejected", slog.LevelWarn, "the server rejected a result", "execution_id", k.executionID,
				"delivery", k.delivery, "reason", said(ack.GetReason(), w.credential))
		}
	}
	w.notifyLocked()
}

// nextResultsLocked takes up to resultsPerMessage results not yet sent on s.
func (w *Worker) nextResultsLocked(s *session) []*tickwheelv1.ExecutionResult {
	var batch []*tickwheelv1.ExecutionResult
	taken := 0
	for taken < len(s.unsent) && len(batch) < resultsPerMessage {
		k := s.unsent[taken]
		taken++
		if _, ok := s.unsentSet[k]; !ok {
			continue // acknowledged meanwhile
		}
		delete(s.unsentSet, k)
		if result, ok := w.unacked[k]; ok {
			batch = append(batch, result)
		}
	}
	s.unsent = s.unsent[taken:]
	if len(s.unsent) == 0 {
		s.unsent = nil // let the array go
	}
	return batch
}

// grantableLocked is the credit to grant now: enough that what the server
// may send plus what the worker holds reaches slots, none while stopping,
// draining or closing, and never so much that a hello could not list
// everything held.
func (w *Worker) grantableLocked(s *session) int {
	if w.stopping || s.draining || s.closing || w.isShutdown() {
		return 0
	}
	credit := w.settings.slots - len(w.attempts) - s.outstanding
	credit = min(credit, maxHelloEntries-len(w.attempts)-len(w.unacked)-s.outstanding)
	return max(0, credit)
}

// helloLocked lists every attempt not yet decided, then every result not
// yet acknowledged, so that the new stream re-attaches their deliveries and
// takes their results.
func (w *Worker) helloLocked() *tickwheelv1.WorkerHello {
	held := w.inFlightLocked()
	sortKeys(held)
	seen := make(map[key]struct{}, len(held))
	for _, k := range held {
		seen[k] = struct{}{}
	}
	unacked := make([]key, 0, len(w.unacked))
	for k := range w.unacked {
		if _, ok := seen[k]; !ok {
			unacked = append(unacked, k)
		}
	}
	sortKeys(unacked)
	held = append(held, unacked...)
	if len(held) > maxHelloEntries {
		held = held[:maxHelloEntries]
	}
	inFlight := make([]*tickwheelv1.InFlightExecution, len(held))
	for i, k := range held {
		inFlight[i] = &tickwheelv1.InFlightExecution{ExecutionId: k.executionID, Delivery: k.delivery}
	}
	return &tickwheelv1.WorkerHello{
		WorkerId: w.settings.workerID,
		Version:  Version,
		Handlers: w.handlerNames(),
		Http:     false,
		Slots:    int32(w.settings.slots),
		InFlight: inFlight,
	}
}

func (w *Worker) heartbeatLocked() *tickwheelv1.WorkerHeartbeat {
	keys := w.inFlightLocked()
	sortKeys(keys)
	beat := &tickwheelv1.WorkerHeartbeat{Executions: make([]*tickwheelv1.ExecutionProgress, len(keys))}
	for i, k := range keys {
		beat.Executions[i] = &tickwheelv1.ExecutionProgress{ExecutionId: k.executionID, Delivery: k.delivery, Progress: w.attempts[k].job.Progress()}
	}
	return beat
}

func sortKeys(keys []key) {
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].executionID != keys[j].executionID {
			return keys[i].executionID < keys[j].executionID
		}
		return keys[i].delivery < keys[j].delivery
	})
}

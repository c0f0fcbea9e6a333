package worker

// A scripted WorkerService for the worker's protocol tests: real gRPC
// servers (the generated stubs) on in-memory listeners, one per address,
// whose Pull streams the test drives one message at a time.

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	tickwheelv1 "github.com/tickwheel/tickwheel/sdk/go/gen/tickwheel/v1"
)

const waitLimit = 5 * time.Second

// fakeStream is one Pull stream as the test sees it.
type fakeStream struct {
	t        *testing.T
	address  string
	metadata metadata.MD
	server   tickwheelv1.WorkerService_PullServer
	inbox    chan *tickwheelv1.PullRequest // closed when the worker half-closes or the stream ends
	end      chan error                    // what the server ends the stream with
	sendMu   sync.Mutex

	mu       sync.Mutex
	received []*tickwheelv1.PullRequest
}

// expect returns the next message of the kind of want (a *PullRequest_X),
// skipping (but recording) others; fails the test after waitLimit or when
// the worker closes its side first.
func expect[M any](s *fakeStream) M {
	s.t.Helper()
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	for {
		select {
		case request, ok := <-s.inbox:
			if !ok {
				var zero M
				s.t.Fatalf("the worker closed stream %s before sending %T", s.address, zero)
			}
			if m, ok := request.GetMessage().(M); ok {
				return m
			}
		case <-timer.C:
			var zero M
			s.t.Fatalf("no %T on stream %s within %v", zero, s.address, waitLimit)
		}
	}
}

func (s *fakeStream) send(response *tickwheelv1.PullResponse) {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	_ = s.server.Send(response)
}

func (s *fakeStream) welcome(interval time.Duration, rejected ...*tickwheelv1.InFlightExecution) {
	s.send(&tickwheelv1.PullResponse{Message: &tickwheelv1.PullResponse_Welcome{Welcome: &tickwheelv1.ServerWelcome{
		ServerId:          "fake-" + s.address,
		HeartbeatInterval: durationpb.New(interval),
		HeartbeatTimeout:  durationpb.New(10 * interval),
		Rejected:          rejected,
	}}})
}

func (s *fakeStream) assign(assignments ...*tickwheelv1.Assignment) {
	s.send(&tickwheelv1.PullResponse{Message: &tickwheelv1.PullResponse_Assignment{Assignment: &tickwheelv1.Assignments{Assignments: assignments}}})
}

func (s *fakeStream) ack(executionID string, delivery int32) {
	s.send(&tickwheelv1.PullResponse{Message: &tickwheelv1.PullResponse_Ack{Ack: &tickwheelv1.ResultAcks{Acks: []*tickwheelv1.ResultAck{
		{ExecutionId: executionID, Delivery: delivery, Accepted: true},
	}}}})
}

func (s *fakeStream) cancel(executionID string, delivery int32, reason string) {
	s.send(&tickwheelv1.PullResponse{Message: &tickwheelv1.PullResponse_Cancel{Cancel: &tickwheelv1.CancelExecutions{
		Executions: []*tickwheelv1.InFlightExecution{{ExecutionId: executionID, Delivery: delivery}}, Reason: reason,
	}}})
}

func (s *fakeStream) drain(deadline time.Time, reason string) {
	s.send(&tickwheelv1.PullResponse{Message: &tickwheelv1.PullResponse_Drain{Drain: &tickwheelv1.ServerDrain{
		DeadlineAt: timestamppb.New(deadline), Reason: reason,
	}}})
}

// fail ends the stream with a status.
func (s *fakeStream) fail(code codes.Code, message string) {
	s.end <- status.Error(code, message)
}

// waitHalfClosed waits until the worker has closed its side.
func (s *fakeStream) waitHalfClosed() {
	s.t.Helper()
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-s.inbox:
			if !ok {
				return
			}
		case <-timer.C:
			s.t.Fatalf("the worker did not close stream %s within %v", s.address, waitLimit)
		}
	}
}

// count is how many messages of kind were received so far (kind: "credit", "result", ...).
func (s *fakeStream) count(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.received {
		if strings.Contains(strings.ToLower(typeName(r.GetMessage())), kind) {
			n++
		}
	}
	return n
}

func typeName(v any) string {
	switch v.(type) {
	case *tickwheelv1.PullRequest_Hello:
		return "hello"
	case *tickwheelv1.PullRequest_Credit:
		return "credit"
	case *tickwheelv1.PullRequest_Heartbeat:
		return "heartbeat"
	case *tickwheelv1.PullRequest_Result:
		return "result"
	}
	return "?"
}

// fakeServer is a WorkerService per address whose streams arrive in next.
type fakeServer struct {
	t         *testing.T
	streams   chan *fakeStream
	listeners map[string]*bufconn.Listener
}

type fakeService struct {
	tickwheelv1.UnimplementedWorkerServiceServer
	address string
	server  *fakeServer
}

func (f *fakeService) Pull(server tickwheelv1.WorkerService_PullServer) error {
	md, _ := metadata.FromIncomingContext(server.Context())
	s := &fakeStream{
		t: f.server.t, address: f.address, metadata: md, server: server,
		inbox: make(chan *tickwheelv1.PullRequest, 10_000), end: make(chan error, 1),
	}
	go func() {
		defer close(s.inbox)
		for {
			request, err := server.Recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					// As the real server does once the worker's side is finished.
					select {
					case s.end <- nil:
					default:
					}
				}
				return
			}
			s.mu.Lock()
			s.received = append(s.received, request)
			s.mu.Unlock()
			s.inbox <- request
		}
	}()
	f.server.streams <- s
	select {
	case err := <-s.end:
		return err
	case <-server.Context().Done():
		return server.Context().Err()
	}
}

// newFakeServer serves WorkerService at each address (in memory).
func newFakeServer(t *testing.T, addresses ...string) *fakeServer {
	t.Helper()
	f := &fakeServer{t: t, streams: make(chan *fakeStream, 100), listeners: map[string]*bufconn.Listener{}}
	for _, address := range addresses {
		listener := bufconn.Listen(1 << 20)
		server := grpc.NewServer()
		tickwheelv1.RegisterWorkerServiceServer(server, &fakeService{address: address, server: f})
		go func() { _ = server.Serve(listener) }()
		t.Cleanup(server.Stop)
		f.listeners[address] = listener
	}
	return f
}

// dialer routes "passthrough:///ADDRESS" to ADDRESS's listener.
func (f *fakeServer) dialer() grpc.DialOption {
	return grpc.WithContextDialer(func(ctx context.Context, address string) (net.Conn, error) {
		listener, ok := f.listeners[address]
		if !ok {
			return nil, errors.New("no fake server at " + address)
		}
		return listener.DialContext(ctx)
	})
}

// next is the next Pull stream a worker opens.
func (f *fakeServer) next() *fakeStream {
	f.t.Helper()
	select {
	case s := <-f.streams:
		return s
	case <-time.After(waitLimit):
		f.t.Fatalf("no Pull stream within %v", waitLimit)
		return nil
	}
}

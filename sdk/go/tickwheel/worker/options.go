package worker

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	mathrand "math/rand/v2"
	"os"
	"regexp"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/tickwheel/tickwheel/sdk/go/tickwheel"
)

const (
	// MaxSlots is the most handlers a worker may run at once (the server's bound on hello.slots).
	MaxSlots = 10_000
	// DefaultSlots is the slots of a worker without [WithSlots].
	DefaultSlots = 4
)

var (
	workerIDPattern    = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)
	handlerNamePattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,200}$`)
)

// settings is what the Options of New set.
type settings struct {
	addresses               []string
	workerID                string
	slots                   int
	handlers                map[string]Handler
	tls                     *tickwheel.TLSOptions
	dialOptions             []grpc.DialOption
	reconnectInitialBackoff time.Duration
	reconnectMaxBackoff     time.Duration
	heartbeatInterval       time.Duration
	serverSilenceIntervals  int
	welcomeTimeout          time.Duration
	cancelGrace             time.Duration
	logger                  *slog.Logger
	// Uniform in [0, 1): the reconnect jitter (tests pin it).
	rand func() float64
	// Told of every reconnect wait before it starts (tests).
	onBackoff func(failures int, delay time.Duration)
	// The clock of the outage and rate-limited log lines (tests pin it).
	now func() time.Time
}

func defaults() settings {
	return settings{
		slots:                   DefaultSlots,
		handlers:                map[string]Handler{},
		reconnectInitialBackoff: 200 * time.Millisecond,
		reconnectMaxBackoff:     15 * time.Second,
		heartbeatInterval:       5 * time.Second,
		serverSilenceIntervals:  3,
		welcomeTimeout:          10 * time.Second,
		cancelGrace:             2 * time.Second,
		rand:                    mathrand.Float64,
		now:                     time.Now,
	}
}

// An Option configures a Worker; New reports a bad one.
type Option func(*settings) error

// WithHandler registers h under name (1 to 200 of [A-Za-z0-9_.:-]); the
// name goes in every hello, and the server assigns this worker only
// executions of the handlers it names. A name given twice is an error, so
// two packages cannot silently shadow each other.
func WithHandler(name string, h Handler) Option {
	return func(s *settings) error {
		if !handlerNamePattern.MatchString(name) {
			return fmt.Errorf("tickwheel worker: handler name %q must be 1 to 200 characters of [A-Za-z0-9_.:-]", name)
		}
		if h == nil {
			return fmt.Errorf("tickwheel worker: handler %q is nil", name)
		}
		if _, taken := s.handlers[name]; taken {
			return fmt.Errorf("tickwheel worker: handler %q is registered twice", name)
		}
		s.handlers[name] = h
		return nil
	}
}

// WithAddresses adds servers ("host:port", any gRPC target) to try after
// New's address: every reconnect moves to the next address of the list,
// round it.
func WithAddresses(addresses ...string) Option {
	return func(s *settings) error {
		for _, address := range addresses {
			if err := checkAddress(address); err != nil {
				return err
			}
		}
		s.addresses = append(s.addresses, addresses...)
		return nil
	}
}

// WithWorkerID sets the worker's id: stable for this process across
// reconnects, unique in the fleet, 1 to 128 of [A-Za-z0-9_.:-]. The default
// is "<host>-<pid>-<6 random hex>".
func WithWorkerID(id string) Option {
	return func(s *settings) error {
		if !workerIDPattern.MatchString(id) {
			return errors.New("tickwheel worker: the worker id must be 1 to 128 characters of [A-Za-z0-9_.:-]")
		}
		s.workerID = id
		return nil
	}
}

// WithSlots sets how many handlers run at once, 1 to [MaxSlots] (default
// 4); it is also the initial credit of every stream.
func WithSlots(n int) Option {
	return func(s *settings) error {
		if n < 1 || n > MaxSlots {
			return fmt.Errorf("tickwheel worker: slots must be between 1 and %d, not %d", MaxSlots, n)
		}
		s.slots = n
		return nil
	}
}

// WithTLS connects over TLS, or mutual TLS when the options carry a client
// certificate (the default is plaintext). The client's
// [tickwheel.TLSFromFiles] reads them from PEM files.
func WithTLS(options tickwheel.TLSOptions) Option {
	return func(s *settings) error {
		if _, err := options.TransportCredentials(); err != nil {
			return err
		}
		s.tls = &options
		return nil
	}
}

// WithDialOptions adds gRPC dial options, after the worker's own.
func WithDialOptions(options ...grpc.DialOption) Option {
	return func(s *settings) error {
		s.dialOptions = append(s.dialOptions, options...)
		return nil
	}
}

// WithReconnectBackoff bounds the wait before a reconnect: the first waits
// uniform in [0, initial], each further one without a welcome doubles the
// bound, up to max (default 200 ms and 15 s).
func WithReconnectBackoff(initial, max time.Duration) Option {
	return func(s *settings) error {
		if initial <= 0 || max < initial {
			return errors.New("tickwheel worker: the reconnect backoff needs 0 < initial <= max")
		}
		s.reconnectInitialBackoff, s.reconnectMaxBackoff = initial, max
		return nil
	}
}

// WithHeartbeatInterval sets the heartbeat interval used when the welcome
// does not give one (default 5 s).
func WithHeartbeatInterval(d time.Duration) Option {
	return func(s *settings) error {
		if d <= 0 {
			return errors.New("tickwheel worker: the heartbeat interval must be positive")
		}
		s.heartbeatInterval = d
		return nil
	}
}

// WithServerSilenceIntervals sets after how many heartbeat intervals
// without any message from the server it is presumed dead (default 3).
func WithServerSilenceIntervals(n int) Option {
	return func(s *settings) error {
		if n < 1 {
			return errors.New("tickwheel worker: the server silence must be at least 1 interval")
		}
		s.serverSilenceIntervals = n
		return nil
	}
}

// WithWelcomeTimeout sets how long a new stream may take to be welcomed,
// connecting included (default 10 s).
func WithWelcomeTimeout(d time.Duration) Option {
	return func(s *settings) error {
		if d <= 0 {
			return errors.New("tickwheel worker: the welcome timeout must be positive")
		}
		s.welcomeTimeout = d
		return nil
	}
}

// WithCancelGrace sets how long a handler whose execution the server
// canceled has to return before CANCELED is reported (default 2 s; 0
// reports it at once). The outcome is CANCELED either way.
func WithCancelGrace(d time.Duration) Option {
	return func(s *settings) error {
		if d < 0 {
			return errors.New("tickwheel worker: the cancel grace must not be negative")
		}
		s.cancelGrace = d
		return nil
	}
}

// WithLogger sets where the worker reports connections, drains and failed
// handlers (default slog.Default()).
func WithLogger(logger *slog.Logger) Option {
	return func(s *settings) error {
		if logger == nil {
			return errors.New("tickwheel worker: the logger is nil")
		}
		s.logger = logger
		return nil
	}
}

func checkAddress(address string) error {
	if address == "" || address != strings.TrimSpace(address) || strings.ContainsAny(address, "\r\n\x00,") {
		return fmt.Errorf("tickwheel worker: address %q must be one host:port (or gRPC target) without spaces or commas", address)
	}
	return nil
}

func checkCredential(credential string) error {
	if credential == "" {
		return errors.New("tickwheel worker: a worker credential is required")
	}
	if credential != strings.TrimSpace(credential) || strings.ContainsAny(credential, "\r\n\x00") {
		return errors.New("tickwheel worker: the credential must be one line without surrounding spaces")
	}
	return nil
}

// DefaultWorkerID is "<hostname>-<pid>-<6 random hex>": unique per process,
// readable in logs.
func DefaultWorkerID() string {
	host, _ := os.Hostname()
	host = regexp.MustCompile(`[^A-Za-z0-9_.:-]`).ReplaceAllString(host, "-")
	if host == "" {
		host = "worker"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	suffix := fmt.Sprintf("-%d-%x", os.Getpid(), b)
	if len(host) > 128-len(suffix) {
		host = host[:128-len(suffix)]
	}
	return host + suffix
}

// ReconnectDelay is the wait before reconnect attempt failures+1, where
// failures counts the consecutive attempts that got no welcome (0 right
// after a welcomed session, so a drained worker comes back quickly), given
// u uniform in [0, 1): u·min(max, initial·2^failures) (full jitter, so a
// fleet that lost the same server does not reconnect in step). Pure: the
// client's [tickwheel.RetryOptions.Backoff], the one backoff of the SDK.
func ReconnectDelay(failures int, initial, max time.Duration, u float64) time.Duration {
	if failures < 0 {
		failures = 0
	}
	return tickwheel.RetryOptions{InitialBackoff: initial, MaxBackoff: max}.Backoff(failures+1, u)
}

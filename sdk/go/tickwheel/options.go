package tickwheel

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"

	tickwheelv1 "github.com/tickwheel/tickwheel/sdk/go/gen/tickwheel/v1"
)

// RetryOptions says how a call that failed with a retryable status is
// retried. Only calls that are safe to repeat are ever retried: reads, and
// writes made idempotent by a request id (CreateJob, TriggerJob) or a dry
// run. Other writes (UpdateJob, DeleteJob, ...) fail on the first error,
// because a reply lost after the server committed would otherwise apply them
// twice.
//
// Retry n (from 1) waits a uniformly random time in
// [0, min(MaxBackoff, InitialBackoff·2^(n-1))] (full jitter), and never past
// the call's deadline.
type RetryOptions struct {
	// Attempts in total, including the first; 1 disables retries.
	MaxAttempts int
	// The upper bound of the first retry's wait.
	InitialBackoff time.Duration
	// The cap of any single wait.
	MaxBackoff time.Duration
	// Status codes that may be retried. UNAVAILABLE means the request did not
	// reach a server that could act on it, or the connection broke.
	RetryableCodes []codes.Code
}

// DefaultRetry is five attempts with waits bounded by 0.2 s, 0.4 s, 0.8 s and
// 1.6 s, on UNAVAILABLE only.
var DefaultRetry = RetryOptions{
	MaxAttempts:    5,
	InitialBackoff: 200 * time.Millisecond,
	MaxBackoff:     5 * time.Second,
	RetryableCodes: []codes.Code{codes.Unavailable},
}

// NoRetry makes every call a single attempt.
var NoRetry = RetryOptions{MaxAttempts: 1}

func (r RetryOptions) validate() error {
	if r.MaxAttempts < 1 {
		return errors.New("tickwheel: RetryOptions.MaxAttempts must be at least 1")
	}
	if r.InitialBackoff < 0 || r.MaxBackoff < r.InitialBackoff {
		return errors.New("tickwheel: RetryOptions needs 0 <= InitialBackoff <= MaxBackoff")
	}
	return nil
}

// Backoff is the wait before retry number retry (1 for the first retry),
// given u drawn uniformly from [0, 1): u·min(MaxBackoff, InitialBackoff·2^(retry-1)).
// It is pure, so tests pin u.
func (r RetryOptions) Backoff(retry int, u float64) time.Duration {
	if retry < 1 {
		panic("tickwheel: retries count from 1")
	}
	ceiling := r.MaxBackoff
	// Doubling past the cap would overflow; stop as soon as it reaches it.
	if step := retry - 1; step < 62 && r.InitialBackoff <= r.MaxBackoff>>step {
		ceiling = r.InitialBackoff << step
	}
	return time.Duration(u * float64(ceiling))
}

func (r RetryOptions) retryable(code codes.Code) bool {
	for _, c := range r.RetryableCodes {
		if c == code {
			return true
		}
	}
	return false
}

// TLSOptions is TLS for the connection to the server. Without it the client
// connects in plaintext.
type TLSOptions struct {
	// PEM CA bundle that signs the server's certificate; empty uses the
	// system roots.
	RootCAs []byte
	// PEM client certificate chain, for servers that require mutual TLS.
	// Must be given together with PrivateKey.
	CertificateChain []byte
	// PEM private key of CertificateChain.
	PrivateKey []byte
	// Overrides the host name checked against the server's certificate;
	// empty checks the address's host.
	ServerName string
}

// TLSFromFiles reads PEM files; an empty name leaves that part unset. It
// fails when a file cannot be read or when only one of the client
// certificate and key is given.
func TLSFromFiles(caFile, certFile, keyFile string) (TLSOptions, error) {
	var t TLSOptions
	for _, f := range []struct {
		name string
		into *[]byte
	}{{caFile, &t.RootCAs}, {certFile, &t.CertificateChain}, {keyFile, &t.PrivateKey}} {
		if f.name == "" {
			continue
		}
		data, err := os.ReadFile(f.name)
		if err != nil {
			return TLSOptions{}, fmt.Errorf("tickwheel: TLS: %w", err)
		}
		*f.into = data
	}
	return t, t.validate()
}

func (t TLSOptions) validate() error {
	if (len(t.CertificateChain) == 0) != (len(t.PrivateKey) == 0) {
		return errors.New("tickwheel: TLSOptions: CertificateChain and PrivateKey go together")
	}
	return nil
}

// TransportCredentials is t as gRPC transport credentials (TLS 1.2 or
// newer), for a connection made elsewhere, such as the worker's
// (package tickwheel/worker). It fails as [WithTLS] does on bad options.
func (t TLSOptions) TransportCredentials() (credentials.TransportCredentials, error) {
	return t.transportCredentials()
}

func (t TLSOptions) transportCredentials() (credentials.TransportCredentials, error) {
	if err := t.validate(); err != nil {
		return nil, err
	}
	config := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if len(t.RootCAs) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(t.RootCAs) {
			return nil, errors.New("tickwheel: TLSOptions.RootCAs holds no PEM certificate")
		}
		config.RootCAs = pool
	}
	if len(t.CertificateChain) > 0 {
		pair, err := tls.X509KeyPair(t.CertificateChain, t.PrivateKey)
		if err != nil {
			return nil, fmt.Errorf("tickwheel: TLSOptions client certificate: %w", err)
		}
		config.Certificates = []tls.Certificate{pair}
	}
	return credentials.NewTLS(config), nil
}

// settings is what the Options of New set.
type settings struct {
	apiKey      string
	adminToken  string
	tls         *TLSOptions
	timeout     time.Duration
	retry       RetryOptions
	dialOptions []grpc.DialOption
	// For tests: how the client waits between retries and draws jitter.
	sleep func(ctxDone <-chan struct{}, d time.Duration) bool
	rand  func() float64
}

// An Option configures a Client.
type Option func(*settings) error

// WithAPIKey sets the tenant API key sent as "authorization: Bearer <key>" on
// every call. Without one the server answers UNAUTHENTICATED.
func WithAPIKey(key string) Option {
	return func(s *settings) error {
		if err := checkCredential("API key", key); err != nil {
			return err
		}
		s.apiKey = key
		return nil
	}
}

// WithAdminToken sets the admin token that AdminService calls send as
// "authorization: Bearer <token>" (SchedulerService calls send the API key).
func WithAdminToken(token string) Option {
	return func(s *settings) error {
		if err := checkCredential("admin token", token); err != nil {
			return err
		}
		s.adminToken = token
		return nil
	}
}

// credentialFor is the bearer credential a call to method carries.
func (s *settings) credentialFor(method string) string {
	if strings.HasPrefix(method, "/"+tickwheelv1.AdminService_ServiceDesc.ServiceName+"/") {
		return s.adminToken
	}
	return s.apiKey
}

func checkCredential(what, value string) error {
	if value != strings.TrimSpace(value) || strings.ContainsAny(value, "\r\n\x00") {
		return fmt.Errorf("tickwheel: the %s must be one line without surrounding spaces", what)
	}
	return nil
}

// WithTLS connects over TLS (the default is plaintext).
func WithTLS(options TLSOptions) Option {
	return func(s *settings) error {
		if err := options.validate(); err != nil {
			return err
		}
		s.tls = &options
		return nil
	}
}

// WithTimeout sets how long each call may take in total, retries and their
// waits included (default 10 s); 0 means no deadline beyond the context's.
// A context deadline that comes first still wins.
func WithTimeout(d time.Duration) Option {
	return func(s *settings) error {
		if d < 0 {
			return errors.New("tickwheel: the timeout must not be negative")
		}
		s.timeout = d
		return nil
	}
}

// WithRetryOptions replaces DefaultRetry; NoRetry disables retries.
func WithRetryOptions(r RetryOptions) Option {
	return func(s *settings) error {
		if err := r.validate(); err != nil {
			return err
		}
		s.retry = r
		return nil
	}
}

// WithDialOptions adds gRPC dial options, after the client's own.
func WithDialOptions(options ...grpc.DialOption) Option {
	return func(s *settings) error {
		s.dialOptions = append(s.dialOptions, options...)
		return nil
	}
}

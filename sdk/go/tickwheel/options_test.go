package tickwheel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/reflect/protoreflect"

	tickwheelv1 "github.com/tickwheel/tickwheel/sdk/go/gen/tickwheel/v1"
)

func TestEverySchedulerAndAdminRPCHasARetryDecision(t *testing.T) {
	seen := map[string]bool{}
	for _, service := range []protoreflect.ServiceDescriptor{
		tickwheelv1.File_tickwheel_v1_scheduler_proto.Services().ByName("SchedulerService"),
		tickwheelv1.File_tickwheel_v1_admin_proto.Services().ByName("AdminService"),
	} {
		methods := service.Methods()
		for i := range methods.Len() {
			name := "/" + string(service.FullName()) + "/" + string(methods.Get(i).Name())
			seen[name] = true
			if repeatable[name] == nil {
				t.Errorf("%s has no entry in repeatable: decide whether it may be retried", name)
			}
		}
	}
	for name := range repeatable {
		if !seen[name] {
			t.Errorf("repeatable names %s, which neither service has", name)
		}
	}
}

func TestBackoffIsFullJitterUnderADoublingCap(t *testing.T) {
	r := DefaultRetry
	cases := []struct {
		retry int
		u     float64
		want  time.Duration
	}{
		{1, 0, 0},
		{1, 0.5, 100 * time.Millisecond},
		{2, 0.5, 200 * time.Millisecond},
		{5, 0.5, 1600 * time.Millisecond},
		{6, 0.5, 2500 * time.Millisecond}, // 6.4 s capped at 5 s
		{200, 0.5, 2500 * time.Millisecond},
	}
	for _, c := range cases {
		if got := r.Backoff(c.retry, c.u); got != c.want {
			t.Errorf("Backoff(%d, %v) = %v, want %v", c.retry, c.u, got, c.want)
		}
	}
}

func TestOptionsAreCheckedWhenTheClientIsBuilt(t *testing.T) {
	bad := []struct {
		name   string
		option Option
		want   string
	}{
		{"api key with a newline", WithAPIKey("twk_a\nb"), "one line"},
		{"admin token with a NUL", WithAdminToken("twa_a\x00b"), "one line"},
		{"negative timeout", WithTimeout(-time.Second), "negative"},
		{"no attempts", WithRetryOptions(RetryOptions{}), "MaxAttempts"},
		{"cap below base", WithRetryOptions(RetryOptions{MaxAttempts: 2, InitialBackoff: time.Second}), "InitialBackoff"},
		{"certificate without key", WithTLS(TLSOptions{CertificateChain: []byte("x")}), "go together"},
	}
	for _, c := range bad {
		if _, err := New("127.0.0.1:1", c.option); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one mentioning %q", c.name, err, c.want)
		}
	}
	if _, err := New(""); err == nil {
		t.Error("an empty address must be refused")
	}
	if _, err := New("127.0.0.1:1", WithTLS(TLSOptions{RootCAs: []byte("not PEM")})); err == nil {
		t.Error("a CA bundle without a certificate must be refused")
	}
	client, err := New("127.0.0.1:1", WithTLS(TLSOptions{}), WithRetryOptions(NoRetry))
	if err != nil {
		t.Fatalf("TLS with the system roots: %v", err)
	}
	_ = client.Close()
}

func TestTLSFromFiles(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := TLSFromFiles(ca, "", "")
	if err != nil || string(got.RootCAs) != "-----BEGIN CERTIFICATE-----\n" {
		t.Fatalf("TLSFromFiles = %v, %v", got, err)
	}
	if _, err := TLSFromFiles(filepath.Join(dir, "missing.pem"), "", ""); err == nil {
		t.Fatal("a missing file must be an error")
	}
	if _, err := TLSFromFiles("", ca, ""); err == nil || !strings.Contains(err.Error(), "go together") {
		t.Fatalf("a certificate without its key: err = %v", err)
	}
}

func TestRetryableCodes(t *testing.T) {
	if !DefaultRetry.retryable(codes.Unavailable) || DefaultRetry.retryable(codes.DeadlineExceeded) {
		t.Fatal("DefaultRetry retries UNAVAILABLE only")
	}
}

package worker

import (
	"fmt"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"

	tickwheelv1 "github.com/tickwheel/tickwheel/sdk/go/gen/tickwheel/v1"
)

// What the worker keeps of a server's assignment, bounded field by field:
// the bounds of the Python worker (tickwheel_worker.bounds), the
// TypeScript worker (src/bounds.ts) and the Java worker, in characters
// (code points). A worker holds up to 2·slots assignments and their
// unacknowledged results for as long as they run, so a broken or hostile
// server could otherwise make it hold ids of megabytes or payloads of the
// whole receive limit each. The bounds are far above what a server that
// keeps the contract sends; an assignment past one is a protocol error,
// which ends the stream, and nothing of its message is taken.
const (
	// maxIDChars is the longest execution id (at least 1 character), job
	// id, tenant or traceparent an assignment may carry (the server makes
	// execution ids of at most 256 characters, tenant names of 63).
	maxIDChars = 1024
	// maxHandlerChars is the contract's bound of a handler name.
	maxHandlerChars = 200
	// maxPayloadBytes: a job's payload reaches the server in a request of
	// at most 4 MiB (gRPC's default).
	maxPayloadBytes = 4 << 20
	// An HTTP target's URL, method and headers (count; names and values in
	// all), as the contract bounds them. This worker runs no HTTP target
	// (it says http: false), but it holds the assignment until it has
	// answered it.
	maxURLChars     = 2048
	maxMethodChars  = 16
	maxHeaders      = 32
	maxHeadersChars = 16 * 1024
)

// protobuf's Timestamp range: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z.
const (
	minTimestampSeconds = -62_135_596_800
	maxTimestampSeconds = 253_402_300_799
)

// overChars is the characters of text when they are more than limit, else
// -1 (a length in bytes is never below one in characters).
func overChars(text string, limit int) int {
	if len(text) <= limit {
		return -1
	}
	if n := utf8.RuneCountInString(text); n > limit {
		return n
	}
	return -1
}

// assignmentBreach is what of a is out of bounds, as the end of a protocol
// error's line; "" when nothing is. The words are the other workers'.
func assignmentBreach(a *tickwheelv1.Assignment) string {
	if a.GetExecutionId() == "" {
		return "an assignment with an execution id of 0 characters"
	}
	for _, field := range [...]struct{ name, value string }{
		{"an execution id", a.GetExecutionId()}, {"a job id", a.GetJobId()}, {"a tenant", a.GetTenant()},
		{"a traceparent", a.GetTraceparent()},
	} {
		if n := overChars(field.value, maxIDChars); n >= 0 {
			return fmt.Sprintf("an assignment with %s of %d characters", field.name, n)
		}
	}
	if n := len(a.GetPayload()); n > maxPayloadBytes {
		return fmt.Sprintf("an assignment with a payload of %d bytes", n)
	}
	if h := a.GetTarget().GetHandler(); h != nil {
		if n := overChars(h.GetName(), maxHandlerChars); n >= 0 {
			return fmt.Sprintf("an assignment with a handler name of %d characters", n)
		}
	}
	if http := a.GetTarget().GetHttp(); http != nil {
		if n := overChars(http.GetUrl(), maxURLChars); n >= 0 {
			return fmt.Sprintf("an assignment with an HTTP URL of %d characters", n)
		}
		if n := overChars(http.GetMethod(), maxMethodChars); n >= 0 {
			return fmt.Sprintf("an assignment with an HTTP method of %d characters", n)
		}
		headers := http.GetHeaders()
		if len(headers) > maxHeaders {
			return fmt.Sprintf("an assignment with %d HTTP headers", len(headers))
		}
		bytes := 0
		for name, value := range headers {
			bytes += len(name) + len(value)
		}
		if bytes > maxHeadersChars {
			chars := 0
			for name, value := range headers {
				chars += utf8.RuneCountInString(name) + utf8.RuneCountInString(value)
			}
			if chars > maxHeadersChars {
				return fmt.Sprintf("an assignment with HTTP headers of %d characters", chars)
			}
		}
	}
	return ""
}

// timeOf is ts as a time; one out of protobuf's range (a broken server's)
// as the nearest instant in it, as the other workers read it: a year-1
// deadline has passed, one beyond 9999 never comes (Go's own conversion of
// a huge one would wrap round to a year long past).
func timeOf(ts *timestamppb.Timestamp) time.Time {
	seconds := min(max(ts.GetSeconds(), minTimestampSeconds), maxTimestampSeconds)
	nanos := min(max(ts.GetNanos(), 0), 999_999_999)
	return time.Unix(seconds, int64(nanos)).UTC()
}

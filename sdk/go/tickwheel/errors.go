package tickwheel

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// FieldViolation is one invalid field of a request, from a
// google.rpc.BadRequest: Field is the path within the request
// ("job.schedule.cron.expression"), Description says what is wrong with it.
type FieldViolation struct {
	Field       string
	Description string
}

func (v FieldViolation) String() string {
	if v.Field == "" {
		return v.Description
	}
	return v.Field + ": " + v.Description
}

// Error is a failed call to a Tickwheel server: the gRPC status code, the
// server's message, and the details the server put in the
// grpc-status-details-bin trailer (a google.rpc.Status): BadRequest field
// violations for INVALID_ARGUMENT, PreconditionFailure for
// FAILED_PRECONDITION, QuotaFailure for RESOURCE_EXHAUSTED.
//
// status.Code(err) and status.FromError(err) work on it. Error() is one
// line: "CODE: field: description; ..." followed by the message in
// parentheses when it adds something, or "CODE: message" when there are no
// violations.
type Error struct {
	// The gRPC status code.
	Code codes.Code
	// The status message as the server sent it (may be empty).
	Message string
	// The BadRequest violations, in the server's order; empty when the server
	// sent none.
	FieldViolations []FieldViolation
	// Every detail message the server attached: *errdetails.BadRequest,
	// *errdetails.PreconditionFailure, *errdetails.QuotaFailure, ... where the
	// type is known, otherwise the raw *anypb.Any.
	Details []proto.Message

	status *status.Status
}

// CodeName is the canonical name of a status code, as the other Tickwheel
// SDKs and grpcurl print it ("INVALID_ARGUMENT"; Go's codes.Code.String says
// "InvalidArgument").
func CodeName(c codes.Code) string {
	return code.Code(c).String()
}

func (e *Error) Error() string {
	parts := make([]string, len(e.FieldViolations))
	for i, v := range e.FieldViolations {
		parts[i] = v.String()
	}
	text := strings.Join(parts, "; ")
	message := strings.Join(strings.Fields(e.Message), " ") // one line, whatever the server sent
	switch {
	case text == "" && message == "":
		text = "(no message)"
	case text == "":
		text = message
	case message != "" && !strings.Contains(text, message):
		text += " (" + message + ")"
	}
	return CodeName(e.Code) + ": " + text
}

// GRPCStatus lets status.FromError and status.Code read the error.
func (e *Error) GRPCStatus() *status.Status {
	if e.status == nil {
		return status.New(e.Code, e.Message)
	}
	return e.status
}

// AsError returns err as an *Error: itself when it is one (or wraps one),
// otherwise built from its gRPC status. A context error becomes CANCELED or
// DEADLINE_EXCEEDED; any other error without a status, UNKNOWN. A nil err
// gives nil.
//
// A details trailer that does not decode is ignored rather than masking the
// status code.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	s, ok := status.FromError(err)
	if !ok && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		s = status.FromContextError(err)
	}
	e = &Error{Code: s.Code(), Message: s.Message(), status: s}
	for _, packed := range s.Proto().GetDetails() {
		detail, err := packed.UnmarshalNew()
		if err != nil { // a type this program does not link in
			e.Details = append(e.Details, proto.Clone(packed).(*anypb.Any))
			continue
		}
		e.Details = append(e.Details, detail)
		if bad, ok := detail.(*errdetails.BadRequest); ok {
			for _, v := range bad.GetFieldViolations() {
				e.FieldViolations = append(e.FieldViolations, FieldViolation{v.GetField(), v.GetDescription()})
			}
		}
	}
	return e
}

package tickwheel

import (
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"

	tickwheelv1 "github.com/tickwheel/tickwheel/sdk/go/gen/tickwheel/v1"
)

// AnswerTooLargeReason is the ErrorInfo reason of a batch call the server
// refused, before writing anything, because its answer would be larger than
// a default client reads (over 3 MiB): INVALID_ARGUMENT "items". Send fewer
// items, or ask for [tickwheelv1.JobView_JOB_VIEW_BASIC].
const AnswerTooLargeReason = "BATCH_ANSWER_TOO_LARGE"

// BatchOption changes how [Client.CreateJobs] and [Client.UpdateJobs] call.
type BatchOption func(*batchOptions)

type batchOptions struct {
	view tickwheelv1.JobView
}

// WithJobView sets how much of each job the calls answer:
// JOB_VIEW_BASIC its identity and state only (no payload, target or
// schedule), JOB_VIEW_FULL (the default) the whole job.
func WithJobView(view tickwheelv1.JobView) BatchOption {
	return func(o *batchOptions) { o.view = view }
}

func batchOptionsOf(opts []BatchOption) batchOptions {
	var o batchOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// IsAnswerTooLarge reports whether err is the server's refusal of a batch
// call for the size of its answer ([AnswerTooLargeReason]): nothing of the
// call was written.
func IsAnswerTooLarge(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	for _, detail := range e.Details {
		if info, ok := detail.(*errdetails.ErrorInfo); ok && info.GetReason() == AnswerTooLargeReason {
			return true
		}
	}
	return false
}

// halving sends items through send, which answers their results; a call
// refused for the size of its answer (nothing written) is sent again as its
// two halves, in order, until each answer fits. A refused single item, or
// any other error, is returned with the results of the calls before it.
func halving[Item, Result any](items []Item, send func([]Item) ([]Result, error)) ([]Result, error) {
	results, err := send(items)
	if err == nil || len(items) < 2 || !IsAnswerTooLarge(err) {
		return results, err
	}
	middle := len(items) / 2
	first, err := halving(items[:middle], send)
	if err != nil {
		return first, err
	}
	second, err := halving(items[middle:], send)
	return append(first, second...), err
}

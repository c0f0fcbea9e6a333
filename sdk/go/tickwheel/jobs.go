package tickwheel

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	tickwheelv1 "github.com/tickwheel/tickwheel/sdk/go/gen/tickwheel/v1"
)

// The helpers below only assemble messages: validation that needs the
// schedule engine (is this cron expression valid, is this zone known) stays
// on the server, which answers INVALID_ARGUMENT naming the field.

// Overlap policies: what happens when an occurrence comes due while the
// previous one still runs.
const (
	OverlapSkip     = tickwheelv1.OverlapPolicy_OVERLAP_POLICY_SKIP
	OverlapQueueOne = tickwheelv1.OverlapPolicy_OVERLAP_POLICY_QUEUE_ONE
	OverlapAllow    = tickwheelv1.OverlapPolicy_OVERLAP_POLICY_ALLOW
	OverlapReplace  = tickwheelv1.OverlapPolicy_OVERLAP_POLICY_REPLACE
)

// Misfire policies: what happens to occurrences missed by more than the
// misfire threshold.
const (
	MisfireRunOnce = tickwheelv1.MisfirePolicy_MISFIRE_POLICY_RUN_ONCE
	MisfireRunAll  = tickwheelv1.MisfirePolicy_MISFIRE_POLICY_RUN_ALL
	MisfireSkip    = tickwheelv1.MisfirePolicy_MISFIRE_POLICY_SKIP
)

// Handler is a target that runs the handler a worker registered under name.
func Handler(name string) *tickwheelv1.Target {
	return &tickwheelv1.Target{Kind: &tickwheelv1.Target_Handler{Handler: &tickwheelv1.HandlerTarget{Name: name}}}
}

// HTTP is a target that POSTs the payload to url.
func HTTP(url string) *tickwheelv1.Target {
	return HTTPRequest("", url, nil)
}

// HTTPRequest is a target that sends the payload to url with method (empty
// means POST) and extra headers.
func HTTPRequest(method, url string, headers map[string]string) *tickwheelv1.Target {
	return &tickwheelv1.Target{Kind: &tickwheelv1.Target_Http{Http: &tickwheelv1.HttpTarget{Url: url, Method: method, Headers: headers}}}
}

// A JobOption sets one field of a job built by CronJob, OnceJob or LocalJob.
// Unset fields take the server's defaults (jitter in [0, 60 s) for cron jobs
// and none for one-off jobs, 5 attempts, overlap skip, misfire run-once).
type JobOption func(*tickwheelv1.Job)

// CronJob is a recurring job: the five-field cron expression in the IANA
// zone ("UTC" for UTC), calling target.
func CronJob(name, expression, zone string, target *tickwheelv1.Target, options ...JobOption) *tickwheelv1.Job {
	return job(name, &tickwheelv1.Schedule{Kind: &tickwheelv1.Schedule_Cron{
		Cron: &tickwheelv1.CronSchedule{Expression: expression, TimeZone: zone},
	}}, target, options)
}

// OnceJob is a one-off job at the instant at. An instant already past runs
// at once when within the misfire threshold (default 60 s), otherwise as the
// misfire policy says.
func OnceJob(name string, at time.Time, target *tickwheelv1.Target, options ...JobOption) *tickwheelv1.Job {
	return job(name, &tickwheelv1.Schedule{Kind: &tickwheelv1.Schedule_OnceAt{OnceAt: timestamppb.New(at)}}, target, options)
}

// LocalJob is a one-off job at a local wall time ("2027-03-28T02:30:00", no
// offset) in the IANA zone, resolved by the job's DST policy when that wall
// time is skipped or repeated.
func LocalJob(name, localTime, zone string, target *tickwheelv1.Target, options ...JobOption) *tickwheelv1.Job {
	return job(name, &tickwheelv1.Schedule{Kind: &tickwheelv1.Schedule_Local{
		Local: &tickwheelv1.LocalTimeSchedule{LocalTime: localTime, TimeZone: zone},
	}}, target, options)
}

func job(name string, schedule *tickwheelv1.Schedule, target *tickwheelv1.Target, options []JobOption) *tickwheelv1.Job {
	j := &tickwheelv1.Job{Name: name, Schedule: schedule, Target: target}
	for _, option := range options {
		option(j)
	}
	return j
}

// Payload sets the bytes handed to the target with every execution.
func Payload(payload []byte) JobOption {
	return func(j *tickwheelv1.Job) { j.Payload = payload }
}

// Retry sets the retry policy: maxAttempts in total (1 disables retries),
// attempt n ≥ 2 waiting uniformly in [0, min(maxBackoff, initial·2^(n-2))].
// Zero values take the server's defaults (5 attempts, 1 s, 1 h).
func Retry(maxAttempts int32, initial, maxBackoff time.Duration) JobOption {
	return func(j *tickwheelv1.Job) {
		policy := &tickwheelv1.RetryPolicy{MaxAttempts: maxAttempts}
		if initial > 0 {
			policy.InitialBackoff = durationpb.New(initial)
		}
		if maxBackoff > 0 {
			policy.MaxBackoff = durationpb.New(maxBackoff)
		}
		j.RetryPolicy = policy
	}
}

// Overlap sets what happens when an occurrence comes due while the previous
// one still runs (OverlapSkip, OverlapQueueOne, OverlapAllow, OverlapReplace).
func Overlap(policy tickwheelv1.OverlapPolicy) JobOption {
	return func(j *tickwheelv1.Job) { j.OverlapPolicy = policy }
}

// Misfire sets what happens to occurrences missed by more than the misfire
// threshold (MisfireRunOnce, MisfireRunAll, MisfireSkip).
func Misfire(policy tickwheelv1.MisfirePolicy) JobOption {
	return func(j *tickwheelv1.Job) { j.MisfirePolicy = policy }
}

// MisfireThreshold sets how late an occurrence may be at claim time before
// it counts as missed (default 60 s).
func MisfireThreshold(d time.Duration) JobOption {
	return func(j *tickwheelv1.Job) { j.MisfireThreshold = durationpb.New(d) }
}

// LatenessThreshold sets how long after its due instant an occurrence may
// stay unstarted before an alert (default 5 minutes; 0 disables it).
func LatenessThreshold(d time.Duration) JobOption {
	return func(j *tickwheelv1.Job) { j.LatenessThreshold = durationpb.New(d) }
}

// Jitter sets the window of the stable delay added to each nominal instant.
func Jitter(window time.Duration) JobOption {
	return func(j *tickwheelv1.Job) { j.Jitter = &tickwheelv1.Jitter{Window: durationpb.New(window)} }
}

// Exact turns jitter off: the due instant is the nominal instant.
func Exact() JobOption {
	return func(j *tickwheelv1.Job) { j.Jitter = &tickwheelv1.Jitter{Exact: true} }
}

// Timeout sets how long one attempt may run (default 5 minutes, at most 6 h).
func Timeout(d time.Duration) JobOption {
	return func(j *tickwheelv1.Job) { j.Timeout = durationpb.New(d) }
}

// StartAt sets the instant before which no occurrence is nominally.
func StartAt(t time.Time) JobOption {
	return func(j *tickwheelv1.Job) { j.StartAt = timestamppb.New(t) }
}

// EndAt sets the instant at or after which no occurrence is nominally.
func EndAt(t time.Time) JobOption {
	return func(j *tickwheelv1.Job) { j.EndAt = timestamppb.New(t) }
}

// MaxRuns completes the job after n occurrences were created.
func MaxRuns(n int64) JobOption {
	return func(j *tickwheelv1.Job) { j.MaxRuns = n }
}

// DST sets how wall times skipped or repeated by a daylight-saving
// transition are treated; the UNSPECIFIED values keep AUTO (cronie's rule).
func DST(gap tickwheelv1.DstGapPolicy, repeat tickwheelv1.DstRepeatPolicy) JobOption {
	return func(j *tickwheelv1.Job) { j.DstPolicy = &tickwheelv1.DstPolicy{Gap: gap, Repeat: repeat} }
}

// ConcurrencyKey adds a limit shared by every job of the tenant naming key.
func ConcurrencyKey(key string, limit int32) JobOption {
	return func(j *tickwheelv1.Job) {
		j.ConcurrencyKeys = append(j.ConcurrencyKeys, &tickwheelv1.ConcurrencyKey{Key: key, Limit: limit})
	}
}

// Label adds a free-form label.
func Label(key, value string) JobOption {
	return func(j *tickwheelv1.Job) {
		if j.Labels == nil {
			j.Labels = map[string]string{}
		}
		j.Labels[key] = value
	}
}

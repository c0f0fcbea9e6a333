package tickwheel

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	tickwheelv1 "github.com/tickwheel/tickwheel/sdk/go/gen/tickwheel/v1"
)

func TestCronJobWithPolicies(t *testing.T) {
	got := CronJob("nightly-report", "0 2 * * *", "Europe/London", Handler("reports.nightly"),
		Retry(3, time.Second, time.Minute), Overlap(OverlapQueueOne), Misfire(MisfireSkip),
		Exact(), Payload([]byte(`{"k":1}`)), Label("team", "billing"), ConcurrencyKey("ledger", 1))
	want := &tickwheelv1.Job{
		Name: "nightly-report",
		Schedule: &tickwheelv1.Schedule{Kind: &tickwheelv1.Schedule_Cron{
			Cron: &tickwheelv1.CronSchedule{Expression: "0 2 * * *", TimeZone: "Europe/London"},
		}},
		Target: &tickwheelv1.Target{Kind: &tickwheelv1.Target_Handler{Handler: &tickwheelv1.HandlerTarget{Name: "reports.nightly"}}},
		RetryPolicy: &tickwheelv1.RetryPolicy{
			MaxAttempts: 3, InitialBackoff: durationpb.New(time.Second), MaxBackoff: durationpb.New(time.Minute),
		},
		OverlapPolicy:   tickwheelv1.OverlapPolicy_OVERLAP_POLICY_QUEUE_ONE,
		MisfirePolicy:   tickwheelv1.MisfirePolicy_MISFIRE_POLICY_SKIP,
		Jitter:          &tickwheelv1.Jitter{Exact: true},
		Payload:         []byte(`{"k":1}`),
		Labels:          map[string]string{"team": "billing"},
		ConcurrencyKeys: []*tickwheelv1.ConcurrencyKey{{Key: "ledger", Limit: 1}},
	}
	if !proto.Equal(got, want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
}

func TestRetryLeavesZeroBackoffsToTheServer(t *testing.T) {
	got := CronJob("j", "* * * * *", "UTC", Handler("echo"), Retry(1, 0, 0)).GetRetryPolicy()
	if got.GetMaxAttempts() != 1 || got.GetInitialBackoff() != nil || got.GetMaxBackoff() != nil {
		t.Fatalf("retry policy = %v", got)
	}
}

func TestOnceJobAtAnInstantWithAnHTTPTarget(t *testing.T) {
	at := time.Date(2027, 3, 28, 1, 30, 0, 0, time.FixedZone("CET", 3600))
	got := OnceJob("ping", at, HTTPRequest("PUT", "https://example.com/hook", map[string]string{"X-Team": "a"}),
		Timeout(30*time.Second), Jitter(5*time.Second))
	if !got.GetSchedule().GetOnceAt().AsTime().Equal(at) || got.GetSchedule().GetOnceAt().AsTime().Hour() != 0 {
		t.Fatalf("once_at = %v, want %v as UTC", got.GetSchedule().GetOnceAt(), at)
	}
	http := got.GetTarget().GetHttp()
	if http.GetUrl() != "https://example.com/hook" || http.GetMethod() != "PUT" || http.GetHeaders()["X-Team"] != "a" {
		t.Fatalf("target = %v", got.GetTarget())
	}
	if got.GetTimeout().AsDuration() != 30*time.Second || got.GetJitter().GetWindow().AsDuration() != 5*time.Second {
		t.Fatalf("job = %v", got)
	}
	if HTTP("https://example.com/a").GetHttp().GetMethod() != "" {
		t.Fatal("HTTP leaves the method to the server's default (POST)")
	}
}

func TestLocalJobAndWindow(t *testing.T) {
	start := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	got := LocalJob("wake", "2027-03-28T02:30:00", "Europe/Berlin", Handler("echo"),
		DST(tickwheelv1.DstGapPolicy_DST_GAP_POLICY_SKIP, tickwheelv1.DstRepeatPolicy_DST_REPEAT_POLICY_UNSPECIFIED),
		StartAt(start), EndAt(start.Add(time.Hour)), MaxRuns(4),
		MisfireThreshold(2*time.Minute), LatenessThreshold(0))
	local := got.GetSchedule().GetLocal()
	if local.GetLocalTime() != "2027-03-28T02:30:00" || local.GetTimeZone() != "Europe/Berlin" {
		t.Fatalf("schedule = %v", got.GetSchedule())
	}
	if got.GetDstPolicy().GetGap() != tickwheelv1.DstGapPolicy_DST_GAP_POLICY_SKIP || got.GetMaxRuns() != 4 {
		t.Fatalf("job = %v", got)
	}
	if !proto.Equal(got.GetStartAt(), timestamppb.New(start)) || got.GetEndAt().AsTime().Sub(start) != time.Hour {
		t.Fatalf("window = %v .. %v", got.GetStartAt(), got.GetEndAt())
	}
	if got.GetMisfireThreshold().AsDuration() != 2*time.Minute || got.GetLatenessThreshold() == nil {
		t.Fatalf("thresholds = %v, %v", got.GetMisfireThreshold(), got.GetLatenessThreshold())
	}
}

func TestNewRequestIDIsAVersion4UUID(t *testing.T) {
	a, b := NewRequestID(), NewRequestID()
	if a == b || len(a) != 36 || a[14] != '4' || a[8] != '-' {
		t.Fatalf("request ids %q, %q", a, b)
	}
}

// Command history creates a job through the Go SDK, waits for its first
// execution to end, and prints the job's history.
//
// Against `tickwheel dev` (its built-in worker serves the "echo" handler):
//
//	go run ./examples/history -address 127.0.0.1:50051 -api-key "$(jq -r .api_key .tickwheel/dev-credentials.json)"
//
// By default the job is a one-off three seconds ahead; -cron makes it a
// recurring job instead; -preview N prints the job's next N fires (after
// -after, default now) and creates nothing. -ca, -cert and -key connect over
// TLS (mutual with -cert and -key). Each step prints one JSON object on a
// line:
//
//	{"event":"created","job_id":"job_…","next_run_at":"…"}
//	{"event":"history","job_id":"job_…","executions":[{"id":"…","status":"EXECUTION_STATUS_SUCCEEDED","attempts":[…]}]}
//	{"event":"preview","fires":[{"nominal_at":"…","local_time":"…","note":""}]}
//
// A failed call prints {"event":"error","code":"INVALID_ARGUMENT","message":…,"field_violations":[…]}
// and exits with status 1; no finished execution within -wait exits with 2.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"time"

	tickwheelv1 "github.com/tickwheel/tickwheel/sdk/go/gen/tickwheel/v1"
	"github.com/tickwheel/tickwheel/sdk/go/tickwheel"
)

type attempt struct {
	Attempt   int32   `json:"attempt"`
	Status    string  `json:"status"`
	WorkerID  string  `json:"worker_id"`
	LatenessS float64 `json:"lateness_seconds"`
	Error     string  `json:"error,omitempty"`
}

type execution struct {
	ID        string    `json:"id"`
	Status    string    `json:"status"`
	NominalAt string    `json:"nominal_at"`
	Attempts  []attempt `json:"attempts"`
}

func main() {
	address := flag.String("address", env("TICKWHEEL_ADDRESS", "127.0.0.1:50051"), "server host:port")
	apiKey := flag.String("api-key", os.Getenv("TICKWHEEL_API_KEY"), "tenant API key")
	handler := flag.String("handler", "echo", "handler target the job calls")
	in := flag.Duration("in", 3*time.Second, "run the one-off job this far ahead")
	cron := flag.String("cron", "", "a cron expression: create a recurring job instead of a one-off")
	zone := flag.String("tz", "UTC", "IANA time zone of -cron")
	wait := flag.Duration("wait", time.Minute, "how long to wait for the first execution to end")
	preview := flag.Int("preview", 0, "print this many next fires of the job instead of creating it")
	after := flag.String("after", "", "with -preview: fires after this RFC 3339 instant (default now)")
	caFile := flag.String("ca", "", "PEM CA bundle of the server's certificate: connect over TLS")
	certFile := flag.String("cert", "", "PEM client certificate, for mutual TLS")
	keyFile := flag.String("key", "", "PEM key of -cert")
	flag.Parse()

	options := []tickwheel.Option{tickwheel.WithAPIKey(*apiKey)}
	if *caFile != "" || *certFile != "" {
		tls, err := tickwheel.TLSFromFiles(*caFile, *certFile, *keyFile)
		if err != nil {
			fail(err)
		}
		options = append(options, tickwheel.WithTLS(tls))
	}
	client, err := tickwheel.New(*address, options...)
	if err != nil {
		fail(err)
	}
	defer client.Close()
	ctx := context.Background()

	job := tickwheel.OnceJob("example-history", time.Now().Add(*in), tickwheel.Handler(*handler),
		tickwheel.Payload([]byte(`{"from":"go"}`)), tickwheel.Retry(3, time.Second, 10*time.Second))
	if *cron != "" {
		job = tickwheel.CronJob("example-history", *cron, *zone, tickwheel.Handler(*handler))
	}
	if *preview > 0 {
		start := time.Now()
		if *after != "" {
			if start, err = time.Parse(time.RFC3339, *after); err != nil {
				fail(err)
			}
		}
		fires, err := client.PreviewAfter(ctx, job, start, int32(*preview))
		if err != nil {
			fail(err)
		}
		rows := []map[string]string{}
		for _, fire := range fires {
			rows = append(rows, map[string]string{
				"nominal_at": fire.GetNominalAt().AsTime().Format(time.RFC3339Nano),
				"local_time": fire.GetLocalTime(),
				"note":       fire.GetNote(),
			})
		}
		emit(map[string]any{"event": "preview", "fires": rows})
		return
	}
	created, err := client.CreateJob(ctx, &tickwheelv1.CreateJobRequest{Job: job})
	if err != nil {
		fail(err)
	}
	jobID := created.GetJob().GetId()
	emit(map[string]any{
		"event":       "created",
		"job_id":      jobID,
		"next_run_at": created.GetJob().GetNextRunAt().AsTime().Format(time.RFC3339Nano),
	})

	deadline := time.Now().Add(*wait)
	for {
		history, finished, err := readHistory(ctx, client, jobID)
		if err != nil {
			fail(err)
		}
		if finished || time.Now().After(deadline) {
			emit(map[string]any{"event": "history", "job_id": jobID, "executions": history})
			if !finished {
				os.Exit(2)
			}
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// readHistory reads every execution of the job, newest first, and says
// whether one of them has ended.
func readHistory(ctx context.Context, client *tickwheel.Client, jobID string) ([]execution, bool, error) {
	history := []execution{}
	finished := false
	for e, err := range client.Executions(ctx, &tickwheelv1.ListExecutionsRequest{JobId: jobID}) {
		if err != nil {
			return nil, false, err
		}
		switch e.GetStatus() {
		case tickwheelv1.ExecutionStatus_EXECUTION_STATUS_SUCCEEDED,
			tickwheelv1.ExecutionStatus_EXECUTION_STATUS_DEAD,
			tickwheelv1.ExecutionStatus_EXECUTION_STATUS_CANCELED:
			finished = true
		}
		row := execution{
			ID:        e.GetId(),
			Status:    e.GetStatus().String(),
			NominalAt: e.GetNominalAt().AsTime().Format(time.RFC3339Nano),
			Attempts:  []attempt{},
		}
		for _, a := range e.GetAttempts() {
			row.Attempts = append(row.Attempts, attempt{
				Attempt:   a.GetAttempt(),
				Status:    a.GetStatus().String(),
				WorkerID:  a.GetWorkerId(),
				LatenessS: a.GetLateness().AsDuration().Seconds(),
				Error:     a.GetError(),
			})
		}
		history = append(history, row)
	}
	return history, finished, nil
}

func fail(err error) {
	failure := tickwheel.AsError(err)
	violations := []map[string]string{}
	for _, v := range failure.FieldViolations {
		violations = append(violations, map[string]string{"field": v.Field, "description": v.Description})
	}
	emit(map[string]any{
		"event":            "error",
		"code":             tickwheel.CodeName(failure.Code),
		"message":          failure.Message,
		"field_violations": violations,
	})
	os.Exit(1)
}

func emit(value any) {
	line, err := json.Marshal(value)
	if err != nil {
		panic(err)
	}
	os.Stdout.Write(append(line, '\n'))
}

func env(name, fallback string) string {
	if value := os.Getenv(name); value != "" {
		return value
	}
	return fallback
}

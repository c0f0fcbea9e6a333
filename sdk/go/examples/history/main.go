// Command history creates a job through the Go SDK, waits for its first
// execution to end, and prints the job's history.
//
// Against `tickwheel dev` (its built-in worker serves the "echo" handler):
//
//	go run ./examples/history -address 127.0.0.1:50051 -api-key "$(jq -r .api_key .tickwheel/dev-credentials.json)"
//
// By default the job is a one-off three seconds ahead; -cron makes it a
// recurring job instead; -preview N prints the job's next N fires (after
// -after, default now) and creates nothing; -batch N creates N such jobs in
// one CreateJobs (request ids <-request-prefix>-<i> when a prefix is given;
// -invalid-at I gives job I the cron expression "61 * * * *") and prints one
// line per job. -ca, -cert and -key connect over TLS (mutual with -cert and
// -key). Each step prints one JSON object on a line:
//
//	{"event":"created","job_id":"job_…","next_run_at":"…"}
//	{"event":"batch","index":0,"request_id":"…","job_id":"job_…","created":true}
//	{"event":"batch","index":1,"request_id":"…","code":"INVALID_ARGUMENT","field_violations":[…]}
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
	"fmt"
	"os"
	"time"

	"google.golang.org/protobuf/proto"

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
	batch := flag.Int("batch", 0, "create this many jobs in one CreateJobs and print each result")
	requestPrefix := flag.String("request-prefix", "", "with -batch: request ids <prefix>-<index> (default fresh ones)")
	invalidAt := flag.Int("invalid-at", -1, "with -batch: the job at this index gets an invalid cron expression")
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
	if *batch > 0 {
		createBatch(ctx, client, job, *batch, *requestPrefix, *invalidAt)
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

// createBatch creates count copies of job named example-batch-<i> through
// CreateJobs and prints one line per result, in order.
func createBatch(ctx context.Context, client *tickwheel.Client, job *tickwheelv1.Job, count int, requestPrefix string, invalidAt int) {
	requests := make([]*tickwheelv1.CreateJobRequest, count)
	for i := range requests {
		copied := proto.CloneOf(job)
		copied.Name = fmt.Sprintf("example-batch-%d", i)
		if i == invalidAt {
			copied.Schedule = &tickwheelv1.Schedule{Kind: &tickwheelv1.Schedule_Cron{Cron: &tickwheelv1.CronSchedule{Expression: "61 * * * *", TimeZone: "UTC"}}}
		}
		requests[i] = &tickwheelv1.CreateJobRequest{Job: copied}
		if requestPrefix != "" {
			requests[i].RequestId = fmt.Sprintf("%s-%d", requestPrefix, i)
		}
	}
	results, err := client.CreateJobs(ctx, requests)
	if err != nil {
		fail(err)
	}
	for i, result := range results {
		row := map[string]any{"event": "batch", "index": i, "request_id": result.RequestID}
		if result.Err != nil {
			failure := tickwheel.AsError(result.Err)
			row["code"] = tickwheel.CodeName(failure.Code)
			row["field_violations"] = violations(failure)
		} else {
			row["job_id"] = result.Job.GetId()
			row["created"] = result.Created
		}
		emit(row)
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
	emit(map[string]any{
		"event":            "error",
		"code":             tickwheel.CodeName(failure.Code),
		"message":          failure.Message,
		"field_violations": violations(failure),
	})
	os.Exit(1)
}

func violations(failure *tickwheel.Error) []map[string]string {
	out := []map[string]string{}
	for _, v := range failure.FieldViolations {
		out = append(out, map[string]string{"field": v.Field, "description": v.Description})
	}
	return out
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

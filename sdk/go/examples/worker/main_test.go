package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tickwheel/tickwheel/sdk/go/tickwheel/worker"
)

func run(t *testing.T, ctx context.Context, payload string) ([]byte, error, []map[string]any) {
	t.Helper()
	var buffer bytes.Buffer
	out := &events{out: &buffer}
	output, err := echo(out)(ctx, &worker.Job{ExecutionID: "job_1:2030-01-01T00:00:00.000000Z", Delivery: 2, Attempt: 3, Payload: []byte(payload)})
	var lines []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(buffer.String(), "\n"), "\n") {
		var event map[string]any
		if err := json.Unmarshal([]byte(line), &event); err != nil {
			t.Fatalf("stdout line %q is not a JSON object", line)
		}
		lines = append(lines, event)
	}
	return output, err, lines
}

func kinds(lines []map[string]any) string {
	var names []string
	for _, line := range lines {
		names = append(names, fmt.Sprint(line["event"]))
	}
	return strings.Join(names, ",")
}

func TestEchoOutputsThePayloadAsIs(t *testing.T) {
	for _, payload := range []string{`{"hello":"go","n":[1,2]}`, "not json \x00\xff", "", `{"sleep_ms":"10"}`, `{"sleep_ms":1.5}`, `[1]`} {
		output, err, lines := run(t, context.Background(), payload)
		if err != nil || string(output) != payload {
			t.Fatalf("payload %q: output %q, err %v", payload, output, err)
		}
		if kinds(lines) != "started,finished" {
			t.Fatalf("events %v", lines)
		}
		started := lines[0]
		if started["execution_id"] != "job_1:2030-01-01T00:00:00.000000Z" || started["delivery"] != 2.0 || started["attempt"] != 3.0 || len(started) != 4 {
			t.Fatalf("started = %v", started)
		}
	}
}

func TestEchoFailsAsAskedAfterItsSleep(t *testing.T) {
	begin := time.Now()
	_, err, _ := run(t, context.Background(), `{"sleep_ms": 30, "fail": "permanent"}`)
	var permanent *worker.PermanentError
	if !errors.As(err, &permanent) || err.Error() != "asked to fail" || time.Since(begin) < 30*time.Millisecond {
		t.Fatalf("permanent: %v after %v", err, time.Since(begin))
	}
	_, err, _ = run(t, context.Background(), `{"fail": "retryable"}`)
	if err == nil || errors.As(err, &permanent) || err.Error() != "asked to fail" {
		t.Fatalf("retryable: %v", err)
	}
}

func TestACanceledSleepEndsAtOnceAndSaysSo(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(fmt.Errorf("%w: by request", worker.ErrCanceled))
	begin := time.Now()
	_, err, lines := run(t, ctx, `{"sleep_ms": 60000}`)
	if !errors.Is(err, worker.ErrCanceled) || time.Since(begin) > 10*time.Second {
		t.Fatalf("err %v after %v", err, time.Since(begin))
	}
	if kinds(lines) != "started,canceled,finished" || len(lines[1]) != 2 || lines[1]["execution_id"] != "job_1:2030-01-01T00:00:00.000000Z" {
		t.Fatalf("events %v", lines)
	}
}

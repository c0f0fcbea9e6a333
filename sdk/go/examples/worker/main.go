// Command worker is the Go example worker: it serves one handler, echo-go,
// over the Pull stream (package tickwheel/worker). Start it with the run
// script beside it:
//
//	sdk/go/examples/worker/run --dev .tickwheel      # beside `tickwheel dev --data .tickwheel`
//	TICKWHEEL_ADDRESS=host:port TICKWHEEL_WORKER_CREDENTIAL=... sdk/go/examples/worker/run
//
// The address (several separated by commas: the worker moves to the next
// when its server goes away) and credential come from TICKWHEEL_ADDRESS and
// TICKWHEEL_WORKER_CREDENTIAL, else from --dev DIR (DIR/dev-credentials.json,
// written by `tickwheel dev --data DIR`); TICKWHEEL_SLOTS sets the handlers
// run at once (default 4). --tls-ca, --tls-cert and --tls-key connect over
// TLS or mutual TLS. A missing address or credential: one line on stderr,
// exit 2.
//
// echo-go outputs its payload as is. When the payload is a JSON object
// with an integer "sleep_ms", it first waits that long (ending the wait at
// once when the execution is canceled); with "fail": "retryable" or
// "permanent" it then fails that way, with the message "asked to fail".
//
// Stdout carries one JSON object per line and nothing else: "started"
// (execution_id, delivery, attempt) when the handler starts, "canceled"
// when it sees its cancellation, "finished" when it returns or fails. Logs
// go to stderr. SIGTERM (or SIGINT) drains: no new work, in-flight handlers
// finish and their results are acknowledged, within 30 s; then exit 0.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tickwheel/tickwheel/sdk/go/tickwheel"
	"github.com/tickwheel/tickwheel/sdk/go/tickwheel/worker"
)

const (
	handlerName = "echo-go"
	drainGrace  = 30 * time.Second
)

// events writes one JSON object per line, each at once (stdout is unbuffered).
type events struct {
	mu  sync.Mutex
	out io.Writer
}

func (e *events) emit(fields map[string]any) {
	line, err := json.Marshal(fields)
	if err != nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	_, _ = e.out.Write(append(line, '\n'))
}

// instructions is what echo-go reads from a payload that is a JSON object.
type instructions struct {
	sleep time.Duration
	fail  string
}

func parse(payload []byte) instructions {
	var object map[string]json.RawMessage
	decoder := json.NewDecoder(bytes.NewReader(payload))
	decoder.UseNumber()
	if decoder.Decode(&object) != nil {
		return instructions{}
	}
	var got instructions
	if raw, ok := object["sleep_ms"]; ok {
		var number json.Number
		if json.Unmarshal(raw, &number) == nil {
			if ms, err := strconv.ParseInt(number.String(), 10, 64); err == nil && ms > 0 {
				got.sleep = time.Duration(min(ms, int64(1<<62)/int64(time.Millisecond))) * time.Millisecond
			}
		}
	}
	if raw, ok := object["fail"]; ok {
		_ = json.Unmarshal(raw, &got.fail)
	}
	return got
}

func echo(out *events) worker.Handler {
	return func(ctx context.Context, job *worker.Job) ([]byte, error) {
		out.emit(map[string]any{"event": "started", "execution_id": job.ExecutionID, "delivery": job.Delivery, "attempt": job.Attempt})
		defer out.emit(map[string]any{"event": "finished", "execution_id": job.ExecutionID})
		do := parse(job.Payload)
		if do.sleep > 0 {
			timer := time.NewTimer(do.sleep)
			select {
			case <-timer.C:
			case <-ctx.Done():
				timer.Stop()
				out.emit(map[string]any{"event": "canceled", "execution_id": job.ExecutionID})
				return nil, context.Cause(ctx)
			}
		}
		switch do.fail {
		case "retryable":
			return nil, errors.New("asked to fail")
		case "permanent":
			return nil, worker.Permanent(errors.New("asked to fail"))
		}
		return job.Payload, nil
	}
}

// usage ends the program: a one-line error on stderr, exit 2.
func usage(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "worker: "+format+"\n", args...)
	os.Exit(2)
}

// connection is the address and credential: the environment first, then --dev DIR.
func connection(dev string) (address, credential string) {
	address = os.Getenv("TICKWHEEL_ADDRESS")
	credential = os.Getenv("TICKWHEEL_WORKER_CREDENTIAL")
	if dev != "" && (address == "" || credential == "") {
		path := filepath.Join(dev, "dev-credentials.json")
		data, err := os.ReadFile(path)
		if err != nil {
			usage("--dev %s: cannot read %s (is `tickwheel dev --data %s` running?)", dev, path, dev)
		}
		var saved struct {
			Address          string `json:"address"`
			WorkerCredential string `json:"worker_credential"`
		}
		if err := json.Unmarshal(data, &saved); err != nil {
			usage("--dev %s: %s is not a JSON object of credentials", dev, path)
		}
		if address == "" {
			address = saved.Address
		}
		if credential == "" {
			credential = saved.WorkerCredential
		}
	}
	if address == "" {
		usage("no server address: set TICKWHEEL_ADDRESS or give --dev DIR")
	}
	if credential == "" {
		usage("no worker credential: set TICKWHEEL_WORKER_CREDENTIAL or give --dev DIR")
	}
	return address, credential
}

func main() {
	dev := flag.String("dev", "", "read the address and worker credential from `DIR`/dev-credentials.json")
	ca := flag.String("tls-ca", "", "use TLS, trusting this PEM CA bundle (`FILE`)")
	cert := flag.String("tls-cert", "", "PEM client certificate for mutual TLS (`FILE`, with --tls-key)")
	key := flag.String("tls-key", "", "PEM private key of --tls-cert (`FILE`)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: run [--dev DIR] [--tls-ca FILE] [--tls-cert FILE --tls-key FILE]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		usage("unexpected argument %q", flag.Arg(0))
	}
	address, credential := connection(*dev)
	slots := worker.DefaultSlots
	if text := os.Getenv("TICKWHEEL_SLOTS"); text != "" {
		n, err := strconv.Atoi(text)
		if err != nil || n < 1 || n > worker.MaxSlots {
			usage("TICKWHEEL_SLOTS must be an integer from 1 to %d, not %q", worker.MaxSlots, text)
		}
		slots = n
	}

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	out := &events{out: os.Stdout}
	options := []worker.Option{worker.WithSlots(slots), worker.WithLogger(logger), worker.WithHandler(handlerName, echo(out))}
	if *ca != "" || *cert != "" || *key != "" {
		tls, err := tickwheel.TLSFromFiles(*ca, *cert, *key)
		if err != nil {
			usage("%v", err)
		}
		options = append(options, worker.WithTLS(tls))
	}
	// TICKWHEEL_ADDRESS may list several servers, separated by commas: the
	// worker moves to the next when its server goes away.
	addresses := strings.Split(address, ",")
	for i := range addresses {
		addresses[i] = strings.TrimSpace(addresses[i])
	}
	options = append(options, worker.WithAddresses(addresses[1:]...))
	w, err := worker.New(addresses[0], credential, options...)
	if err != nil {
		usage("%v", err)
	}

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		received := <-signals
		logger.Info("draining", "signal", received.String(), "grace", drainGrace)
		ctx, cancel := context.WithTimeout(context.Background(), drainGrace)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			logger.Warn("the drain grace ran out; in-flight work is left to the server", "error", err)
		}
	}()
	logger.Info("serving", "handler", handlerName, "address", address, "slots", slots, "worker_id", w.WorkerID())
	if err := w.Run(context.Background()); err != nil {
		logger.Error("worker stopped", "error", err)
		os.Exit(1)
	}
}

// Command createload makes CreateJob calls from many Go SDK clients at once
// and prints one JSON object: what loadtest/bench_create.py runs as its
// create_16_go phase, so that the clients' own CPU (a Python client's is
// most of a call's on this machine) weighs little beside the server's.
//
//	createload -address 127.0.0.1:50051[,127.0.0.1:50052…] -api-key KEY -calls 2000 -clients 16 -tag go
//
// Each client has a channel of its own and the SDK's default retries; with
// several addresses (a fleet of servers) client k calls address k % N, as
// a client-side balancer would spread them. The
// jobs are those bench_create.py creates: handler "echo", cron "0 3 1 1 *"
// in UTC, payload {"bench": true}, named <tag>-<i>, request id <tag>-<i>.
// The output:
//
//	{"calls":2000,"clients":16,"seconds":…,"jobs_per_s":…,"failures":0,
//	 "failures_by_code":{},"latency_ms":{"p50":…,"p90":…,"p99":…,"max":…},"cpu_s":…,
//	 "ok_by_address":{"127.0.0.1:50051":…}}
//
// cpu_s is this process's user and system CPU over the calls. Exit status 2
// for bad flags, 1 when the clients cannot be made.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc/status"

	tickwheelv1 "github.com/tickwheel/tickwheel/sdk/go/gen/tickwheel/v1"
	"github.com/tickwheel/tickwheel/sdk/go/tickwheel"
)

type report struct {
	Calls          int                `json:"calls"`
	Clients        int                `json:"clients"`
	Seconds        float64            `json:"seconds"`
	JobsPerS       float64            `json:"jobs_per_s"`
	Failures       int                `json:"failures"`
	FailuresByCode map[string]int     `json:"failures_by_code"`
	LatencyMs      map[string]float64 `json:"latency_ms"`
	CPUS           float64            `json:"cpu_s"`
	OKByAddress    map[string]int     `json:"ok_by_address"`
}

func cpuSeconds() float64 {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano()).Seconds()
}

func job(name string) *tickwheelv1.Job {
	return &tickwheelv1.Job{
		Name: name,
		Schedule: &tickwheelv1.Schedule{Kind: &tickwheelv1.Schedule_Cron{
			Cron: &tickwheelv1.CronSchedule{Expression: "0 3 1 1 *", TimeZone: "UTC"},
		}},
		Target: &tickwheelv1.Target{Kind: &tickwheelv1.Target_Handler{
			Handler: &tickwheelv1.HandlerTarget{Name: "echo"},
		}},
		Payload: []byte(`{"bench": true}`),
	}
}

// percentile is the nearest-rank percentile of sorted values.
func percentile(sorted []time.Duration, q float64) float64 {
	i := int(q*float64(len(sorted))+0.5) - 1
	i = max(0, min(i, len(sorted)-1))
	return float64(sorted[i].Microseconds()) / 1000
}

func main() {
	address := flag.String("address", "", "the server's host:port")
	apiKey := flag.String("api-key", "", "the tenant's API key")
	calls := flag.Int("calls", 2000, "CreateJob calls in all")
	clients := flag.Int("clients", 16, "clients calling at once")
	tag := flag.String("tag", "go", "the jobs' name and request-id prefix")
	flag.Parse()
	if *address == "" || *calls < 1 || *clients < 1 || *tag == "" {
		fmt.Fprintln(os.Stderr, "createload: -address is required; -calls, -clients and -tag must be positive/non-empty")
		os.Exit(2)
	}
	addresses := strings.Split(*address, ",")
	made := make([]*tickwheel.Client, *clients)
	okByAddress := make([]atomic.Int64, len(addresses))
	for i := range made {
		client, err := tickwheel.New(addresses[i%len(addresses)], tickwheel.WithAPIKey(*apiKey))
		if err != nil {
			fmt.Fprintln(os.Stderr, "createload:", err)
			os.Exit(1)
		}
		defer client.Close()
		made[i] = client
	}
	var next atomic.Int64
	var mu sync.Mutex
	failures := map[string]int{}
	latencies := make([]time.Duration, 0, *calls)
	var wg sync.WaitGroup
	cpuBefore := cpuSeconds()
	began := time.Now()
	for k, client := range made {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, *calls / *clients + 1)
			for {
				i := next.Add(1) - 1
				if i >= int64(*calls) {
					break
				}
				name := fmt.Sprintf("%s-%07d", *tag, i)
				start := time.Now()
				_, err := client.CreateJob(context.Background(), &tickwheelv1.CreateJobRequest{
					Job: job(name), RequestId: fmt.Sprintf("%s-%d", *tag, i),
				})
				mine = append(mine, time.Since(start))
				if err == nil {
					okByAddress[k%len(addresses)].Add(1)
				} else {
					mu.Lock()
					failures[status.Code(err).String()]++
					mu.Unlock()
				}
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	seconds := time.Since(began).Seconds()
	cpu := cpuSeconds() - cpuBefore
	sort.Slice(latencies, func(a, b int) bool { return latencies[a] < latencies[b] })
	failed := 0
	for _, n := range failures {
		failed += n
	}
	out := report{
		Calls: *calls, Clients: *clients, Seconds: seconds,
		JobsPerS: float64(*calls-failed) / seconds, Failures: failed, FailuresByCode: failures,
		LatencyMs: map[string]float64{
			"p50": percentile(latencies, 0.5), "p90": percentile(latencies, 0.9),
			"p99": percentile(latencies, 0.99), "max": percentile(latencies, 1),
		},
		CPUS: cpu, OKByAddress: map[string]int{},
	}
	for i, a := range addresses {
		out.OKByAddress[a] += int(okByAddress[i].Load())
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		os.Exit(1)
	}
}

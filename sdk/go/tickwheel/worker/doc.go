// Package worker runs Tickwheel jobs whose target is a named handler in a
// Go process: it holds one WorkerService.Pull stream at a time to a
// Tickwheel server and keeps it up, with the protocol of the Python worker
// runtime (tickwheel_worker) and the TypeScript worker. HTTP targets stay in
// the Python worker: this one says http: false in its hello, so the server
// never hands it one.
//
// Per stream (a session) the worker sends hello (on a reconnect, with the
// executions it still runs or holds an unacknowledged result for: a server
// counts a result only from the stream that holds its delivery, so the new
// stream must re-attach those too), waits for welcome, then:
//
//   - credit: hello.slots is the stream's initial credit. The worker tracks
//     the credit the server still holds and grants more only while
//     held + outstanding < slots, where held counts every assignment it has
//     not finished with (waiting for a slot, running, or decided with a
//     handler that has not yet returned). After a reconnect the executions
//     still running are held while the server's credit restarts at slots;
//     the worker never runs more than slots handlers at once (a semaphore),
//     lets the surplus wait for a slot, and grants nothing until
//     held + outstanding is back under slots. An assignment beyond 2·slots
//     held (a server ignoring credit) is answered FAILED_RETRYABLE at once;
//     more than 1 000 such answers unacknowledged end the stream as a
//     protocol error and are forgotten (the server hands those executions
//     out again; the results of real attempts are kept and sent on the next
//     stream).
//   - heartbeats: every welcome.heartbeat_interval (clamped to 50 ms – 5 min,
//     the bounds a server's configuration takes), listing every execution
//     not yet decided with the progress its handler last reported
//     ([Job.Heartbeat]).
//   - results: sent the moment each attempt's outcome is known, up to 100
//     per message, and kept until acknowledged; after a reconnect every
//     unacknowledged result is sent again (the server's result handling is
//     idempotent). An ack forgets the execution.
//   - cancel: the handler's context is canceled (its cause wraps
//     [ErrCanceled] with the server's reason); it gets the cancel grace to
//     return, then the attempt is reported CANCELED. welcome.rejected: the
//     context is canceled ([ErrRejected]) and nothing is reported: the
//     execution is someone else's now.
//   - deadline: at the assignment's deadline_at the context is canceled
//     ([ErrTimedOut]; ctx.Deadline reports the instant) and TIMED_OUT is
//     reported at once.
//   - drain: no more credit; when every attempt is decided and every result
//     acknowledged, or at the drain's deadline, the worker closes the stream
//     and reconnects (to the next address of its list), re-attaching what
//     still runs.
//   - server liveness: any message from the server counts; after
//     [WithServerSilenceIntervals] heartbeat intervals of silence the
//     server is presumed dead and the worker reconnects.
//
// Reconnects go round the address list ([WithAddresses]) and wait
// [ReconnectDelay]: full jitter, doubling per stream that got no welcome or
// ended within a heartbeat interval of it, capped ([WithReconnectBackoff]).
// A server that refuses the worker (UNAUTHENTICATED, PERMISSION_DENIED,
// INVALID_ARGUMENT, UNIMPLEMENTED) ends [Worker.Run] with a [*FatalError]
// (one ERROR line); any other failure is retried, logged as an outage: one
// WARNING when it begins, one after 1, 3, 7 and 15 minutes and every 15
// minutes, DEBUG in between, one INFO once a stream lasted a heartbeat
// interval. What a server may repeat at will (second welcomes, duplicate or
// surplus assignments, rejected results, drains, closes, an interval out of
// bounds) is a line of each kind a minute, the rest DEBUG; a server's text
// in any line is its first line, printable, at most 300 characters, the
// credential masked.
//
// An assignment message with a field over its bound (an execution id of 1
// to 1 024 characters; a job id, tenant or traceparent of 1 024; a handler
// name of 200; a payload of 4 MiB; an HTTP target's URL of 2 048, method of
// 16, 32 headers of 16 KiB in all) ends the stream as a protocol error and
// nothing of it is taken, as does a welcome's heartbeat interval or a
// drain's deadline out of protobuf's range; an assignment's timestamps out
// of it are read as the nearest instant in it (years 1 to 9999: a deadline
// beyond never comes); a cancel's reason is cut to 1 024 characters;
// a cancel or a welcome's rejected list costs one pass over the attempts
// however many entries it has.
//
// Nothing is queued without bound: outgoing messages are computed from
// state (results not yet sent, credit owed, a heartbeat due) by the one
// goroutine that writes the stream, and the state is bounded by what the
// worker holds: at most 2·slots attempts, results only for attempts it
// accepted (no credit is granted while attempts and unacknowledged results
// together would pass the 20 000 entries a hello may list, and an
// assignment arriving past that is refused), and at most 1 000 refusals.
//
// A handler returns the output (kept in history, at most 16 KiB; longer is
// cut) or an error: [Permanent] makes it FAILED_PERMANENT (dead-lettered at
// once), any other error FAILED_RETRYABLE (retried within the job's retry
// policy), as does a panic.
//
//	w, err := worker.New("127.0.0.1:50051", os.Getenv("TICKWHEEL_WORKER_CREDENTIAL"),
//		worker.WithHandler("reports.nightly", func(ctx context.Context, job *worker.Job) ([]byte, error) {
//			job.Heartbeat("rendering")
//			return render(ctx, job.Payload)
//		}))
//	if err != nil { log.Fatal(err) }
//	go func() {
//		<-sigterm
//		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
//		defer cancel()
//		_ = w.Stop(ctx) // drain: finish in-flight work, report it, then stop
//	}()
//	if err := w.Run(context.Background()); err != nil { log.Fatal(err) }
package worker

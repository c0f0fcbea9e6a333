// Package tickwheel is the Go client of the Tickwheel job scheduler: a thin
// hand-written layer over the generated tickwheel.v1 stubs in
// github.com/tickwheel/tickwheel/sdk/go/gen/tickwheel/v1 (package
// tickwheelv1, regenerated from proto/ by scripts/generate.sh and never
// edited).
//
// A [Client] has one method per SchedulerService RPC. Each sends the request
// with "authorization: Bearer <API key>", within the client's deadline, and
// returns the response message unchanged. A failed call returns an [*Error]
// carrying the status code and the BadRequest field violations the server
// put in the grpc-status-details-bin trailer.
//
// Retries: UNAVAILABLE (by default) is retried with exponential backoff and
// full jitter, within the deadline, and only for calls that are safe to
// repeat: reads, CreateJob, BatchCreateJobs and TriggerJob (request ids make
// them idempotent; the client generates them where the request has none),
// and dry runs. Other writes fail on the first error. [Client.CreateJobs]
// creates any number of jobs, 1000 per BatchCreateJobs call, with one
// result per job.
//
// An [AdminClient] ([NewAdmin], or [Client.Admin] over a client's
// connection) has one method per AdminService RPC, with the same deadline,
// error mapping and retry rules; it sends the [WithAdminToken] token. The
// worker that runs handlers is package tickwheel/worker.
//
// The helpers [CronJob], [OnceJob] and [LocalJob], with [Handler] or [HTTP]
// targets and [JobOption]s such as [Retry] and [Overlap], build the common
// jobs in one line:
//
//	client, err := tickwheel.New("127.0.0.1:50051", tickwheel.WithAPIKey(key))
//	if err != nil { ... }
//	defer client.Close()
//	job := tickwheel.CronJob("nightly-report", "0 2 * * *", "Europe/London",
//		tickwheel.Handler("reports.nightly"), tickwheel.Retry(3, time.Second, time.Minute))
//	created, err := client.CreateJob(ctx, &tickwheelv1.CreateJobRequest{Job: job})
package tickwheel

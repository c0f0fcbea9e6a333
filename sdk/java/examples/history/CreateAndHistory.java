package dev.tickwheel.examples;

import dev.tickwheel.CreateJobResult;
import dev.tickwheel.Jobs;
import dev.tickwheel.TickwheelClient;
import dev.tickwheel.TickwheelException;
import dev.tickwheel.TlsOptions;
import dev.tickwheel.v1.Attempt;
import dev.tickwheel.v1.CreateJobRequest;
import dev.tickwheel.v1.CreateJobResponse;
import dev.tickwheel.v1.CronSchedule;
import dev.tickwheel.v1.Execution;
import dev.tickwheel.v1.ExecutionStatus;
import dev.tickwheel.v1.Job;
import dev.tickwheel.v1.PreviewScheduleRequest;
import dev.tickwheel.v1.Schedule;
import dev.tickwheel.v1.ScheduledFire;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Creates a job through the Java SDK, waits for its first execution to end, and prints the job's
 * history.
 *
 * <p>Against {@code tickwheel dev} (its built-in worker serves the {@code echo} handler):
 *
 * <pre>
 * TICKWHEEL_API_KEY="$(jq -r .api_key .tickwheel/dev-credentials.json)" \
 *     java -cp target/classes:$(cat target/classpath.txt) dev.tickwheel.examples.CreateAndHistory \
 *     --address 127.0.0.1:50051
 * </pre>
 *
 * <p>Options: {@code --address} (default {@code $TICKWHEEL_ADDRESS} or 127.0.0.1:50051), {@code
 * --api-key} (default {@code $TICKWHEEL_API_KEY}), {@code --handler} (default echo), {@code --in}
 * seconds ahead for the one-off job (default 3), {@code --cron} to create a recurring job instead,
 * {@code --tz} its zone (default UTC), {@code --wait} seconds for the first execution to end
 * (default 60), {@code --preview N} to print the job's next N fires (after {@code --after}, an
 * RFC 3339 instant, default now) and create nothing, {@code --ca}, {@code --cert} and {@code
 * --key} (PEM files) to connect over TLS, mutual with a client certificate. {@code --batch N}
 * creates N such jobs in one {@code createJobs} (request ids {@code <--request-prefix>-<i>} when a
 * prefix is given; {@code --invalid-at I} gives job I the cron expression {@code 61 * * * *}) and
 * prints one line per job. Each step prints one JSON object on a line:
 *
 * <pre>
 * {"event":"created","job_id":"job_…","next_run_at":"…"}
 * {"event":"batch","index":0,"request_id":"…","job_id":"job_…","created":true}
 * {"event":"batch","index":1,"request_id":"…","code":"INVALID_ARGUMENT","field_violations":[…]}
 * {"event":"history","job_id":"job_…","executions":[{"id":"…","status":"EXECUTION_STATUS_SUCCEEDED","attempts":[…]}]}
 * {"event":"preview","fires":[{"nominal_at":"…","local_time":"…","note":""}]}
 * </pre>
 *
 * <p>A failed call prints {@code {"event":"error","code":"INVALID_ARGUMENT","message":…,
 * "field_violations":[…]}} and exits with status 1; no finished execution within the wait exits
 * with 2.
 */
public final class CreateAndHistory {
  private CreateAndHistory() {}

  public static void main(String[] args) throws InterruptedException {
    Map<String, String> options;
    Duration in;
    Duration wait;
    int preview;
    int batch;
    int invalidAt;
    Instant after;
    try {
      options = parse(args);
      in = seconds(options.getOrDefault("in", "3"));
      wait = seconds(options.getOrDefault("wait", "60"));
      preview = Integer.parseInt(options.getOrDefault("preview", "0"));
      batch = Integer.parseInt(options.getOrDefault("batch", "0"));
      invalidAt = Integer.parseInt(options.getOrDefault("invalid-at", "-1"));
      after = options.containsKey("after") ? Instant.parse(options.get("after")) : Instant.now();
    } catch (IllegalArgumentException | DateTimeParseException e) { // NumberFormatException too
      System.err.println("CreateAndHistory: " + e.getMessage());
      System.exit(64);
      return;
    }
    String address =
        options.getOrDefault("address", env("TICKWHEEL_ADDRESS", "127.0.0.1:50051"));
    String apiKey = options.getOrDefault("api-key", env("TICKWHEEL_API_KEY", ""));
    String handler = options.getOrDefault("handler", "echo");

    TickwheelClient.Builder builder = TickwheelClient.builder(address).apiKey(apiKey);
    if (options.containsKey("ca") || options.containsKey("cert")) {
      builder.tls(TlsOptions.fromFiles(path(options, "ca"), path(options, "cert"), path(options, "key")));
    }
    try (TickwheelClient client = builder.build()) {
      Job job =
          options.containsKey("cron")
              ? Jobs.cron(
                      "example-history",
                      options.get("cron"),
                      options.getOrDefault("tz", "UTC"),
                      Jobs.handler(handler))
                  .build()
              : Jobs.once(
                      "example-history",
                      Instant.now().plus(in),
                      Jobs.handler(handler))
                  .setPayload(com.google.protobuf.ByteString.copyFromUtf8("{\"from\":\"java\"}"))
                  .setRetryPolicy(Jobs.retry(3, Duration.ofSeconds(1), Duration.ofSeconds(10)))
                  .build();
      if (preview > 0) {
        List<ScheduledFire> fires =
            client
                .previewSchedule(
                    PreviewScheduleRequest.newBuilder()
                        .setJob(job)
                        .setAfter(Jobs.timestamp(after))
                        .setCount(preview)
                        .build())
                .getFiresList();
        List<String> rows = new ArrayList<>();
        for (ScheduledFire fire : fires) {
          rows.add(
              "{\"nominal_at\":"
                  + quote(Jobs.instant(fire.getNominalAt()).toString())
                  + ",\"local_time\":"
                  + quote(fire.getLocalTime())
                  + ",\"note\":"
                  + quote(fire.getNote())
                  + "}");
        }
        emit("{\"event\":\"preview\",\"fires\":[" + String.join(",", rows) + "]}");
        return;
      }
      if (batch > 0) {
        createBatch(client, job, batch, options.getOrDefault("request-prefix", ""), invalidAt);
        return;
      }
      CreateJobResponse created = client.createJob(job);
      String jobId = created.getJob().getId();
      emit(
          "{\"event\":\"created\",\"job_id\":"
              + quote(jobId)
              + ",\"next_run_at\":"
              + quote(Jobs.instant(created.getJob().getNextRunAt()).toString())
              + "}");

      Instant deadline = Instant.now().plus(wait);
      while (true) {
        List<Execution> history = new ArrayList<>();
        client.executions(jobId).forEach(history::add);
        boolean finished = history.stream().anyMatch(CreateAndHistory::ended);
        if (finished || Instant.now().isAfter(deadline)) {
          emit(
              "{\"event\":\"history\",\"job_id\":"
                  + quote(jobId)
                  + ",\"executions\":"
                  + executions(history)
                  + "}");
          if (!finished) {
            System.exit(2);
          }
          return;
        }
        Thread.sleep(250);
      }
    } catch (TickwheelException e) {
      emit(
          "{\"event\":\"error\",\"code\":"
              + quote(e.codeName())
              + ",\"message\":"
              + quote(e.statusMessage())
              + ",\"field_violations\":"
              + violations(e)
              + "}");
      System.exit(1);
    }
  }

  /**
   * Creates {@code count} copies of {@code job} named {@code example-batch-<i>} through createJobs
   * and prints one line per result, in order.
   */
  private static void createBatch(
      TickwheelClient client, Job job, int count, String requestPrefix, int invalidAt) {
    List<CreateJobRequest> requests = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      Job.Builder copy = job.toBuilder().setName("example-batch-" + i);
      if (i == invalidAt) {
        copy.setSchedule(
            Schedule.newBuilder()
                .setCron(CronSchedule.newBuilder().setExpression("61 * * * *").setTimeZone("UTC")));
      }
      CreateJobRequest.Builder request = CreateJobRequest.newBuilder().setJob(copy);
      if (!requestPrefix.isEmpty()) {
        request.setRequestId(requestPrefix + "-" + i);
      }
      requests.add(request.build());
    }
    List<CreateJobResult> results = client.createJobs(requests);
    for (int i = 0; i < results.size(); i++) {
      CreateJobResult result = results.get(i);
      String head =
          "{\"event\":\"batch\",\"index\":" + i + ",\"request_id\":" + quote(result.requestId());
      emit(
          result.ok()
              ? head
                  + ",\"job_id\":"
                  + quote(result.job().getId())
                  + ",\"created\":"
                  + result.created()
                  + "}"
              : head
                  + ",\"code\":"
                  + quote(result.error().codeName())
                  + ",\"field_violations\":"
                  + violations(result.error())
                  + "}");
    }
  }

  private static String violations(TickwheelException e) {
    List<String> rows = new ArrayList<>();
    e.fieldViolations()
        .forEach(
            v ->
                rows.add(
                    "{\"field\":"
                        + quote(v.field())
                        + ",\"description\":"
                        + quote(v.description())
                        + "}"));
    return "[" + String.join(",", rows) + "]";
  }

  private static boolean ended(Execution execution) {
    ExecutionStatus status = execution.getStatus();
    return status == ExecutionStatus.EXECUTION_STATUS_SUCCEEDED
        || status == ExecutionStatus.EXECUTION_STATUS_DEAD
        || status == ExecutionStatus.EXECUTION_STATUS_CANCELED;
  }

  private static String executions(List<Execution> history) {
    List<String> rows = new ArrayList<>();
    for (Execution e : history) {
      List<String> attempts = new ArrayList<>();
      for (Attempt a : e.getAttemptsList()) {
        Duration lateness = Jobs.duration(a.getLateness());
        attempts.add(
            "{\"attempt\":"
                + a.getAttempt()
                + ",\"status\":"
                + quote(a.getStatus().name())
                + ",\"worker_id\":"
                + quote(a.getWorkerId())
                + ",\"lateness_seconds\":"
                + (lateness.toNanos() / 1e9)
                + (a.getError().isEmpty() ? "" : ",\"error\":" + quote(a.getError()))
                + "}");
      }
      rows.add(
          "{\"id\":"
              + quote(e.getId())
              + ",\"status\":"
              + quote(e.getStatus().name())
              + ",\"nominal_at\":"
              + quote(Jobs.instant(e.getNominalAt()).toString())
              + ",\"attempts\":["
              + String.join(",", attempts)
              + "]}");
    }
    return "[" + String.join(",", rows) + "]";
  }

  private static Path path(Map<String, String> options, String name) {
    return options.containsKey(name) ? Path.of(options.get(name)) : null;
  }

  private static Duration seconds(String text) {
    return Duration.ofMillis(Math.round(Double.parseDouble(text) * 1000));
  }

  /** {@code --name value} or {@code --name=value} pairs. */
  private static Map<String, String> parse(String[] args) {
    Map<String, String> options = new HashMap<>();
    for (int i = 0; i < args.length; i++) {
      String arg = args[i];
      if (!arg.startsWith("--")) {
        throw new IllegalArgumentException("unexpected argument " + arg);
      }
      int equals = arg.indexOf('=');
      if (equals > 0) {
        options.put(arg.substring(2, equals), arg.substring(equals + 1));
      } else if (i + 1 < args.length) {
        options.put(arg.substring(2), args[++i]);
      } else {
        throw new IllegalArgumentException(arg + " needs a value");
      }
    }
    return options;
  }

  private static String env(String name, String fallback) {
    String value = System.getenv(name);
    return value == null || value.isEmpty() ? fallback : value;
  }

  /** A JSON string literal. */
  private static String quote(String text) {
    StringBuilder out = new StringBuilder("\"");
    for (char c : text.toCharArray()) {
      switch (c) {
        case '"' -> out.append("\\\"");
        case '\\' -> out.append("\\\\");
        case '\n' -> out.append("\\n");
        case '\r' -> out.append("\\r");
        case '\t' -> out.append("\\t");
        default -> {
          if (c < 0x20) {
            out.append(String.format("\\u%04x", (int) c));
          } else {
            out.append(c);
          }
        }
      }
    }
    return out.append('"').toString();
  }

  private static void emit(String line) {
    System.out.println(line);
    System.out.flush();
  }
}

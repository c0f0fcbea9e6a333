package dev.tickwheel.examples;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import com.google.gson.JsonPrimitive;
import dev.tickwheel.TlsOptions;
import dev.tickwheel.worker.JobContext;
import dev.tickwheel.worker.PermanentException;
import dev.tickwheel.worker.RetryableException;
import dev.tickwheel.worker.Worker;
import dev.tickwheel.worker.WorkerFatalException;
import java.io.IOException;
import java.io.PrintStream;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The example worker (sdk/java/examples/worker/run): serves one handler, {@code echo-java}, whose
 * output is the payload as is.
 *
 * <p>A payload that is a JSON object may ask for more: an integer {@code "sleep_ms"} makes the
 * handler wait that long first (ending the wait at once when the execution is canceled), and
 * {@code "fail": "retryable"} or {@code "fail": "permanent"} makes it fail that way after the wait,
 * with the message {@code asked to fail}.
 *
 * <p>Address and credential: {@code --dev DIR} reads {@code DIR/dev-credentials.json} (written by
 * {@code tickwheel dev --data DIR}), else {@code TICKWHEEL_ADDRESS} (a comma-separated list is
 * tried in turn) and {@code TICKWHEEL_WORKER_CREDENTIAL}; {@code TICKWHEEL_SLOTS} (default 4).
 * Missing either: one line on stderr, exit 2. TLS as the {@code tickwheel} CLI says it: {@code
 * --ca-cert FILE} (the CA bundle of the server's certificate), and for mutual TLS {@code
 * --client-cert FILE --client-key FILE}.
 *
 * <p>Stdout carries one JSON object per line and nothing else: {@code started} (execution id,
 * delivery, attempt), {@code canceled} when the handler sees the cancellation, {@code finished}
 * when it returns or fails. Logs go to stderr. SIGTERM drains: no new work, in-flight handlers
 * finish and their results are acknowledged (within 30 s), then exit 0.
 */
public final class EchoWorker {
  private static final Duration DRAIN = Duration.ofSeconds(30);
  private static final PrintStream OUT = System.out;

  private EchoWorker() {}

  /** The command line: {@code --dev DIR} and the TLS files. */
  private record Flags(String dev, Path caCert, Path clientCert, Path clientKey) {
    static Flags parse(String[] args) {
      String dev = null;
      Path ca = null;
      Path cert = null;
      Path key = null;
      for (int i = 0; i < args.length; i++) {
        String flag = args[i];
        if (i + 1 >= args.length
            || !List.of("--dev", "--ca-cert", "--client-cert", "--client-key").contains(flag)) {
          throw new IllegalArgumentException(
              "unknown argument "
                  + flag
                  + " (usage: run [--dev DIR] [--ca-cert FILE [--client-cert FILE --client-key FILE]])");
        }
        String value = args[++i];
        switch (flag) {
          case "--dev" -> dev = value;
          case "--ca-cert" -> ca = Path.of(value);
          case "--client-cert" -> cert = Path.of(value);
          default -> key = Path.of(value);
        }
      }
      if ((cert == null) != (key == null)) {
        throw new IllegalArgumentException("--client-cert and --client-key go together");
      }
      return new Flags(dev, ca, cert, key);
    }

    TlsOptions tls() {
      return caCert == null && clientCert == null ? null : TlsOptions.fromFiles(caCert, clientCert, clientKey);
    }
  }

  public static void main(String[] args) {
    List<String> addresses;
    String credential;
    int slots;
    TlsOptions tls;
    try {
      Flags flags = Flags.parse(args);
      tls = flags.tls();
      String[] found = addressAndCredential(flags.dev());
      addresses = Arrays.stream(found[0].split(",")).map(String::strip).filter(a -> !a.isEmpty()).toList();
      credential = found[1];
      String configured = System.getenv("TICKWHEEL_SLOTS");
      slots = configured == null || configured.isBlank() ? 4 : Integer.parseInt(configured.strip());
      if (addresses.isEmpty()) {
        throw new IllegalArgumentException("TICKWHEEL_ADDRESS names no address");
      }
    } catch (IllegalArgumentException | IOException | java.io.UncheckedIOException e) {
      System.err.println("echo-java: " + e.getMessage());
      System.exit(2);
      return;
    }

    Worker worker;
    try {
      worker =
          Worker.builder(addresses)
              .credential(credential)
              .slots(slots)
              .tls(tls)
              .handler("echo-java", EchoWorker::echo)
              .build();
    } catch (IllegalArgumentException | IllegalStateException e) {
      System.err.println("echo-java: " + e.getMessage());
      System.exit(2);
      return;
    }

    // SIGTERM (and Ctrl-C) start the JVM's shutdown: drain, then exit 0. When main itself decided
    // to exit (a refusal), the hook leaves that exit status alone.
    AtomicBoolean exiting = new AtomicBoolean();
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  if (exiting.get()) {
                    return;
                  }
                  System.err.println("echo-java: draining (at most " + DRAIN.toSeconds() + " s)");
                  worker.stop(DRAIN);
                  OUT.flush();
                  Runtime.getRuntime().halt(0);
                },
                "echo-java-drain"));
    try {
      worker.run();
    } catch (WorkerFatalException e) {
      exiting.set(true);
      System.err.println("echo-java: " + e.getMessage());
      System.exit(1);
    }
    exiting.set(true);
    System.exit(0);
  }

  /** The handler: the payload back, after the wait and the failure the payload asks for. */
  static byte[] echo(JobContext ctx) throws Exception {
    emit(
        "{\"event\":\"started\",\"execution_id\":"
            + quote(ctx.executionId())
            + ",\"delivery\":"
            + ctx.delivery()
            + ",\"attempt\":"
            + ctx.attempt()
            + "}");
    try {
      JsonObject asked = jsonObject(ctx.payloadText());
      long sleepMs = asked == null ? 0 : integer(asked.get("sleep_ms"));
      if (sleepMs > 0 && ctx.awaitCancellation(Duration.ofMillis(sleepMs))) {
        emit("{\"event\":\"canceled\",\"execution_id\":" + quote(ctx.executionId()) + "}");
        return ctx.payload(); // the runtime reports CANCELED (or TIMED_OUT) whatever this returns
      }
      JsonElement fail = asked == null ? null : asked.get("fail");
      if (fail != null && fail.isJsonPrimitive() && fail.getAsJsonPrimitive().isString()) {
        switch (fail.getAsString()) {
          case "retryable" -> throw new RetryableException("asked to fail");
          case "permanent" -> throw new PermanentException("asked to fail");
          default -> {}
        }
      }
      return ctx.payload();
    } finally {
      emit("{\"event\":\"finished\",\"execution_id\":" + quote(ctx.executionId()) + "}");
    }
  }

  /** {@code [address, credential]} from {@code --dev DIR} (when not null) or the environment. */
  private static String[] addressAndCredential(String dev) throws IOException {
    String address = System.getenv("TICKWHEEL_ADDRESS");
    String credential = System.getenv("TICKWHEEL_WORKER_CREDENTIAL");
    if (dev != null) {
      Path file = Path.of(dev, "dev-credentials.json");
      JsonObject saved;
      try {
        saved = jsonObject(Files.readString(file, StandardCharsets.UTF_8));
      } catch (IOException e) {
        throw new IOException("cannot read " + file + ": " + e.getMessage(), e);
      }
      if (saved == null) {
        throw new IllegalArgumentException(file + " is not a JSON object");
      }
      address = string(saved.get("address"));
      credential = string(saved.get("worker_credential"));
      if (address == null || credential == null) {
        throw new IllegalArgumentException(file + " lacks address or worker_credential");
      }
    }
    if (address == null || address.isBlank()) {
      throw new IllegalArgumentException("no address: set TICKWHEEL_ADDRESS or pass --dev DIR");
    }
    if (credential == null || credential.isBlank()) {
      throw new IllegalArgumentException(
          "no worker credential: set TICKWHEEL_WORKER_CREDENTIAL or pass --dev DIR");
    }
    return new String[] {address, credential};
  }

  /** The text parsed as a JSON object, or null when it is anything else. */
  private static JsonObject jsonObject(String text) {
    try {
      JsonElement parsed = JsonParser.parseString(text);
      return parsed.isJsonObject() ? parsed.getAsJsonObject() : null;
    } catch (RuntimeException e) {
      return null;
    }
  }

  /** A JSON integer as a long (saturated), 0 for anything else. */
  private static long integer(JsonElement value) {
    if (value == null || !value.isJsonPrimitive() || !value.getAsJsonPrimitive().isNumber()) {
      return 0;
    }
    try {
      BigDecimal number = value.getAsJsonPrimitive().getAsBigDecimal();
      if (number.stripTrailingZeros().scale() > 0) {
        return 0; // not an integer
      }
      return number.max(BigDecimal.ZERO).min(BigDecimal.valueOf(Long.MAX_VALUE / 1_000_000)).longValueExact();
    } catch (ArithmeticException | NumberFormatException e) {
      return 0;
    }
  }

  private static String string(JsonElement value) {
    return value != null && value.isJsonPrimitive() && value.getAsJsonPrimitive().isString()
        ? value.getAsString()
        : null;
  }

  /** One line on stdout, flushed at once; lines of concurrent handlers never interleave. */
  private static void emit(String line) {
    synchronized (OUT) {
      OUT.println(line);
      OUT.flush();
    }
  }

  private static String quote(String text) {
    return new JsonPrimitive(text).toString();
  }
}

package dev.tickwheel.worker;

import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.fail;

import dev.tickwheel.v1.PullRequest;
import dev.tickwheel.v1.PullResponse;
import dev.tickwheel.v1.WorkerServiceGrpc;
import io.grpc.Context;
import io.grpc.Contexts;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.InsecureServerCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.Status;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * A scripted WorkerService for the worker's protocol tests: an in-process gRPC server whose Pull
 * streams the test drives one message at a time.
 */
final class FakeServer implements AutoCloseable {
  private static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);
  private static final Context.Key<String> SEEN_AUTHORIZATION = Context.key("authorization");

  /** The server's name (in process) or host:port (over TCP). */
  final String name;

  /**
   * How long the tests wait for what must come (a stream, a message, a handler's start): a wait
   * that returns as soon as it comes, so it is long. On a loaded machine the worker's first
   * connect over TCP (grpc-java's Netty transport loaded and started) takes seconds.
   */
  static final long WAIT_SECONDS = 30;

  private final BlockingQueue<FakeStream> streams = new LinkedBlockingQueue<>();
  private final Server server;

  FakeServer() throws IOException {
    this(false);
  }

  /**
   * {@code overTcp}: on a port of 127.0.0.1 rather than in process (where messages are passed
   * unserialized and no receive limit applies).
   */
  FakeServer(boolean overTcp) throws IOException {
    ServerInterceptor headers =
        new ServerInterceptor() {
          @Override
          public <Q, R> ServerCall.Listener<Q> interceptCall(
              ServerCall<Q, R> call, Metadata metadata, ServerCallHandler<Q, R> next) {
            Context context =
                Context.current().withValue(SEEN_AUTHORIZATION, metadata.get(AUTHORIZATION));
            return Contexts.interceptCall(context, call, metadata, next);
          }
        };
    WorkerServiceGrpc.WorkerServiceImplBase service =
        new WorkerServiceGrpc.WorkerServiceImplBase() {
          @Override
          public StreamObserver<PullRequest> pull(StreamObserver<PullResponse> responses) {
            FakeStream stream = new FakeStream(responses, SEEN_AUTHORIZATION.get());
            streams.add(stream);
            return stream.requests;
          }
        };
    if (overTcp) {
      server =
          Grpc.newServerBuilderForPort(0, InsecureServerCredentials.create())
              .addService(ServerInterceptors.intercept(service, headers))
              .build()
              .start();
      name = "127.0.0.1:" + server.getPort();
    } else {
      name = InProcessServerBuilder.generateName();
      server =
          InProcessServerBuilder.forName(name)
              .addService(ServerInterceptors.intercept(service, headers))
              .build()
              .start();
    }
  }

  /** Opens a plaintext channel to {@code address} (host:port). */
  static ManagedChannel tcpChannel(String address) {
    return Grpc.newChannelBuilder(address, InsecureChannelCredentials.create()).build();
  }

  /** Opens a channel to the server named {@code address} (this one's name, or another's). */
  static ManagedChannel channel(String address) {
    return InProcessChannelBuilder.forName(address).build();
  }

  /** The next Pull stream the worker opens; fails after {@link #WAIT_SECONDS}. */
  FakeStream nextStream() throws InterruptedException {
    FakeStream stream = streams.poll(WAIT_SECONDS, TimeUnit.SECONDS);
    assertNotNull(stream, "no stream opened within " + WAIT_SECONDS + " s");
    return stream;
  }

  /** The next stream if one opens within {@code millis}, else null. */
  FakeStream pollStream(long millis) throws InterruptedException {
    return streams.poll(millis, TimeUnit.MILLISECONDS);
  }

  @Override
  public void close() throws InterruptedException {
    server.shutdownNow();
    server.awaitTermination(5, TimeUnit.SECONDS);
  }

  /** One Pull stream as the test sees it. */
  static final class FakeStream {
    final String authorization;
    /** Every message received, in order. */
    final List<PullRequest> received = new CopyOnWriteArrayList<>();
    private final BlockingQueue<PullRequest> inbox = new LinkedBlockingQueue<>();
    /** Counts down when the worker half-closed (or canceled) its side. */
    final CountDownLatch closed = new CountDownLatch(1);
    volatile boolean halfClosedCleanly;
    private final StreamObserver<PullResponse> responses;
    final StreamObserver<PullRequest> requests;
    private boolean ended;

    FakeStream(StreamObserver<PullResponse> responses, String authorization) {
      this.responses = responses;
      this.authorization = authorization;
      this.requests =
          new StreamObserver<>() {
            @Override
            public void onNext(PullRequest request) {
              received.add(request);
              inbox.add(request);
            }

            @Override
            public void onError(Throwable t) {
              closed.countDown();
            }

            @Override
            public void onCompleted() {
              halfClosedCleanly = true;
              closed.countDown();
            }
          };
    }

    /**
     * The next message of {@code kind}, skipping (but recording) others; fails after {@link
     * #WAIT_SECONDS}.
     */
    PullRequest expect(PullRequest.MessageCase kind) throws InterruptedException {
      return expect(kind, TimeUnit.SECONDS.toMillis(WAIT_SECONDS));
    }

    PullRequest expect(PullRequest.MessageCase kind, long millis) throws InterruptedException {
      long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
      for (; ; ) {
        long left = deadline - System.nanoTime();
        PullRequest next = inbox.poll(Math.max(0, left), TimeUnit.NANOSECONDS);
        if (next == null) {
          fail("no " + kind + " within " + millis + " ms");
        }
        if (next.getMessageCase() == kind) {
          return next;
        }
      }
    }

    long count(PullRequest.MessageCase kind) {
      return received.stream().filter(r -> r.getMessageCase() == kind).count();
    }

    synchronized void send(PullResponse response) {
      if (!ended) {
        responses.onNext(response);
      }
    }

    /** Ends the stream with OK. */
    synchronized void end() {
      if (!ended) {
        ended = true;
        responses.onCompleted();
      }
    }

    /** Ends the stream with an error status. */
    synchronized void failWith(Status status) {
      if (!ended) {
        ended = true;
        responses.onError(status.asRuntimeException());
      }
    }
  }
}

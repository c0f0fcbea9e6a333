package dev.tickwheel.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 * <pre>
 * The worker-facing API. A worker authenticates with
 * `authorization: Bearer &lt;worker credential&gt;`; the credential names the
 * tenants and handlers it may serve, and it never receives other work.
 * </pre>
 */
@io.grpc.stub.annotations.GrpcGenerated
public final class WorkerServiceGrpc {

  private WorkerServiceGrpc() {}

  public static final java.lang.String SERVICE_NAME = "tickwheel.v1.WorkerService";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.PullRequest,
      dev.tickwheel.v1.PullResponse> getPullMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Pull",
      requestType = dev.tickwheel.v1.PullRequest.class,
      responseType = dev.tickwheel.v1.PullResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.BIDI_STREAMING)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.PullRequest,
      dev.tickwheel.v1.PullResponse> getPullMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.PullRequest, dev.tickwheel.v1.PullResponse> getPullMethod;
    if ((getPullMethod = WorkerServiceGrpc.getPullMethod) == null) {
      synchronized (WorkerServiceGrpc.class) {
        if ((getPullMethod = WorkerServiceGrpc.getPullMethod) == null) {
          WorkerServiceGrpc.getPullMethod = getPullMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.PullRequest, dev.tickwheel.v1.PullResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.BIDI_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Pull"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.PullRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.PullResponse.getDefaultInstance()))
              .setSchemaDescriptor(new WorkerServiceMethodDescriptorSupplier("Pull"))
              .build();
        }
      }
    }
    return getPullMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static WorkerServiceStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<WorkerServiceStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<WorkerServiceStub>() {
        @java.lang.Override
        public WorkerServiceStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new WorkerServiceStub(channel, callOptions);
        }
      };
    return WorkerServiceStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports all types of calls on the service
   */
  public static WorkerServiceBlockingV2Stub newBlockingV2Stub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<WorkerServiceBlockingV2Stub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<WorkerServiceBlockingV2Stub>() {
        @java.lang.Override
        public WorkerServiceBlockingV2Stub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new WorkerServiceBlockingV2Stub(channel, callOptions);
        }
      };
    return WorkerServiceBlockingV2Stub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static WorkerServiceBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<WorkerServiceBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<WorkerServiceBlockingStub>() {
        @java.lang.Override
        public WorkerServiceBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new WorkerServiceBlockingStub(channel, callOptions);
        }
      };
    return WorkerServiceBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static WorkerServiceFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<WorkerServiceFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<WorkerServiceFutureStub>() {
        @java.lang.Override
        public WorkerServiceFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new WorkerServiceFutureStub(channel, callOptions);
        }
      };
    return WorkerServiceFutureStub.newStub(factory, channel);
  }

  /**
   * <pre>
   * The worker-facing API. A worker authenticates with
   * `authorization: Bearer &lt;worker credential&gt;`; the credential names the
   * tenants and handlers it may serve, and it never receives other work.
   * </pre>
   */
  public interface AsyncService {

    /**
     * <pre>
     * One long-lived bidirectional stream per worker. The worker sends `hello`
     * first (anything else first: FAILED_PRECONDITION), then `credit` to ask
     * for work, `heartbeat` for what it runs and `result` when an attempt ends.
     * The server answers `welcome`, then sends `assignment`s up to the credit,
     * `ack` for each result, `cancel`, `heartbeat` and `drain`. The stream ends
     * when either side closes it; executions the worker held are re-delivered
     * unless it re-attaches them through a new stream's hello within the grace
     * (one session TTL). A result counts only from the stream that holds its
     * delivery (handed out on it, or re-attached to it), for a tenant of the
     * credential; anything else is answered exactly like an unknown id. A
     * credential that sends, faster than its server's budget allows, results
     * or re-attachments none of its streams holds (or malformed results) has
     * its stream ended with RESOURCE_EXHAUSTED, and new streams refused so
     * until the budget refills. A server takes a bounded number of streams,
     * of one credential's streams and of the slots they state, summed
     * (docs/operations.md, "What a worker credential may hold"): a hello past
     * one is refused with RESOURCE_EXHAUSTED naming it, and the streams
     * already open go on.
     * </pre>
     */
    default io.grpc.stub.StreamObserver<dev.tickwheel.v1.PullRequest> pull(
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.PullResponse> responseObserver) {
      return io.grpc.stub.ServerCalls.asyncUnimplementedStreamingCall(getPullMethod(), responseObserver);
    }
  }

  /**
   * Base class for the server implementation of the service WorkerService.
   * <pre>
   * The worker-facing API. A worker authenticates with
   * `authorization: Bearer &lt;worker credential&gt;`; the credential names the
   * tenants and handlers it may serve, and it never receives other work.
   * </pre>
   */
  public static abstract class WorkerServiceImplBase
      implements io.grpc.BindableService, AsyncService {

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return WorkerServiceGrpc.bindService(this);
    }
  }

  /**
   * A stub to allow clients to do asynchronous rpc calls to service WorkerService.
   * <pre>
   * The worker-facing API. A worker authenticates with
   * `authorization: Bearer &lt;worker credential&gt;`; the credential names the
   * tenants and handlers it may serve, and it never receives other work.
   * </pre>
   */
  public static final class WorkerServiceStub
      extends io.grpc.stub.AbstractAsyncStub<WorkerServiceStub> {
    private WorkerServiceStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected WorkerServiceStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new WorkerServiceStub(channel, callOptions);
    }

    /**
     * <pre>
     * One long-lived bidirectional stream per worker. The worker sends `hello`
     * first (anything else first: FAILED_PRECONDITION), then `credit` to ask
     * for work, `heartbeat` for what it runs and `result` when an attempt ends.
     * The server answers `welcome`, then sends `assignment`s up to the credit,
     * `ack` for each result, `cancel`, `heartbeat` and `drain`. The stream ends
     * when either side closes it; executions the worker held are re-delivered
     * unless it re-attaches them through a new stream's hello within the grace
     * (one session TTL). A result counts only from the stream that holds its
     * delivery (handed out on it, or re-attached to it), for a tenant of the
     * credential; anything else is answered exactly like an unknown id. A
     * credential that sends, faster than its server's budget allows, results
     * or re-attachments none of its streams holds (or malformed results) has
     * its stream ended with RESOURCE_EXHAUSTED, and new streams refused so
     * until the budget refills. A server takes a bounded number of streams,
     * of one credential's streams and of the slots they state, summed
     * (docs/operations.md, "What a worker credential may hold"): a hello past
     * one is refused with RESOURCE_EXHAUSTED naming it, and the streams
     * already open go on.
     * </pre>
     */
    public io.grpc.stub.StreamObserver<dev.tickwheel.v1.PullRequest> pull(
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.PullResponse> responseObserver) {
      return io.grpc.stub.ClientCalls.asyncBidiStreamingCall(
          getChannel().newCall(getPullMethod(), getCallOptions()), responseObserver);
    }
  }

  /**
   * A stub to allow clients to do synchronous rpc calls to service WorkerService.
   * <pre>
   * The worker-facing API. A worker authenticates with
   * `authorization: Bearer &lt;worker credential&gt;`; the credential names the
   * tenants and handlers it may serve, and it never receives other work.
   * </pre>
   */
  public static final class WorkerServiceBlockingV2Stub
      extends io.grpc.stub.AbstractBlockingStub<WorkerServiceBlockingV2Stub> {
    private WorkerServiceBlockingV2Stub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected WorkerServiceBlockingV2Stub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new WorkerServiceBlockingV2Stub(channel, callOptions);
    }

    /**
     * <pre>
     * One long-lived bidirectional stream per worker. The worker sends `hello`
     * first (anything else first: FAILED_PRECONDITION), then `credit` to ask
     * for work, `heartbeat` for what it runs and `result` when an attempt ends.
     * The server answers `welcome`, then sends `assignment`s up to the credit,
     * `ack` for each result, `cancel`, `heartbeat` and `drain`. The stream ends
     * when either side closes it; executions the worker held are re-delivered
     * unless it re-attaches them through a new stream's hello within the grace
     * (one session TTL). A result counts only from the stream that holds its
     * delivery (handed out on it, or re-attached to it), for a tenant of the
     * credential; anything else is answered exactly like an unknown id. A
     * credential that sends, faster than its server's budget allows, results
     * or re-attachments none of its streams holds (or malformed results) has
     * its stream ended with RESOURCE_EXHAUSTED, and new streams refused so
     * until the budget refills. A server takes a bounded number of streams,
     * of one credential's streams and of the slots they state, summed
     * (docs/operations.md, "What a worker credential may hold"): a hello past
     * one is refused with RESOURCE_EXHAUSTED naming it, and the streams
     * already open go on.
     * </pre>
     */
    @io.grpc.ExperimentalApi("https://github.com/grpc/grpc-java/issues/10918")
    public io.grpc.stub.BlockingClientCall<dev.tickwheel.v1.PullRequest, dev.tickwheel.v1.PullResponse>
        pull() {
      return io.grpc.stub.ClientCalls.blockingBidiStreamingCall(
          getChannel(), getPullMethod(), getCallOptions());
    }
  }

  /**
   * A stub to allow clients to do limited synchronous rpc calls to service WorkerService.
   * <pre>
   * The worker-facing API. A worker authenticates with
   * `authorization: Bearer &lt;worker credential&gt;`; the credential names the
   * tenants and handlers it may serve, and it never receives other work.
   * </pre>
   */
  public static final class WorkerServiceBlockingStub
      extends io.grpc.stub.AbstractBlockingStub<WorkerServiceBlockingStub> {
    private WorkerServiceBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected WorkerServiceBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new WorkerServiceBlockingStub(channel, callOptions);
    }
  }

  /**
   * A stub to allow clients to do ListenableFuture-style rpc calls to service WorkerService.
   * <pre>
   * The worker-facing API. A worker authenticates with
   * `authorization: Bearer &lt;worker credential&gt;`; the credential names the
   * tenants and handlers it may serve, and it never receives other work.
   * </pre>
   */
  public static final class WorkerServiceFutureStub
      extends io.grpc.stub.AbstractFutureStub<WorkerServiceFutureStub> {
    private WorkerServiceFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected WorkerServiceFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new WorkerServiceFutureStub(channel, callOptions);
    }
  }

  private static final int METHODID_PULL = 0;

  private static final class MethodHandlers<Req, Resp> implements
      io.grpc.stub.ServerCalls.UnaryMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ServerStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ClientStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.BidiStreamingMethod<Req, Resp> {
    private final AsyncService serviceImpl;
    private final int methodId;

    MethodHandlers(AsyncService serviceImpl, int methodId) {
      this.serviceImpl = serviceImpl;
      this.methodId = methodId;
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public void invoke(Req request, io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        default:
          throw new AssertionError();
      }
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public io.grpc.stub.StreamObserver<Req> invoke(
        io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        case METHODID_PULL:
          return (io.grpc.stub.StreamObserver<Req>) serviceImpl.pull(
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.PullResponse>) responseObserver);
        default:
          throw new AssertionError();
      }
    }
  }

  public static final io.grpc.ServerServiceDefinition bindService(AsyncService service) {
    return io.grpc.ServerServiceDefinition.builder(getServiceDescriptor())
        .addMethod(
          getPullMethod(),
          io.grpc.stub.ServerCalls.asyncBidiStreamingCall(
            new MethodHandlers<
              dev.tickwheel.v1.PullRequest,
              dev.tickwheel.v1.PullResponse>(
                service, METHODID_PULL)))
        .build();
  }

  private static abstract class WorkerServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    WorkerServiceBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return dev.tickwheel.v1.WorkerProto.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("WorkerService");
    }
  }

  private static final class WorkerServiceFileDescriptorSupplier
      extends WorkerServiceBaseDescriptorSupplier {
    WorkerServiceFileDescriptorSupplier() {}
  }

  private static final class WorkerServiceMethodDescriptorSupplier
      extends WorkerServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final java.lang.String methodName;

    WorkerServiceMethodDescriptorSupplier(java.lang.String methodName) {
      this.methodName = methodName;
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.MethodDescriptor getMethodDescriptor() {
      return getServiceDescriptor().findMethodByName(methodName);
    }
  }

  private static volatile io.grpc.ServiceDescriptor serviceDescriptor;

  public static io.grpc.ServiceDescriptor getServiceDescriptor() {
    io.grpc.ServiceDescriptor result = serviceDescriptor;
    if (result == null) {
      synchronized (WorkerServiceGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new WorkerServiceFileDescriptorSupplier())
              .addMethod(getPullMethod())
              .build();
        }
      }
    }
    return result;
  }
}

package dev.tickwheel.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 * <pre>
 * The tenant-facing API. Every call carries `authorization: Bearer &lt;API key&gt;`
 * and sees only the jobs and executions of that key's tenant: another
 * tenant's id gets NOT_FOUND. Errors carry a google.rpc.Status with
 * BadRequest field violations (INVALID_ARGUMENT; at most 20 listed, the rest
 * counted in the message and an ErrorInfo TOO_MANY_VIOLATIONS), QuotaFailure
 * (RESOURCE_EXHAUSTED) or PreconditionFailure (FAILED_PRECONDITION); nothing
 * is written when a call fails. A request that is not a valid message (for
 * example a string that is not UTF-8) gets INVALID_ARGUMENT "the request is
 * not a valid &lt;Message&gt;"; a string holding NUL gets INVALID_ARGUMENT naming
 * it. Fields this server does not know are ignored and never stored.
 * </pre>
 */
@io.grpc.stub.annotations.GrpcGenerated
public final class SchedulerServiceGrpc {

  private SchedulerServiceGrpc() {}

  public static final java.lang.String SERVICE_NAME = "tickwheel.v1.SchedulerService";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.CreateJobRequest,
      dev.tickwheel.v1.CreateJobResponse> getCreateJobMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "CreateJob",
      requestType = dev.tickwheel.v1.CreateJobRequest.class,
      responseType = dev.tickwheel.v1.CreateJobResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.CreateJobRequest,
      dev.tickwheel.v1.CreateJobResponse> getCreateJobMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.CreateJobRequest, dev.tickwheel.v1.CreateJobResponse> getCreateJobMethod;
    if ((getCreateJobMethod = SchedulerServiceGrpc.getCreateJobMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getCreateJobMethod = SchedulerServiceGrpc.getCreateJobMethod) == null) {
          SchedulerServiceGrpc.getCreateJobMethod = getCreateJobMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.CreateJobRequest, dev.tickwheel.v1.CreateJobResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "CreateJob"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.CreateJobRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.CreateJobResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("CreateJob"))
              .build();
        }
      }
    }
    return getCreateJobMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.BatchCreateJobsRequest,
      dev.tickwheel.v1.BatchCreateJobsResponse> getBatchCreateJobsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "BatchCreateJobs",
      requestType = dev.tickwheel.v1.BatchCreateJobsRequest.class,
      responseType = dev.tickwheel.v1.BatchCreateJobsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.BatchCreateJobsRequest,
      dev.tickwheel.v1.BatchCreateJobsResponse> getBatchCreateJobsMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.BatchCreateJobsRequest, dev.tickwheel.v1.BatchCreateJobsResponse> getBatchCreateJobsMethod;
    if ((getBatchCreateJobsMethod = SchedulerServiceGrpc.getBatchCreateJobsMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getBatchCreateJobsMethod = SchedulerServiceGrpc.getBatchCreateJobsMethod) == null) {
          SchedulerServiceGrpc.getBatchCreateJobsMethod = getBatchCreateJobsMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.BatchCreateJobsRequest, dev.tickwheel.v1.BatchCreateJobsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "BatchCreateJobs"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.BatchCreateJobsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.BatchCreateJobsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("BatchCreateJobs"))
              .build();
        }
      }
    }
    return getBatchCreateJobsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.GetJobRequest,
      dev.tickwheel.v1.GetJobResponse> getGetJobMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "GetJob",
      requestType = dev.tickwheel.v1.GetJobRequest.class,
      responseType = dev.tickwheel.v1.GetJobResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.GetJobRequest,
      dev.tickwheel.v1.GetJobResponse> getGetJobMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.GetJobRequest, dev.tickwheel.v1.GetJobResponse> getGetJobMethod;
    if ((getGetJobMethod = SchedulerServiceGrpc.getGetJobMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getGetJobMethod = SchedulerServiceGrpc.getGetJobMethod) == null) {
          SchedulerServiceGrpc.getGetJobMethod = getGetJobMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.GetJobRequest, dev.tickwheel.v1.GetJobResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "GetJob"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.GetJobRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.GetJobResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("GetJob"))
              .build();
        }
      }
    }
    return getGetJobMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.ListJobsRequest,
      dev.tickwheel.v1.ListJobsResponse> getListJobsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListJobs",
      requestType = dev.tickwheel.v1.ListJobsRequest.class,
      responseType = dev.tickwheel.v1.ListJobsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.ListJobsRequest,
      dev.tickwheel.v1.ListJobsResponse> getListJobsMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.ListJobsRequest, dev.tickwheel.v1.ListJobsResponse> getListJobsMethod;
    if ((getListJobsMethod = SchedulerServiceGrpc.getListJobsMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getListJobsMethod = SchedulerServiceGrpc.getListJobsMethod) == null) {
          SchedulerServiceGrpc.getListJobsMethod = getListJobsMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.ListJobsRequest, dev.tickwheel.v1.ListJobsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListJobs"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.ListJobsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.ListJobsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("ListJobs"))
              .build();
        }
      }
    }
    return getListJobsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.UpdateJobRequest,
      dev.tickwheel.v1.UpdateJobResponse> getUpdateJobMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "UpdateJob",
      requestType = dev.tickwheel.v1.UpdateJobRequest.class,
      responseType = dev.tickwheel.v1.UpdateJobResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.UpdateJobRequest,
      dev.tickwheel.v1.UpdateJobResponse> getUpdateJobMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.UpdateJobRequest, dev.tickwheel.v1.UpdateJobResponse> getUpdateJobMethod;
    if ((getUpdateJobMethod = SchedulerServiceGrpc.getUpdateJobMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getUpdateJobMethod = SchedulerServiceGrpc.getUpdateJobMethod) == null) {
          SchedulerServiceGrpc.getUpdateJobMethod = getUpdateJobMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.UpdateJobRequest, dev.tickwheel.v1.UpdateJobResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "UpdateJob"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.UpdateJobRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.UpdateJobResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("UpdateJob"))
              .build();
        }
      }
    }
    return getUpdateJobMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.BatchUpdateJobsRequest,
      dev.tickwheel.v1.BatchUpdateJobsResponse> getBatchUpdateJobsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "BatchUpdateJobs",
      requestType = dev.tickwheel.v1.BatchUpdateJobsRequest.class,
      responseType = dev.tickwheel.v1.BatchUpdateJobsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.BatchUpdateJobsRequest,
      dev.tickwheel.v1.BatchUpdateJobsResponse> getBatchUpdateJobsMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.BatchUpdateJobsRequest, dev.tickwheel.v1.BatchUpdateJobsResponse> getBatchUpdateJobsMethod;
    if ((getBatchUpdateJobsMethod = SchedulerServiceGrpc.getBatchUpdateJobsMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getBatchUpdateJobsMethod = SchedulerServiceGrpc.getBatchUpdateJobsMethod) == null) {
          SchedulerServiceGrpc.getBatchUpdateJobsMethod = getBatchUpdateJobsMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.BatchUpdateJobsRequest, dev.tickwheel.v1.BatchUpdateJobsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "BatchUpdateJobs"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.BatchUpdateJobsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.BatchUpdateJobsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("BatchUpdateJobs"))
              .build();
        }
      }
    }
    return getBatchUpdateJobsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.ListJobRevisionsRequest,
      dev.tickwheel.v1.ListJobRevisionsResponse> getListJobRevisionsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListJobRevisions",
      requestType = dev.tickwheel.v1.ListJobRevisionsRequest.class,
      responseType = dev.tickwheel.v1.ListJobRevisionsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.ListJobRevisionsRequest,
      dev.tickwheel.v1.ListJobRevisionsResponse> getListJobRevisionsMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.ListJobRevisionsRequest, dev.tickwheel.v1.ListJobRevisionsResponse> getListJobRevisionsMethod;
    if ((getListJobRevisionsMethod = SchedulerServiceGrpc.getListJobRevisionsMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getListJobRevisionsMethod = SchedulerServiceGrpc.getListJobRevisionsMethod) == null) {
          SchedulerServiceGrpc.getListJobRevisionsMethod = getListJobRevisionsMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.ListJobRevisionsRequest, dev.tickwheel.v1.ListJobRevisionsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListJobRevisions"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.ListJobRevisionsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.ListJobRevisionsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("ListJobRevisions"))
              .build();
        }
      }
    }
    return getListJobRevisionsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.DeleteJobRequest,
      dev.tickwheel.v1.DeleteJobResponse> getDeleteJobMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "DeleteJob",
      requestType = dev.tickwheel.v1.DeleteJobRequest.class,
      responseType = dev.tickwheel.v1.DeleteJobResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.DeleteJobRequest,
      dev.tickwheel.v1.DeleteJobResponse> getDeleteJobMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.DeleteJobRequest, dev.tickwheel.v1.DeleteJobResponse> getDeleteJobMethod;
    if ((getDeleteJobMethod = SchedulerServiceGrpc.getDeleteJobMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getDeleteJobMethod = SchedulerServiceGrpc.getDeleteJobMethod) == null) {
          SchedulerServiceGrpc.getDeleteJobMethod = getDeleteJobMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.DeleteJobRequest, dev.tickwheel.v1.DeleteJobResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "DeleteJob"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.DeleteJobRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.DeleteJobResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("DeleteJob"))
              .build();
        }
      }
    }
    return getDeleteJobMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.BatchDeleteJobsRequest,
      dev.tickwheel.v1.BatchDeleteJobsResponse> getBatchDeleteJobsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "BatchDeleteJobs",
      requestType = dev.tickwheel.v1.BatchDeleteJobsRequest.class,
      responseType = dev.tickwheel.v1.BatchDeleteJobsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.BatchDeleteJobsRequest,
      dev.tickwheel.v1.BatchDeleteJobsResponse> getBatchDeleteJobsMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.BatchDeleteJobsRequest, dev.tickwheel.v1.BatchDeleteJobsResponse> getBatchDeleteJobsMethod;
    if ((getBatchDeleteJobsMethod = SchedulerServiceGrpc.getBatchDeleteJobsMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getBatchDeleteJobsMethod = SchedulerServiceGrpc.getBatchDeleteJobsMethod) == null) {
          SchedulerServiceGrpc.getBatchDeleteJobsMethod = getBatchDeleteJobsMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.BatchDeleteJobsRequest, dev.tickwheel.v1.BatchDeleteJobsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "BatchDeleteJobs"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.BatchDeleteJobsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.BatchDeleteJobsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("BatchDeleteJobs"))
              .build();
        }
      }
    }
    return getBatchDeleteJobsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.PauseJobRequest,
      dev.tickwheel.v1.PauseJobResponse> getPauseJobMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "PauseJob",
      requestType = dev.tickwheel.v1.PauseJobRequest.class,
      responseType = dev.tickwheel.v1.PauseJobResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.PauseJobRequest,
      dev.tickwheel.v1.PauseJobResponse> getPauseJobMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.PauseJobRequest, dev.tickwheel.v1.PauseJobResponse> getPauseJobMethod;
    if ((getPauseJobMethod = SchedulerServiceGrpc.getPauseJobMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getPauseJobMethod = SchedulerServiceGrpc.getPauseJobMethod) == null) {
          SchedulerServiceGrpc.getPauseJobMethod = getPauseJobMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.PauseJobRequest, dev.tickwheel.v1.PauseJobResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "PauseJob"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.PauseJobRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.PauseJobResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("PauseJob"))
              .build();
        }
      }
    }
    return getPauseJobMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.BatchPauseJobsRequest,
      dev.tickwheel.v1.BatchPauseJobsResponse> getBatchPauseJobsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "BatchPauseJobs",
      requestType = dev.tickwheel.v1.BatchPauseJobsRequest.class,
      responseType = dev.tickwheel.v1.BatchPauseJobsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.BatchPauseJobsRequest,
      dev.tickwheel.v1.BatchPauseJobsResponse> getBatchPauseJobsMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.BatchPauseJobsRequest, dev.tickwheel.v1.BatchPauseJobsResponse> getBatchPauseJobsMethod;
    if ((getBatchPauseJobsMethod = SchedulerServiceGrpc.getBatchPauseJobsMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getBatchPauseJobsMethod = SchedulerServiceGrpc.getBatchPauseJobsMethod) == null) {
          SchedulerServiceGrpc.getBatchPauseJobsMethod = getBatchPauseJobsMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.BatchPauseJobsRequest, dev.tickwheel.v1.BatchPauseJobsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "BatchPauseJobs"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.BatchPauseJobsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.BatchPauseJobsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("BatchPauseJobs"))
              .build();
        }
      }
    }
    return getBatchPauseJobsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.ResumeJobRequest,
      dev.tickwheel.v1.ResumeJobResponse> getResumeJobMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ResumeJob",
      requestType = dev.tickwheel.v1.ResumeJobRequest.class,
      responseType = dev.tickwheel.v1.ResumeJobResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.ResumeJobRequest,
      dev.tickwheel.v1.ResumeJobResponse> getResumeJobMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.ResumeJobRequest, dev.tickwheel.v1.ResumeJobResponse> getResumeJobMethod;
    if ((getResumeJobMethod = SchedulerServiceGrpc.getResumeJobMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getResumeJobMethod = SchedulerServiceGrpc.getResumeJobMethod) == null) {
          SchedulerServiceGrpc.getResumeJobMethod = getResumeJobMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.ResumeJobRequest, dev.tickwheel.v1.ResumeJobResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ResumeJob"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.ResumeJobRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.ResumeJobResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("ResumeJob"))
              .build();
        }
      }
    }
    return getResumeJobMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.BatchResumeJobsRequest,
      dev.tickwheel.v1.BatchResumeJobsResponse> getBatchResumeJobsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "BatchResumeJobs",
      requestType = dev.tickwheel.v1.BatchResumeJobsRequest.class,
      responseType = dev.tickwheel.v1.BatchResumeJobsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.BatchResumeJobsRequest,
      dev.tickwheel.v1.BatchResumeJobsResponse> getBatchResumeJobsMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.BatchResumeJobsRequest, dev.tickwheel.v1.BatchResumeJobsResponse> getBatchResumeJobsMethod;
    if ((getBatchResumeJobsMethod = SchedulerServiceGrpc.getBatchResumeJobsMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getBatchResumeJobsMethod = SchedulerServiceGrpc.getBatchResumeJobsMethod) == null) {
          SchedulerServiceGrpc.getBatchResumeJobsMethod = getBatchResumeJobsMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.BatchResumeJobsRequest, dev.tickwheel.v1.BatchResumeJobsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "BatchResumeJobs"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.BatchResumeJobsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.BatchResumeJobsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("BatchResumeJobs"))
              .build();
        }
      }
    }
    return getBatchResumeJobsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.TriggerJobRequest,
      dev.tickwheel.v1.TriggerJobResponse> getTriggerJobMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "TriggerJob",
      requestType = dev.tickwheel.v1.TriggerJobRequest.class,
      responseType = dev.tickwheel.v1.TriggerJobResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.TriggerJobRequest,
      dev.tickwheel.v1.TriggerJobResponse> getTriggerJobMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.TriggerJobRequest, dev.tickwheel.v1.TriggerJobResponse> getTriggerJobMethod;
    if ((getTriggerJobMethod = SchedulerServiceGrpc.getTriggerJobMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getTriggerJobMethod = SchedulerServiceGrpc.getTriggerJobMethod) == null) {
          SchedulerServiceGrpc.getTriggerJobMethod = getTriggerJobMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.TriggerJobRequest, dev.tickwheel.v1.TriggerJobResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "TriggerJob"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.TriggerJobRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.TriggerJobResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("TriggerJob"))
              .build();
        }
      }
    }
    return getTriggerJobMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.BackfillJobRequest,
      dev.tickwheel.v1.BackfillJobResponse> getBackfillJobMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "BackfillJob",
      requestType = dev.tickwheel.v1.BackfillJobRequest.class,
      responseType = dev.tickwheel.v1.BackfillJobResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.BackfillJobRequest,
      dev.tickwheel.v1.BackfillJobResponse> getBackfillJobMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.BackfillJobRequest, dev.tickwheel.v1.BackfillJobResponse> getBackfillJobMethod;
    if ((getBackfillJobMethod = SchedulerServiceGrpc.getBackfillJobMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getBackfillJobMethod = SchedulerServiceGrpc.getBackfillJobMethod) == null) {
          SchedulerServiceGrpc.getBackfillJobMethod = getBackfillJobMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.BackfillJobRequest, dev.tickwheel.v1.BackfillJobResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "BackfillJob"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.BackfillJobRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.BackfillJobResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("BackfillJob"))
              .build();
        }
      }
    }
    return getBackfillJobMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.PreviewScheduleRequest,
      dev.tickwheel.v1.PreviewScheduleResponse> getPreviewScheduleMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "PreviewSchedule",
      requestType = dev.tickwheel.v1.PreviewScheduleRequest.class,
      responseType = dev.tickwheel.v1.PreviewScheduleResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.PreviewScheduleRequest,
      dev.tickwheel.v1.PreviewScheduleResponse> getPreviewScheduleMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.PreviewScheduleRequest, dev.tickwheel.v1.PreviewScheduleResponse> getPreviewScheduleMethod;
    if ((getPreviewScheduleMethod = SchedulerServiceGrpc.getPreviewScheduleMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getPreviewScheduleMethod = SchedulerServiceGrpc.getPreviewScheduleMethod) == null) {
          SchedulerServiceGrpc.getPreviewScheduleMethod = getPreviewScheduleMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.PreviewScheduleRequest, dev.tickwheel.v1.PreviewScheduleResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "PreviewSchedule"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.PreviewScheduleRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.PreviewScheduleResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("PreviewSchedule"))
              .build();
        }
      }
    }
    return getPreviewScheduleMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.GetExecutionRequest,
      dev.tickwheel.v1.GetExecutionResponse> getGetExecutionMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "GetExecution",
      requestType = dev.tickwheel.v1.GetExecutionRequest.class,
      responseType = dev.tickwheel.v1.GetExecutionResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.GetExecutionRequest,
      dev.tickwheel.v1.GetExecutionResponse> getGetExecutionMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.GetExecutionRequest, dev.tickwheel.v1.GetExecutionResponse> getGetExecutionMethod;
    if ((getGetExecutionMethod = SchedulerServiceGrpc.getGetExecutionMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getGetExecutionMethod = SchedulerServiceGrpc.getGetExecutionMethod) == null) {
          SchedulerServiceGrpc.getGetExecutionMethod = getGetExecutionMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.GetExecutionRequest, dev.tickwheel.v1.GetExecutionResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "GetExecution"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.GetExecutionRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.GetExecutionResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("GetExecution"))
              .build();
        }
      }
    }
    return getGetExecutionMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.ListExecutionsRequest,
      dev.tickwheel.v1.ListExecutionsResponse> getListExecutionsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListExecutions",
      requestType = dev.tickwheel.v1.ListExecutionsRequest.class,
      responseType = dev.tickwheel.v1.ListExecutionsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.ListExecutionsRequest,
      dev.tickwheel.v1.ListExecutionsResponse> getListExecutionsMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.ListExecutionsRequest, dev.tickwheel.v1.ListExecutionsResponse> getListExecutionsMethod;
    if ((getListExecutionsMethod = SchedulerServiceGrpc.getListExecutionsMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getListExecutionsMethod = SchedulerServiceGrpc.getListExecutionsMethod) == null) {
          SchedulerServiceGrpc.getListExecutionsMethod = getListExecutionsMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.ListExecutionsRequest, dev.tickwheel.v1.ListExecutionsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListExecutions"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.ListExecutionsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.ListExecutionsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("ListExecutions"))
              .build();
        }
      }
    }
    return getListExecutionsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.CancelExecutionRequest,
      dev.tickwheel.v1.CancelExecutionResponse> getCancelExecutionMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "CancelExecution",
      requestType = dev.tickwheel.v1.CancelExecutionRequest.class,
      responseType = dev.tickwheel.v1.CancelExecutionResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.CancelExecutionRequest,
      dev.tickwheel.v1.CancelExecutionResponse> getCancelExecutionMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.CancelExecutionRequest, dev.tickwheel.v1.CancelExecutionResponse> getCancelExecutionMethod;
    if ((getCancelExecutionMethod = SchedulerServiceGrpc.getCancelExecutionMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getCancelExecutionMethod = SchedulerServiceGrpc.getCancelExecutionMethod) == null) {
          SchedulerServiceGrpc.getCancelExecutionMethod = getCancelExecutionMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.CancelExecutionRequest, dev.tickwheel.v1.CancelExecutionResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "CancelExecution"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.CancelExecutionRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.CancelExecutionResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("CancelExecution"))
              .build();
        }
      }
    }
    return getCancelExecutionMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.ListDeadLettersRequest,
      dev.tickwheel.v1.ListDeadLettersResponse> getListDeadLettersMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListDeadLetters",
      requestType = dev.tickwheel.v1.ListDeadLettersRequest.class,
      responseType = dev.tickwheel.v1.ListDeadLettersResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.ListDeadLettersRequest,
      dev.tickwheel.v1.ListDeadLettersResponse> getListDeadLettersMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.ListDeadLettersRequest, dev.tickwheel.v1.ListDeadLettersResponse> getListDeadLettersMethod;
    if ((getListDeadLettersMethod = SchedulerServiceGrpc.getListDeadLettersMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getListDeadLettersMethod = SchedulerServiceGrpc.getListDeadLettersMethod) == null) {
          SchedulerServiceGrpc.getListDeadLettersMethod = getListDeadLettersMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.ListDeadLettersRequest, dev.tickwheel.v1.ListDeadLettersResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListDeadLetters"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.ListDeadLettersRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.ListDeadLettersResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("ListDeadLetters"))
              .build();
        }
      }
    }
    return getListDeadLettersMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.ReplayDeadLetterRequest,
      dev.tickwheel.v1.ReplayDeadLetterResponse> getReplayDeadLetterMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ReplayDeadLetter",
      requestType = dev.tickwheel.v1.ReplayDeadLetterRequest.class,
      responseType = dev.tickwheel.v1.ReplayDeadLetterResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.ReplayDeadLetterRequest,
      dev.tickwheel.v1.ReplayDeadLetterResponse> getReplayDeadLetterMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.ReplayDeadLetterRequest, dev.tickwheel.v1.ReplayDeadLetterResponse> getReplayDeadLetterMethod;
    if ((getReplayDeadLetterMethod = SchedulerServiceGrpc.getReplayDeadLetterMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getReplayDeadLetterMethod = SchedulerServiceGrpc.getReplayDeadLetterMethod) == null) {
          SchedulerServiceGrpc.getReplayDeadLetterMethod = getReplayDeadLetterMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.ReplayDeadLetterRequest, dev.tickwheel.v1.ReplayDeadLetterResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ReplayDeadLetter"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.ReplayDeadLetterRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.ReplayDeadLetterResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("ReplayDeadLetter"))
              .build();
        }
      }
    }
    return getReplayDeadLetterMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.CreateCalendarRequest,
      dev.tickwheel.v1.CreateCalendarResponse> getCreateCalendarMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "CreateCalendar",
      requestType = dev.tickwheel.v1.CreateCalendarRequest.class,
      responseType = dev.tickwheel.v1.CreateCalendarResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.CreateCalendarRequest,
      dev.tickwheel.v1.CreateCalendarResponse> getCreateCalendarMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.CreateCalendarRequest, dev.tickwheel.v1.CreateCalendarResponse> getCreateCalendarMethod;
    if ((getCreateCalendarMethod = SchedulerServiceGrpc.getCreateCalendarMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getCreateCalendarMethod = SchedulerServiceGrpc.getCreateCalendarMethod) == null) {
          SchedulerServiceGrpc.getCreateCalendarMethod = getCreateCalendarMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.CreateCalendarRequest, dev.tickwheel.v1.CreateCalendarResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "CreateCalendar"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.CreateCalendarRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.CreateCalendarResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("CreateCalendar"))
              .build();
        }
      }
    }
    return getCreateCalendarMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.GetCalendarRequest,
      dev.tickwheel.v1.GetCalendarResponse> getGetCalendarMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "GetCalendar",
      requestType = dev.tickwheel.v1.GetCalendarRequest.class,
      responseType = dev.tickwheel.v1.GetCalendarResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.GetCalendarRequest,
      dev.tickwheel.v1.GetCalendarResponse> getGetCalendarMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.GetCalendarRequest, dev.tickwheel.v1.GetCalendarResponse> getGetCalendarMethod;
    if ((getGetCalendarMethod = SchedulerServiceGrpc.getGetCalendarMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getGetCalendarMethod = SchedulerServiceGrpc.getGetCalendarMethod) == null) {
          SchedulerServiceGrpc.getGetCalendarMethod = getGetCalendarMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.GetCalendarRequest, dev.tickwheel.v1.GetCalendarResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "GetCalendar"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.GetCalendarRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.GetCalendarResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("GetCalendar"))
              .build();
        }
      }
    }
    return getGetCalendarMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.ListCalendarsRequest,
      dev.tickwheel.v1.ListCalendarsResponse> getListCalendarsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListCalendars",
      requestType = dev.tickwheel.v1.ListCalendarsRequest.class,
      responseType = dev.tickwheel.v1.ListCalendarsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.ListCalendarsRequest,
      dev.tickwheel.v1.ListCalendarsResponse> getListCalendarsMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.ListCalendarsRequest, dev.tickwheel.v1.ListCalendarsResponse> getListCalendarsMethod;
    if ((getListCalendarsMethod = SchedulerServiceGrpc.getListCalendarsMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getListCalendarsMethod = SchedulerServiceGrpc.getListCalendarsMethod) == null) {
          SchedulerServiceGrpc.getListCalendarsMethod = getListCalendarsMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.ListCalendarsRequest, dev.tickwheel.v1.ListCalendarsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListCalendars"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.ListCalendarsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.ListCalendarsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("ListCalendars"))
              .build();
        }
      }
    }
    return getListCalendarsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.UpdateCalendarRequest,
      dev.tickwheel.v1.UpdateCalendarResponse> getUpdateCalendarMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "UpdateCalendar",
      requestType = dev.tickwheel.v1.UpdateCalendarRequest.class,
      responseType = dev.tickwheel.v1.UpdateCalendarResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.UpdateCalendarRequest,
      dev.tickwheel.v1.UpdateCalendarResponse> getUpdateCalendarMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.UpdateCalendarRequest, dev.tickwheel.v1.UpdateCalendarResponse> getUpdateCalendarMethod;
    if ((getUpdateCalendarMethod = SchedulerServiceGrpc.getUpdateCalendarMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getUpdateCalendarMethod = SchedulerServiceGrpc.getUpdateCalendarMethod) == null) {
          SchedulerServiceGrpc.getUpdateCalendarMethod = getUpdateCalendarMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.UpdateCalendarRequest, dev.tickwheel.v1.UpdateCalendarResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "UpdateCalendar"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.UpdateCalendarRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.UpdateCalendarResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("UpdateCalendar"))
              .build();
        }
      }
    }
    return getUpdateCalendarMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.DeleteCalendarRequest,
      dev.tickwheel.v1.DeleteCalendarResponse> getDeleteCalendarMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "DeleteCalendar",
      requestType = dev.tickwheel.v1.DeleteCalendarRequest.class,
      responseType = dev.tickwheel.v1.DeleteCalendarResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.DeleteCalendarRequest,
      dev.tickwheel.v1.DeleteCalendarResponse> getDeleteCalendarMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.DeleteCalendarRequest, dev.tickwheel.v1.DeleteCalendarResponse> getDeleteCalendarMethod;
    if ((getDeleteCalendarMethod = SchedulerServiceGrpc.getDeleteCalendarMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getDeleteCalendarMethod = SchedulerServiceGrpc.getDeleteCalendarMethod) == null) {
          SchedulerServiceGrpc.getDeleteCalendarMethod = getDeleteCalendarMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.DeleteCalendarRequest, dev.tickwheel.v1.DeleteCalendarResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "DeleteCalendar"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.DeleteCalendarRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.DeleteCalendarResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("DeleteCalendar"))
              .build();
        }
      }
    }
    return getDeleteCalendarMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static SchedulerServiceStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<SchedulerServiceStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<SchedulerServiceStub>() {
        @java.lang.Override
        public SchedulerServiceStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new SchedulerServiceStub(channel, callOptions);
        }
      };
    return SchedulerServiceStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports all types of calls on the service
   */
  public static SchedulerServiceBlockingV2Stub newBlockingV2Stub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<SchedulerServiceBlockingV2Stub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<SchedulerServiceBlockingV2Stub>() {
        @java.lang.Override
        public SchedulerServiceBlockingV2Stub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new SchedulerServiceBlockingV2Stub(channel, callOptions);
        }
      };
    return SchedulerServiceBlockingV2Stub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static SchedulerServiceBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<SchedulerServiceBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<SchedulerServiceBlockingStub>() {
        @java.lang.Override
        public SchedulerServiceBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new SchedulerServiceBlockingStub(channel, callOptions);
        }
      };
    return SchedulerServiceBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static SchedulerServiceFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<SchedulerServiceFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<SchedulerServiceFutureStub>() {
        @java.lang.Override
        public SchedulerServiceFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new SchedulerServiceFutureStub(channel, callOptions);
        }
      };
    return SchedulerServiceFutureStub.newStub(factory, channel);
  }

  /**
   * <pre>
   * The tenant-facing API. Every call carries `authorization: Bearer &lt;API key&gt;`
   * and sees only the jobs and executions of that key's tenant: another
   * tenant's id gets NOT_FOUND. Errors carry a google.rpc.Status with
   * BadRequest field violations (INVALID_ARGUMENT; at most 20 listed, the rest
   * counted in the message and an ErrorInfo TOO_MANY_VIOLATIONS), QuotaFailure
   * (RESOURCE_EXHAUSTED) or PreconditionFailure (FAILED_PRECONDITION); nothing
   * is written when a call fails. A request that is not a valid message (for
   * example a string that is not UTF-8) gets INVALID_ARGUMENT "the request is
   * not a valid &lt;Message&gt;"; a string holding NUL gets INVALID_ARGUMENT naming
   * it. Fields this server does not know are ignored and never stored.
   * </pre>
   */
  public interface AsyncService {

    /**
     * <pre>
     * Creates a job and computes its first run. Idempotent by `request_id`: the
     * same request id returns the job the first call created and writes
     * nothing. The job is durable before the reply.
     * </pre>
     */
    default void createJob(dev.tickwheel.v1.CreateJobRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.CreateJobResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getCreateJobMethod(), responseObserver);
    }

    /**
     * <pre>
     * Creates up to 1 000 jobs in one call. Each item is a CreateJobRequest
     * with its own `request_id` and is validated, deduplicated and counted
     * against the tenant's `max_jobs` on its own: a bad item, or one over the
     * quota, gets its error in its result and does not fail the others. The
     * items created are stored in one transaction, durable before the reply;
     * a repeat of an item's request id (in this call or an earlier one)
     * returns the job its first request created and writes nothing. The call
     * itself fails only when it is not a batch: no items or more than 1 000
     * (INVALID_ARGUMENT `items`), or when the store is unavailable
     * (UNAVAILABLE; nothing written, retrying the same call is safe), and,
     * nothing written, when its answer would be too large for a default
     * client (see BatchCreateJobsRequest.view).
     * </pre>
     */
    default void batchCreateJobs(dev.tickwheel.v1.BatchCreateJobsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.BatchCreateJobsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getBatchCreateJobsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Returns a job with its next runs and its last outcome.
     * </pre>
     */
    default void getJob(dev.tickwheel.v1.GetJobRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.GetJobResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getGetJobMethod(), responseObserver);
    }

    /**
     * <pre>
     * Lists the tenant's jobs, ordered by id, paged.
     * </pre>
     */
    default void listJobs(dev.tickwheel.v1.ListJobsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.ListJobsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListJobsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Changes a job. The request's `job.version` must equal the stored version:
     * FAILED_PRECONDITION otherwise. An update never loses an occurrence still
     * to come and never touches a RUNNING execution. What it does to the
     * executions that have not started, by what changed:
     * - When a job runs (`schedule`, its zone, `dst_policy`, `jitter`,
     *   `start_at`, `end_at`, `max_runs`, a one-off's instant): the next run is
     *   recomputed, and the occurrences already created ahead of time that have
     *   not started are re-created under the new definition by the id rule:
     *   an instant the new schedule keeps keeps its execution id (with the new
     *   due instant, payload and target); one it does not have is CANCELED
     *   ("canceled: job updated: not an occurrence of the new schedule"); one
     *   it adds among them is created.
     * - `payload`: those occurrences take the new payload. Retries waiting,
     *   re-deliveries, triggers and backfills keep the payload they have.
     * - `target`: every execution not started runs the new target (a change of
     *   handler moves it to workers serving the new handler).
     * - Anything else (name, labels, timeout, retry, overlap and
     *   misfire policies, concurrency keys, thresholds): executions stay as they
     *   are; the new values apply wherever they are read (the timeout, target
     *   and overlap policy at hand-out, the retry policy when a result is
     *   recorded, the misfire policy when occurrences are created).
     * A paused job stays paused: what the update keeps or creates stays held.
     * Each applied change keeps the definition it replaced as a revision
     * (ListJobRevisions); a change that changes nothing keeps none. Rollback
     * is an UpdateJob whose `job` is a revision's definition (GetJob with
     * `revision`) at the current `version`, with an empty `update_mask`.
     * With `validate_only`, the request is checked as an update (the same
     * errors, the version check included) and nothing is written; the answer
     * holds the diff of the job's runs (UpdateJobResponse.run_diff).
     * </pre>
     */
    default void updateJob(dev.tickwheel.v1.UpdateJobRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.UpdateJobResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getUpdateJobMethod(), responseObserver);
    }

    /**
     * <pre>
     * Changes up to 1 000 jobs in one call. Each item is an UpdateJobRequest
     * and is answered as UpdateJob would answer it alone: the job as stored
     * after the change, or the error (INVALID_ARGUMENT with BadRequest field
     * violations relative to the item, e.g. `update_mask` or `job.version`;
     * NOT_FOUND for an id that is not one of the tenant's jobs, another
     * tenant's included; FAILED_PRECONDITION with a PreconditionFailure when
     * `job.version` is not the stored version; RESOURCE_EXHAUSTED over
     * `max_payload_bytes`, or on `requests_per_second` with a RetryInfo
     * delay once the paused spans the earlier items counted exceed what the
     * tenant's request rate pays for: see BatchResumeJobs). A bad item writes
     * nothing and does not fail the others. The items are applied in request
     * order in one transaction,
     * durable before the reply: an id repeated in the call sees what its
     * earlier items did (its version among them, so a repeat carrying the
     * version it read before the call gets FAILED_PRECONDITION when an earlier
     * item changed the job). The call itself fails only when it is not a
     * batch: no items or more than 1 000 (INVALID_ARGUMENT `items`), or when
     * the store is unavailable (UNAVAILABLE; nothing written, and retrying the
     * same call is safe: each item's `job.version` makes a change apply once).
     * An item with `validate_only` is refused (INVALID_ARGUMENT
     * `validate_only`): preview changes one at a time with UpdateJob. A call
     * whose answer would be too large for a default client is refused whole,
     * nothing written (see BatchUpdateJobsRequest.view).
     * </pre>
     */
    default void batchUpdateJobs(dev.tickwheel.v1.BatchUpdateJobsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.BatchUpdateJobsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getBatchUpdateJobsMethod(), responseObserver);
    }

    /**
     * <pre>
     * The revisions of a job, newest first, paged: each one the definition an
     * applied UpdateJob (single, batch or a rollback) replaced, with who
     * changed it, when, and the change's mask. The last 100 revisions of a
     * job are kept (older ones are deleted as new ones come); deleting the
     * job deletes its revisions. NOT_FOUND for an id that is not one of the
     * tenant's jobs, another tenant's included.
     * </pre>
     */
    default void listJobRevisions(dev.tickwheel.v1.ListJobRevisionsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.ListJobRevisionsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListJobRevisionsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Deletes a job and cancels its executions that have not started (held
     * ones included), recorded as CANCELED with "canceled: job deleted".
     * A RUNNING execution finishes. History is kept for the retention window.
     * </pre>
     */
    default void deleteJob(dev.tickwheel.v1.DeleteJobRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.DeleteJobResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getDeleteJobMethod(), responseObserver);
    }

    /**
     * <pre>
     * Deletes up to 1 000 jobs in one call. Each item is a DeleteJobRequest
     * and is answered as DeleteJob would answer it alone: how many of the
     * job's executions that had not started were canceled, or the error
     * (INVALID_ARGUMENT naming the item's field, e.g. `id`; NOT_FOUND for an
     * id that is not one of the tenant's jobs, another tenant's included;
     * FAILED_PRECONDITION when a non-zero `version` is not the stored
     * version). A bad item writes nothing and does not fail the others. The
     * items are applied in request order in one transaction, durable before
     * the reply: an id repeated in the call gets NOT_FOUND after its first
     * delete. The call itself fails only when it is not a batch: no items or
     * more than 1 000 (INVALID_ARGUMENT `items`), or when the store is
     * unavailable (UNAVAILABLE; nothing written, retrying is safe). A retried
     * call whose first attempt did commit (the reply was lost) answers
     * NOT_FOUND for the jobs it deleted.
     * </pre>
     */
    default void batchDeleteJobs(dev.tickwheel.v1.BatchDeleteJobsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.BatchDeleteJobsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getBatchDeleteJobsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Stops creating occurrences and holds the executions that have not started
     * (created ahead of time, waiting for a retry, triggered or backfilled): they
     * show as WAITING and are not handed out until ResumeJob. A RUNNING
     * execution finishes (a failure of it may still be retried). TriggerJob and
     * BackfillJob still run on a paused job: they are asked for. Pausing a
     * paused job changes nothing.
     * </pre>
     */
    default void pauseJob(dev.tickwheel.v1.PauseJobRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.PauseJobResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getPauseJobMethod(), responseObserver);
    }

    /**
     * <pre>
     * Pauses up to 1 000 jobs in one call (an operator stopping a team's jobs
     * during an incident). Each item is a PauseJobRequest answered as PauseJob
     * would answer it alone: the job, now PAUSED, with the executions it held
     * (a job already paused, by an earlier item too, is answered unchanged),
     * or the error (NOT_FOUND for an id that is not one of the tenant's jobs,
     * another tenant's included; INVALID_ARGUMENT naming the item's field).
     * The items are applied in request order in one transaction, durable
     * before the reply. The call itself fails only when it is not a batch (no
     * items or more than 1 000: INVALID_ARGUMENT `items`) or when the store is
     * unavailable (UNAVAILABLE; nothing written, retrying is safe: pausing a
     * paused job changes nothing), or when its answer would be too large for
     * a default client (nothing written; ask JOB_VIEW_BASIC: see
     * BatchPauseJobsRequest.view).
     * </pre>
     */
    default void batchPauseJobs(dev.tickwheel.v1.BatchPauseJobsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.BatchPauseJobsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getBatchPauseJobsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Starts again. One rule for every occurrence that came due while
     * paused, whether the dispatcher had claimed it ahead (a held execution)
     * or not: it runs, late, when the resume is within the job's
     * `misfire_threshold` of its due instant; older ones are recorded as one
     * skip range (reason JOB_PAUSED), never run as a catch-up burst. The
     * late ones are bounded: at most one less than the job's backlog cap
     * (10, plus `misfire_run_all_limit` under MISFIRE_POLICY_RUN_ALL) run in
     * all, the held executions released counted first, then the most recent
     * of those never claimed; the older ones join the skip range. The other
     * held executions (retries, re-deliveries, triggers, backfills) are
     * released and run however late. The job's next run is then the
     * earliest late occurrence that runs, else the next future one.
     * Resuming an active job changes nothing. Counting the paused span (up
     * to 100 000 occurrences) is charged to the tenant's request rate, one
     * request per 100 occurrences beyond the first 100, after the resume:
     * the tenant's next
     * calls may then be refused RESOURCE_EXHAUSTED `requests_per_second`
     * with a RetryInfo delay until it is paid back. So is a schedule change
     * of a paused job (UpdateJob).
     * </pre>
     */
    default void resumeJob(dev.tickwheel.v1.ResumeJobRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.ResumeJobResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getResumeJobMethod(), responseObserver);
    }

    /**
     * <pre>
     * Resumes up to 1 000 jobs in one call. Each item is a ResumeJobRequest
     * answered as ResumeJob would answer it alone: the job with its next
     * run, the skip range of its paused span and the executions it
     * released (a job that is not paused, resumed by an earlier item too, is
     * answered unchanged), or the error (NOT_FOUND for an id that is not one
     * of the tenant's jobs; INVALID_ARGUMENT naming the item's field;
     * RESOURCE_EXHAUSTED `requests_per_second` with a RetryInfo delay for an
     * item reached once the spans counted by the earlier items exceed what
     * the tenant's request rate pays for: it stays paused, send it again
     * after the delay; the first item is always counted). Each span is
     * counted under the job's lock, in request order, in one transaction. The call itself fails only when it is not a batch
     * (INVALID_ARGUMENT `items`) or when the store is unavailable
     * (UNAVAILABLE; nothing written, retrying is safe: resuming an active job
     * changes nothing), or when its answer would be too large for a default
     * client (nothing written; see BatchResumeJobsRequest.view).
     * </pre>
     */
    default void batchResumeJobs(dev.tickwheel.v1.BatchResumeJobsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.BatchResumeJobsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getBatchResumeJobsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Runs the job now, once per request id: the execution id is
     * `&lt;job id&gt;:trigger:&lt;request id&gt;`.
     * </pre>
     */
    default void triggerJob(dev.tickwheel.v1.TriggerJobRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.TriggerJobResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getTriggerJobMethod(), responseObserver);
    }

    /**
     * <pre>
     * Creates the occurrences the schedule had in [from_at, to_at), with their
     * normal ids, so repeated or overlapping backfills never duplicate.
     * </pre>
     */
    default void backfillJob(dev.tickwheel.v1.BackfillJobRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.BackfillJobResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getBackfillJobMethod(), responseObserver);
    }

    /**
     * <pre>
     * Computes the next fires of a saved job or of an unsaved schedule.
     * </pre>
     */
    default void previewSchedule(dev.tickwheel.v1.PreviewScheduleRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.PreviewScheduleResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getPreviewScheduleMethod(), responseObserver);
    }

    /**
     * <pre>
     * Returns one execution with its attempts.
     * </pre>
     */
    default void getExecution(dev.tickwheel.v1.GetExecutionRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.GetExecutionResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getGetExecutionMethod(), responseObserver);
    }

    /**
     * <pre>
     * A job's history, newest first, with attempts and skip ranges.
     * </pre>
     */
    default void listExecutions(dev.tickwheel.v1.ListExecutionsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.ListExecutionsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListExecutionsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Cancels an execution: a waiting one at once, a running one through its
     * worker's cancel signal. A run started ahead of its instant is canceled as
     * a running one (signalled once it is sent) and answered as SCHEDULED, as
     * every read shows it until it is sent.
     * </pre>
     */
    default void cancelExecution(dev.tickwheel.v1.CancelExecutionRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.CancelExecutionResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getCancelExecutionMethod(), responseObserver);
    }

    /**
     * <pre>
     * Dead-lettered executions of the tenant, newest first.
     * </pre>
     */
    default void listDeadLetters(dev.tickwheel.v1.ListDeadLettersRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.ListDeadLettersResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListDeadLettersMethod(), responseObserver);
    }

    /**
     * <pre>
     * Starts a fresh attempt series for a dead execution, with the same id.
     * The run counts against the tenant's max_pending_manual_runs until it
     * starts: RESOURCE_EXHAUSTED naming it, the execution still dead, when
     * none is left.
     * </pre>
     */
    default void replayDeadLetter(dev.tickwheel.v1.ReplayDeadLetterRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.ReplayDeadLetterResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getReplayDeadLetterMethod(), responseObserver);
    }

    /**
     * <pre>
     * Creates a business-day calendar (see `Calendar` for every bound).
     * Idempotent by `request_id` for 24 hours: a repeat returns the calendar
     * the first call created (`created` false) and writes nothing, whatever its
     * own definition; NOT_FOUND when that calendar was deleted since.
     * ALREADY_EXISTS when the tenant has a calendar of that name (created by
     * another request). RESOURCE_EXHAUSTED (QuotaFailure, quota
     * `max_calendars`) when the tenant has 1 000 calendars, the most it may
     * have. Durable before the reply.
     * </pre>
     */
    default void createCalendar(dev.tickwheel.v1.CreateCalendarRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.CreateCalendarResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getCreateCalendarMethod(), responseObserver);
    }

    /**
     * <pre>
     * Returns one calendar with every holiday and half-day. NOT_FOUND for a
     * name that is not one of the tenant's calendars, another tenant's
     * included.
     * </pre>
     */
    default void getCalendar(dev.tickwheel.v1.GetCalendarRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.GetCalendarResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getGetCalendarMethod(), responseObserver);
    }

    /**
     * <pre>
     * Lists the tenant's calendars, ordered by name, paged, without their
     * dates (their counts instead).
     * </pre>
     */
    default void listCalendars(dev.tickwheel.v1.ListCalendarsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.ListCalendarsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListCalendarsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Changes a calendar. `calendar.version` is required and must equal the
     * stored version: FAILED_PRECONDITION otherwise. The fields in
     * `update_mask` are replaced (a list is replaced whole, not merged) and the
     * result is validated as CreateCalendar validates; it is stored at version
     * + 1, or returned unchanged when it changes nothing. In the same
     * transaction, the runs already created and not yet handed out of the
     * tenant's jobs that name the calendar are decided again under the new
     * calendar (their ids stay): the response counts those moved or dropped
     * and lists the first ones, and a `calendar_runs_changed` alert says the
     * same when there are any.
     * </pre>
     */
    default void updateCalendar(dev.tickwheel.v1.UpdateCalendarRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.UpdateCalendarResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getUpdateCalendarMethod(), responseObserver);
    }

    /**
     * <pre>
     * Deletes a calendar. FAILED_PRECONDITION when a non-zero `version` is not
     * the stored version, and FAILED_PRECONDITION naming how many jobs name
     * the calendar when any does (a deleted job does not count; a paused or
     * completed one does): change or delete those jobs first.
     * </pre>
     */
    default void deleteCalendar(dev.tickwheel.v1.DeleteCalendarRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.DeleteCalendarResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getDeleteCalendarMethod(), responseObserver);
    }
  }

  /**
   * Base class for the server implementation of the service SchedulerService.
   * <pre>
   * The tenant-facing API. Every call carries `authorization: Bearer &lt;API key&gt;`
   * and sees only the jobs and executions of that key's tenant: another
   * tenant's id gets NOT_FOUND. Errors carry a google.rpc.Status with
   * BadRequest field violations (INVALID_ARGUMENT; at most 20 listed, the rest
   * counted in the message and an ErrorInfo TOO_MANY_VIOLATIONS), QuotaFailure
   * (RESOURCE_EXHAUSTED) or PreconditionFailure (FAILED_PRECONDITION); nothing
   * is written when a call fails. A request that is not a valid message (for
   * example a string that is not UTF-8) gets INVALID_ARGUMENT "the request is
   * not a valid &lt;Message&gt;"; a string holding NUL gets INVALID_ARGUMENT naming
   * it. Fields this server does not know are ignored and never stored.
   * </pre>
   */
  public static abstract class SchedulerServiceImplBase
      implements io.grpc.BindableService, AsyncService {

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return SchedulerServiceGrpc.bindService(this);
    }
  }

  /**
   * A stub to allow clients to do asynchronous rpc calls to service SchedulerService.
   * <pre>
   * The tenant-facing API. Every call carries `authorization: Bearer &lt;API key&gt;`
   * and sees only the jobs and executions of that key's tenant: another
   * tenant's id gets NOT_FOUND. Errors carry a google.rpc.Status with
   * BadRequest field violations (INVALID_ARGUMENT; at most 20 listed, the rest
   * counted in the message and an ErrorInfo TOO_MANY_VIOLATIONS), QuotaFailure
   * (RESOURCE_EXHAUSTED) or PreconditionFailure (FAILED_PRECONDITION); nothing
   * is written when a call fails. A request that is not a valid message (for
   * example a string that is not UTF-8) gets INVALID_ARGUMENT "the request is
   * not a valid &lt;Message&gt;"; a string holding NUL gets INVALID_ARGUMENT naming
   * it. Fields this server does not know are ignored and never stored.
   * </pre>
   */
  public static final class SchedulerServiceStub
      extends io.grpc.stub.AbstractAsyncStub<SchedulerServiceStub> {
    private SchedulerServiceStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected SchedulerServiceStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new SchedulerServiceStub(channel, callOptions);
    }

    /**
     * <pre>
     * Creates a job and computes its first run. Idempotent by `request_id`: the
     * same request id returns the job the first call created and writes
     * nothing. The job is durable before the reply.
     * </pre>
     */
    public void createJob(dev.tickwheel.v1.CreateJobRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.CreateJobResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getCreateJobMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Creates up to 1 000 jobs in one call. Each item is a CreateJobRequest
     * with its own `request_id` and is validated, deduplicated and counted
     * against the tenant's `max_jobs` on its own: a bad item, or one over the
     * quota, gets its error in its result and does not fail the others. The
     * items created are stored in one transaction, durable before the reply;
     * a repeat of an item's request id (in this call or an earlier one)
     * returns the job its first request created and writes nothing. The call
     * itself fails only when it is not a batch: no items or more than 1 000
     * (INVALID_ARGUMENT `items`), or when the store is unavailable
     * (UNAVAILABLE; nothing written, retrying the same call is safe), and,
     * nothing written, when its answer would be too large for a default
     * client (see BatchCreateJobsRequest.view).
     * </pre>
     */
    public void batchCreateJobs(dev.tickwheel.v1.BatchCreateJobsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.BatchCreateJobsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getBatchCreateJobsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Returns a job with its next runs and its last outcome.
     * </pre>
     */
    public void getJob(dev.tickwheel.v1.GetJobRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.GetJobResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getGetJobMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Lists the tenant's jobs, ordered by id, paged.
     * </pre>
     */
    public void listJobs(dev.tickwheel.v1.ListJobsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.ListJobsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListJobsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Changes a job. The request's `job.version` must equal the stored version:
     * FAILED_PRECONDITION otherwise. An update never loses an occurrence still
     * to come and never touches a RUNNING execution. What it does to the
     * executions that have not started, by what changed:
     * - When a job runs (`schedule`, its zone, `dst_policy`, `jitter`,
     *   `start_at`, `end_at`, `max_runs`, a one-off's instant): the next run is
     *   recomputed, and the occurrences already created ahead of time that have
     *   not started are re-created under the new definition by the id rule:
     *   an instant the new schedule keeps keeps its execution id (with the new
     *   due instant, payload and target); one it does not have is CANCELED
     *   ("canceled: job updated: not an occurrence of the new schedule"); one
     *   it adds among them is created.
     * - `payload`: those occurrences take the new payload. Retries waiting,
     *   re-deliveries, triggers and backfills keep the payload they have.
     * - `target`: every execution not started runs the new target (a change of
     *   handler moves it to workers serving the new handler).
     * - Anything else (name, labels, timeout, retry, overlap and
     *   misfire policies, concurrency keys, thresholds): executions stay as they
     *   are; the new values apply wherever they are read (the timeout, target
     *   and overlap policy at hand-out, the retry policy when a result is
     *   recorded, the misfire policy when occurrences are created).
     * A paused job stays paused: what the update keeps or creates stays held.
     * Each applied change keeps the definition it replaced as a revision
     * (ListJobRevisions); a change that changes nothing keeps none. Rollback
     * is an UpdateJob whose `job` is a revision's definition (GetJob with
     * `revision`) at the current `version`, with an empty `update_mask`.
     * With `validate_only`, the request is checked as an update (the same
     * errors, the version check included) and nothing is written; the answer
     * holds the diff of the job's runs (UpdateJobResponse.run_diff).
     * </pre>
     */
    public void updateJob(dev.tickwheel.v1.UpdateJobRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.UpdateJobResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getUpdateJobMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Changes up to 1 000 jobs in one call. Each item is an UpdateJobRequest
     * and is answered as UpdateJob would answer it alone: the job as stored
     * after the change, or the error (INVALID_ARGUMENT with BadRequest field
     * violations relative to the item, e.g. `update_mask` or `job.version`;
     * NOT_FOUND for an id that is not one of the tenant's jobs, another
     * tenant's included; FAILED_PRECONDITION with a PreconditionFailure when
     * `job.version` is not the stored version; RESOURCE_EXHAUSTED over
     * `max_payload_bytes`, or on `requests_per_second` with a RetryInfo
     * delay once the paused spans the earlier items counted exceed what the
     * tenant's request rate pays for: see BatchResumeJobs). A bad item writes
     * nothing and does not fail the others. The items are applied in request
     * order in one transaction,
     * durable before the reply: an id repeated in the call sees what its
     * earlier items did (its version among them, so a repeat carrying the
     * version it read before the call gets FAILED_PRECONDITION when an earlier
     * item changed the job). The call itself fails only when it is not a
     * batch: no items or more than 1 000 (INVALID_ARGUMENT `items`), or when
     * the store is unavailable (UNAVAILABLE; nothing written, and retrying the
     * same call is safe: each item's `job.version` makes a change apply once).
     * An item with `validate_only` is refused (INVALID_ARGUMENT
     * `validate_only`): preview changes one at a time with UpdateJob. A call
     * whose answer would be too large for a default client is refused whole,
     * nothing written (see BatchUpdateJobsRequest.view).
     * </pre>
     */
    public void batchUpdateJobs(dev.tickwheel.v1.BatchUpdateJobsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.BatchUpdateJobsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getBatchUpdateJobsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * The revisions of a job, newest first, paged: each one the definition an
     * applied UpdateJob (single, batch or a rollback) replaced, with who
     * changed it, when, and the change's mask. The last 100 revisions of a
     * job are kept (older ones are deleted as new ones come); deleting the
     * job deletes its revisions. NOT_FOUND for an id that is not one of the
     * tenant's jobs, another tenant's included.
     * </pre>
     */
    public void listJobRevisions(dev.tickwheel.v1.ListJobRevisionsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.ListJobRevisionsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListJobRevisionsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Deletes a job and cancels its executions that have not started (held
     * ones included), recorded as CANCELED with "canceled: job deleted".
     * A RUNNING execution finishes. History is kept for the retention window.
     * </pre>
     */
    public void deleteJob(dev.tickwheel.v1.DeleteJobRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.DeleteJobResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getDeleteJobMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Deletes up to 1 000 jobs in one call. Each item is a DeleteJobRequest
     * and is answered as DeleteJob would answer it alone: how many of the
     * job's executions that had not started were canceled, or the error
     * (INVALID_ARGUMENT naming the item's field, e.g. `id`; NOT_FOUND for an
     * id that is not one of the tenant's jobs, another tenant's included;
     * FAILED_PRECONDITION when a non-zero `version` is not the stored
     * version). A bad item writes nothing and does not fail the others. The
     * items are applied in request order in one transaction, durable before
     * the reply: an id repeated in the call gets NOT_FOUND after its first
     * delete. The call itself fails only when it is not a batch: no items or
     * more than 1 000 (INVALID_ARGUMENT `items`), or when the store is
     * unavailable (UNAVAILABLE; nothing written, retrying is safe). A retried
     * call whose first attempt did commit (the reply was lost) answers
     * NOT_FOUND for the jobs it deleted.
     * </pre>
     */
    public void batchDeleteJobs(dev.tickwheel.v1.BatchDeleteJobsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.BatchDeleteJobsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getBatchDeleteJobsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Stops creating occurrences and holds the executions that have not started
     * (created ahead of time, waiting for a retry, triggered or backfilled): they
     * show as WAITING and are not handed out until ResumeJob. A RUNNING
     * execution finishes (a failure of it may still be retried). TriggerJob and
     * BackfillJob still run on a paused job: they are asked for. Pausing a
     * paused job changes nothing.
     * </pre>
     */
    public void pauseJob(dev.tickwheel.v1.PauseJobRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.PauseJobResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getPauseJobMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Pauses up to 1 000 jobs in one call (an operator stopping a team's jobs
     * during an incident). Each item is a PauseJobRequest answered as PauseJob
     * would answer it alone: the job, now PAUSED, with the executions it held
     * (a job already paused, by an earlier item too, is answered unchanged),
     * or the error (NOT_FOUND for an id that is not one of the tenant's jobs,
     * another tenant's included; INVALID_ARGUMENT naming the item's field).
     * The items are applied in request order in one transaction, durable
     * before the reply. The call itself fails only when it is not a batch (no
     * items or more than 1 000: INVALID_ARGUMENT `items`) or when the store is
     * unavailable (UNAVAILABLE; nothing written, retrying is safe: pausing a
     * paused job changes nothing), or when its answer would be too large for
     * a default client (nothing written; ask JOB_VIEW_BASIC: see
     * BatchPauseJobsRequest.view).
     * </pre>
     */
    public void batchPauseJobs(dev.tickwheel.v1.BatchPauseJobsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.BatchPauseJobsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getBatchPauseJobsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Starts again. One rule for every occurrence that came due while
     * paused, whether the dispatcher had claimed it ahead (a held execution)
     * or not: it runs, late, when the resume is within the job's
     * `misfire_threshold` of its due instant; older ones are recorded as one
     * skip range (reason JOB_PAUSED), never run as a catch-up burst. The
     * late ones are bounded: at most one less than the job's backlog cap
     * (10, plus `misfire_run_all_limit` under MISFIRE_POLICY_RUN_ALL) run in
     * all, the held executions released counted first, then the most recent
     * of those never claimed; the older ones join the skip range. The other
     * held executions (retries, re-deliveries, triggers, backfills) are
     * released and run however late. The job's next run is then the
     * earliest late occurrence that runs, else the next future one.
     * Resuming an active job changes nothing. Counting the paused span (up
     * to 100 000 occurrences) is charged to the tenant's request rate, one
     * request per 100 occurrences beyond the first 100, after the resume:
     * the tenant's next
     * calls may then be refused RESOURCE_EXHAUSTED `requests_per_second`
     * with a RetryInfo delay until it is paid back. So is a schedule change
     * of a paused job (UpdateJob).
     * </pre>
     */
    public void resumeJob(dev.tickwheel.v1.ResumeJobRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.ResumeJobResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getResumeJobMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Resumes up to 1 000 jobs in one call. Each item is a ResumeJobRequest
     * answered as ResumeJob would answer it alone: the job with its next
     * run, the skip range of its paused span and the executions it
     * released (a job that is not paused, resumed by an earlier item too, is
     * answered unchanged), or the error (NOT_FOUND for an id that is not one
     * of the tenant's jobs; INVALID_ARGUMENT naming the item's field;
     * RESOURCE_EXHAUSTED `requests_per_second` with a RetryInfo delay for an
     * item reached once the spans counted by the earlier items exceed what
     * the tenant's request rate pays for: it stays paused, send it again
     * after the delay; the first item is always counted). Each span is
     * counted under the job's lock, in request order, in one transaction. The call itself fails only when it is not a batch
     * (INVALID_ARGUMENT `items`) or when the store is unavailable
     * (UNAVAILABLE; nothing written, retrying is safe: resuming an active job
     * changes nothing), or when its answer would be too large for a default
     * client (nothing written; see BatchResumeJobsRequest.view).
     * </pre>
     */
    public void batchResumeJobs(dev.tickwheel.v1.BatchResumeJobsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.BatchResumeJobsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getBatchResumeJobsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Runs the job now, once per request id: the execution id is
     * `&lt;job id&gt;:trigger:&lt;request id&gt;`.
     * </pre>
     */
    public void triggerJob(dev.tickwheel.v1.TriggerJobRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.TriggerJobResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getTriggerJobMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Creates the occurrences the schedule had in [from_at, to_at), with their
     * normal ids, so repeated or overlapping backfills never duplicate.
     * </pre>
     */
    public void backfillJob(dev.tickwheel.v1.BackfillJobRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.BackfillJobResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getBackfillJobMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Computes the next fires of a saved job or of an unsaved schedule.
     * </pre>
     */
    public void previewSchedule(dev.tickwheel.v1.PreviewScheduleRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.PreviewScheduleResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getPreviewScheduleMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Returns one execution with its attempts.
     * </pre>
     */
    public void getExecution(dev.tickwheel.v1.GetExecutionRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.GetExecutionResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getGetExecutionMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * A job's history, newest first, with attempts and skip ranges.
     * </pre>
     */
    public void listExecutions(dev.tickwheel.v1.ListExecutionsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.ListExecutionsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListExecutionsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Cancels an execution: a waiting one at once, a running one through its
     * worker's cancel signal. A run started ahead of its instant is canceled as
     * a running one (signalled once it is sent) and answered as SCHEDULED, as
     * every read shows it until it is sent.
     * </pre>
     */
    public void cancelExecution(dev.tickwheel.v1.CancelExecutionRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.CancelExecutionResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getCancelExecutionMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Dead-lettered executions of the tenant, newest first.
     * </pre>
     */
    public void listDeadLetters(dev.tickwheel.v1.ListDeadLettersRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.ListDeadLettersResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListDeadLettersMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Starts a fresh attempt series for a dead execution, with the same id.
     * The run counts against the tenant's max_pending_manual_runs until it
     * starts: RESOURCE_EXHAUSTED naming it, the execution still dead, when
     * none is left.
     * </pre>
     */
    public void replayDeadLetter(dev.tickwheel.v1.ReplayDeadLetterRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.ReplayDeadLetterResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getReplayDeadLetterMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Creates a business-day calendar (see `Calendar` for every bound).
     * Idempotent by `request_id` for 24 hours: a repeat returns the calendar
     * the first call created (`created` false) and writes nothing, whatever its
     * own definition; NOT_FOUND when that calendar was deleted since.
     * ALREADY_EXISTS when the tenant has a calendar of that name (created by
     * another request). RESOURCE_EXHAUSTED (QuotaFailure, quota
     * `max_calendars`) when the tenant has 1 000 calendars, the most it may
     * have. Durable before the reply.
     * </pre>
     */
    public void createCalendar(dev.tickwheel.v1.CreateCalendarRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.CreateCalendarResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getCreateCalendarMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Returns one calendar with every holiday and half-day. NOT_FOUND for a
     * name that is not one of the tenant's calendars, another tenant's
     * included.
     * </pre>
     */
    public void getCalendar(dev.tickwheel.v1.GetCalendarRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.GetCalendarResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getGetCalendarMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Lists the tenant's calendars, ordered by name, paged, without their
     * dates (their counts instead).
     * </pre>
     */
    public void listCalendars(dev.tickwheel.v1.ListCalendarsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.ListCalendarsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListCalendarsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Changes a calendar. `calendar.version` is required and must equal the
     * stored version: FAILED_PRECONDITION otherwise. The fields in
     * `update_mask` are replaced (a list is replaced whole, not merged) and the
     * result is validated as CreateCalendar validates; it is stored at version
     * + 1, or returned unchanged when it changes nothing. In the same
     * transaction, the runs already created and not yet handed out of the
     * tenant's jobs that name the calendar are decided again under the new
     * calendar (their ids stay): the response counts those moved or dropped
     * and lists the first ones, and a `calendar_runs_changed` alert says the
     * same when there are any.
     * </pre>
     */
    public void updateCalendar(dev.tickwheel.v1.UpdateCalendarRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.UpdateCalendarResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getUpdateCalendarMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Deletes a calendar. FAILED_PRECONDITION when a non-zero `version` is not
     * the stored version, and FAILED_PRECONDITION naming how many jobs name
     * the calendar when any does (a deleted job does not count; a paused or
     * completed one does): change or delete those jobs first.
     * </pre>
     */
    public void deleteCalendar(dev.tickwheel.v1.DeleteCalendarRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.DeleteCalendarResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getDeleteCalendarMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * A stub to allow clients to do synchronous rpc calls to service SchedulerService.
   * <pre>
   * The tenant-facing API. Every call carries `authorization: Bearer &lt;API key&gt;`
   * and sees only the jobs and executions of that key's tenant: another
   * tenant's id gets NOT_FOUND. Errors carry a google.rpc.Status with
   * BadRequest field violations (INVALID_ARGUMENT; at most 20 listed, the rest
   * counted in the message and an ErrorInfo TOO_MANY_VIOLATIONS), QuotaFailure
   * (RESOURCE_EXHAUSTED) or PreconditionFailure (FAILED_PRECONDITION); nothing
   * is written when a call fails. A request that is not a valid message (for
   * example a string that is not UTF-8) gets INVALID_ARGUMENT "the request is
   * not a valid &lt;Message&gt;"; a string holding NUL gets INVALID_ARGUMENT naming
   * it. Fields this server does not know are ignored and never stored.
   * </pre>
   */
  public static final class SchedulerServiceBlockingV2Stub
      extends io.grpc.stub.AbstractBlockingStub<SchedulerServiceBlockingV2Stub> {
    private SchedulerServiceBlockingV2Stub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected SchedulerServiceBlockingV2Stub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new SchedulerServiceBlockingV2Stub(channel, callOptions);
    }

    /**
     * <pre>
     * Creates a job and computes its first run. Idempotent by `request_id`: the
     * same request id returns the job the first call created and writes
     * nothing. The job is durable before the reply.
     * </pre>
     */
    public dev.tickwheel.v1.CreateJobResponse createJob(dev.tickwheel.v1.CreateJobRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getCreateJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Creates up to 1 000 jobs in one call. Each item is a CreateJobRequest
     * with its own `request_id` and is validated, deduplicated and counted
     * against the tenant's `max_jobs` on its own: a bad item, or one over the
     * quota, gets its error in its result and does not fail the others. The
     * items created are stored in one transaction, durable before the reply;
     * a repeat of an item's request id (in this call or an earlier one)
     * returns the job its first request created and writes nothing. The call
     * itself fails only when it is not a batch: no items or more than 1 000
     * (INVALID_ARGUMENT `items`), or when the store is unavailable
     * (UNAVAILABLE; nothing written, retrying the same call is safe), and,
     * nothing written, when its answer would be too large for a default
     * client (see BatchCreateJobsRequest.view).
     * </pre>
     */
    public dev.tickwheel.v1.BatchCreateJobsResponse batchCreateJobs(dev.tickwheel.v1.BatchCreateJobsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getBatchCreateJobsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Returns a job with its next runs and its last outcome.
     * </pre>
     */
    public dev.tickwheel.v1.GetJobResponse getJob(dev.tickwheel.v1.GetJobRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getGetJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Lists the tenant's jobs, ordered by id, paged.
     * </pre>
     */
    public dev.tickwheel.v1.ListJobsResponse listJobs(dev.tickwheel.v1.ListJobsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getListJobsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Changes a job. The request's `job.version` must equal the stored version:
     * FAILED_PRECONDITION otherwise. An update never loses an occurrence still
     * to come and never touches a RUNNING execution. What it does to the
     * executions that have not started, by what changed:
     * - When a job runs (`schedule`, its zone, `dst_policy`, `jitter`,
     *   `start_at`, `end_at`, `max_runs`, a one-off's instant): the next run is
     *   recomputed, and the occurrences already created ahead of time that have
     *   not started are re-created under the new definition by the id rule:
     *   an instant the new schedule keeps keeps its execution id (with the new
     *   due instant, payload and target); one it does not have is CANCELED
     *   ("canceled: job updated: not an occurrence of the new schedule"); one
     *   it adds among them is created.
     * - `payload`: those occurrences take the new payload. Retries waiting,
     *   re-deliveries, triggers and backfills keep the payload they have.
     * - `target`: every execution not started runs the new target (a change of
     *   handler moves it to workers serving the new handler).
     * - Anything else (name, labels, timeout, retry, overlap and
     *   misfire policies, concurrency keys, thresholds): executions stay as they
     *   are; the new values apply wherever they are read (the timeout, target
     *   and overlap policy at hand-out, the retry policy when a result is
     *   recorded, the misfire policy when occurrences are created).
     * A paused job stays paused: what the update keeps or creates stays held.
     * Each applied change keeps the definition it replaced as a revision
     * (ListJobRevisions); a change that changes nothing keeps none. Rollback
     * is an UpdateJob whose `job` is a revision's definition (GetJob with
     * `revision`) at the current `version`, with an empty `update_mask`.
     * With `validate_only`, the request is checked as an update (the same
     * errors, the version check included) and nothing is written; the answer
     * holds the diff of the job's runs (UpdateJobResponse.run_diff).
     * </pre>
     */
    public dev.tickwheel.v1.UpdateJobResponse updateJob(dev.tickwheel.v1.UpdateJobRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getUpdateJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Changes up to 1 000 jobs in one call. Each item is an UpdateJobRequest
     * and is answered as UpdateJob would answer it alone: the job as stored
     * after the change, or the error (INVALID_ARGUMENT with BadRequest field
     * violations relative to the item, e.g. `update_mask` or `job.version`;
     * NOT_FOUND for an id that is not one of the tenant's jobs, another
     * tenant's included; FAILED_PRECONDITION with a PreconditionFailure when
     * `job.version` is not the stored version; RESOURCE_EXHAUSTED over
     * `max_payload_bytes`, or on `requests_per_second` with a RetryInfo
     * delay once the paused spans the earlier items counted exceed what the
     * tenant's request rate pays for: see BatchResumeJobs). A bad item writes
     * nothing and does not fail the others. The items are applied in request
     * order in one transaction,
     * durable before the reply: an id repeated in the call sees what its
     * earlier items did (its version among them, so a repeat carrying the
     * version it read before the call gets FAILED_PRECONDITION when an earlier
     * item changed the job). The call itself fails only when it is not a
     * batch: no items or more than 1 000 (INVALID_ARGUMENT `items`), or when
     * the store is unavailable (UNAVAILABLE; nothing written, and retrying the
     * same call is safe: each item's `job.version` makes a change apply once).
     * An item with `validate_only` is refused (INVALID_ARGUMENT
     * `validate_only`): preview changes one at a time with UpdateJob. A call
     * whose answer would be too large for a default client is refused whole,
     * nothing written (see BatchUpdateJobsRequest.view).
     * </pre>
     */
    public dev.tickwheel.v1.BatchUpdateJobsResponse batchUpdateJobs(dev.tickwheel.v1.BatchUpdateJobsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getBatchUpdateJobsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * The revisions of a job, newest first, paged: each one the definition an
     * applied UpdateJob (single, batch or a rollback) replaced, with who
     * changed it, when, and the change's mask. The last 100 revisions of a
     * job are kept (older ones are deleted as new ones come); deleting the
     * job deletes its revisions. NOT_FOUND for an id that is not one of the
     * tenant's jobs, another tenant's included.
     * </pre>
     */
    public dev.tickwheel.v1.ListJobRevisionsResponse listJobRevisions(dev.tickwheel.v1.ListJobRevisionsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getListJobRevisionsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Deletes a job and cancels its executions that have not started (held
     * ones included), recorded as CANCELED with "canceled: job deleted".
     * A RUNNING execution finishes. History is kept for the retention window.
     * </pre>
     */
    public dev.tickwheel.v1.DeleteJobResponse deleteJob(dev.tickwheel.v1.DeleteJobRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getDeleteJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Deletes up to 1 000 jobs in one call. Each item is a DeleteJobRequest
     * and is answered as DeleteJob would answer it alone: how many of the
     * job's executions that had not started were canceled, or the error
     * (INVALID_ARGUMENT naming the item's field, e.g. `id`; NOT_FOUND for an
     * id that is not one of the tenant's jobs, another tenant's included;
     * FAILED_PRECONDITION when a non-zero `version` is not the stored
     * version). A bad item writes nothing and does not fail the others. The
     * items are applied in request order in one transaction, durable before
     * the reply: an id repeated in the call gets NOT_FOUND after its first
     * delete. The call itself fails only when it is not a batch: no items or
     * more than 1 000 (INVALID_ARGUMENT `items`), or when the store is
     * unavailable (UNAVAILABLE; nothing written, retrying is safe). A retried
     * call whose first attempt did commit (the reply was lost) answers
     * NOT_FOUND for the jobs it deleted.
     * </pre>
     */
    public dev.tickwheel.v1.BatchDeleteJobsResponse batchDeleteJobs(dev.tickwheel.v1.BatchDeleteJobsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getBatchDeleteJobsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Stops creating occurrences and holds the executions that have not started
     * (created ahead of time, waiting for a retry, triggered or backfilled): they
     * show as WAITING and are not handed out until ResumeJob. A RUNNING
     * execution finishes (a failure of it may still be retried). TriggerJob and
     * BackfillJob still run on a paused job: they are asked for. Pausing a
     * paused job changes nothing.
     * </pre>
     */
    public dev.tickwheel.v1.PauseJobResponse pauseJob(dev.tickwheel.v1.PauseJobRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getPauseJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Pauses up to 1 000 jobs in one call (an operator stopping a team's jobs
     * during an incident). Each item is a PauseJobRequest answered as PauseJob
     * would answer it alone: the job, now PAUSED, with the executions it held
     * (a job already paused, by an earlier item too, is answered unchanged),
     * or the error (NOT_FOUND for an id that is not one of the tenant's jobs,
     * another tenant's included; INVALID_ARGUMENT naming the item's field).
     * The items are applied in request order in one transaction, durable
     * before the reply. The call itself fails only when it is not a batch (no
     * items or more than 1 000: INVALID_ARGUMENT `items`) or when the store is
     * unavailable (UNAVAILABLE; nothing written, retrying is safe: pausing a
     * paused job changes nothing), or when its answer would be too large for
     * a default client (nothing written; ask JOB_VIEW_BASIC: see
     * BatchPauseJobsRequest.view).
     * </pre>
     */
    public dev.tickwheel.v1.BatchPauseJobsResponse batchPauseJobs(dev.tickwheel.v1.BatchPauseJobsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getBatchPauseJobsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Starts again. One rule for every occurrence that came due while
     * paused, whether the dispatcher had claimed it ahead (a held execution)
     * or not: it runs, late, when the resume is within the job's
     * `misfire_threshold` of its due instant; older ones are recorded as one
     * skip range (reason JOB_PAUSED), never run as a catch-up burst. The
     * late ones are bounded: at most one less than the job's backlog cap
     * (10, plus `misfire_run_all_limit` under MISFIRE_POLICY_RUN_ALL) run in
     * all, the held executions released counted first, then the most recent
     * of those never claimed; the older ones join the skip range. The other
     * held executions (retries, re-deliveries, triggers, backfills) are
     * released and run however late. The job's next run is then the
     * earliest late occurrence that runs, else the next future one.
     * Resuming an active job changes nothing. Counting the paused span (up
     * to 100 000 occurrences) is charged to the tenant's request rate, one
     * request per 100 occurrences beyond the first 100, after the resume:
     * the tenant's next
     * calls may then be refused RESOURCE_EXHAUSTED `requests_per_second`
     * with a RetryInfo delay until it is paid back. So is a schedule change
     * of a paused job (UpdateJob).
     * </pre>
     */
    public dev.tickwheel.v1.ResumeJobResponse resumeJob(dev.tickwheel.v1.ResumeJobRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getResumeJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Resumes up to 1 000 jobs in one call. Each item is a ResumeJobRequest
     * answered as ResumeJob would answer it alone: the job with its next
     * run, the skip range of its paused span and the executions it
     * released (a job that is not paused, resumed by an earlier item too, is
     * answered unchanged), or the error (NOT_FOUND for an id that is not one
     * of the tenant's jobs; INVALID_ARGUMENT naming the item's field;
     * RESOURCE_EXHAUSTED `requests_per_second` with a RetryInfo delay for an
     * item reached once the spans counted by the earlier items exceed what
     * the tenant's request rate pays for: it stays paused, send it again
     * after the delay; the first item is always counted). Each span is
     * counted under the job's lock, in request order, in one transaction. The call itself fails only when it is not a batch
     * (INVALID_ARGUMENT `items`) or when the store is unavailable
     * (UNAVAILABLE; nothing written, retrying is safe: resuming an active job
     * changes nothing), or when its answer would be too large for a default
     * client (nothing written; see BatchResumeJobsRequest.view).
     * </pre>
     */
    public dev.tickwheel.v1.BatchResumeJobsResponse batchResumeJobs(dev.tickwheel.v1.BatchResumeJobsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getBatchResumeJobsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Runs the job now, once per request id: the execution id is
     * `&lt;job id&gt;:trigger:&lt;request id&gt;`.
     * </pre>
     */
    public dev.tickwheel.v1.TriggerJobResponse triggerJob(dev.tickwheel.v1.TriggerJobRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getTriggerJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Creates the occurrences the schedule had in [from_at, to_at), with their
     * normal ids, so repeated or overlapping backfills never duplicate.
     * </pre>
     */
    public dev.tickwheel.v1.BackfillJobResponse backfillJob(dev.tickwheel.v1.BackfillJobRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getBackfillJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Computes the next fires of a saved job or of an unsaved schedule.
     * </pre>
     */
    public dev.tickwheel.v1.PreviewScheduleResponse previewSchedule(dev.tickwheel.v1.PreviewScheduleRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getPreviewScheduleMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Returns one execution with its attempts.
     * </pre>
     */
    public dev.tickwheel.v1.GetExecutionResponse getExecution(dev.tickwheel.v1.GetExecutionRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getGetExecutionMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * A job's history, newest first, with attempts and skip ranges.
     * </pre>
     */
    public dev.tickwheel.v1.ListExecutionsResponse listExecutions(dev.tickwheel.v1.ListExecutionsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getListExecutionsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Cancels an execution: a waiting one at once, a running one through its
     * worker's cancel signal. A run started ahead of its instant is canceled as
     * a running one (signalled once it is sent) and answered as SCHEDULED, as
     * every read shows it until it is sent.
     * </pre>
     */
    public dev.tickwheel.v1.CancelExecutionResponse cancelExecution(dev.tickwheel.v1.CancelExecutionRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getCancelExecutionMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Dead-lettered executions of the tenant, newest first.
     * </pre>
     */
    public dev.tickwheel.v1.ListDeadLettersResponse listDeadLetters(dev.tickwheel.v1.ListDeadLettersRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getListDeadLettersMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Starts a fresh attempt series for a dead execution, with the same id.
     * The run counts against the tenant's max_pending_manual_runs until it
     * starts: RESOURCE_EXHAUSTED naming it, the execution still dead, when
     * none is left.
     * </pre>
     */
    public dev.tickwheel.v1.ReplayDeadLetterResponse replayDeadLetter(dev.tickwheel.v1.ReplayDeadLetterRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getReplayDeadLetterMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Creates a business-day calendar (see `Calendar` for every bound).
     * Idempotent by `request_id` for 24 hours: a repeat returns the calendar
     * the first call created (`created` false) and writes nothing, whatever its
     * own definition; NOT_FOUND when that calendar was deleted since.
     * ALREADY_EXISTS when the tenant has a calendar of that name (created by
     * another request). RESOURCE_EXHAUSTED (QuotaFailure, quota
     * `max_calendars`) when the tenant has 1 000 calendars, the most it may
     * have. Durable before the reply.
     * </pre>
     */
    public dev.tickwheel.v1.CreateCalendarResponse createCalendar(dev.tickwheel.v1.CreateCalendarRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getCreateCalendarMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Returns one calendar with every holiday and half-day. NOT_FOUND for a
     * name that is not one of the tenant's calendars, another tenant's
     * included.
     * </pre>
     */
    public dev.tickwheel.v1.GetCalendarResponse getCalendar(dev.tickwheel.v1.GetCalendarRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getGetCalendarMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Lists the tenant's calendars, ordered by name, paged, without their
     * dates (their counts instead).
     * </pre>
     */
    public dev.tickwheel.v1.ListCalendarsResponse listCalendars(dev.tickwheel.v1.ListCalendarsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getListCalendarsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Changes a calendar. `calendar.version` is required and must equal the
     * stored version: FAILED_PRECONDITION otherwise. The fields in
     * `update_mask` are replaced (a list is replaced whole, not merged) and the
     * result is validated as CreateCalendar validates; it is stored at version
     * + 1, or returned unchanged when it changes nothing. In the same
     * transaction, the runs already created and not yet handed out of the
     * tenant's jobs that name the calendar are decided again under the new
     * calendar (their ids stay): the response counts those moved or dropped
     * and lists the first ones, and a `calendar_runs_changed` alert says the
     * same when there are any.
     * </pre>
     */
    public dev.tickwheel.v1.UpdateCalendarResponse updateCalendar(dev.tickwheel.v1.UpdateCalendarRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getUpdateCalendarMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Deletes a calendar. FAILED_PRECONDITION when a non-zero `version` is not
     * the stored version, and FAILED_PRECONDITION naming how many jobs name
     * the calendar when any does (a deleted job does not count; a paused or
     * completed one does): change or delete those jobs first.
     * </pre>
     */
    public dev.tickwheel.v1.DeleteCalendarResponse deleteCalendar(dev.tickwheel.v1.DeleteCalendarRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getDeleteCalendarMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do limited synchronous rpc calls to service SchedulerService.
   * <pre>
   * The tenant-facing API. Every call carries `authorization: Bearer &lt;API key&gt;`
   * and sees only the jobs and executions of that key's tenant: another
   * tenant's id gets NOT_FOUND. Errors carry a google.rpc.Status with
   * BadRequest field violations (INVALID_ARGUMENT; at most 20 listed, the rest
   * counted in the message and an ErrorInfo TOO_MANY_VIOLATIONS), QuotaFailure
   * (RESOURCE_EXHAUSTED) or PreconditionFailure (FAILED_PRECONDITION); nothing
   * is written when a call fails. A request that is not a valid message (for
   * example a string that is not UTF-8) gets INVALID_ARGUMENT "the request is
   * not a valid &lt;Message&gt;"; a string holding NUL gets INVALID_ARGUMENT naming
   * it. Fields this server does not know are ignored and never stored.
   * </pre>
   */
  public static final class SchedulerServiceBlockingStub
      extends io.grpc.stub.AbstractBlockingStub<SchedulerServiceBlockingStub> {
    private SchedulerServiceBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected SchedulerServiceBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new SchedulerServiceBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * Creates a job and computes its first run. Idempotent by `request_id`: the
     * same request id returns the job the first call created and writes
     * nothing. The job is durable before the reply.
     * </pre>
     */
    public dev.tickwheel.v1.CreateJobResponse createJob(dev.tickwheel.v1.CreateJobRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getCreateJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Creates up to 1 000 jobs in one call. Each item is a CreateJobRequest
     * with its own `request_id` and is validated, deduplicated and counted
     * against the tenant's `max_jobs` on its own: a bad item, or one over the
     * quota, gets its error in its result and does not fail the others. The
     * items created are stored in one transaction, durable before the reply;
     * a repeat of an item's request id (in this call or an earlier one)
     * returns the job its first request created and writes nothing. The call
     * itself fails only when it is not a batch: no items or more than 1 000
     * (INVALID_ARGUMENT `items`), or when the store is unavailable
     * (UNAVAILABLE; nothing written, retrying the same call is safe), and,
     * nothing written, when its answer would be too large for a default
     * client (see BatchCreateJobsRequest.view).
     * </pre>
     */
    public dev.tickwheel.v1.BatchCreateJobsResponse batchCreateJobs(dev.tickwheel.v1.BatchCreateJobsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getBatchCreateJobsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Returns a job with its next runs and its last outcome.
     * </pre>
     */
    public dev.tickwheel.v1.GetJobResponse getJob(dev.tickwheel.v1.GetJobRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getGetJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Lists the tenant's jobs, ordered by id, paged.
     * </pre>
     */
    public dev.tickwheel.v1.ListJobsResponse listJobs(dev.tickwheel.v1.ListJobsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListJobsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Changes a job. The request's `job.version` must equal the stored version:
     * FAILED_PRECONDITION otherwise. An update never loses an occurrence still
     * to come and never touches a RUNNING execution. What it does to the
     * executions that have not started, by what changed:
     * - When a job runs (`schedule`, its zone, `dst_policy`, `jitter`,
     *   `start_at`, `end_at`, `max_runs`, a one-off's instant): the next run is
     *   recomputed, and the occurrences already created ahead of time that have
     *   not started are re-created under the new definition by the id rule:
     *   an instant the new schedule keeps keeps its execution id (with the new
     *   due instant, payload and target); one it does not have is CANCELED
     *   ("canceled: job updated: not an occurrence of the new schedule"); one
     *   it adds among them is created.
     * - `payload`: those occurrences take the new payload. Retries waiting,
     *   re-deliveries, triggers and backfills keep the payload they have.
     * - `target`: every execution not started runs the new target (a change of
     *   handler moves it to workers serving the new handler).
     * - Anything else (name, labels, timeout, retry, overlap and
     *   misfire policies, concurrency keys, thresholds): executions stay as they
     *   are; the new values apply wherever they are read (the timeout, target
     *   and overlap policy at hand-out, the retry policy when a result is
     *   recorded, the misfire policy when occurrences are created).
     * A paused job stays paused: what the update keeps or creates stays held.
     * Each applied change keeps the definition it replaced as a revision
     * (ListJobRevisions); a change that changes nothing keeps none. Rollback
     * is an UpdateJob whose `job` is a revision's definition (GetJob with
     * `revision`) at the current `version`, with an empty `update_mask`.
     * With `validate_only`, the request is checked as an update (the same
     * errors, the version check included) and nothing is written; the answer
     * holds the diff of the job's runs (UpdateJobResponse.run_diff).
     * </pre>
     */
    public dev.tickwheel.v1.UpdateJobResponse updateJob(dev.tickwheel.v1.UpdateJobRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getUpdateJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Changes up to 1 000 jobs in one call. Each item is an UpdateJobRequest
     * and is answered as UpdateJob would answer it alone: the job as stored
     * after the change, or the error (INVALID_ARGUMENT with BadRequest field
     * violations relative to the item, e.g. `update_mask` or `job.version`;
     * NOT_FOUND for an id that is not one of the tenant's jobs, another
     * tenant's included; FAILED_PRECONDITION with a PreconditionFailure when
     * `job.version` is not the stored version; RESOURCE_EXHAUSTED over
     * `max_payload_bytes`, or on `requests_per_second` with a RetryInfo
     * delay once the paused spans the earlier items counted exceed what the
     * tenant's request rate pays for: see BatchResumeJobs). A bad item writes
     * nothing and does not fail the others. The items are applied in request
     * order in one transaction,
     * durable before the reply: an id repeated in the call sees what its
     * earlier items did (its version among them, so a repeat carrying the
     * version it read before the call gets FAILED_PRECONDITION when an earlier
     * item changed the job). The call itself fails only when it is not a
     * batch: no items or more than 1 000 (INVALID_ARGUMENT `items`), or when
     * the store is unavailable (UNAVAILABLE; nothing written, and retrying the
     * same call is safe: each item's `job.version` makes a change apply once).
     * An item with `validate_only` is refused (INVALID_ARGUMENT
     * `validate_only`): preview changes one at a time with UpdateJob. A call
     * whose answer would be too large for a default client is refused whole,
     * nothing written (see BatchUpdateJobsRequest.view).
     * </pre>
     */
    public dev.tickwheel.v1.BatchUpdateJobsResponse batchUpdateJobs(dev.tickwheel.v1.BatchUpdateJobsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getBatchUpdateJobsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * The revisions of a job, newest first, paged: each one the definition an
     * applied UpdateJob (single, batch or a rollback) replaced, with who
     * changed it, when, and the change's mask. The last 100 revisions of a
     * job are kept (older ones are deleted as new ones come); deleting the
     * job deletes its revisions. NOT_FOUND for an id that is not one of the
     * tenant's jobs, another tenant's included.
     * </pre>
     */
    public dev.tickwheel.v1.ListJobRevisionsResponse listJobRevisions(dev.tickwheel.v1.ListJobRevisionsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListJobRevisionsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Deletes a job and cancels its executions that have not started (held
     * ones included), recorded as CANCELED with "canceled: job deleted".
     * A RUNNING execution finishes. History is kept for the retention window.
     * </pre>
     */
    public dev.tickwheel.v1.DeleteJobResponse deleteJob(dev.tickwheel.v1.DeleteJobRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getDeleteJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Deletes up to 1 000 jobs in one call. Each item is a DeleteJobRequest
     * and is answered as DeleteJob would answer it alone: how many of the
     * job's executions that had not started were canceled, or the error
     * (INVALID_ARGUMENT naming the item's field, e.g. `id`; NOT_FOUND for an
     * id that is not one of the tenant's jobs, another tenant's included;
     * FAILED_PRECONDITION when a non-zero `version` is not the stored
     * version). A bad item writes nothing and does not fail the others. The
     * items are applied in request order in one transaction, durable before
     * the reply: an id repeated in the call gets NOT_FOUND after its first
     * delete. The call itself fails only when it is not a batch: no items or
     * more than 1 000 (INVALID_ARGUMENT `items`), or when the store is
     * unavailable (UNAVAILABLE; nothing written, retrying is safe). A retried
     * call whose first attempt did commit (the reply was lost) answers
     * NOT_FOUND for the jobs it deleted.
     * </pre>
     */
    public dev.tickwheel.v1.BatchDeleteJobsResponse batchDeleteJobs(dev.tickwheel.v1.BatchDeleteJobsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getBatchDeleteJobsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Stops creating occurrences and holds the executions that have not started
     * (created ahead of time, waiting for a retry, triggered or backfilled): they
     * show as WAITING and are not handed out until ResumeJob. A RUNNING
     * execution finishes (a failure of it may still be retried). TriggerJob and
     * BackfillJob still run on a paused job: they are asked for. Pausing a
     * paused job changes nothing.
     * </pre>
     */
    public dev.tickwheel.v1.PauseJobResponse pauseJob(dev.tickwheel.v1.PauseJobRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getPauseJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Pauses up to 1 000 jobs in one call (an operator stopping a team's jobs
     * during an incident). Each item is a PauseJobRequest answered as PauseJob
     * would answer it alone: the job, now PAUSED, with the executions it held
     * (a job already paused, by an earlier item too, is answered unchanged),
     * or the error (NOT_FOUND for an id that is not one of the tenant's jobs,
     * another tenant's included; INVALID_ARGUMENT naming the item's field).
     * The items are applied in request order in one transaction, durable
     * before the reply. The call itself fails only when it is not a batch (no
     * items or more than 1 000: INVALID_ARGUMENT `items`) or when the store is
     * unavailable (UNAVAILABLE; nothing written, retrying is safe: pausing a
     * paused job changes nothing), or when its answer would be too large for
     * a default client (nothing written; ask JOB_VIEW_BASIC: see
     * BatchPauseJobsRequest.view).
     * </pre>
     */
    public dev.tickwheel.v1.BatchPauseJobsResponse batchPauseJobs(dev.tickwheel.v1.BatchPauseJobsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getBatchPauseJobsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Starts again. One rule for every occurrence that came due while
     * paused, whether the dispatcher had claimed it ahead (a held execution)
     * or not: it runs, late, when the resume is within the job's
     * `misfire_threshold` of its due instant; older ones are recorded as one
     * skip range (reason JOB_PAUSED), never run as a catch-up burst. The
     * late ones are bounded: at most one less than the job's backlog cap
     * (10, plus `misfire_run_all_limit` under MISFIRE_POLICY_RUN_ALL) run in
     * all, the held executions released counted first, then the most recent
     * of those never claimed; the older ones join the skip range. The other
     * held executions (retries, re-deliveries, triggers, backfills) are
     * released and run however late. The job's next run is then the
     * earliest late occurrence that runs, else the next future one.
     * Resuming an active job changes nothing. Counting the paused span (up
     * to 100 000 occurrences) is charged to the tenant's request rate, one
     * request per 100 occurrences beyond the first 100, after the resume:
     * the tenant's next
     * calls may then be refused RESOURCE_EXHAUSTED `requests_per_second`
     * with a RetryInfo delay until it is paid back. So is a schedule change
     * of a paused job (UpdateJob).
     * </pre>
     */
    public dev.tickwheel.v1.ResumeJobResponse resumeJob(dev.tickwheel.v1.ResumeJobRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getResumeJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Resumes up to 1 000 jobs in one call. Each item is a ResumeJobRequest
     * answered as ResumeJob would answer it alone: the job with its next
     * run, the skip range of its paused span and the executions it
     * released (a job that is not paused, resumed by an earlier item too, is
     * answered unchanged), or the error (NOT_FOUND for an id that is not one
     * of the tenant's jobs; INVALID_ARGUMENT naming the item's field;
     * RESOURCE_EXHAUSTED `requests_per_second` with a RetryInfo delay for an
     * item reached once the spans counted by the earlier items exceed what
     * the tenant's request rate pays for: it stays paused, send it again
     * after the delay; the first item is always counted). Each span is
     * counted under the job's lock, in request order, in one transaction. The call itself fails only when it is not a batch
     * (INVALID_ARGUMENT `items`) or when the store is unavailable
     * (UNAVAILABLE; nothing written, retrying is safe: resuming an active job
     * changes nothing), or when its answer would be too large for a default
     * client (nothing written; see BatchResumeJobsRequest.view).
     * </pre>
     */
    public dev.tickwheel.v1.BatchResumeJobsResponse batchResumeJobs(dev.tickwheel.v1.BatchResumeJobsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getBatchResumeJobsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Runs the job now, once per request id: the execution id is
     * `&lt;job id&gt;:trigger:&lt;request id&gt;`.
     * </pre>
     */
    public dev.tickwheel.v1.TriggerJobResponse triggerJob(dev.tickwheel.v1.TriggerJobRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getTriggerJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Creates the occurrences the schedule had in [from_at, to_at), with their
     * normal ids, so repeated or overlapping backfills never duplicate.
     * </pre>
     */
    public dev.tickwheel.v1.BackfillJobResponse backfillJob(dev.tickwheel.v1.BackfillJobRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getBackfillJobMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Computes the next fires of a saved job or of an unsaved schedule.
     * </pre>
     */
    public dev.tickwheel.v1.PreviewScheduleResponse previewSchedule(dev.tickwheel.v1.PreviewScheduleRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getPreviewScheduleMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Returns one execution with its attempts.
     * </pre>
     */
    public dev.tickwheel.v1.GetExecutionResponse getExecution(dev.tickwheel.v1.GetExecutionRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getGetExecutionMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * A job's history, newest first, with attempts and skip ranges.
     * </pre>
     */
    public dev.tickwheel.v1.ListExecutionsResponse listExecutions(dev.tickwheel.v1.ListExecutionsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListExecutionsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Cancels an execution: a waiting one at once, a running one through its
     * worker's cancel signal. A run started ahead of its instant is canceled as
     * a running one (signalled once it is sent) and answered as SCHEDULED, as
     * every read shows it until it is sent.
     * </pre>
     */
    public dev.tickwheel.v1.CancelExecutionResponse cancelExecution(dev.tickwheel.v1.CancelExecutionRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getCancelExecutionMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Dead-lettered executions of the tenant, newest first.
     * </pre>
     */
    public dev.tickwheel.v1.ListDeadLettersResponse listDeadLetters(dev.tickwheel.v1.ListDeadLettersRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListDeadLettersMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Starts a fresh attempt series for a dead execution, with the same id.
     * The run counts against the tenant's max_pending_manual_runs until it
     * starts: RESOURCE_EXHAUSTED naming it, the execution still dead, when
     * none is left.
     * </pre>
     */
    public dev.tickwheel.v1.ReplayDeadLetterResponse replayDeadLetter(dev.tickwheel.v1.ReplayDeadLetterRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getReplayDeadLetterMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Creates a business-day calendar (see `Calendar` for every bound).
     * Idempotent by `request_id` for 24 hours: a repeat returns the calendar
     * the first call created (`created` false) and writes nothing, whatever its
     * own definition; NOT_FOUND when that calendar was deleted since.
     * ALREADY_EXISTS when the tenant has a calendar of that name (created by
     * another request). RESOURCE_EXHAUSTED (QuotaFailure, quota
     * `max_calendars`) when the tenant has 1 000 calendars, the most it may
     * have. Durable before the reply.
     * </pre>
     */
    public dev.tickwheel.v1.CreateCalendarResponse createCalendar(dev.tickwheel.v1.CreateCalendarRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getCreateCalendarMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Returns one calendar with every holiday and half-day. NOT_FOUND for a
     * name that is not one of the tenant's calendars, another tenant's
     * included.
     * </pre>
     */
    public dev.tickwheel.v1.GetCalendarResponse getCalendar(dev.tickwheel.v1.GetCalendarRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getGetCalendarMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Lists the tenant's calendars, ordered by name, paged, without their
     * dates (their counts instead).
     * </pre>
     */
    public dev.tickwheel.v1.ListCalendarsResponse listCalendars(dev.tickwheel.v1.ListCalendarsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListCalendarsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Changes a calendar. `calendar.version` is required and must equal the
     * stored version: FAILED_PRECONDITION otherwise. The fields in
     * `update_mask` are replaced (a list is replaced whole, not merged) and the
     * result is validated as CreateCalendar validates; it is stored at version
     * + 1, or returned unchanged when it changes nothing. In the same
     * transaction, the runs already created and not yet handed out of the
     * tenant's jobs that name the calendar are decided again under the new
     * calendar (their ids stay): the response counts those moved or dropped
     * and lists the first ones, and a `calendar_runs_changed` alert says the
     * same when there are any.
     * </pre>
     */
    public dev.tickwheel.v1.UpdateCalendarResponse updateCalendar(dev.tickwheel.v1.UpdateCalendarRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getUpdateCalendarMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Deletes a calendar. FAILED_PRECONDITION when a non-zero `version` is not
     * the stored version, and FAILED_PRECONDITION naming how many jobs name
     * the calendar when any does (a deleted job does not count; a paused or
     * completed one does): change or delete those jobs first.
     * </pre>
     */
    public dev.tickwheel.v1.DeleteCalendarResponse deleteCalendar(dev.tickwheel.v1.DeleteCalendarRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getDeleteCalendarMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do ListenableFuture-style rpc calls to service SchedulerService.
   * <pre>
   * The tenant-facing API. Every call carries `authorization: Bearer &lt;API key&gt;`
   * and sees only the jobs and executions of that key's tenant: another
   * tenant's id gets NOT_FOUND. Errors carry a google.rpc.Status with
   * BadRequest field violations (INVALID_ARGUMENT; at most 20 listed, the rest
   * counted in the message and an ErrorInfo TOO_MANY_VIOLATIONS), QuotaFailure
   * (RESOURCE_EXHAUSTED) or PreconditionFailure (FAILED_PRECONDITION); nothing
   * is written when a call fails. A request that is not a valid message (for
   * example a string that is not UTF-8) gets INVALID_ARGUMENT "the request is
   * not a valid &lt;Message&gt;"; a string holding NUL gets INVALID_ARGUMENT naming
   * it. Fields this server does not know are ignored and never stored.
   * </pre>
   */
  public static final class SchedulerServiceFutureStub
      extends io.grpc.stub.AbstractFutureStub<SchedulerServiceFutureStub> {
    private SchedulerServiceFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected SchedulerServiceFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new SchedulerServiceFutureStub(channel, callOptions);
    }

    /**
     * <pre>
     * Creates a job and computes its first run. Idempotent by `request_id`: the
     * same request id returns the job the first call created and writes
     * nothing. The job is durable before the reply.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.CreateJobResponse> createJob(
        dev.tickwheel.v1.CreateJobRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getCreateJobMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Creates up to 1 000 jobs in one call. Each item is a CreateJobRequest
     * with its own `request_id` and is validated, deduplicated and counted
     * against the tenant's `max_jobs` on its own: a bad item, or one over the
     * quota, gets its error in its result and does not fail the others. The
     * items created are stored in one transaction, durable before the reply;
     * a repeat of an item's request id (in this call or an earlier one)
     * returns the job its first request created and writes nothing. The call
     * itself fails only when it is not a batch: no items or more than 1 000
     * (INVALID_ARGUMENT `items`), or when the store is unavailable
     * (UNAVAILABLE; nothing written, retrying the same call is safe), and,
     * nothing written, when its answer would be too large for a default
     * client (see BatchCreateJobsRequest.view).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.BatchCreateJobsResponse> batchCreateJobs(
        dev.tickwheel.v1.BatchCreateJobsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getBatchCreateJobsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Returns a job with its next runs and its last outcome.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.GetJobResponse> getJob(
        dev.tickwheel.v1.GetJobRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getGetJobMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Lists the tenant's jobs, ordered by id, paged.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.ListJobsResponse> listJobs(
        dev.tickwheel.v1.ListJobsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListJobsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Changes a job. The request's `job.version` must equal the stored version:
     * FAILED_PRECONDITION otherwise. An update never loses an occurrence still
     * to come and never touches a RUNNING execution. What it does to the
     * executions that have not started, by what changed:
     * - When a job runs (`schedule`, its zone, `dst_policy`, `jitter`,
     *   `start_at`, `end_at`, `max_runs`, a one-off's instant): the next run is
     *   recomputed, and the occurrences already created ahead of time that have
     *   not started are re-created under the new definition by the id rule:
     *   an instant the new schedule keeps keeps its execution id (with the new
     *   due instant, payload and target); one it does not have is CANCELED
     *   ("canceled: job updated: not an occurrence of the new schedule"); one
     *   it adds among them is created.
     * - `payload`: those occurrences take the new payload. Retries waiting,
     *   re-deliveries, triggers and backfills keep the payload they have.
     * - `target`: every execution not started runs the new target (a change of
     *   handler moves it to workers serving the new handler).
     * - Anything else (name, labels, timeout, retry, overlap and
     *   misfire policies, concurrency keys, thresholds): executions stay as they
     *   are; the new values apply wherever they are read (the timeout, target
     *   and overlap policy at hand-out, the retry policy when a result is
     *   recorded, the misfire policy when occurrences are created).
     * A paused job stays paused: what the update keeps or creates stays held.
     * Each applied change keeps the definition it replaced as a revision
     * (ListJobRevisions); a change that changes nothing keeps none. Rollback
     * is an UpdateJob whose `job` is a revision's definition (GetJob with
     * `revision`) at the current `version`, with an empty `update_mask`.
     * With `validate_only`, the request is checked as an update (the same
     * errors, the version check included) and nothing is written; the answer
     * holds the diff of the job's runs (UpdateJobResponse.run_diff).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.UpdateJobResponse> updateJob(
        dev.tickwheel.v1.UpdateJobRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getUpdateJobMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Changes up to 1 000 jobs in one call. Each item is an UpdateJobRequest
     * and is answered as UpdateJob would answer it alone: the job as stored
     * after the change, or the error (INVALID_ARGUMENT with BadRequest field
     * violations relative to the item, e.g. `update_mask` or `job.version`;
     * NOT_FOUND for an id that is not one of the tenant's jobs, another
     * tenant's included; FAILED_PRECONDITION with a PreconditionFailure when
     * `job.version` is not the stored version; RESOURCE_EXHAUSTED over
     * `max_payload_bytes`, or on `requests_per_second` with a RetryInfo
     * delay once the paused spans the earlier items counted exceed what the
     * tenant's request rate pays for: see BatchResumeJobs). A bad item writes
     * nothing and does not fail the others. The items are applied in request
     * order in one transaction,
     * durable before the reply: an id repeated in the call sees what its
     * earlier items did (its version among them, so a repeat carrying the
     * version it read before the call gets FAILED_PRECONDITION when an earlier
     * item changed the job). The call itself fails only when it is not a
     * batch: no items or more than 1 000 (INVALID_ARGUMENT `items`), or when
     * the store is unavailable (UNAVAILABLE; nothing written, and retrying the
     * same call is safe: each item's `job.version` makes a change apply once).
     * An item with `validate_only` is refused (INVALID_ARGUMENT
     * `validate_only`): preview changes one at a time with UpdateJob. A call
     * whose answer would be too large for a default client is refused whole,
     * nothing written (see BatchUpdateJobsRequest.view).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.BatchUpdateJobsResponse> batchUpdateJobs(
        dev.tickwheel.v1.BatchUpdateJobsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getBatchUpdateJobsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * The revisions of a job, newest first, paged: each one the definition an
     * applied UpdateJob (single, batch or a rollback) replaced, with who
     * changed it, when, and the change's mask. The last 100 revisions of a
     * job are kept (older ones are deleted as new ones come); deleting the
     * job deletes its revisions. NOT_FOUND for an id that is not one of the
     * tenant's jobs, another tenant's included.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.ListJobRevisionsResponse> listJobRevisions(
        dev.tickwheel.v1.ListJobRevisionsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListJobRevisionsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Deletes a job and cancels its executions that have not started (held
     * ones included), recorded as CANCELED with "canceled: job deleted".
     * A RUNNING execution finishes. History is kept for the retention window.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.DeleteJobResponse> deleteJob(
        dev.tickwheel.v1.DeleteJobRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getDeleteJobMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Deletes up to 1 000 jobs in one call. Each item is a DeleteJobRequest
     * and is answered as DeleteJob would answer it alone: how many of the
     * job's executions that had not started were canceled, or the error
     * (INVALID_ARGUMENT naming the item's field, e.g. `id`; NOT_FOUND for an
     * id that is not one of the tenant's jobs, another tenant's included;
     * FAILED_PRECONDITION when a non-zero `version` is not the stored
     * version). A bad item writes nothing and does not fail the others. The
     * items are applied in request order in one transaction, durable before
     * the reply: an id repeated in the call gets NOT_FOUND after its first
     * delete. The call itself fails only when it is not a batch: no items or
     * more than 1 000 (INVALID_ARGUMENT `items`), or when the store is
     * unavailable (UNAVAILABLE; nothing written, retrying is safe). A retried
     * call whose first attempt did commit (the reply was lost) answers
     * NOT_FOUND for the jobs it deleted.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.BatchDeleteJobsResponse> batchDeleteJobs(
        dev.tickwheel.v1.BatchDeleteJobsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getBatchDeleteJobsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Stops creating occurrences and holds the executions that have not started
     * (created ahead of time, waiting for a retry, triggered or backfilled): they
     * show as WAITING and are not handed out until ResumeJob. A RUNNING
     * execution finishes (a failure of it may still be retried). TriggerJob and
     * BackfillJob still run on a paused job: they are asked for. Pausing a
     * paused job changes nothing.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.PauseJobResponse> pauseJob(
        dev.tickwheel.v1.PauseJobRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getPauseJobMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Pauses up to 1 000 jobs in one call (an operator stopping a team's jobs
     * during an incident). Each item is a PauseJobRequest answered as PauseJob
     * would answer it alone: the job, now PAUSED, with the executions it held
     * (a job already paused, by an earlier item too, is answered unchanged),
     * or the error (NOT_FOUND for an id that is not one of the tenant's jobs,
     * another tenant's included; INVALID_ARGUMENT naming the item's field).
     * The items are applied in request order in one transaction, durable
     * before the reply. The call itself fails only when it is not a batch (no
     * items or more than 1 000: INVALID_ARGUMENT `items`) or when the store is
     * unavailable (UNAVAILABLE; nothing written, retrying is safe: pausing a
     * paused job changes nothing), or when its answer would be too large for
     * a default client (nothing written; ask JOB_VIEW_BASIC: see
     * BatchPauseJobsRequest.view).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.BatchPauseJobsResponse> batchPauseJobs(
        dev.tickwheel.v1.BatchPauseJobsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getBatchPauseJobsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Starts again. One rule for every occurrence that came due while
     * paused, whether the dispatcher had claimed it ahead (a held execution)
     * or not: it runs, late, when the resume is within the job's
     * `misfire_threshold` of its due instant; older ones are recorded as one
     * skip range (reason JOB_PAUSED), never run as a catch-up burst. The
     * late ones are bounded: at most one less than the job's backlog cap
     * (10, plus `misfire_run_all_limit` under MISFIRE_POLICY_RUN_ALL) run in
     * all, the held executions released counted first, then the most recent
     * of those never claimed; the older ones join the skip range. The other
     * held executions (retries, re-deliveries, triggers, backfills) are
     * released and run however late. The job's next run is then the
     * earliest late occurrence that runs, else the next future one.
     * Resuming an active job changes nothing. Counting the paused span (up
     * to 100 000 occurrences) is charged to the tenant's request rate, one
     * request per 100 occurrences beyond the first 100, after the resume:
     * the tenant's next
     * calls may then be refused RESOURCE_EXHAUSTED `requests_per_second`
     * with a RetryInfo delay until it is paid back. So is a schedule change
     * of a paused job (UpdateJob).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.ResumeJobResponse> resumeJob(
        dev.tickwheel.v1.ResumeJobRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getResumeJobMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Resumes up to 1 000 jobs in one call. Each item is a ResumeJobRequest
     * answered as ResumeJob would answer it alone: the job with its next
     * run, the skip range of its paused span and the executions it
     * released (a job that is not paused, resumed by an earlier item too, is
     * answered unchanged), or the error (NOT_FOUND for an id that is not one
     * of the tenant's jobs; INVALID_ARGUMENT naming the item's field;
     * RESOURCE_EXHAUSTED `requests_per_second` with a RetryInfo delay for an
     * item reached once the spans counted by the earlier items exceed what
     * the tenant's request rate pays for: it stays paused, send it again
     * after the delay; the first item is always counted). Each span is
     * counted under the job's lock, in request order, in one transaction. The call itself fails only when it is not a batch
     * (INVALID_ARGUMENT `items`) or when the store is unavailable
     * (UNAVAILABLE; nothing written, retrying is safe: resuming an active job
     * changes nothing), or when its answer would be too large for a default
     * client (nothing written; see BatchResumeJobsRequest.view).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.BatchResumeJobsResponse> batchResumeJobs(
        dev.tickwheel.v1.BatchResumeJobsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getBatchResumeJobsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Runs the job now, once per request id: the execution id is
     * `&lt;job id&gt;:trigger:&lt;request id&gt;`.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.TriggerJobResponse> triggerJob(
        dev.tickwheel.v1.TriggerJobRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getTriggerJobMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Creates the occurrences the schedule had in [from_at, to_at), with their
     * normal ids, so repeated or overlapping backfills never duplicate.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.BackfillJobResponse> backfillJob(
        dev.tickwheel.v1.BackfillJobRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getBackfillJobMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Computes the next fires of a saved job or of an unsaved schedule.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.PreviewScheduleResponse> previewSchedule(
        dev.tickwheel.v1.PreviewScheduleRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getPreviewScheduleMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Returns one execution with its attempts.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.GetExecutionResponse> getExecution(
        dev.tickwheel.v1.GetExecutionRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getGetExecutionMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * A job's history, newest first, with attempts and skip ranges.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.ListExecutionsResponse> listExecutions(
        dev.tickwheel.v1.ListExecutionsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListExecutionsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Cancels an execution: a waiting one at once, a running one through its
     * worker's cancel signal. A run started ahead of its instant is canceled as
     * a running one (signalled once it is sent) and answered as SCHEDULED, as
     * every read shows it until it is sent.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.CancelExecutionResponse> cancelExecution(
        dev.tickwheel.v1.CancelExecutionRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getCancelExecutionMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Dead-lettered executions of the tenant, newest first.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.ListDeadLettersResponse> listDeadLetters(
        dev.tickwheel.v1.ListDeadLettersRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListDeadLettersMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Starts a fresh attempt series for a dead execution, with the same id.
     * The run counts against the tenant's max_pending_manual_runs until it
     * starts: RESOURCE_EXHAUSTED naming it, the execution still dead, when
     * none is left.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.ReplayDeadLetterResponse> replayDeadLetter(
        dev.tickwheel.v1.ReplayDeadLetterRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getReplayDeadLetterMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Creates a business-day calendar (see `Calendar` for every bound).
     * Idempotent by `request_id` for 24 hours: a repeat returns the calendar
     * the first call created (`created` false) and writes nothing, whatever its
     * own definition; NOT_FOUND when that calendar was deleted since.
     * ALREADY_EXISTS when the tenant has a calendar of that name (created by
     * another request). RESOURCE_EXHAUSTED (QuotaFailure, quota
     * `max_calendars`) when the tenant has 1 000 calendars, the most it may
     * have. Durable before the reply.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.CreateCalendarResponse> createCalendar(
        dev.tickwheel.v1.CreateCalendarRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getCreateCalendarMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Returns one calendar with every holiday and half-day. NOT_FOUND for a
     * name that is not one of the tenant's calendars, another tenant's
     * included.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.GetCalendarResponse> getCalendar(
        dev.tickwheel.v1.GetCalendarRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getGetCalendarMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Lists the tenant's calendars, ordered by name, paged, without their
     * dates (their counts instead).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.ListCalendarsResponse> listCalendars(
        dev.tickwheel.v1.ListCalendarsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListCalendarsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Changes a calendar. `calendar.version` is required and must equal the
     * stored version: FAILED_PRECONDITION otherwise. The fields in
     * `update_mask` are replaced (a list is replaced whole, not merged) and the
     * result is validated as CreateCalendar validates; it is stored at version
     * + 1, or returned unchanged when it changes nothing. In the same
     * transaction, the runs already created and not yet handed out of the
     * tenant's jobs that name the calendar are decided again under the new
     * calendar (their ids stay): the response counts those moved or dropped
     * and lists the first ones, and a `calendar_runs_changed` alert says the
     * same when there are any.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.UpdateCalendarResponse> updateCalendar(
        dev.tickwheel.v1.UpdateCalendarRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getUpdateCalendarMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Deletes a calendar. FAILED_PRECONDITION when a non-zero `version` is not
     * the stored version, and FAILED_PRECONDITION naming how many jobs name
     * the calendar when any does (a deleted job does not count; a paused or
     * completed one does): change or delete those jobs first.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.DeleteCalendarResponse> deleteCalendar(
        dev.tickwheel.v1.DeleteCalendarRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getDeleteCalendarMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_CREATE_JOB = 0;
  private static final int METHODID_BATCH_CREATE_JOBS = 1;
  private static final int METHODID_GET_JOB = 2;
  private static final int METHODID_LIST_JOBS = 3;
  private static final int METHODID_UPDATE_JOB = 4;
  private static final int METHODID_BATCH_UPDATE_JOBS = 5;
  private static final int METHODID_LIST_JOB_REVISIONS = 6;
  private static final int METHODID_DELETE_JOB = 7;
  private static final int METHODID_BATCH_DELETE_JOBS = 8;
  private static final int METHODID_PAUSE_JOB = 9;
  private static final int METHODID_BATCH_PAUSE_JOBS = 10;
  private static final int METHODID_RESUME_JOB = 11;
  private static final int METHODID_BATCH_RESUME_JOBS = 12;
  private static final int METHODID_TRIGGER_JOB = 13;
  private static final int METHODID_BACKFILL_JOB = 14;
  private static final int METHODID_PREVIEW_SCHEDULE = 15;
  private static final int METHODID_GET_EXECUTION = 16;
  private static final int METHODID_LIST_EXECUTIONS = 17;
  private static final int METHODID_CANCEL_EXECUTION = 18;
  private static final int METHODID_LIST_DEAD_LETTERS = 19;
  private static final int METHODID_REPLAY_DEAD_LETTER = 20;
  private static final int METHODID_CREATE_CALENDAR = 21;
  private static final int METHODID_GET_CALENDAR = 22;
  private static final int METHODID_LIST_CALENDARS = 23;
  private static final int METHODID_UPDATE_CALENDAR = 24;
  private static final int METHODID_DELETE_CALENDAR = 25;

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
        case METHODID_CREATE_JOB:
          serviceImpl.createJob((dev.tickwheel.v1.CreateJobRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.CreateJobResponse>) responseObserver);
          break;
        case METHODID_BATCH_CREATE_JOBS:
          serviceImpl.batchCreateJobs((dev.tickwheel.v1.BatchCreateJobsRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.BatchCreateJobsResponse>) responseObserver);
          break;
        case METHODID_GET_JOB:
          serviceImpl.getJob((dev.tickwheel.v1.GetJobRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.GetJobResponse>) responseObserver);
          break;
        case METHODID_LIST_JOBS:
          serviceImpl.listJobs((dev.tickwheel.v1.ListJobsRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.ListJobsResponse>) responseObserver);
          break;
        case METHODID_UPDATE_JOB:
          serviceImpl.updateJob((dev.tickwheel.v1.UpdateJobRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.UpdateJobResponse>) responseObserver);
          break;
        case METHODID_BATCH_UPDATE_JOBS:
          serviceImpl.batchUpdateJobs((dev.tickwheel.v1.BatchUpdateJobsRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.BatchUpdateJobsResponse>) responseObserver);
          break;
        case METHODID_LIST_JOB_REVISIONS:
          serviceImpl.listJobRevisions((dev.tickwheel.v1.ListJobRevisionsRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.ListJobRevisionsResponse>) responseObserver);
          break;
        case METHODID_DELETE_JOB:
          serviceImpl.deleteJob((dev.tickwheel.v1.DeleteJobRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.DeleteJobResponse>) responseObserver);
          break;
        case METHODID_BATCH_DELETE_JOBS:
          serviceImpl.batchDeleteJobs((dev.tickwheel.v1.BatchDeleteJobsRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.BatchDeleteJobsResponse>) responseObserver);
          break;
        case METHODID_PAUSE_JOB:
          serviceImpl.pauseJob((dev.tickwheel.v1.PauseJobRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.PauseJobResponse>) responseObserver);
          break;
        case METHODID_BATCH_PAUSE_JOBS:
          serviceImpl.batchPauseJobs((dev.tickwheel.v1.BatchPauseJobsRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.BatchPauseJobsResponse>) responseObserver);
          break;
        case METHODID_RESUME_JOB:
          serviceImpl.resumeJob((dev.tickwheel.v1.ResumeJobRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.ResumeJobResponse>) responseObserver);
          break;
        case METHODID_BATCH_RESUME_JOBS:
          serviceImpl.batchResumeJobs((dev.tickwheel.v1.BatchResumeJobsRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.BatchResumeJobsResponse>) responseObserver);
          break;
        case METHODID_TRIGGER_JOB:
          serviceImpl.triggerJob((dev.tickwheel.v1.TriggerJobRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.TriggerJobResponse>) responseObserver);
          break;
        case METHODID_BACKFILL_JOB:
          serviceImpl.backfillJob((dev.tickwheel.v1.BackfillJobRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.BackfillJobResponse>) responseObserver);
          break;
        case METHODID_PREVIEW_SCHEDULE:
          serviceImpl.previewSchedule((dev.tickwheel.v1.PreviewScheduleRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.PreviewScheduleResponse>) responseObserver);
          break;
        case METHODID_GET_EXECUTION:
          serviceImpl.getExecution((dev.tickwheel.v1.GetExecutionRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.GetExecutionResponse>) responseObserver);
          break;
        case METHODID_LIST_EXECUTIONS:
          serviceImpl.listExecutions((dev.tickwheel.v1.ListExecutionsRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.ListExecutionsResponse>) responseObserver);
          break;
        case METHODID_CANCEL_EXECUTION:
          serviceImpl.cancelExecution((dev.tickwheel.v1.CancelExecutionRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.CancelExecutionResponse>) responseObserver);
          break;
        case METHODID_LIST_DEAD_LETTERS:
          serviceImpl.listDeadLetters((dev.tickwheel.v1.ListDeadLettersRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.ListDeadLettersResponse>) responseObserver);
          break;
        case METHODID_REPLAY_DEAD_LETTER:
          serviceImpl.replayDeadLetter((dev.tickwheel.v1.ReplayDeadLetterRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.ReplayDeadLetterResponse>) responseObserver);
          break;
        case METHODID_CREATE_CALENDAR:
          serviceImpl.createCalendar((dev.tickwheel.v1.CreateCalendarRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.CreateCalendarResponse>) responseObserver);
          break;
        case METHODID_GET_CALENDAR:
          serviceImpl.getCalendar((dev.tickwheel.v1.GetCalendarRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.GetCalendarResponse>) responseObserver);
          break;
        case METHODID_LIST_CALENDARS:
          serviceImpl.listCalendars((dev.tickwheel.v1.ListCalendarsRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.ListCalendarsResponse>) responseObserver);
          break;
        case METHODID_UPDATE_CALENDAR:
          serviceImpl.updateCalendar((dev.tickwheel.v1.UpdateCalendarRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.UpdateCalendarResponse>) responseObserver);
          break;
        case METHODID_DELETE_CALENDAR:
          serviceImpl.deleteCalendar((dev.tickwheel.v1.DeleteCalendarRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.DeleteCalendarResponse>) responseObserver);
          break;
        default:
          throw new AssertionError();
      }
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public io.grpc.stub.StreamObserver<Req> invoke(
        io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        default:
          throw new AssertionError();
      }
    }
  }

  public static final io.grpc.ServerServiceDefinition bindService(AsyncService service) {
    return io.grpc.ServerServiceDefinition.builder(getServiceDescriptor())
        .addMethod(
          getCreateJobMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.CreateJobRequest,
              dev.tickwheel.v1.CreateJobResponse>(
                service, METHODID_CREATE_JOB)))
        .addMethod(
          getBatchCreateJobsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.BatchCreateJobsRequest,
              dev.tickwheel.v1.BatchCreateJobsResponse>(
                service, METHODID_BATCH_CREATE_JOBS)))
        .addMethod(
          getGetJobMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.GetJobRequest,
              dev.tickwheel.v1.GetJobResponse>(
                service, METHODID_GET_JOB)))
        .addMethod(
          getListJobsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.ListJobsRequest,
              dev.tickwheel.v1.ListJobsResponse>(
                service, METHODID_LIST_JOBS)))
        .addMethod(
          getUpdateJobMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.UpdateJobRequest,
              dev.tickwheel.v1.UpdateJobResponse>(
                service, METHODID_UPDATE_JOB)))
        .addMethod(
          getBatchUpdateJobsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.BatchUpdateJobsRequest,
              dev.tickwheel.v1.BatchUpdateJobsResponse>(
                service, METHODID_BATCH_UPDATE_JOBS)))
        .addMethod(
          getListJobRevisionsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.ListJobRevisionsRequest,
              dev.tickwheel.v1.ListJobRevisionsResponse>(
                service, METHODID_LIST_JOB_REVISIONS)))
        .addMethod(
          getDeleteJobMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.DeleteJobRequest,
              dev.tickwheel.v1.DeleteJobResponse>(
                service, METHODID_DELETE_JOB)))
        .addMethod(
          getBatchDeleteJobsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.BatchDeleteJobsRequest,
              dev.tickwheel.v1.BatchDeleteJobsResponse>(
                service, METHODID_BATCH_DELETE_JOBS)))
        .addMethod(
          getPauseJobMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.PauseJobRequest,
              dev.tickwheel.v1.PauseJobResponse>(
                service, METHODID_PAUSE_JOB)))
        .addMethod(
          getBatchPauseJobsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.BatchPauseJobsRequest,
              dev.tickwheel.v1.BatchPauseJobsResponse>(
                service, METHODID_BATCH_PAUSE_JOBS)))
        .addMethod(
          getResumeJobMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.ResumeJobRequest,
              dev.tickwheel.v1.ResumeJobResponse>(
                service, METHODID_RESUME_JOB)))
        .addMethod(
          getBatchResumeJobsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.BatchResumeJobsRequest,
              dev.tickwheel.v1.BatchResumeJobsResponse>(
                service, METHODID_BATCH_RESUME_JOBS)))
        .addMethod(
          getTriggerJobMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.TriggerJobRequest,
              dev.tickwheel.v1.TriggerJobResponse>(
                service, METHODID_TRIGGER_JOB)))
        .addMethod(
          getBackfillJobMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.BackfillJobRequest,
              dev.tickwheel.v1.BackfillJobResponse>(
                service, METHODID_BACKFILL_JOB)))
        .addMethod(
          getPreviewScheduleMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.PreviewScheduleRequest,
              dev.tickwheel.v1.PreviewScheduleResponse>(
                service, METHODID_PREVIEW_SCHEDULE)))
        .addMethod(
          getGetExecutionMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.GetExecutionRequest,
              dev.tickwheel.v1.GetExecutionResponse>(
                service, METHODID_GET_EXECUTION)))
        .addMethod(
          getListExecutionsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.ListExecutionsRequest,
              dev.tickwheel.v1.ListExecutionsResponse>(
                service, METHODID_LIST_EXECUTIONS)))
        .addMethod(
          getCancelExecutionMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.CancelExecutionRequest,
              dev.tickwheel.v1.CancelExecutionResponse>(
                service, METHODID_CANCEL_EXECUTION)))
        .addMethod(
          getListDeadLettersMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.ListDeadLettersRequest,
              dev.tickwheel.v1.ListDeadLettersResponse>(
                service, METHODID_LIST_DEAD_LETTERS)))
        .addMethod(
          getReplayDeadLetterMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.ReplayDeadLetterRequest,
              dev.tickwheel.v1.ReplayDeadLetterResponse>(
                service, METHODID_REPLAY_DEAD_LETTER)))
        .addMethod(
          getCreateCalendarMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.CreateCalendarRequest,
              dev.tickwheel.v1.CreateCalendarResponse>(
                service, METHODID_CREATE_CALENDAR)))
        .addMethod(
          getGetCalendarMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.GetCalendarRequest,
              dev.tickwheel.v1.GetCalendarResponse>(
                service, METHODID_GET_CALENDAR)))
        .addMethod(
          getListCalendarsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.ListCalendarsRequest,
              dev.tickwheel.v1.ListCalendarsResponse>(
                service, METHODID_LIST_CALENDARS)))
        .addMethod(
          getUpdateCalendarMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.UpdateCalendarRequest,
              dev.tickwheel.v1.UpdateCalendarResponse>(
                service, METHODID_UPDATE_CALENDAR)))
        .addMethod(
          getDeleteCalendarMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.DeleteCalendarRequest,
              dev.tickwheel.v1.DeleteCalendarResponse>(
                service, METHODID_DELETE_CALENDAR)))
        .build();
  }

  private static abstract class SchedulerServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    SchedulerServiceBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return dev.tickwheel.v1.SchedulerProto.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("SchedulerService");
    }
  }

  private static final class SchedulerServiceFileDescriptorSupplier
      extends SchedulerServiceBaseDescriptorSupplier {
    SchedulerServiceFileDescriptorSupplier() {}
  }

  private static final class SchedulerServiceMethodDescriptorSupplier
      extends SchedulerServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final java.lang.String methodName;

    SchedulerServiceMethodDescriptorSupplier(java.lang.String methodName) {
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
      synchronized (SchedulerServiceGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new SchedulerServiceFileDescriptorSupplier())
              .addMethod(getCreateJobMethod())
              .addMethod(getBatchCreateJobsMethod())
              .addMethod(getGetJobMethod())
              .addMethod(getListJobsMethod())
              .addMethod(getUpdateJobMethod())
              .addMethod(getBatchUpdateJobsMethod())
              .addMethod(getListJobRevisionsMethod())
              .addMethod(getDeleteJobMethod())
              .addMethod(getBatchDeleteJobsMethod())
              .addMethod(getPauseJobMethod())
              .addMethod(getBatchPauseJobsMethod())
              .addMethod(getResumeJobMethod())
              .addMethod(getBatchResumeJobsMethod())
              .addMethod(getTriggerJobMethod())
              .addMethod(getBackfillJobMethod())
              .addMethod(getPreviewScheduleMethod())
              .addMethod(getGetExecutionMethod())
              .addMethod(getListExecutionsMethod())
              .addMethod(getCancelExecutionMethod())
              .addMethod(getListDeadLettersMethod())
              .addMethod(getReplayDeadLetterMethod())
              .addMethod(getCreateCalendarMethod())
              .addMethod(getGetCalendarMethod())
              .addMethod(getListCalendarsMethod())
              .addMethod(getUpdateCalendarMethod())
              .addMethod(getDeleteCalendarMethod())
              .build();
        }
      }
    }
    return result;
  }
}

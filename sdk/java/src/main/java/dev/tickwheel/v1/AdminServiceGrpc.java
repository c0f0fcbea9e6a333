package dev.tickwheel.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 * <pre>
 * The operators' API, driven with grpcurl (the server has reflection) or
 * `tickwheel admin`. Every call needs `authorization: Bearer &lt;admin token&gt;`:
 * a tenant API key gets PERMISSION_DENIED, no or a wrong credential
 * UNAUTHENTICATED.
 * </pre>
 */
@io.grpc.stub.annotations.GrpcGenerated
public final class AdminServiceGrpc {

  private AdminServiceGrpc() {}

  public static final java.lang.String SERVICE_NAME = "tickwheel.v1.AdminService";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.ClusterStatusRequest,
      dev.tickwheel.v1.ClusterStatusResponse> getClusterStatusMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ClusterStatus",
      requestType = dev.tickwheel.v1.ClusterStatusRequest.class,
      responseType = dev.tickwheel.v1.ClusterStatusResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.ClusterStatusRequest,
      dev.tickwheel.v1.ClusterStatusResponse> getClusterStatusMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.ClusterStatusRequest, dev.tickwheel.v1.ClusterStatusResponse> getClusterStatusMethod;
    if ((getClusterStatusMethod = AdminServiceGrpc.getClusterStatusMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getClusterStatusMethod = AdminServiceGrpc.getClusterStatusMethod) == null) {
          AdminServiceGrpc.getClusterStatusMethod = getClusterStatusMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.ClusterStatusRequest, dev.tickwheel.v1.ClusterStatusResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ClusterStatus"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.ClusterStatusRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.ClusterStatusResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("ClusterStatus"))
              .build();
        }
      }
    }
    return getClusterStatusMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.CreateTenantRequest,
      dev.tickwheel.v1.CreateTenantResponse> getCreateTenantMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "CreateTenant",
      requestType = dev.tickwheel.v1.CreateTenantRequest.class,
      responseType = dev.tickwheel.v1.CreateTenantResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.CreateTenantRequest,
      dev.tickwheel.v1.CreateTenantResponse> getCreateTenantMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.CreateTenantRequest, dev.tickwheel.v1.CreateTenantResponse> getCreateTenantMethod;
    if ((getCreateTenantMethod = AdminServiceGrpc.getCreateTenantMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getCreateTenantMethod = AdminServiceGrpc.getCreateTenantMethod) == null) {
          AdminServiceGrpc.getCreateTenantMethod = getCreateTenantMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.CreateTenantRequest, dev.tickwheel.v1.CreateTenantResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "CreateTenant"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.CreateTenantRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.CreateTenantResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("CreateTenant"))
              .build();
        }
      }
    }
    return getCreateTenantMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.GetTenantRequest,
      dev.tickwheel.v1.GetTenantResponse> getGetTenantMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "GetTenant",
      requestType = dev.tickwheel.v1.GetTenantRequest.class,
      responseType = dev.tickwheel.v1.GetTenantResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.GetTenantRequest,
      dev.tickwheel.v1.GetTenantResponse> getGetTenantMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.GetTenantRequest, dev.tickwheel.v1.GetTenantResponse> getGetTenantMethod;
    if ((getGetTenantMethod = AdminServiceGrpc.getGetTenantMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getGetTenantMethod = AdminServiceGrpc.getGetTenantMethod) == null) {
          AdminServiceGrpc.getGetTenantMethod = getGetTenantMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.GetTenantRequest, dev.tickwheel.v1.GetTenantResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "GetTenant"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.GetTenantRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.GetTenantResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("GetTenant"))
              .build();
        }
      }
    }
    return getGetTenantMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.ListTenantsRequest,
      dev.tickwheel.v1.ListTenantsResponse> getListTenantsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListTenants",
      requestType = dev.tickwheel.v1.ListTenantsRequest.class,
      responseType = dev.tickwheel.v1.ListTenantsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.ListTenantsRequest,
      dev.tickwheel.v1.ListTenantsResponse> getListTenantsMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.ListTenantsRequest, dev.tickwheel.v1.ListTenantsResponse> getListTenantsMethod;
    if ((getListTenantsMethod = AdminServiceGrpc.getListTenantsMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getListTenantsMethod = AdminServiceGrpc.getListTenantsMethod) == null) {
          AdminServiceGrpc.getListTenantsMethod = getListTenantsMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.ListTenantsRequest, dev.tickwheel.v1.ListTenantsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListTenants"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.ListTenantsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.ListTenantsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("ListTenants"))
              .build();
        }
      }
    }
    return getListTenantsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.UpdateTenantRequest,
      dev.tickwheel.v1.UpdateTenantResponse> getUpdateTenantMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "UpdateTenant",
      requestType = dev.tickwheel.v1.UpdateTenantRequest.class,
      responseType = dev.tickwheel.v1.UpdateTenantResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.UpdateTenantRequest,
      dev.tickwheel.v1.UpdateTenantResponse> getUpdateTenantMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.UpdateTenantRequest, dev.tickwheel.v1.UpdateTenantResponse> getUpdateTenantMethod;
    if ((getUpdateTenantMethod = AdminServiceGrpc.getUpdateTenantMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getUpdateTenantMethod = AdminServiceGrpc.getUpdateTenantMethod) == null) {
          AdminServiceGrpc.getUpdateTenantMethod = getUpdateTenantMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.UpdateTenantRequest, dev.tickwheel.v1.UpdateTenantResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "UpdateTenant"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.UpdateTenantRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.UpdateTenantResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("UpdateTenant"))
              .build();
        }
      }
    }
    return getUpdateTenantMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.PauseTenantRequest,
      dev.tickwheel.v1.PauseTenantResponse> getPauseTenantMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "PauseTenant",
      requestType = dev.tickwheel.v1.PauseTenantRequest.class,
      responseType = dev.tickwheel.v1.PauseTenantResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.PauseTenantRequest,
      dev.tickwheel.v1.PauseTenantResponse> getPauseTenantMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.PauseTenantRequest, dev.tickwheel.v1.PauseTenantResponse> getPauseTenantMethod;
    if ((getPauseTenantMethod = AdminServiceGrpc.getPauseTenantMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getPauseTenantMethod = AdminServiceGrpc.getPauseTenantMethod) == null) {
          AdminServiceGrpc.getPauseTenantMethod = getPauseTenantMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.PauseTenantRequest, dev.tickwheel.v1.PauseTenantResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "PauseTenant"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.PauseTenantRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.PauseTenantResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("PauseTenant"))
              .build();
        }
      }
    }
    return getPauseTenantMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.ResumeTenantRequest,
      dev.tickwheel.v1.ResumeTenantResponse> getResumeTenantMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ResumeTenant",
      requestType = dev.tickwheel.v1.ResumeTenantRequest.class,
      responseType = dev.tickwheel.v1.ResumeTenantResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.ResumeTenantRequest,
      dev.tickwheel.v1.ResumeTenantResponse> getResumeTenantMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.ResumeTenantRequest, dev.tickwheel.v1.ResumeTenantResponse> getResumeTenantMethod;
    if ((getResumeTenantMethod = AdminServiceGrpc.getResumeTenantMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getResumeTenantMethod = AdminServiceGrpc.getResumeTenantMethod) == null) {
          AdminServiceGrpc.getResumeTenantMethod = getResumeTenantMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.ResumeTenantRequest, dev.tickwheel.v1.ResumeTenantResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ResumeTenant"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.ResumeTenantRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.ResumeTenantResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("ResumeTenant"))
              .build();
        }
      }
    }
    return getResumeTenantMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.IssueApiKeyRequest,
      dev.tickwheel.v1.IssueApiKeyResponse> getIssueApiKeyMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "IssueApiKey",
      requestType = dev.tickwheel.v1.IssueApiKeyRequest.class,
      responseType = dev.tickwheel.v1.IssueApiKeyResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.IssueApiKeyRequest,
      dev.tickwheel.v1.IssueApiKeyResponse> getIssueApiKeyMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.IssueApiKeyRequest, dev.tickwheel.v1.IssueApiKeyResponse> getIssueApiKeyMethod;
    if ((getIssueApiKeyMethod = AdminServiceGrpc.getIssueApiKeyMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getIssueApiKeyMethod = AdminServiceGrpc.getIssueApiKeyMethod) == null) {
          AdminServiceGrpc.getIssueApiKeyMethod = getIssueApiKeyMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.IssueApiKeyRequest, dev.tickwheel.v1.IssueApiKeyResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "IssueApiKey"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.IssueApiKeyRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.IssueApiKeyResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("IssueApiKey"))
              .build();
        }
      }
    }
    return getIssueApiKeyMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.RotateApiKeyRequest,
      dev.tickwheel.v1.RotateApiKeyResponse> getRotateApiKeyMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "RotateApiKey",
      requestType = dev.tickwheel.v1.RotateApiKeyRequest.class,
      responseType = dev.tickwheel.v1.RotateApiKeyResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.RotateApiKeyRequest,
      dev.tickwheel.v1.RotateApiKeyResponse> getRotateApiKeyMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.RotateApiKeyRequest, dev.tickwheel.v1.RotateApiKeyResponse> getRotateApiKeyMethod;
    if ((getRotateApiKeyMethod = AdminServiceGrpc.getRotateApiKeyMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getRotateApiKeyMethod = AdminServiceGrpc.getRotateApiKeyMethod) == null) {
          AdminServiceGrpc.getRotateApiKeyMethod = getRotateApiKeyMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.RotateApiKeyRequest, dev.tickwheel.v1.RotateApiKeyResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "RotateApiKey"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.RotateApiKeyRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.RotateApiKeyResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("RotateApiKey"))
              .build();
        }
      }
    }
    return getRotateApiKeyMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.RevokeApiKeyRequest,
      dev.tickwheel.v1.RevokeApiKeyResponse> getRevokeApiKeyMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "RevokeApiKey",
      requestType = dev.tickwheel.v1.RevokeApiKeyRequest.class,
      responseType = dev.tickwheel.v1.RevokeApiKeyResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.RevokeApiKeyRequest,
      dev.tickwheel.v1.RevokeApiKeyResponse> getRevokeApiKeyMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.RevokeApiKeyRequest, dev.tickwheel.v1.RevokeApiKeyResponse> getRevokeApiKeyMethod;
    if ((getRevokeApiKeyMethod = AdminServiceGrpc.getRevokeApiKeyMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getRevokeApiKeyMethod = AdminServiceGrpc.getRevokeApiKeyMethod) == null) {
          AdminServiceGrpc.getRevokeApiKeyMethod = getRevokeApiKeyMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.RevokeApiKeyRequest, dev.tickwheel.v1.RevokeApiKeyResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "RevokeApiKey"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.RevokeApiKeyRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.RevokeApiKeyResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("RevokeApiKey"))
              .build();
        }
      }
    }
    return getRevokeApiKeyMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.ListApiKeysRequest,
      dev.tickwheel.v1.ListApiKeysResponse> getListApiKeysMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListApiKeys",
      requestType = dev.tickwheel.v1.ListApiKeysRequest.class,
      responseType = dev.tickwheel.v1.ListApiKeysResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.ListApiKeysRequest,
      dev.tickwheel.v1.ListApiKeysResponse> getListApiKeysMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.ListApiKeysRequest, dev.tickwheel.v1.ListApiKeysResponse> getListApiKeysMethod;
    if ((getListApiKeysMethod = AdminServiceGrpc.getListApiKeysMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getListApiKeysMethod = AdminServiceGrpc.getListApiKeysMethod) == null) {
          AdminServiceGrpc.getListApiKeysMethod = getListApiKeysMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.ListApiKeysRequest, dev.tickwheel.v1.ListApiKeysResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListApiKeys"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.ListApiKeysRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.ListApiKeysResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("ListApiKeys"))
              .build();
        }
      }
    }
    return getListApiKeysMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.IssueWorkerCredentialRequest,
      dev.tickwheel.v1.IssueWorkerCredentialResponse> getIssueWorkerCredentialMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "IssueWorkerCredential",
      requestType = dev.tickwheel.v1.IssueWorkerCredentialRequest.class,
      responseType = dev.tickwheel.v1.IssueWorkerCredentialResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.IssueWorkerCredentialRequest,
      dev.tickwheel.v1.IssueWorkerCredentialResponse> getIssueWorkerCredentialMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.IssueWorkerCredentialRequest, dev.tickwheel.v1.IssueWorkerCredentialResponse> getIssueWorkerCredentialMethod;
    if ((getIssueWorkerCredentialMethod = AdminServiceGrpc.getIssueWorkerCredentialMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getIssueWorkerCredentialMethod = AdminServiceGrpc.getIssueWorkerCredentialMethod) == null) {
          AdminServiceGrpc.getIssueWorkerCredentialMethod = getIssueWorkerCredentialMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.IssueWorkerCredentialRequest, dev.tickwheel.v1.IssueWorkerCredentialResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "IssueWorkerCredential"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.IssueWorkerCredentialRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.IssueWorkerCredentialResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("IssueWorkerCredential"))
              .build();
        }
      }
    }
    return getIssueWorkerCredentialMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.RevokeWorkerCredentialRequest,
      dev.tickwheel.v1.RevokeWorkerCredentialResponse> getRevokeWorkerCredentialMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "RevokeWorkerCredential",
      requestType = dev.tickwheel.v1.RevokeWorkerCredentialRequest.class,
      responseType = dev.tickwheel.v1.RevokeWorkerCredentialResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.RevokeWorkerCredentialRequest,
      dev.tickwheel.v1.RevokeWorkerCredentialResponse> getRevokeWorkerCredentialMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.RevokeWorkerCredentialRequest, dev.tickwheel.v1.RevokeWorkerCredentialResponse> getRevokeWorkerCredentialMethod;
    if ((getRevokeWorkerCredentialMethod = AdminServiceGrpc.getRevokeWorkerCredentialMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getRevokeWorkerCredentialMethod = AdminServiceGrpc.getRevokeWorkerCredentialMethod) == null) {
          AdminServiceGrpc.getRevokeWorkerCredentialMethod = getRevokeWorkerCredentialMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.RevokeWorkerCredentialRequest, dev.tickwheel.v1.RevokeWorkerCredentialResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "RevokeWorkerCredential"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.RevokeWorkerCredentialRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.RevokeWorkerCredentialResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("RevokeWorkerCredential"))
              .build();
        }
      }
    }
    return getRevokeWorkerCredentialMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.ListWorkerCredentialsRequest,
      dev.tickwheel.v1.ListWorkerCredentialsResponse> getListWorkerCredentialsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListWorkerCredentials",
      requestType = dev.tickwheel.v1.ListWorkerCredentialsRequest.class,
      responseType = dev.tickwheel.v1.ListWorkerCredentialsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.ListWorkerCredentialsRequest,
      dev.tickwheel.v1.ListWorkerCredentialsResponse> getListWorkerCredentialsMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.ListWorkerCredentialsRequest, dev.tickwheel.v1.ListWorkerCredentialsResponse> getListWorkerCredentialsMethod;
    if ((getListWorkerCredentialsMethod = AdminServiceGrpc.getListWorkerCredentialsMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getListWorkerCredentialsMethod = AdminServiceGrpc.getListWorkerCredentialsMethod) == null) {
          AdminServiceGrpc.getListWorkerCredentialsMethod = getListWorkerCredentialsMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.ListWorkerCredentialsRequest, dev.tickwheel.v1.ListWorkerCredentialsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListWorkerCredentials"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.ListWorkerCredentialsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.ListWorkerCredentialsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("ListWorkerCredentials"))
              .build();
        }
      }
    }
    return getListWorkerCredentialsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.SearchJobsRequest,
      dev.tickwheel.v1.SearchJobsResponse> getSearchJobsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "SearchJobs",
      requestType = dev.tickwheel.v1.SearchJobsRequest.class,
      responseType = dev.tickwheel.v1.SearchJobsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.SearchJobsRequest,
      dev.tickwheel.v1.SearchJobsResponse> getSearchJobsMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.SearchJobsRequest, dev.tickwheel.v1.SearchJobsResponse> getSearchJobsMethod;
    if ((getSearchJobsMethod = AdminServiceGrpc.getSearchJobsMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getSearchJobsMethod = AdminServiceGrpc.getSearchJobsMethod) == null) {
          AdminServiceGrpc.getSearchJobsMethod = getSearchJobsMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.SearchJobsRequest, dev.tickwheel.v1.SearchJobsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "SearchJobs"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.SearchJobsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.SearchJobsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("SearchJobs"))
              .build();
        }
      }
    }
    return getSearchJobsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.SearchExecutionsRequest,
      dev.tickwheel.v1.SearchExecutionsResponse> getSearchExecutionsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "SearchExecutions",
      requestType = dev.tickwheel.v1.SearchExecutionsRequest.class,
      responseType = dev.tickwheel.v1.SearchExecutionsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.SearchExecutionsRequest,
      dev.tickwheel.v1.SearchExecutionsResponse> getSearchExecutionsMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.SearchExecutionsRequest, dev.tickwheel.v1.SearchExecutionsResponse> getSearchExecutionsMethod;
    if ((getSearchExecutionsMethod = AdminServiceGrpc.getSearchExecutionsMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getSearchExecutionsMethod = AdminServiceGrpc.getSearchExecutionsMethod) == null) {
          AdminServiceGrpc.getSearchExecutionsMethod = getSearchExecutionsMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.SearchExecutionsRequest, dev.tickwheel.v1.SearchExecutionsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "SearchExecutions"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.SearchExecutionsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.SearchExecutionsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("SearchExecutions"))
              .build();
        }
      }
    }
    return getSearchExecutionsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.DrainServerRequest,
      dev.tickwheel.v1.DrainServerResponse> getDrainServerMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "DrainServer",
      requestType = dev.tickwheel.v1.DrainServerRequest.class,
      responseType = dev.tickwheel.v1.DrainServerResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.DrainServerRequest,
      dev.tickwheel.v1.DrainServerResponse> getDrainServerMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.DrainServerRequest, dev.tickwheel.v1.DrainServerResponse> getDrainServerMethod;
    if ((getDrainServerMethod = AdminServiceGrpc.getDrainServerMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getDrainServerMethod = AdminServiceGrpc.getDrainServerMethod) == null) {
          AdminServiceGrpc.getDrainServerMethod = getDrainServerMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.DrainServerRequest, dev.tickwheel.v1.DrainServerResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "DrainServer"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.DrainServerRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.DrainServerResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("DrainServer"))
              .build();
        }
      }
    }
    return getDrainServerMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.ListAlertsRequest,
      dev.tickwheel.v1.ListAlertsResponse> getListAlertsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListAlerts",
      requestType = dev.tickwheel.v1.ListAlertsRequest.class,
      responseType = dev.tickwheel.v1.ListAlertsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.ListAlertsRequest,
      dev.tickwheel.v1.ListAlertsResponse> getListAlertsMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.ListAlertsRequest, dev.tickwheel.v1.ListAlertsResponse> getListAlertsMethod;
    if ((getListAlertsMethod = AdminServiceGrpc.getListAlertsMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getListAlertsMethod = AdminServiceGrpc.getListAlertsMethod) == null) {
          AdminServiceGrpc.getListAlertsMethod = getListAlertsMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.ListAlertsRequest, dev.tickwheel.v1.ListAlertsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListAlerts"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.ListAlertsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.ListAlertsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("ListAlerts"))
              .build();
        }
      }
    }
    return getListAlertsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.WatchAlertsRequest,
      dev.tickwheel.v1.WatchAlertsResponse> getWatchAlertsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "WatchAlerts",
      requestType = dev.tickwheel.v1.WatchAlertsRequest.class,
      responseType = dev.tickwheel.v1.WatchAlertsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.WatchAlertsRequest,
      dev.tickwheel.v1.WatchAlertsResponse> getWatchAlertsMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.WatchAlertsRequest, dev.tickwheel.v1.WatchAlertsResponse> getWatchAlertsMethod;
    if ((getWatchAlertsMethod = AdminServiceGrpc.getWatchAlertsMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getWatchAlertsMethod = AdminServiceGrpc.getWatchAlertsMethod) == null) {
          AdminServiceGrpc.getWatchAlertsMethod = getWatchAlertsMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.WatchAlertsRequest, dev.tickwheel.v1.WatchAlertsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "WatchAlerts"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.WatchAlertsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.WatchAlertsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("WatchAlerts"))
              .build();
        }
      }
    }
    return getWatchAlertsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.tickwheel.v1.RecomputeSchedulesRequest,
      dev.tickwheel.v1.RecomputeSchedulesResponse> getRecomputeSchedulesMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "RecomputeSchedules",
      requestType = dev.tickwheel.v1.RecomputeSchedulesRequest.class,
      responseType = dev.tickwheel.v1.RecomputeSchedulesResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.tickwheel.v1.RecomputeSchedulesRequest,
      dev.tickwheel.v1.RecomputeSchedulesResponse> getRecomputeSchedulesMethod() {
    io.grpc.MethodDescriptor<dev.tickwheel.v1.RecomputeSchedulesRequest, dev.tickwheel.v1.RecomputeSchedulesResponse> getRecomputeSchedulesMethod;
    if ((getRecomputeSchedulesMethod = AdminServiceGrpc.getRecomputeSchedulesMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getRecomputeSchedulesMethod = AdminServiceGrpc.getRecomputeSchedulesMethod) == null) {
          AdminServiceGrpc.getRecomputeSchedulesMethod = getRecomputeSchedulesMethod =
              io.grpc.MethodDescriptor.<dev.tickwheel.v1.RecomputeSchedulesRequest, dev.tickwheel.v1.RecomputeSchedulesResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "RecomputeSchedules"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.RecomputeSchedulesRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.tickwheel.v1.RecomputeSchedulesResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("RecomputeSchedules"))
              .build();
        }
      }
    }
    return getRecomputeSchedulesMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static AdminServiceStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AdminServiceStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AdminServiceStub>() {
        @java.lang.Override
        public AdminServiceStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AdminServiceStub(channel, callOptions);
        }
      };
    return AdminServiceStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports all types of calls on the service
   */
  public static AdminServiceBlockingV2Stub newBlockingV2Stub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AdminServiceBlockingV2Stub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AdminServiceBlockingV2Stub>() {
        @java.lang.Override
        public AdminServiceBlockingV2Stub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AdminServiceBlockingV2Stub(channel, callOptions);
        }
      };
    return AdminServiceBlockingV2Stub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static AdminServiceBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AdminServiceBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AdminServiceBlockingStub>() {
        @java.lang.Override
        public AdminServiceBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AdminServiceBlockingStub(channel, callOptions);
        }
      };
    return AdminServiceBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static AdminServiceFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AdminServiceFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AdminServiceFutureStub>() {
        @java.lang.Override
        public AdminServiceFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AdminServiceFutureStub(channel, callOptions);
        }
      };
    return AdminServiceFutureStub.newStub(factory, channel);
  }

  /**
   * <pre>
   * The operators' API, driven with grpcurl (the server has reflection) or
   * `tickwheel admin`. Every call needs `authorization: Bearer &lt;admin token&gt;`:
   * a tenant API key gets PERMISSION_DENIED, no or a wrong credential
   * UNAUTHENTICATED.
   * </pre>
   */
  public interface AsyncService {

    /**
     * <pre>
     * The cluster as the answering server sees it: servers, partitions, queues.
     * </pre>
     */
    default void clusterStatus(dev.tickwheel.v1.ClusterStatusRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.ClusterStatusResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getClusterStatusMethod(), responseObserver);
    }

    /**
     * <pre>
     * Creates a tenant and its first API key.
     * </pre>
     */
    default void createTenant(dev.tickwheel.v1.CreateTenantRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.CreateTenantResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getCreateTenantMethod(), responseObserver);
    }

    /**
     * <pre>
     * Returns one tenant.
     * </pre>
     */
    default void getTenant(dev.tickwheel.v1.GetTenantRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.GetTenantResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getGetTenantMethod(), responseObserver);
    }

    /**
     * <pre>
     * Lists tenants by name, paged.
     * </pre>
     */
    default void listTenants(dev.tickwheel.v1.ListTenantsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.ListTenantsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListTenantsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Changes a tenant's weight, concurrency cap, quotas or one of its quotas.
     * </pre>
     */
    default void updateTenant(dev.tickwheel.v1.UpdateTenantRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.UpdateTenantResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getUpdateTenantMethod(), responseObserver);
    }

    /**
     * <pre>
     * Stops creating and handing out the tenant's executions.
     * </pre>
     */
    default void pauseTenant(dev.tickwheel.v1.PauseTenantRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.PauseTenantResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getPauseTenantMethod(), responseObserver);
    }

    /**
     * <pre>
     * Resumes a paused tenant; its jobs continue at their next future run.
     * </pre>
     */
    default void resumeTenant(dev.tickwheel.v1.ResumeTenantRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.ResumeTenantResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getResumeTenantMethod(), responseObserver);
    }

    /**
     * <pre>
     * Issues a new API key for a tenant. The secret is returned once.
     * </pre>
     */
    default void issueApiKey(dev.tickwheel.v1.IssueApiKeyRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.IssueApiKeyResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getIssueApiKeyMethod(), responseObserver);
    }

    /**
     * <pre>
     * Issues a replacement key; the old one stays valid for a grace period.
     * </pre>
     */
    default void rotateApiKey(dev.tickwheel.v1.RotateApiKeyRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.RotateApiKeyResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getRotateApiKeyMethod(), responseObserver);
    }

    /**
     * <pre>
     * Revokes an API key at once.
     * </pre>
     */
    default void revokeApiKey(dev.tickwheel.v1.RevokeApiKeyRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.RevokeApiKeyResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getRevokeApiKeyMethod(), responseObserver);
    }

    /**
     * <pre>
     * Lists a tenant's API keys (never their secrets).
     * </pre>
     */
    default void listApiKeys(dev.tickwheel.v1.ListApiKeysRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.ListApiKeysResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListApiKeysMethod(), responseObserver);
    }

    /**
     * <pre>
     * Issues a worker credential. The secret is returned once.
     * </pre>
     */
    default void issueWorkerCredential(dev.tickwheel.v1.IssueWorkerCredentialRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.IssueWorkerCredentialResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getIssueWorkerCredentialMethod(), responseObserver);
    }

    /**
     * <pre>
     * Revokes a worker credential; streams using it are closed.
     * </pre>
     */
    default void revokeWorkerCredential(dev.tickwheel.v1.RevokeWorkerCredentialRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.RevokeWorkerCredentialResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getRevokeWorkerCredentialMethod(), responseObserver);
    }

    /**
     * <pre>
     * Lists worker credentials (never their secrets).
     * </pre>
     */
    default void listWorkerCredentials(dev.tickwheel.v1.ListWorkerCredentialsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.ListWorkerCredentialsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListWorkerCredentialsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Jobs across tenants.
     * </pre>
     */
    default void searchJobs(dev.tickwheel.v1.SearchJobsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.SearchJobsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getSearchJobsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Executions across tenants.
     * </pre>
     */
    default void searchExecutions(dev.tickwheel.v1.SearchExecutionsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.SearchExecutionsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getSearchExecutionsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Moves a server's partitions and workers away gracefully, for rolling
     * restarts.
     * </pre>
     */
    default void drainServer(dev.tickwheel.v1.DrainServerRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.DrainServerResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getDrainServerMethod(), responseObserver);
    }

    /**
     * <pre>
     * Alerts, newest first.
     * </pre>
     */
    default void listAlerts(dev.tickwheel.v1.ListAlertsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.ListAlertsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListAlertsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Alerts as they are raised and resolved, until the client cancels.
     * </pre>
     */
    default void watchAlerts(dev.tickwheel.v1.WatchAlertsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.WatchAlertsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getWatchAlertsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Recomputes stored next runs after a time-zone database change.
     * </pre>
     */
    default void recomputeSchedules(dev.tickwheel.v1.RecomputeSchedulesRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.RecomputeSchedulesResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getRecomputeSchedulesMethod(), responseObserver);
    }
  }

  /**
   * Base class for the server implementation of the service AdminService.
   * <pre>
   * The operators' API, driven with grpcurl (the server has reflection) or
   * `tickwheel admin`. Every call needs `authorization: Bearer &lt;admin token&gt;`:
   * a tenant API key gets PERMISSION_DENIED, no or a wrong credential
   * UNAUTHENTICATED.
   * </pre>
   */
  public static abstract class AdminServiceImplBase
      implements io.grpc.BindableService, AsyncService {

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return AdminServiceGrpc.bindService(this);
    }
  }

  /**
   * A stub to allow clients to do asynchronous rpc calls to service AdminService.
   * <pre>
   * The operators' API, driven with grpcurl (the server has reflection) or
   * `tickwheel admin`. Every call needs `authorization: Bearer &lt;admin token&gt;`:
   * a tenant API key gets PERMISSION_DENIED, no or a wrong credential
   * UNAUTHENTICATED.
   * </pre>
   */
  public static final class AdminServiceStub
      extends io.grpc.stub.AbstractAsyncStub<AdminServiceStub> {
    private AdminServiceStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AdminServiceStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AdminServiceStub(channel, callOptions);
    }

    /**
     * <pre>
     * The cluster as the answering server sees it: servers, partitions, queues.
     * </pre>
     */
    public void clusterStatus(dev.tickwheel.v1.ClusterStatusRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.ClusterStatusResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getClusterStatusMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Creates a tenant and its first API key.
     * </pre>
     */
    public void createTenant(dev.tickwheel.v1.CreateTenantRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.CreateTenantResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getCreateTenantMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Returns one tenant.
     * </pre>
     */
    public void getTenant(dev.tickwheel.v1.GetTenantRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.GetTenantResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getGetTenantMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Lists tenants by name, paged.
     * </pre>
     */
    public void listTenants(dev.tickwheel.v1.ListTenantsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.ListTenantsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListTenantsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Changes a tenant's weight, concurrency cap, quotas or one of its quotas.
     * </pre>
     */
    public void updateTenant(dev.tickwheel.v1.UpdateTenantRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.UpdateTenantResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getUpdateTenantMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Stops creating and handing out the tenant's executions.
     * </pre>
     */
    public void pauseTenant(dev.tickwheel.v1.PauseTenantRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.PauseTenantResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getPauseTenantMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Resumes a paused tenant; its jobs continue at their next future run.
     * </pre>
     */
    public void resumeTenant(dev.tickwheel.v1.ResumeTenantRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.ResumeTenantResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getResumeTenantMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Issues a new API key for a tenant. The secret is returned once.
     * </pre>
     */
    public void issueApiKey(dev.tickwheel.v1.IssueApiKeyRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.IssueApiKeyResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getIssueApiKeyMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Issues a replacement key; the old one stays valid for a grace period.
     * </pre>
     */
    public void rotateApiKey(dev.tickwheel.v1.RotateApiKeyRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.RotateApiKeyResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getRotateApiKeyMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Revokes an API key at once.
     * </pre>
     */
    public void revokeApiKey(dev.tickwheel.v1.RevokeApiKeyRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.RevokeApiKeyResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getRevokeApiKeyMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Lists a tenant's API keys (never their secrets).
     * </pre>
     */
    public void listApiKeys(dev.tickwheel.v1.ListApiKeysRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.ListApiKeysResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListApiKeysMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Issues a worker credential. The secret is returned once.
     * </pre>
     */
    public void issueWorkerCredential(dev.tickwheel.v1.IssueWorkerCredentialRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.IssueWorkerCredentialResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getIssueWorkerCredentialMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Revokes a worker credential; streams using it are closed.
     * </pre>
     */
    public void revokeWorkerCredential(dev.tickwheel.v1.RevokeWorkerCredentialRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.RevokeWorkerCredentialResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getRevokeWorkerCredentialMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Lists worker credentials (never their secrets).
     * </pre>
     */
    public void listWorkerCredentials(dev.tickwheel.v1.ListWorkerCredentialsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.ListWorkerCredentialsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListWorkerCredentialsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Jobs across tenants.
     * </pre>
     */
    public void searchJobs(dev.tickwheel.v1.SearchJobsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.SearchJobsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getSearchJobsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Executions across tenants.
     * </pre>
     */
    public void searchExecutions(dev.tickwheel.v1.SearchExecutionsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.SearchExecutionsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getSearchExecutionsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Moves a server's partitions and workers away gracefully, for rolling
     * restarts.
     * </pre>
     */
    public void drainServer(dev.tickwheel.v1.DrainServerRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.DrainServerResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getDrainServerMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Alerts, newest first.
     * </pre>
     */
    public void listAlerts(dev.tickwheel.v1.ListAlertsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.ListAlertsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListAlertsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Alerts as they are raised and resolved, until the client cancels.
     * </pre>
     */
    public void watchAlerts(dev.tickwheel.v1.WatchAlertsRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.WatchAlertsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncServerStreamingCall(
          getChannel().newCall(getWatchAlertsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Recomputes stored next runs after a time-zone database change.
     * </pre>
     */
    public void recomputeSchedules(dev.tickwheel.v1.RecomputeSchedulesRequest request,
        io.grpc.stub.StreamObserver<dev.tickwheel.v1.RecomputeSchedulesResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getRecomputeSchedulesMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * A stub to allow clients to do synchronous rpc calls to service AdminService.
   * <pre>
   * The operators' API, driven with grpcurl (the server has reflection) or
   * `tickwheel admin`. Every call needs `authorization: Bearer &lt;admin token&gt;`:
   * a tenant API key gets PERMISSION_DENIED, no or a wrong credential
   * UNAUTHENTICATED.
   * </pre>
   */
  public static final class AdminServiceBlockingV2Stub
      extends io.grpc.stub.AbstractBlockingStub<AdminServiceBlockingV2Stub> {
    private AdminServiceBlockingV2Stub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AdminServiceBlockingV2Stub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AdminServiceBlockingV2Stub(channel, callOptions);
    }

    /**
     * <pre>
     * The cluster as the answering server sees it: servers, partitions, queues.
     * </pre>
     */
    public dev.tickwheel.v1.ClusterStatusResponse clusterStatus(dev.tickwheel.v1.ClusterStatusRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getClusterStatusMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Creates a tenant and its first API key.
     * </pre>
     */
    public dev.tickwheel.v1.CreateTenantResponse createTenant(dev.tickwheel.v1.CreateTenantRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getCreateTenantMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Returns one tenant.
     * </pre>
     */
    public dev.tickwheel.v1.GetTenantResponse getTenant(dev.tickwheel.v1.GetTenantRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getGetTenantMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Lists tenants by name, paged.
     * </pre>
     */
    public dev.tickwheel.v1.ListTenantsResponse listTenants(dev.tickwheel.v1.ListTenantsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getListTenantsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Changes a tenant's weight, concurrency cap, quotas or one of its quotas.
     * </pre>
     */
    public dev.tickwheel.v1.UpdateTenantResponse updateTenant(dev.tickwheel.v1.UpdateTenantRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getUpdateTenantMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Stops creating and handing out the tenant's executions.
     * </pre>
     */
    public dev.tickwheel.v1.PauseTenantResponse pauseTenant(dev.tickwheel.v1.PauseTenantRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getPauseTenantMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Resumes a paused tenant; its jobs continue at their next future run.
     * </pre>
     */
    public dev.tickwheel.v1.ResumeTenantResponse resumeTenant(dev.tickwheel.v1.ResumeTenantRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getResumeTenantMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Issues a new API key for a tenant. The secret is returned once.
     * </pre>
     */
    public dev.tickwheel.v1.IssueApiKeyResponse issueApiKey(dev.tickwheel.v1.IssueApiKeyRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getIssueApiKeyMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Issues a replacement key; the old one stays valid for a grace period.
     * </pre>
     */
    public dev.tickwheel.v1.RotateApiKeyResponse rotateApiKey(dev.tickwheel.v1.RotateApiKeyRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getRotateApiKeyMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Revokes an API key at once.
     * </pre>
     */
    public dev.tickwheel.v1.RevokeApiKeyResponse revokeApiKey(dev.tickwheel.v1.RevokeApiKeyRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getRevokeApiKeyMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Lists a tenant's API keys (never their secrets).
     * </pre>
     */
    public dev.tickwheel.v1.ListApiKeysResponse listApiKeys(dev.tickwheel.v1.ListApiKeysRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getListApiKeysMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Issues a worker credential. The secret is returned once.
     * </pre>
     */
    public dev.tickwheel.v1.IssueWorkerCredentialResponse issueWorkerCredential(dev.tickwheel.v1.IssueWorkerCredentialRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getIssueWorkerCredentialMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Revokes a worker credential; streams using it are closed.
     * </pre>
     */
    public dev.tickwheel.v1.RevokeWorkerCredentialResponse revokeWorkerCredential(dev.tickwheel.v1.RevokeWorkerCredentialRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getRevokeWorkerCredentialMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Lists worker credentials (never their secrets).
     * </pre>
     */
    public dev.tickwheel.v1.ListWorkerCredentialsResponse listWorkerCredentials(dev.tickwheel.v1.ListWorkerCredentialsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getListWorkerCredentialsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Jobs across tenants.
     * </pre>
     */
    public dev.tickwheel.v1.SearchJobsResponse searchJobs(dev.tickwheel.v1.SearchJobsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getSearchJobsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Executions across tenants.
     * </pre>
     */
    public dev.tickwheel.v1.SearchExecutionsResponse searchExecutions(dev.tickwheel.v1.SearchExecutionsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getSearchExecutionsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Moves a server's partitions and workers away gracefully, for rolling
     * restarts.
     * </pre>
     */
    public dev.tickwheel.v1.DrainServerResponse drainServer(dev.tickwheel.v1.DrainServerRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getDrainServerMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Alerts, newest first.
     * </pre>
     */
    public dev.tickwheel.v1.ListAlertsResponse listAlerts(dev.tickwheel.v1.ListAlertsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getListAlertsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Alerts as they are raised and resolved, until the client cancels.
     * </pre>
     */
    @io.grpc.ExperimentalApi("https://github.com/grpc/grpc-java/issues/10918")
    public io.grpc.stub.BlockingClientCall<?, dev.tickwheel.v1.WatchAlertsResponse>
        watchAlerts(dev.tickwheel.v1.WatchAlertsRequest request) {
      return io.grpc.stub.ClientCalls.blockingV2ServerStreamingCall(
          getChannel(), getWatchAlertsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Recomputes stored next runs after a time-zone database change.
     * </pre>
     */
    public dev.tickwheel.v1.RecomputeSchedulesResponse recomputeSchedules(dev.tickwheel.v1.RecomputeSchedulesRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getRecomputeSchedulesMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do limited synchronous rpc calls to service AdminService.
   * <pre>
   * The operators' API, driven with grpcurl (the server has reflection) or
   * `tickwheel admin`. Every call needs `authorization: Bearer &lt;admin token&gt;`:
   * a tenant API key gets PERMISSION_DENIED, no or a wrong credential
   * UNAUTHENTICATED.
   * </pre>
   */
  public static final class AdminServiceBlockingStub
      extends io.grpc.stub.AbstractBlockingStub<AdminServiceBlockingStub> {
    private AdminServiceBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AdminServiceBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AdminServiceBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * The cluster as the answering server sees it: servers, partitions, queues.
     * </pre>
     */
    public dev.tickwheel.v1.ClusterStatusResponse clusterStatus(dev.tickwheel.v1.ClusterStatusRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getClusterStatusMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Creates a tenant and its first API key.
     * </pre>
     */
    public dev.tickwheel.v1.CreateTenantResponse createTenant(dev.tickwheel.v1.CreateTenantRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getCreateTenantMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Returns one tenant.
     * </pre>
     */
    public dev.tickwheel.v1.GetTenantResponse getTenant(dev.tickwheel.v1.GetTenantRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getGetTenantMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Lists tenants by name, paged.
     * </pre>
     */
    public dev.tickwheel.v1.ListTenantsResponse listTenants(dev.tickwheel.v1.ListTenantsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListTenantsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Changes a tenant's weight, concurrency cap, quotas or one of its quotas.
     * </pre>
     */
    public dev.tickwheel.v1.UpdateTenantResponse updateTenant(dev.tickwheel.v1.UpdateTenantRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getUpdateTenantMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Stops creating and handing out the tenant's executions.
     * </pre>
     */
    public dev.tickwheel.v1.PauseTenantResponse pauseTenant(dev.tickwheel.v1.PauseTenantRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getPauseTenantMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Resumes a paused tenant; its jobs continue at their next future run.
     * </pre>
     */
    public dev.tickwheel.v1.ResumeTenantResponse resumeTenant(dev.tickwheel.v1.ResumeTenantRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getResumeTenantMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Issues a new API key for a tenant. The secret is returned once.
     * </pre>
     */
    public dev.tickwheel.v1.IssueApiKeyResponse issueApiKey(dev.tickwheel.v1.IssueApiKeyRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getIssueApiKeyMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Issues a replacement key; the old one stays valid for a grace period.
     * </pre>
     */
    public dev.tickwheel.v1.RotateApiKeyResponse rotateApiKey(dev.tickwheel.v1.RotateApiKeyRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getRotateApiKeyMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Revokes an API key at once.
     * </pre>
     */
    public dev.tickwheel.v1.RevokeApiKeyResponse revokeApiKey(dev.tickwheel.v1.RevokeApiKeyRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getRevokeApiKeyMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Lists a tenant's API keys (never their secrets).
     * </pre>
     */
    public dev.tickwheel.v1.ListApiKeysResponse listApiKeys(dev.tickwheel.v1.ListApiKeysRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListApiKeysMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Issues a worker credential. The secret is returned once.
     * </pre>
     */
    public dev.tickwheel.v1.IssueWorkerCredentialResponse issueWorkerCredential(dev.tickwheel.v1.IssueWorkerCredentialRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getIssueWorkerCredentialMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Revokes a worker credential; streams using it are closed.
     * </pre>
     */
    public dev.tickwheel.v1.RevokeWorkerCredentialResponse revokeWorkerCredential(dev.tickwheel.v1.RevokeWorkerCredentialRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getRevokeWorkerCredentialMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Lists worker credentials (never their secrets).
     * </pre>
     */
    public dev.tickwheel.v1.ListWorkerCredentialsResponse listWorkerCredentials(dev.tickwheel.v1.ListWorkerCredentialsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListWorkerCredentialsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Jobs across tenants.
     * </pre>
     */
    public dev.tickwheel.v1.SearchJobsResponse searchJobs(dev.tickwheel.v1.SearchJobsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getSearchJobsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Executions across tenants.
     * </pre>
     */
    public dev.tickwheel.v1.SearchExecutionsResponse searchExecutions(dev.tickwheel.v1.SearchExecutionsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getSearchExecutionsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Moves a server's partitions and workers away gracefully, for rolling
     * restarts.
     * </pre>
     */
    public dev.tickwheel.v1.DrainServerResponse drainServer(dev.tickwheel.v1.DrainServerRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getDrainServerMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Alerts, newest first.
     * </pre>
     */
    public dev.tickwheel.v1.ListAlertsResponse listAlerts(dev.tickwheel.v1.ListAlertsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListAlertsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Alerts as they are raised and resolved, until the client cancels.
     * </pre>
     */
    public java.util.Iterator<dev.tickwheel.v1.WatchAlertsResponse> watchAlerts(
        dev.tickwheel.v1.WatchAlertsRequest request) {
      return io.grpc.stub.ClientCalls.blockingServerStreamingCall(
          getChannel(), getWatchAlertsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Recomputes stored next runs after a time-zone database change.
     * </pre>
     */
    public dev.tickwheel.v1.RecomputeSchedulesResponse recomputeSchedules(dev.tickwheel.v1.RecomputeSchedulesRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getRecomputeSchedulesMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do ListenableFuture-style rpc calls to service AdminService.
   * <pre>
   * The operators' API, driven with grpcurl (the server has reflection) or
   * `tickwheel admin`. Every call needs `authorization: Bearer &lt;admin token&gt;`:
   * a tenant API key gets PERMISSION_DENIED, no or a wrong credential
   * UNAUTHENTICATED.
   * </pre>
   */
  public static final class AdminServiceFutureStub
      extends io.grpc.stub.AbstractFutureStub<AdminServiceFutureStub> {
    private AdminServiceFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AdminServiceFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AdminServiceFutureStub(channel, callOptions);
    }

    /**
     * <pre>
     * The cluster as the answering server sees it: servers, partitions, queues.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.ClusterStatusResponse> clusterStatus(
        dev.tickwheel.v1.ClusterStatusRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getClusterStatusMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Creates a tenant and its first API key.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.CreateTenantResponse> createTenant(
        dev.tickwheel.v1.CreateTenantRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getCreateTenantMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Returns one tenant.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.GetTenantResponse> getTenant(
        dev.tickwheel.v1.GetTenantRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getGetTenantMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Lists tenants by name, paged.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.ListTenantsResponse> listTenants(
        dev.tickwheel.v1.ListTenantsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListTenantsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Changes a tenant's weight, concurrency cap, quotas or one of its quotas.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.UpdateTenantResponse> updateTenant(
        dev.tickwheel.v1.UpdateTenantRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getUpdateTenantMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Stops creating and handing out the tenant's executions.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.PauseTenantResponse> pauseTenant(
        dev.tickwheel.v1.PauseTenantRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getPauseTenantMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Resumes a paused tenant; its jobs continue at their next future run.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.ResumeTenantResponse> resumeTenant(
        dev.tickwheel.v1.ResumeTenantRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getResumeTenantMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Issues a new API key for a tenant. The secret is returned once.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.IssueApiKeyResponse> issueApiKey(
        dev.tickwheel.v1.IssueApiKeyRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getIssueApiKeyMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Issues a replacement key; the old one stays valid for a grace period.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.RotateApiKeyResponse> rotateApiKey(
        dev.tickwheel.v1.RotateApiKeyRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getRotateApiKeyMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Revokes an API key at once.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.RevokeApiKeyResponse> revokeApiKey(
        dev.tickwheel.v1.RevokeApiKeyRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getRevokeApiKeyMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Lists a tenant's API keys (never their secrets).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.ListApiKeysResponse> listApiKeys(
        dev.tickwheel.v1.ListApiKeysRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListApiKeysMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Issues a worker credential. The secret is returned once.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.IssueWorkerCredentialResponse> issueWorkerCredential(
        dev.tickwheel.v1.IssueWorkerCredentialRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getIssueWorkerCredentialMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Revokes a worker credential; streams using it are closed.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.RevokeWorkerCredentialResponse> revokeWorkerCredential(
        dev.tickwheel.v1.RevokeWorkerCredentialRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getRevokeWorkerCredentialMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Lists worker credentials (never their secrets).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.ListWorkerCredentialsResponse> listWorkerCredentials(
        dev.tickwheel.v1.ListWorkerCredentialsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListWorkerCredentialsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Jobs across tenants.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.SearchJobsResponse> searchJobs(
        dev.tickwheel.v1.SearchJobsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getSearchJobsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Executions across tenants.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.SearchExecutionsResponse> searchExecutions(
        dev.tickwheel.v1.SearchExecutionsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getSearchExecutionsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Moves a server's partitions and workers away gracefully, for rolling
     * restarts.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.DrainServerResponse> drainServer(
        dev.tickwheel.v1.DrainServerRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getDrainServerMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Alerts, newest first.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.ListAlertsResponse> listAlerts(
        dev.tickwheel.v1.ListAlertsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListAlertsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Recomputes stored next runs after a time-zone database change.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.tickwheel.v1.RecomputeSchedulesResponse> recomputeSchedules(
        dev.tickwheel.v1.RecomputeSchedulesRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getRecomputeSchedulesMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_CLUSTER_STATUS = 0;
  private static final int METHODID_CREATE_TENANT = 1;
  private static final int METHODID_GET_TENANT = 2;
  private static final int METHODID_LIST_TENANTS = 3;
  private static final int METHODID_UPDATE_TENANT = 4;
  private static final int METHODID_PAUSE_TENANT = 5;
  private static final int METHODID_RESUME_TENANT = 6;
  private static final int METHODID_ISSUE_API_KEY = 7;
  private static final int METHODID_ROTATE_API_KEY = 8;
  private static final int METHODID_REVOKE_API_KEY = 9;
  private static final int METHODID_LIST_API_KEYS = 10;
  private static final int METHODID_ISSUE_WORKER_CREDENTIAL = 11;
  private static final int METHODID_REVOKE_WORKER_CREDENTIAL = 12;
  private static final int METHODID_LIST_WORKER_CREDENTIALS = 13;
  private static final int METHODID_SEARCH_JOBS = 14;
  private static final int METHODID_SEARCH_EXECUTIONS = 15;
  private static final int METHODID_DRAIN_SERVER = 16;
  private static final int METHODID_LIST_ALERTS = 17;
  private static final int METHODID_WATCH_ALERTS = 18;
  private static final int METHODID_RECOMPUTE_SCHEDULES = 19;

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
        case METHODID_CLUSTER_STATUS:
          serviceImpl.clusterStatus((dev.tickwheel.v1.ClusterStatusRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.ClusterStatusResponse>) responseObserver);
          break;
        case METHODID_CREATE_TENANT:
          serviceImpl.createTenant((dev.tickwheel.v1.CreateTenantRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.CreateTenantResponse>) responseObserver);
          break;
        case METHODID_GET_TENANT:
          serviceImpl.getTenant((dev.tickwheel.v1.GetTenantRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.GetTenantResponse>) responseObserver);
          break;
        case METHODID_LIST_TENANTS:
          serviceImpl.listTenants((dev.tickwheel.v1.ListTenantsRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.ListTenantsResponse>) responseObserver);
          break;
        case METHODID_UPDATE_TENANT:
          serviceImpl.updateTenant((dev.tickwheel.v1.UpdateTenantRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.UpdateTenantResponse>) responseObserver);
          break;
        case METHODID_PAUSE_TENANT:
          serviceImpl.pauseTenant((dev.tickwheel.v1.PauseTenantRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.PauseTenantResponse>) responseObserver);
          break;
        case METHODID_RESUME_TENANT:
          serviceImpl.resumeTenant((dev.tickwheel.v1.ResumeTenantRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.ResumeTenantResponse>) responseObserver);
          break;
        case METHODID_ISSUE_API_KEY:
          serviceImpl.issueApiKey((dev.tickwheel.v1.IssueApiKeyRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.IssueApiKeyResponse>) responseObserver);
          break;
        case METHODID_ROTATE_API_KEY:
          serviceImpl.rotateApiKey((dev.tickwheel.v1.RotateApiKeyRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.RotateApiKeyResponse>) responseObserver);
          break;
        case METHODID_REVOKE_API_KEY:
          serviceImpl.revokeApiKey((dev.tickwheel.v1.RevokeApiKeyRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.RevokeApiKeyResponse>) responseObserver);
          break;
        case METHODID_LIST_API_KEYS:
          serviceImpl.listApiKeys((dev.tickwheel.v1.ListApiKeysRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.ListApiKeysResponse>) responseObserver);
          break;
        case METHODID_ISSUE_WORKER_CREDENTIAL:
          serviceImpl.issueWorkerCredential((dev.tickwheel.v1.IssueWorkerCredentialRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.IssueWorkerCredentialResponse>) responseObserver);
          break;
        case METHODID_REVOKE_WORKER_CREDENTIAL:
          serviceImpl.revokeWorkerCredential((dev.tickwheel.v1.RevokeWorkerCredentialRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.RevokeWorkerCredentialResponse>) responseObserver);
          break;
        case METHODID_LIST_WORKER_CREDENTIALS:
          serviceImpl.listWorkerCredentials((dev.tickwheel.v1.ListWorkerCredentialsRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.ListWorkerCredentialsResponse>) responseObserver);
          break;
        case METHODID_SEARCH_JOBS:
          serviceImpl.searchJobs((dev.tickwheel.v1.SearchJobsRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.SearchJobsResponse>) responseObserver);
          break;
        case METHODID_SEARCH_EXECUTIONS:
          serviceImpl.searchExecutions((dev.tickwheel.v1.SearchExecutionsRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.SearchExecutionsResponse>) responseObserver);
          break;
        case METHODID_DRAIN_SERVER:
          serviceImpl.drainServer((dev.tickwheel.v1.DrainServerRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.DrainServerResponse>) responseObserver);
          break;
        case METHODID_LIST_ALERTS:
          serviceImpl.listAlerts((dev.tickwheel.v1.ListAlertsRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.ListAlertsResponse>) responseObserver);
          break;
        case METHODID_WATCH_ALERTS:
          serviceImpl.watchAlerts((dev.tickwheel.v1.WatchAlertsRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.WatchAlertsResponse>) responseObserver);
          break;
        case METHODID_RECOMPUTE_SCHEDULES:
          serviceImpl.recomputeSchedules((dev.tickwheel.v1.RecomputeSchedulesRequest) request,
              (io.grpc.stub.StreamObserver<dev.tickwheel.v1.RecomputeSchedulesResponse>) responseObserver);
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
          getClusterStatusMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.ClusterStatusRequest,
              dev.tickwheel.v1.ClusterStatusResponse>(
                service, METHODID_CLUSTER_STATUS)))
        .addMethod(
          getCreateTenantMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.CreateTenantRequest,
              dev.tickwheel.v1.CreateTenantResponse>(
                service, METHODID_CREATE_TENANT)))
        .addMethod(
          getGetTenantMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.GetTenantRequest,
              dev.tickwheel.v1.GetTenantResponse>(
                service, METHODID_GET_TENANT)))
        .addMethod(
          getListTenantsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.ListTenantsRequest,
              dev.tickwheel.v1.ListTenantsResponse>(
                service, METHODID_LIST_TENANTS)))
        .addMethod(
          getUpdateTenantMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.UpdateTenantRequest,
              dev.tickwheel.v1.UpdateTenantResponse>(
                service, METHODID_UPDATE_TENANT)))
        .addMethod(
          getPauseTenantMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.PauseTenantRequest,
              dev.tickwheel.v1.PauseTenantResponse>(
                service, METHODID_PAUSE_TENANT)))
        .addMethod(
          getResumeTenantMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.ResumeTenantRequest,
              dev.tickwheel.v1.ResumeTenantResponse>(
                service, METHODID_RESUME_TENANT)))
        .addMethod(
          getIssueApiKeyMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.IssueApiKeyRequest,
              dev.tickwheel.v1.IssueApiKeyResponse>(
                service, METHODID_ISSUE_API_KEY)))
        .addMethod(
          getRotateApiKeyMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.RotateApiKeyRequest,
              dev.tickwheel.v1.RotateApiKeyResponse>(
                service, METHODID_ROTATE_API_KEY)))
        .addMethod(
          getRevokeApiKeyMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.RevokeApiKeyRequest,
              dev.tickwheel.v1.RevokeApiKeyResponse>(
                service, METHODID_REVOKE_API_KEY)))
        .addMethod(
          getListApiKeysMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.ListApiKeysRequest,
              dev.tickwheel.v1.ListApiKeysResponse>(
                service, METHODID_LIST_API_KEYS)))
        .addMethod(
          getIssueWorkerCredentialMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.IssueWorkerCredentialRequest,
              dev.tickwheel.v1.IssueWorkerCredentialResponse>(
                service, METHODID_ISSUE_WORKER_CREDENTIAL)))
        .addMethod(
          getRevokeWorkerCredentialMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.RevokeWorkerCredentialRequest,
              dev.tickwheel.v1.RevokeWorkerCredentialResponse>(
                service, METHODID_REVOKE_WORKER_CREDENTIAL)))
        .addMethod(
          getListWorkerCredentialsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.ListWorkerCredentialsRequest,
              dev.tickwheel.v1.ListWorkerCredentialsResponse>(
                service, METHODID_LIST_WORKER_CREDENTIALS)))
        .addMethod(
          getSearchJobsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.SearchJobsRequest,
              dev.tickwheel.v1.SearchJobsResponse>(
                service, METHODID_SEARCH_JOBS)))
        .addMethod(
          getSearchExecutionsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.SearchExecutionsRequest,
              dev.tickwheel.v1.SearchExecutionsResponse>(
                service, METHODID_SEARCH_EXECUTIONS)))
        .addMethod(
          getDrainServerMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.DrainServerRequest,
              dev.tickwheel.v1.DrainServerResponse>(
                service, METHODID_DRAIN_SERVER)))
        .addMethod(
          getListAlertsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.ListAlertsRequest,
              dev.tickwheel.v1.ListAlertsResponse>(
                service, METHODID_LIST_ALERTS)))
        .addMethod(
          getWatchAlertsMethod(),
          io.grpc.stub.ServerCalls.asyncServerStreamingCall(
            new MethodHandlers<
              dev.tickwheel.v1.WatchAlertsRequest,
              dev.tickwheel.v1.WatchAlertsResponse>(
                service, METHODID_WATCH_ALERTS)))
        .addMethod(
          getRecomputeSchedulesMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.tickwheel.v1.RecomputeSchedulesRequest,
              dev.tickwheel.v1.RecomputeSchedulesResponse>(
                service, METHODID_RECOMPUTE_SCHEDULES)))
        .build();
  }

  private static abstract class AdminServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    AdminServiceBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return dev.tickwheel.v1.AdminProto.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("AdminService");
    }
  }

  private static final class AdminServiceFileDescriptorSupplier
      extends AdminServiceBaseDescriptorSupplier {
    AdminServiceFileDescriptorSupplier() {}
  }

  private static final class AdminServiceMethodDescriptorSupplier
      extends AdminServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final java.lang.String methodName;

    AdminServiceMethodDescriptorSupplier(java.lang.String methodName) {
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
      synchronized (AdminServiceGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new AdminServiceFileDescriptorSupplier())
              .addMethod(getClusterStatusMethod())
              .addMethod(getCreateTenantMethod())
              .addMethod(getGetTenantMethod())
              .addMethod(getListTenantsMethod())
              .addMethod(getUpdateTenantMethod())
              .addMethod(getPauseTenantMethod())
              .addMethod(getResumeTenantMethod())
              .addMethod(getIssueApiKeyMethod())
              .addMethod(getRotateApiKeyMethod())
              .addMethod(getRevokeApiKeyMethod())
              .addMethod(getListApiKeysMethod())
              .addMethod(getIssueWorkerCredentialMethod())
              .addMethod(getRevokeWorkerCredentialMethod())
              .addMethod(getListWorkerCredentialsMethod())
              .addMethod(getSearchJobsMethod())
              .addMethod(getSearchExecutionsMethod())
              .addMethod(getDrainServerMethod())
              .addMethod(getListAlertsMethod())
              .addMethod(getWatchAlertsMethod())
              .addMethod(getRecomputeSchedulesMethod())
              .build();
        }
      }
    }
    return result;
  }
}

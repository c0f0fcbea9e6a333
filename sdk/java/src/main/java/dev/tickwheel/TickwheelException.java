package dev.tickwheel;

import com.google.protobuf.Any;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Message;
import com.google.rpc.BadRequest;
import com.google.rpc.DebugInfo;
import com.google.rpc.ErrorInfo;
import com.google.rpc.PreconditionFailure;
import com.google.rpc.QuotaFailure;
import com.google.rpc.ResourceInfo;
import com.google.rpc.RetryInfo;
import io.grpc.Status;
import io.grpc.protobuf.StatusProto;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;

/**
 * A call to a Tickwheel server failed.
 *
 * <p>Carries the gRPC status code, the server's message, and the details the server put in the
 * {@code grpc-status-details-bin} trailer (a {@code google.rpc.Status}): {@link BadRequest} field
 * violations for INVALID_ARGUMENT, {@link PreconditionFailure} for FAILED_PRECONDITION, {@link
 * QuotaFailure} for RESOURCE_EXHAUSTED.
 *
 * <p>{@link #getMessage()} is one line: {@code CODE: field: description; ...} followed by the
 * server's message in parentheses when it adds something, or {@code CODE: message} when there are
 * no violations.
 */
public final class TickwheelException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private static final List<Message> KNOWN_DETAILS =
      List.of(
          BadRequest.getDefaultInstance(),
          PreconditionFailure.getDefaultInstance(),
          QuotaFailure.getDefaultInstance(),
          ErrorInfo.getDefaultInstance(),
          RetryInfo.getDefaultInstance(),
          ResourceInfo.getDefaultInstance(),
          DebugInfo.getDefaultInstance());

  private final Status.Code code;
  private final String statusMessage;
  private final transient List<FieldViolation> fieldViolations;
  private final transient List<Message> details;

  /** An error with the given parts; {@link #from} builds one from a failed call. */
  public TickwheelException(
      Status.Code code,
      String statusMessage,
      List<FieldViolation> fieldViolations,
      List<Message> details,
      Throwable cause) {
    super(oneLine(code, statusMessage, fieldViolations), cause);
    this.code = code;
    this.statusMessage = statusMessage == null ? "" : statusMessage;
    this.fieldViolations = List.copyOf(fieldViolations);
    this.details = List.copyOf(details);
  }

  /**
   * The error a failed call raised: a {@code StatusRuntimeException} or {@code StatusException}
   * (any other throwable is UNKNOWN). A details trailer that does not decode is ignored rather
   * than masking the status code.
   */
  public static TickwheelException from(Throwable failure) {
    if (failure instanceof TickwheelException known) {
      return known;
    }
    Status status = Status.fromThrowable(failure);
    List<FieldViolation> violations = new ArrayList<>();
    List<Message> details = new ArrayList<>();
    com.google.rpc.Status rich = null;
    try {
      rich = StatusProto.fromThrowable(failure);
    } catch (RuntimeException malformed) {
      // An undecodable trailer: keep the code and message.
    }
    if (rich != null) {
      for (Any packed : rich.getDetailsList()) {
        Message detail = unpack(packed);
        details.add(detail);
        if (detail instanceof BadRequest bad) {
          for (BadRequest.FieldViolation v : bad.getFieldViolationsList()) {
            violations.add(new FieldViolation(v.getField(), v.getDescription()));
          }
        }
      }
    }
    return new TickwheelException(
        status.getCode(), status.getDescription(), violations, details, failure);
  }

  /**
   * The error a {@code google.rpc.Status} message describes, as {@link #from} builds it for a
   * failed call: the same code, message, details and field violations. BatchCreateJobs answers a
   * refused item with one. A status whose code is OK describes no error: it gives INTERNAL rather
   * than an error that reads as a success.
   */
  public static TickwheelException fromStatus(com.google.rpc.Status status) {
    if (status.getCode() == Status.Code.OK.value()) {
      return new TickwheelException(
          Status.Code.INTERNAL,
          "the server sent an error status with code OK: " + status.getMessage(),
          List.of(),
          List.of(),
          null);
    }
    return from(StatusProto.toStatusRuntimeException(status));
  }

  /** The gRPC status code. */
  public Status.Code code() {
    return code;
  }

  /** The status code's canonical name, for example {@code INVALID_ARGUMENT}. */
  public String codeName() {
    return code.name();
  }

  /** The status message as the server sent it (may be empty). */
  public String statusMessage() {
    return statusMessage;
  }

  /** The BadRequest violations, in the server's order; empty when the server sent none. */
  public List<FieldViolation> fieldViolations() {
    return fieldViolations;
  }

  /**
   * Every detail message the server attached: {@link BadRequest}, {@link PreconditionFailure},
   * {@link QuotaFailure}, ... where the type is known, otherwise the raw {@link Any}.
   */
  public List<Message> details() {
    return details;
  }

  private static Message unpack(Any packed) {
    for (Message type : KNOWN_DETAILS) {
      if (packed.is(type.getClass().asSubclass(Message.class))) {
        try {
          return packed.unpack(type.getClass().asSubclass(Message.class));
        } catch (InvalidProtocolBufferException e) {
          return packed;
        }
      }
    }
    return packed;
  }

  private static String oneLine(
      Status.Code code, String statusMessage, List<FieldViolation> violations) {
    String text = violations.stream().map(FieldViolation::toString).collect(Collectors.joining("; "));
    // One line, whatever the server sent.
    String message = statusMessage == null ? "" : String.join(" ", statusMessage.trim().split("\\s+"));
    if (text.isEmpty()) {
      text = message.isEmpty() ? "(no message)" : message;
    } else if (!message.isEmpty() && !text.contains(message)) {
      text = text + " (" + message + ")";
    }
    return code.name() + ": " + text;
  }
}

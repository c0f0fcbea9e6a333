/**
 * Errors raised by the Tickwheel client.
 *
 * Every failed RPC surfaces as one {@link TickwheelError} carrying the gRPC
 * status code, the server's message, and the structured details the server
 * put in the `grpc-status-details-bin` trailer (a `google.rpc.Status`):
 * `BadRequest` field violations for INVALID_ARGUMENT, `PreconditionFailure`
 * for FAILED_PRECONDITION and `QuotaFailure` for RESOURCE_EXHAUSTED.
 */

import { create, createRegistry, fromBinary, type Message } from "@bufbuild/protobuf";
import { AnySchema, anyUnpack, type Any } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";

import {
  BadRequestSchema,
  DebugInfoSchema,
  ErrorInfoSchema,
  PreconditionFailureSchema,
  QuotaFailureSchema,
  ResourceInfoSchema,
  RetryInfoSchema,
  type BadRequest,
} from "./gen/google/rpc/error_details_pb.js";
import { StatusSchema, type Status } from "./gen/google/rpc/status_pb.js";

export { Code };

/** The canonical gRPC name of each status code (`INVALID_ARGUMENT`, ...). */
const CODE_NAMES: Record<Code, string> = {
  [Code.Canceled]: "CANCELLED",
  [Code.Unknown]: "UNKNOWN",
  [Code.InvalidArgument]: "INVALID_ARGUMENT",
  [Code.DeadlineExceeded]: "DEADLINE_EXCEEDED",
  [Code.NotFound]: "NOT_FOUND",
  [Code.AlreadyExists]: "ALREADY_EXISTS",
  [Code.PermissionDenied]: "PERMISSION_DENIED",
  [Code.ResourceExhausted]: "RESOURCE_EXHAUSTED",
  [Code.FailedPrecondition]: "FAILED_PRECONDITION",
  [Code.Aborted]: "ABORTED",
  [Code.OutOfRange]: "OUT_OF_RANGE",
  [Code.Unimplemented]: "UNIMPLEMENTED",
  [Code.Internal]: "INTERNAL",
  [Code.Unavailable]: "UNAVAILABLE",
  [Code.DataLoss]: "DATA_LOSS",
  [Code.Unauthenticated]: "UNAUTHENTICATED",
};

/** The canonical gRPC name of `code`, for example `INVALID_ARGUMENT`. */
export function codeName(code: Code): string {
  return CODE_NAMES[code] ?? `CODE_${code}`;
}

/**
 * One invalid field of a request, from a `google.rpc.BadRequest`. `field` is
 * the path within the request (`job.schedule.cron.expression`),
 * `description` says what is wrong with it.
 */
export interface FieldViolation {
  readonly field: string;
  readonly description: string;
}

/**
 * A call to a Tickwheel server failed.
 *
 * `message` is one line: `CODE: field: description; ...` followed by the
 * server's message in parentheses when it adds something, or
 * `CODE: message` when there are no violations.
 */
export class TickwheelError extends Error {
  override readonly name = "TickwheelError";
  /** The status code (`Code.InvalidArgument`, ...). */
  readonly code: Code;
  /** The status message as the server sent it (may be empty). */
  readonly serverMessage: string;
  /** The BadRequest violations, in the server's order; empty when it sent none. */
  readonly fieldViolations: readonly FieldViolation[];
  /**
   * Every detail the server attached, unpacked where the type is known
   * (`BadRequest`, `PreconditionFailure`, `QuotaFailure`, `ErrorInfo`, ...),
   * otherwise the raw `google.protobuf.Any`.
   */
  readonly details: readonly (Message | Any)[];

  constructor(
    code: Code,
    serverMessage = "",
    fieldViolations: readonly FieldViolation[] = [],
    details: readonly (Message | Any)[] = [],
    options?: { cause?: unknown },
  ) {
    super(oneLine(code, serverMessage, fieldViolations), options);
    this.code = code;
    this.serverMessage = serverMessage;
    this.fieldViolations = Object.freeze([...fieldViolations]);
    this.details = Object.freeze([...details]);
  }

  /** The status code's canonical gRPC name, for example `INVALID_ARGUMENT`. */
  get codeName(): string {
    return codeName(this.code);
  }

  /** The violation of `field`, if the server named it. */
  violation(field: string): FieldViolation | undefined {
    return this.fieldViolations.find((v) => v.field === field);
  }

  /**
   * Builds the error from anything a Connect call throws. A `ConnectError`
   * keeps its code and message, and its details come from the
   * `grpc-status-details-bin` trailer; anything else becomes UNKNOWN (or
   * CANCELLED for an abort). A malformed details trailer is ignored rather
   * than masking the status code.
   *
   * A failure to reach the server or to keep the connection (refused, reset,
   * DNS, a TLS handshake the server rejects, a session torn down under the
   * call) is UNAVAILABLE, as gRPC reports it, whatever Node and Connect
   * called it (ABORTED for a reset, INTERNAL for TLS, CANCELLED for a stream
   * the peer reset): that is the code retries look for, and they repeat only
   * calls that are safe to repeat.
   */
  static from(reason: unknown): TickwheelError {
    if (reason instanceof TickwheelError) {
      return reason;
    }
    const error = ConnectError.from(reason);
    const code = isConnectionFailure(error) ? Code.Unavailable : error.code;
    const details = statusDetails(error);
    return new TickwheelError(code, error.rawMessage, violationsOf(details), details, { cause: reason });
  }

  /**
   * Builds the error a `google.rpc.Status` message describes, as
   * {@link from} does for the status of a failed call: the same code,
   * message, details and field violations. BatchCreateJobs answers a refused
   * item with one. A status whose code is OK describes no error: it gives
   * INTERNAL rather than an error that reads as a success.
   */
  static fromStatus(status: Status): TickwheelError {
    if (status.code === 0) {
      return new TickwheelError(Code.Internal, `the server sent an error status with code OK: ${status.message}`);
    }
    const details = unpackDetails(status.details);
    return new TickwheelError(status.code as Code, status.message, violationsOf(details), details);
  }
}

/** The BadRequest field violations among `details`, in order. */
function violationsOf(details: readonly (Message | Any)[]): FieldViolation[] {
  const violations: FieldViolation[] = [];
  for (const detail of details) {
    if (isBadRequest(detail)) {
      for (const v of detail.fieldViolations) {
        violations.push({ field: v.field, description: v.description });
      }
    }
  }
  return violations;
}

/** Node error codes of a connection that could not be made or did not last. */
const CONNECTION_ERROR_CODES =
  /^(ECONN|EPIPE$|ETIMEDOUT$|EHOSTUNREACH$|ENETUNREACH$|ENOTFOUND$|EAI_AGAIN$|ERR_SSL_|ERR_TLS_|ERR_HTTP2_(GOAWAY|SESSION|STREAM_CANCEL|INVALID_SESSION|ERROR)|ERR_STREAM_DESTROYED$|CERT_|UNABLE_TO_|DEPTH_ZERO_SELF_SIGNED_CERT$|SELF_SIGNED_CERT_IN_CHAIN$)/;

/** True when `error` was made by the client's transport because the connection failed, not sent by a server. */
function isConnectionFailure(error: ConnectError): boolean {
  if (error.isWireError || ![Code.Canceled, Code.Internal, Code.Aborted, Code.Unknown].includes(error.code)) {
    return false;
  }
  // The peer reset the stream or tore the session down; an abort by the caller carries its own reason.
  if (error.code === Code.Canceled && /^http\/2 stream closed with error code CANCEL\b/.test(error.rawMessage)) {
    return true;
  }
  const seen = new Set<unknown>();
  for (let cause: unknown = error; cause instanceof Error && !seen.has(cause); cause = cause.cause) {
    seen.add(cause);
    const nodeCode = (cause as { code?: unknown }).code;
    if (typeof nodeCode === "string" && CONNECTION_ERROR_CODES.test(nodeCode)) {
      return true;
    }
  }
  return false;
}

const KNOWN_DETAILS = createRegistry(
  BadRequestSchema,
  PreconditionFailureSchema,
  QuotaFailureSchema,
  ErrorInfoSchema,
  RetryInfoSchema,
  ResourceInfoSchema,
  DebugInfoSchema,
);

function isBadRequest(detail: Message | Any): detail is BadRequest {
  return detail.$typeName === BadRequestSchema.typeName;
}

/**
 * The details of `google.rpc.Status` in the error's `grpc-status-details-bin`
 * trailer (base64, padded or not), each unpacked when its type is known.
 * Without that trailer, the details Connect parsed are used; none when both
 * are absent or unreadable.
 */
function statusDetails(error: ConnectError): (Message | Any)[] {
  const header = error.metadata.get("grpc-status-details-bin");
  let anys: Any[] = [];
  if (header !== null) {
    try {
      anys = fromBinary(StatusSchema, Buffer.from(header, "base64")).details;
    } catch {
      anys = [];
    }
  } else {
    // Details of errors made locally carry messages, not bytes: none from the wire.
    anys = error.details.flatMap((d) =>
      "type" in d ? [create(AnySchema, { typeUrl: `type.googleapis.com/${d.type}`, value: d.value })] : [],
    );
  }
  return unpackDetails(anys);
}

/** Each detail unpacked when its type is known, else the raw `Any`. */
function unpackDetails(anys: readonly Any[]): (Message | Any)[] {
  const out: (Message | Any)[] = [];
  for (const any of anys) {
    let unpacked: Message | undefined;
    try {
      unpacked = anyUnpack(any, KNOWN_DETAILS);
    } catch {
      unpacked = undefined;
    }
    out.push(unpacked ?? any);
  }
  return out;
}

function oneLine(code: Code, message: string, violations: readonly FieldViolation[]): string {
  const flat = message.split(/\s+/).filter(Boolean).join(" ");
  let text = violations.map((v) => (v.field ? `${v.field}: ${v.description}` : v.description)).join("; ");
  if (!text) {
    text = flat || "(no message)";
  } else if (flat && !text.includes(flat)) {
    text = `${text} (${flat})`;
  }
  return `${codeName(code)}: ${text}`;
}

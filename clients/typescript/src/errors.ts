/**
 * `MemsvcError`: every failed call, with the server's status code, its message as sent, and
 * the rich details memsvc puts in the status (`google.rpc.ErrorInfo`: a stable `reason` such
 * as REINDEX_RUNNING or UNAUTHENTICATED; `google.rpc.BadRequest`: one field violation per
 * refused field).
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { anyIs, anyUnpack } from "@bufbuild/protobuf/wkt";
import { BadRequestSchema, ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.js";
import type { Status } from "./gen/google/rpc/status_pb.js";

export { Code };

/** gRPC's names of the status codes (`MemsvcError.codeName`). */
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

/** The gRPC name of a status code ("INVALID_ARGUMENT"); "UNKNOWN" for a number gRPC lacks. */
export function codeName(code: number): string {
  return CODE_NAMES[code as Code] ?? "UNKNOWN";
}

/** One refused field of a request (`google.rpc.BadRequest.FieldViolation`). */
export interface FieldViolation {
  field: string;
  description: string;
}

export interface MemsvcErrorInit {
  code: Code;
  reason?: string;
  domain?: string;
  metadata?: Record<string, string>;
  fieldViolations?: FieldViolation[];
  requestId?: string;
  cause?: unknown;
}

/**
 * A call memsvc refused, or one that could not reach it.
 *
 *     try { await memsvc.memories.add("") }
 *     catch (err) {
 *       if (err instanceof MemsvcError && err.code === Code.InvalidArgument) console.log(err.fieldViolations)
 *     }
 *
 * `message` is the server's message as sent; `toString()` adds the code and reason.
 */
export class MemsvcError extends Error {
  override name = "MemsvcError";
  /** The status code (connect's `Code`, numbered as gRPC numbers them). */
  readonly code: Code;
  /** ErrorInfo.reason: which conflict or refusal (e.g. REINDEX_RUNNING, UNAUTHENTICATED). */
  readonly reason?: string;
  /** ErrorInfo.domain ("memsvc"). */
  readonly domain?: string;
  /** ErrorInfo.metadata (e.g. the current tokens of a RECENT_FILE_CONFLICT). */
  readonly metadata: Record<string, string>;
  /** BadRequest's field violations of an INVALID_ARGUMENT: every refused field. */
  readonly fieldViolations: FieldViolation[];
  /** The server's request id (its `x-request-id` trailer), to find the call in its log. */
  readonly requestId?: string;

  constructor(message: string, init: MemsvcErrorInit) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.code = init.code;
    this.reason = init.reason;
    this.domain = init.domain;
    this.metadata = { ...(init.metadata ?? {}) };
    this.fieldViolations = [...(init.fieldViolations ?? [])];
    this.requestId = init.requestId;
  }

  /** The gRPC name of `code`: "INVALID_ARGUMENT", "NOT_FOUND", ... */
  get codeName(): string {
    return codeName(this.code);
  }

  override toString(): string {
    const text = `${this.name}: ${this.codeName}: ${this.message}`;
    return this.reason ? `${text} [${this.reason}]` : text;
  }
}

/** True when `err` is a MemsvcError (with `code`, when given). */
export function isMemsvcError(err: unknown, code?: Code): err is MemsvcError {
  return err instanceof MemsvcError && (code === undefined || err.code === code);
}

/** The MemsvcError for anything a connect call threw (a ConnectError or otherwise). */
export function fromConnectError(err: unknown): MemsvcError {
  if (err instanceof MemsvcError) return err;
  const connect = ConnectError.from(err);
  const info = connect.findDetails(ErrorInfoSchema)[0];
  const violations = connect
    .findDetails(BadRequestSchema)
    .flatMap((bad) => bad.fieldViolations.map((v) => ({ field: v.field, description: v.description })));
  return new MemsvcError(connect.rawMessage, {
    code: connect.code,
    reason: info?.reason || undefined,
    domain: info?.domain || undefined,
    metadata: info?.metadata,
    fieldViolations: violations,
    requestId: connect.metadata.get("x-request-id") ?? undefined,
    cause: err,
  });
}

/**
 * The MemsvcError for a `google.rpc.Status` carried in a response: one refused item of
 * `memories.addMany` (CreateMemoryResult.error holds the details the call alone would have).
 */
export function fromStatus(status: Status): MemsvcError {
  let reason: string | undefined;
  let domain: string | undefined;
  let metadata: Record<string, string> = {};
  const violations: FieldViolation[] = [];
  for (const detail of status.details) {
    if (anyIs(detail, ErrorInfoSchema)) {
      const info = anyUnpack(detail, ErrorInfoSchema);
      if (info) {
        reason = info.reason || undefined;
        domain = info.domain || undefined;
        metadata = info.metadata;
      }
    } else if (anyIs(detail, BadRequestSchema)) {
      const bad = anyUnpack(detail, BadRequestSchema);
      for (const v of bad?.fieldViolations ?? []) violations.push({ field: v.field, description: v.description });
    }
  }
  const code = (CODE_NAMES[status.code as Code] ? status.code : Code.Unknown) as Code;
  return new MemsvcError(status.message, { code, reason, domain, metadata, fieldViolations: violations });
}

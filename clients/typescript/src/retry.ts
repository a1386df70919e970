/**
 * Retries of idempotent calls on UNAVAILABLE (the server restarting, a connection refused or
 * reset), as a connect interceptor: gRPC's retry policy, which connect-node does not have.
 */
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";

/**
 * Calls retried on UNAVAILABLE: those whose repetition changes nothing a caller could tell
 * apart from one run (memsvc has no idempotency key, so no write is safe to send twice: a
 * create that reached the server before the connection broke would be stored twice). The
 * same table as the Python SDK's `RETRIED`; every other RPC is sent once.
 */
export const RETRIED: Readonly<Record<string, readonly string[]>> = {
  "memsvc.v1.MemoryService": ["ListMemories", "GetMemory", "GetMemoryHistory", "CheckHealth", "ListRecentFiles", "GetRecentFile", "ScanLegacy"],
  "memsvc.v1.EngineService": ["Retrieve", "Inject", "RetrievePreview", "ListEmbeddingProviders", "GetEngineStatus"],
  "memsvc.v1.SettingsService": [
    "GetMemorySettings",
    "GetQdrantSettings",
    "CheckQdrantHealth",
    "SearchQdrant",
    "ListQdrantEmbeddingModels",
    "GetReviewConfig",
    "GetPowerfulMemoryConfig",
  ],
  "memsvc.v1.CredentialService": ["ListCredentials", "GetCaller", "RevokeCredential"],
};

/**
 * How idempotent calls are retried: before attempt n+1 the client waits a random time up to
 * min(initialBackoffMs × multiplier^(n-1), maxBackoffMs). The call's deadline covers every
 * attempt (and each retry sends the time that is left).
 */
export interface RetryPolicy {
  /** Attempts in all, the first included; default 5. */
  maxAttempts?: number;
  /** Default 200. */
  initialBackoffMs?: number;
  /** Default 5000. */
  maxBackoffMs?: number;
  /** Default 2. */
  multiplier?: number;
}

const DEFAULTS: Required<RetryPolicy> = { maxAttempts: 5, initialBackoffMs: 200, maxBackoffMs: 5000, multiplier: 2 };

/** True for a method of the `RETRIED` table. */
export function isRetried(service: string, method: string): boolean {
  return RETRIED[service]?.includes(method) ?? false;
}

function validated(policy: RetryPolicy): Required<RetryPolicy> {
  const p = { ...DEFAULTS, ...policy };
  if (!Number.isInteger(p.maxAttempts) || p.maxAttempts < 1) throw new RangeError("retry.maxAttempts must be an integer >= 1");
  if (!(p.initialBackoffMs > 0 && p.maxBackoffMs >= p.initialBackoffMs && p.multiplier >= 1)) {
    throw new RangeError("retry: backoffs must be positive, maxBackoffMs >= initialBackoffMs, multiplier >= 1");
  }
  return p;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/** The grpc-timeout header value of `ms` milliseconds ("<n>m"). */
function grpcTimeout(ms: number): string {
  return `${Math.max(1, Math.ceil(ms))}m`;
}

/** Milliseconds of a grpc-timeout header ("100m", "5S", ...), or undefined. */
function parseGrpcTimeout(value: string | null): number | undefined {
  const match = value ? /^(\d{1,8})([HMSmun])$/.exec(value) : null;
  if (!match) return undefined;
  const scale: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 1e-3, n: 1e-6 };
  return Number(match[1]) * scale[match[2]];
}

/** The interceptor retrying the `RETRIED` unary calls that fail with UNAVAILABLE. */
export function retryInterceptor(policy: RetryPolicy = {}): Interceptor {
  const p = validated(policy);
  return (next) => async (req) => {
    if (req.stream || !isRetried(req.service.typeName, req.method.name)) return next(req);
    const started = Date.now();
    const timeoutMs = parseGrpcTimeout(req.header.get("grpc-timeout"));
    let bound = p.initialBackoffMs;
    for (let attempt = 1; ; attempt++) {
      try {
        return await next(req);
      } catch (err) {
        const code = err instanceof ConnectError ? err.code : ConnectError.from(err).code;
        if (code !== Code.Unavailable || attempt >= p.maxAttempts || req.signal.aborted) throw err;
        await sleep(Math.random() * bound, req.signal).catch(() => {
          throw err;
        });
        bound = Math.min(bound * p.multiplier, p.maxBackoffMs);
        if (timeoutMs !== undefined) {
          const left = timeoutMs - (Date.now() - started);
          if (left <= 0) throw err;
          req.header.set("grpc-timeout", grpcTimeout(left));
        }
      }
    }
  };
}

/**
 * @memsvc/client: the TypeScript SDK of memsvc, over gRPC (connect-node, HTTP/2).
 *
 *     import { Memsvc } from "@memsvc/client";
 *
 * The Vercel AI SDK middleware is the subpath `@memsvc/client/ai`.
 */
export {
  DEFAULT_BASE_URL,
  DEFAULT_TIMEOUT_MS,
  HistoryIterator,
  Memories,
  Memsvc,
  ReindexStream,
  Settings,
  WatchStream,
  type ClearOptions,
  type IterateOptions,
  type MemsvcOptions,
  type PageOptions,
  type Services,
  type UpdateOptions,
} from "./client.js";
export { Code, MemsvcError, codeName, fromConnectError, fromStatus, isMemsvcError, type FieldViolation } from "./errors.js";
export { RETRIED, isRetried, retryInterceptor, type RetryPolicy } from "./retry.js";
export type * from "./types.js";
export { CredentialService } from "./gen/memsvc/v1/credentials_pb.js";
export { EngineService } from "./gen/memsvc/v1/engine_pb.js";
export { MemoryService } from "./gen/memsvc/v1/memory_pb.js";
export { SettingsService } from "./gen/memsvc/v1/settings_pb.js";
export type { Interceptor, Transport } from "@connectrpc/connect";

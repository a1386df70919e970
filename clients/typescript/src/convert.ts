/**
 * Every wire ⇄ domain conversion of the SDK, one function per message: requests built from
 * the methods' arguments, results read from responses.
 */
import { create, type JsonObject } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { fromStatus } from "./errors.js";
import * as engine from "./gen/memsvc/v1/engine_pb.js";
import * as memory from "./gen/memsvc/v1/memory_pb.js";
import * as settings from "./gen/memsvc/v1/settings_pb.js";
import type {
  AddResult,
  BatchResult,
  ExtractInput,
  ExtractResult,
  HealthResult,
  HistoryEntry,
  InjectFormat,
  InjectOptions,
  InjectResult,
  Memory,
  MemoryEvent,
  MemoryPage,
  MemorySettings,
  NewMemory,
  ReindexOptions,
  ReindexProgress,
  Resolution,
  RetrieveOptions,
  RetrieveResult,
  RetrievedMemory,
  SettingsChanges,
  WatchOptions,
} from "./types.js";

/** Page size of `memories.list` unless given (the server's default too). */
export const DEFAULT_PAGE_SIZE = 50;
/** The server's bounds of a page. */
export const MAX_PAGE_SIZE = 200;
/** The server's bounds of a page of a memory's history. */
export const MAX_HISTORY_PAGE = 1000;

const FINISHED = new Set(["done", "failed", "cancelled"]);

function date(ts: Timestamp | undefined): Date | undefined {
  return ts ? timestampDate(ts) : undefined;
}

function timestamp(value: Date | undefined, name: string): Timestamp | undefined {
  if (value === undefined) return undefined;
  if (!(value instanceof Date) || Number.isNaN(value.getTime())) throw new TypeError(`${name} must be a valid Date`);
  return timestampFromDate(value);
}

function nonEmpty(value: string): string | undefined {
  return value === "" ? undefined : value;
}

// ---- memories ------------------------------------------------------------------------------

export function toMemory(m: memory.Memory): Memory {
  return {
    id: m.id,
    apiKeyId: m.apiKeyId,
    content: m.content,
    type: m.type,
    key: m.key,
    sessionId: m.sessionId,
    metadata: m.metadata ?? {},
    createdAt: date(m.createdAt),
    updatedAt: date(m.updatedAt),
    expiresAt: date(m.expiresAt),
    occurredAt: date(m.occurredAt),
    lastAccessedAt: date(m.lastAccessedAt),
    accessCount: m.accessCount,
    keep: m.keep,
    validFrom: date(m.validFrom),
    validTo: date(m.validTo),
    raw: m,
  };
}

/** A NewMemory from a content string or the object itself. */
export function newMemory(item: NewMemory | string): NewMemory {
  if (typeof item === "string") return { content: item };
  if (item === null || typeof item !== "object" || typeof item.content !== "string") {
    throw new TypeError("each memory is a content string or an object with a string `content`");
  }
  return item;
}

export function createRequest(item: NewMemory, apiKeyId: string): memory.CreateMemoryRequest {
  return create(memory.CreateMemoryRequestSchema, {
    apiKeyId,
    sessionId: item.sessionId,
    type: item.type ?? "",
    key: item.key,
    content: item.content,
    metadata: item.metadata,
    expiresAt: timestamp(item.expiresAt, "expiresAt"),
    occurredAt: timestamp(item.occurredAt, "occurredAt"),
    keep: item.keep,
  });
}

export function toAdded(res: memory.CreateMemoryResponse): AddResult {
  return { id: res.id, created: res.created, mergedInto: nonEmpty(res.mergedInto) };
}

export function toBatch(res: memory.CreateMemoriesResponse): BatchResult {
  return {
    items: res.results.map((r) =>
      r.error && r.error.code !== 0
        ? { ok: false, created: false, error: fromStatus(r.error) }
        : { ok: true, id: r.id, created: r.created, mergedInto: nonEmpty(r.mergedInto) },
    ),
    storedCount: res.storedCount,
    failedCount: res.failedCount,
    raw: res,
  };
}

export interface UpdateFields {
  content?: string;
  type?: string;
  key?: string;
  metadata?: JsonObject;
  keep?: boolean;
  occurredAt?: Date;
}

export function updateRequest(id: string, fields: UpdateFields): memory.UpdateMemoryRequest {
  return create(memory.UpdateMemoryRequestSchema, {
    id,
    content: fields.content,
    type: fields.type,
    key: fields.key,
    metadata: fields.metadata,
    keep: fields.keep,
    occurredAt: timestamp(fields.occurredAt, "occurredAt"),
  });
}

export interface ListFilters {
  apiKeyId: string;
  type?: string;
  sessionId?: string;
  query?: string;
}

export function pageSize(size: number): number {
  if (!Number.isInteger(size) || size < 1 || size > MAX_PAGE_SIZE) {
    throw new RangeError(`page size must be an integer 1..${MAX_PAGE_SIZE}`);
  }
  return size;
}

export function listRequest(f: ListFilters, offset: number, limit: number): memory.ListMemoriesRequest {
  if (!Number.isInteger(offset) || offset < 0) throw new RangeError("offset must be an integer >= 0");
  return create(memory.ListMemoriesRequestSchema, {
    apiKeyId: f.apiKeyId,
    type: f.type ?? "",
    sessionId: f.sessionId ?? "",
    q: f.query ?? "",
    offset,
    limit: pageSize(limit),
  });
}

export function toPage(res: memory.ListMemoriesResponse, offset: number): MemoryPage {
  const memories = res.data.map(toMemory);
  const stats = res.stats && {
    total: res.stats.total,
    byType: { ...res.stats.byType },
    tokensUsed: res.stats.tokensUsed,
    hitRate: res.stats.hitRate,
  };
  return {
    memories,
    total: res.total,
    offset,
    limit: res.limit,
    hasMore: offset + memories.length < res.total,
    stats,
    raw: res,
  };
}

export function clearRequest(
  apiKeyId: string,
  f: { type?: string; sessionId?: string; olderThan?: Date },
): memory.ClearMemoriesRequest {
  return create(memory.ClearMemoriesRequestSchema, {
    apiKeyId,
    type: f.type ?? "",
    sessionId: f.sessionId ?? "",
    olderThan: timestamp(f.olderThan, "olderThan"),
  });
}

export function toHealth(res: memory.CheckHealthResponse): HealthResult {
  return { working: res.working, latencyMs: res.latencyMs, error: res.error };
}

export function historyLimit(limit: number | undefined): number | undefined {
  if (limit !== undefined && (!Number.isInteger(limit) || limit < 1 || limit > MAX_HISTORY_PAGE)) {
    throw new RangeError(`history limit (entries per page) must be an integer 1..${MAX_HISTORY_PAGE}`);
  }
  return limit;
}

export function historyRequest(id: string, limit: number | undefined, pageToken: string): memory.GetMemoryHistoryRequest {
  return create(memory.GetMemoryHistoryRequestSchema, { id, limit, pageToken });
}

export function toHistoryEntry(e: memory.MemoryHistoryEntry): HistoryEntry {
  return {
    event: e.event,
    at: date(e.at),
    author: nonEmpty(e.author),
    changes: e.changes ?? {},
    relatedId: nonEmpty(e.relatedId),
    raw: e,
  };
}

export function watchRequest(apiKeyId: string, o: WatchOptions): memory.WatchMemoriesRequest {
  if (o.resumeToken !== undefined && typeof o.resumeToken !== "string") {
    throw new TypeError("resumeToken must be a string (an event's resumeToken)");
  }
  return create(memory.WatchMemoriesRequestSchema, {
    apiKeyId,
    resumeToken: o.resumeToken ?? "",
    stopWhenCaughtUp: o.stopWhenCaughtUp ?? false,
  });
}

export function toMemoryEvent(e: memory.MemoryEvent): MemoryEvent {
  return {
    kind: e.kind,
    resumeToken: e.resumeToken,
    memoryId: nonEmpty(e.memoryId),
    apiKeyId: nonEmpty(e.apiKeyId),
    at: date(e.at),
    author: nonEmpty(e.author),
    change: nonEmpty(e.change),
    changedFields: [...e.changedFields],
    memory: e.memory && toMemory(e.memory),
    relatedId: nonEmpty(e.relatedId),
    raw: e,
  };
}

// ---- the engine ----------------------------------------------------------------------------

export function retrieveRequest(query: string, apiKeyId: string, o: RetrieveOptions): engine.RetrieveRequest {
  return create(engine.RetrieveRequestSchema, {
    apiKeyId,
    query,
    sessionId: o.sessionId ?? "",
    strategy: o.strategy ?? "",
    scope: o.scope ?? "",
    maxTokens: o.maxTokens,
    limit: o.limit,
    minScore: o.minScore,
    asOf: timestamp(o.asOf, "asOf"),
  });
}

function toRetrieved(m: engine.RetrievedMemory): RetrievedMemory {
  return {
    id: m.id,
    content: m.content,
    type: m.type,
    key: nonEmpty(m.key),
    sessionId: nonEmpty(m.sessionId),
    score: m.score,
    tokens: m.tokens,
    tier: m.tier,
    vecScore: m.vecScore,
    ftsScore: m.ftsScore,
    occurredAt: date(m.occurredAt),
    validFrom: date(m.validFrom),
    validTo: date(m.validTo),
  };
}

function toResolution(r: engine.Resolution): Resolution {
  return {
    embeddingSource: r.embeddingSource,
    embeddingModel: r.embeddingModel,
    vectorStore: r.vectorStore,
    strategyUsed: r.strategyUsed,
    rerankApplied: r.rerankApplied,
    fallbackReason: r.fallbackReason,
    backend: r.backend,
    belowMinScore: r.belowMinScore,
    keywordFloor: r.keywordFloor,
    vectorFloor: r.vectorFloor,
    skippedForAge: r.skippedForAge,
  };
}

export function toRetrieveResult(res: engine.RetrieveResponse): RetrieveResult {
  return {
    memories: res.memories.map(toRetrieved),
    totalTokens: res.totalTokens,
    resolution: res.resolution && toResolution(res.resolution),
    raw: res,
  };
}

export function injectRequest(body: JsonObject, apiKeyId: string, o: InjectOptions): engine.InjectRequest {
  if (body === null || typeof body !== "object" || Array.isArray(body)) {
    throw new TypeError("inject takes the chat request body as a JSON object");
  }
  return create(engine.InjectRequestSchema, {
    request: body,
    provider: o.provider ?? "",
    model: o.model ?? "",
    apiKeyId,
    sessionId: o.sessionId ?? "",
    noMemory: o.noMemory ?? false,
    options: { cacheSafe: o.cacheSafe ?? false, systemMessageMustBeFirst: o.systemMessageMustBeFirst ?? false },
    limit: o.limit,
    minScore: o.minScore,
    asOf: timestamp(o.asOf, "asOf"),
  });
}

export function toInjectResult(res: engine.InjectResponse): InjectResult {
  return {
    request: res.request ?? {},
    injected: res.injected,
    memoryIds: [...res.memoryIds],
    tokens: res.tokens,
    role: res.role as InjectResult["role"],
    format: res.format as InjectFormat | "",
    skippedReason: res.skippedReason,
    belowMinScore: res.belowMinScore,
    skippedForAge: res.skippedForAge,
    raw: res,
  };
}

export function extractRequest(apiKeyId: string, o: ExtractInput): engine.ExtractRequest {
  return create(engine.ExtractRequestSchema, {
    apiKeyId,
    text: o.text ?? "",
    userMessage: o.userMessage ?? "",
    assistantMessage: o.assistantMessage ?? "",
    sessionId: o.sessionId ?? "",
    dryRun: o.dryRun ?? false,
    wait: o.wait ?? false,
  });
}

export function toExtractResult(res: engine.ExtractResponse): ExtractResult {
  return {
    facts: res.facts.map((f) => ({ category: f.category, type: f.type, key: f.key, content: f.content })),
    stored: res.stored,
    accepted: res.accepted,
    skippedReason: res.skippedReason,
    raw: res,
  };
}

export function reindexRequest(o: ReindexOptions): engine.ReindexRequest {
  const limit = o.limit ?? 0;
  if (!Number.isInteger(limit) || limit < 0) throw new RangeError("reindex limit must be an integer >= 0");
  return create(engine.ReindexRequestSchema, {
    force: o.force ?? false,
    limit,
    target: o.target ?? "",
    attach: o.attach ?? false,
  });
}

export function toProgress(p: engine.ReindexProgress): ReindexProgress {
  return {
    started: p.started,
    pending: p.pending,
    processed: p.processed,
    errors: p.errors,
    ratePerSecond: p.ratePerSecond,
    etaSeconds: p.etaSeconds,
    state: p.state,
    error: p.error,
    finished: FINISHED.has(p.state),
    raw: p,
  };
}

// ---- settings ------------------------------------------------------------------------------

export function toSettings(s: settings.MemorySettings): MemorySettings {
  return {
    enabled: s.enabled,
    maxTokens: s.maxTokens,
    retentionDays: s.retentionDays,
    strategy: s.strategy,
    scope: s.scope,
    skillsEnabled: s.skillsEnabled,
    embeddingSource: s.embeddingSource,
    embeddingProviderModel: s.embeddingProviderModel ?? null,
    customBaseUrl: s.customBaseUrl ?? null,
    customModelId: s.customModelId ?? null,
    transformersEnabled: s.transformersEnabled,
    staticEnabled: s.staticEnabled,
    rerankEnabled: s.rerankEnabled,
    rerankProviderModel: s.rerankProviderModel ?? null,
    vectorStore: s.vectorStore,
    primaryBackend: s.primaryBackend,
    fallbackBackends: [...s.fallbackBackends],
    backendConfigs: s.backendConfigs ?? {},
    dedupOnWrite: s.dedupOnWrite,
    raw: s,
  };
}

export function settingsRequest(changes: SettingsChanges): settings.UpdateMemorySettingsRequest {
  if (changes === null || typeof changes !== "object" || Array.isArray(changes)) {
    throw new TypeError("settings.update takes an object of settings to change");
  }
  const values: JsonObject = {};
  for (const [name, value] of Object.entries(changes)) {
    if (name === "raw" || value === undefined) continue;
    values[name] = value;
  }
  if (Object.keys(values).length === 0) throw new TypeError("settings.update needs at least one setting to change");
  return create(settings.UpdateMemorySettingsRequestSchema, { settings: values });
}

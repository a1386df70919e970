/**
 * The SDK's values: plain objects with `Date`s, `undefined` for "not set" and JSON objects,
 * instead of the generated protobuf messages (whose Timestamps are messages and whose unset
 * strings are ""). Each result keeps the message it was read from as `raw`, for the fields
 * this SDK does not surface.
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { MemsvcError } from "./errors.js";
import type * as engine from "./gen/memsvc/v1/engine_pb.js";
import type * as memory from "./gen/memsvc/v1/memory_pb.js";
import type * as settings from "./gen/memsvc/v1/settings_pb.js";

export type { JsonObject, JsonValue };

/** The memory types the server accepts (`factual` when none is given). */
export type MemoryType = "factual" | "episodic" | "procedural" | "semantic";
/** Retrieval strategies (`exact` is an alias of `recent`); default: the server's settings. */
export type Strategy = "exact" | "recent" | "semantic" | "hybrid";
/** Whose memories a retrieval reads: the apiKeyId's, one session's, or (admin) every tenant's. */
export type Scope = "apiKey" | "session" | "global";
/** Where a reindex writes: the store's own vector index, or a backfill of Qdrant. */
export type ReindexTarget = "local" | "qdrant";

/** Per-call options every method takes. */
export interface CallOptions {
  /** The deadline of this call in milliseconds; default: the client's `timeoutMs`. */
  timeoutMs?: number;
  /** Cancels the call when aborted. */
  signal?: AbortSignal;
}

/** Options of the calls that act for one owner (tenant). */
export interface OwnerOptions extends CallOptions {
  /** The owner; default: the client's `apiKeyId`. */
  apiKeyId?: string;
}

/**
 * One remembered fact, as stored. `createdAt` is when memsvc stored it; `occurredAt` when the
 * thing it records happened, as the writer said. `keep` exempts it from the retention limit.
 * `validFrom` is since when this version holds (when a keyed add replaced an earlier fact,
 * the time it took over; otherwise `occurredAt`, else `createdAt`); `validTo` is set only on
 * a version a later fact superseded (`MemoryHistory.versions`, a retrieval with `asOf`).
 */
export interface Memory {
  id: string;
  apiKeyId: string;
  content: string;
  type: string;
  key?: string;
  sessionId?: string;
  metadata: JsonObject;
  createdAt?: Date;
  updatedAt?: Date;
  expiresAt?: Date;
  occurredAt?: Date;
  lastAccessedAt?: Date;
  accessCount: number;
  keep: boolean;
  validFrom?: Date;
  validTo?: Date;
  raw: memory.Memory;
}

/** What `memories.add` stores (and each item of `memories.addMany`). */
export interface NewMemory {
  /** The fact, at most 32 KiB. */
  content: string;
  /** factual (default) | episodic | procedural | semantic. */
  type?: MemoryType;
  /** e.g. "diet:vegetarian": an existing memory with the same (apiKeyId, key) is updated in place. */
  key?: string;
  sessionId?: string;
  /** A JSON object, at most 16 KiB serialized; merged (shallow) into an existing keyed memory. */
  metadata?: JsonObject;
  /** When it stops being retrievable (must be in the future). */
  expiresAt?: Date;
  /** When the thing happened (at most one day after now). */
  occurredAt?: Date;
  /** true: kept with no age limit; unset: the server decides by key (name:, diet:, ...). */
  keep?: boolean;
  /** The owner of this item; default: the call's, then the client's. */
  apiKeyId?: string;
}

/**
 * A stored memory's id; `created` is false when an existing keyed memory was updated in place,
 * or when the memory was merged into an existing one. `mergedInto` is set when nothing new was
 * stored because a memory of the owner (of the same type) already says the same: that
 * memory's id (also `id`), whose history records the merge. Only memories without a key that
 * are not conversation turns (episodic with a session) merge; the setting `dedupOnWrite: false`
 * turns it off.
 */
export interface AddResult {
  id: string;
  created: boolean;
  mergedInto?: string;
}

/** One item of `addMany`, in request order: stored (`id`, `created`, `mergedInto`) or refused (`error`). */
export interface BatchItem {
  ok: boolean;
  id?: string;
  created: boolean;
  /** As `AddResult.mergedInto`. */
  mergedInto?: string;
  /** What `add` would have thrown for this item alone; nothing of it was stored. */
  error?: MemsvcError;
}

/** The outcome of `addMany`: valid items are stored even when others are refused. */
export interface BatchResult {
  items: BatchItem[];
  storedCount: number;
  failedCount: number;
  raw: memory.CreateMemoriesResponse;
}

/** Figures over every memory matching a listing's filters (not just the page). */
export interface MemoryStats {
  total: number;
  byType: Record<string, number>;
  tokensUsed: number;
  hitRate: number;
}

/** One page of `memories.page`: newest first, with the total of matching memories. */
export interface MemoryPage {
  memories: Memory[];
  total: number;
  offset: number;
  limit: number;
  hasMore: boolean;
  stats?: MemoryStats;
  raw: memory.ListMemoriesResponse;
}

/** Filters of a listing. */
export interface ListOptions extends OwnerOptions {
  type?: MemoryType;
  sessionId?: string;
  /** A case-insensitive substring of content or key. */
  query?: string;
}

/**
 * One ranked memory; `tier` says what found it (keyword, vector, hybrid-<fusion>, recent, ...).
 * `validFrom` / `validTo` as in `Memory`: with `asOf`, a fact a later one superseded comes back
 * as it was then, with `validTo` set.
 */
export interface RetrievedMemory {
  id: string;
  content: string;
  type: string;
  key?: string;
  sessionId?: string;
  score: number;
  tokens: number;
  tier: string;
  vecScore?: number;
  ftsScore?: number;
  occurredAt?: Date;
  validFrom?: Date;
  validTo?: Date;
}

/** How a retrieval was answered: sources, strategy, fallbacks, floors. */
export interface Resolution {
  embeddingSource: string;
  embeddingModel: string;
  vectorStore: string;
  strategyUsed: string;
  rerankApplied: boolean;
  /** English; empty when the requested strategy ran as asked. */
  fallbackReason: string;
  backend: string;
  belowMinScore: number;
  keywordFloor: number;
  vectorFloor: number;
  skippedForAge: number;
}

/** Ranked memories within the token budget, best first. */
export interface RetrieveResult {
  memories: RetrievedMemory[];
  totalTokens: number;
  resolution?: Resolution;
  raw: engine.RetrieveResponse;
}

export interface RetrieveOptions extends OwnerOptions {
  sessionId?: string;
  strategy?: Strategy;
  scope?: Scope;
  /** The budget, 1..16000; default: the server's settings. */
  maxTokens?: number;
  /** At most this many memories, 1..100. */
  limit?: number;
  /** Relevance floor 0..1 (0 turns it off); default: the server's floor. */
  minScore?: number;
  /**
   * Answer with the memories as they were at this instant: a fact a keyed add superseded
   * later comes back as it was (with `validTo`), nothing stored after it. Not in the future.
   */
  asOf?: Date;
}

/** The provider formats Inject recognises (`InjectResult.format`). */
export type InjectFormat = "openai-chat" | "openai-responses" | "anthropic" | "gemini";

export interface InjectOptions extends OwnerOptions {
  /** openai | anthropic | gemini (google, vertex) | ...: decides the format and the role. */
  provider?: string;
  /** The model name (some models take memory only as a user turn). */
  model?: string;
  sessionId?: string;
  limit?: number;
  minScore?: number;
  /** Keep the prompt-cache prefix: the memory goes just before (or into) the last user turn. */
  cacheSafe?: boolean;
  /** Merge into the body's own first system message. */
  systemMessageMustBeFirst?: boolean;
  /** Skip injection for this call (the body comes back as is). */
  noMemory?: boolean;
  /** Inject the memories as they were at this instant (as `RetrieveOptions.asOf`). */
  asOf?: Date;
}

/**
 * A chat request body with the owner's memories injected. `request` is the body to send (a
 * new object; the input is never changed); with nothing to inject it is the body as given
 * and `skippedReason` says why. `role` is where the memories went: system or user.
 */
export interface InjectResult {
  request: JsonObject;
  injected: boolean;
  memoryIds: string[];
  tokens: number;
  role: "system" | "user" | "";
  format: InjectFormat | "";
  skippedReason: string;
  belowMinScore: number;
  skippedForAge: number;
  raw: engine.InjectResponse;
}

export interface ExtractInput extends OwnerOptions {
  /** Chat text, the user's words. */
  text?: string;
  /** A turn: the user's message ... */
  userMessage?: string;
  /** ... and the assistant's reply (only what it restates about the user counts). */
  assistantMessage?: string;
  sessionId?: string;
  /** Only report the facts, store nothing. */
  dryRun?: boolean;
  /** Answer after storing (`stored` rows) instead of storing in the background. */
  wait?: boolean;
}

/** A fact the rules found: `category` preference | decision | pattern. */
export interface ExtractedFact {
  category: string;
  type: string;
  key: string;
  content: string;
}

/** Facts extracted from chat text; `stored` with `wait`, `accepted` when handed to the background. */
export interface ExtractResult {
  facts: ExtractedFact[];
  stored: number;
  accepted: boolean;
  skippedReason: string;
  raw: engine.ExtractResponse;
}

export interface ReindexOptions extends CallOptions {
  /** Mark every memory for re-embedding first. */
  force?: boolean;
  /** At most this many memories in this run; default every pending one. */
  limit?: number;
  target?: ReindexTarget;
  /** Follow a running reindex instead of being refused with ABORTED REINDEX_RUNNING. */
  attach?: boolean;
}

/**
 * One message of a reindex: the first has `started` and the `pending` total, then one per
 * batch; the last has `state` done | failed | cancelled (`error` says why it failed).
 */
export interface ReindexProgress {
  started: boolean;
  pending: number;
  processed: number;
  errors: number;
  ratePerSecond: number;
  etaSeconds: number;
  state: string;
  error: string;
  finished: boolean;
  raw: engine.ReindexProgress;
}

/** The server's memory engine settings (every field, normalized; unset strings are null). */
export interface MemorySettings {
  enabled: boolean;
  maxTokens: number;
  retentionDays: number;
  strategy: string;
  scope: string;
  skillsEnabled: boolean;
  embeddingSource: string;
  embeddingProviderModel: string | null;
  customBaseUrl: string | null;
  customModelId: string | null;
  transformersEnabled: boolean;
  staticEnabled: boolean;
  rerankEnabled: boolean;
  rerankProviderModel: string | null;
  vectorStore: string;
  primaryBackend: string;
  fallbackBackends: string[];
  backendConfigs: JsonObject;
  /** Merge a new keyless memory into an existing one that already says the same (`AddResult.mergedInto`). */
  dedupOnWrite: boolean;
  raw: settings.MemorySettings;
}

/**
 * A change of settings: any of MemorySettings' fields (null clears a nullable one). The
 * server validates strictly: an unknown name, a wrong type or a value out of range is
 * INVALID_ARGUMENT listing every violation, and nothing is saved.
 */
export type SettingsChanges = Partial<Omit<MemorySettings, "raw">> & { [name: string]: JsonValue | undefined };

/** The outcome of a create → list → delete round trip under a reserved owner. */
export interface HealthResult {
  working: boolean;
  latencyMs: number;
  error?: string;
}

/**
 * One change to a memory, oldest first. `event`: created | updated | superseded (a keyed add
 * replaced the content; the old fact is in `MemoryHistory.versions`) | merged (a duplicate add
 * touched it) | summarized | deleted | expired. `author` is the id of the credential that made
 * it (`oauth:<sub>` for an OAuth token, `memsvc` for the expiry sweep; undefined on a server
 * without tokens). `changes` holds the fields it set, by their API names, with their values
 * after it (a merge: `mergedContent`). `relatedId`: for summarized, the summary.
 */
export interface HistoryEntry {
  event: string;
  at?: Date;
  author?: string;
  changes: JsonObject;
  relatedId?: string;
  raw: memory.MemoryHistoryEntry;
}

/**
 * A memory's whole history (`memories.history(id).read()`): every entry oldest first and the
 * facts its key superseded (`versions`, oldest first, with `validFrom` / `validTo`). A deleted
 * or expired memory's history is only that entry: forgetting keeps nothing of what it said.
 */
export interface MemoryHistory {
  id: string;
  apiKeyId: string;
  entries: HistoryEntry[];
  versions: Memory[];
}

export interface HistoryOptions extends CallOptions {
  /** Entries per call (page), 1..1000; default the server's 100. `timeoutMs` applies to each page. */
  limit?: number;
}

/**
 * One message of `memories.watch`, in commit order. `kind`: created | updated | deleted |
 * expired, or bookmark (no change, only the position: the first message of every stream, one
 * every few seconds while nothing changes, and the last of a `stopWhenCaughtUp` poll). Pass
 * any event's `resumeToken` as `watch({ resumeToken })` to continue right after it.
 *
 * For a change: `memoryId`, `apiKeyId` (its owner), `at`, `author` (as `HistoryEntry.author`),
 * `change` (the history event: superseded and merged arrive as kind updated, summarized as
 * deleted), `changedFields` (API names) and `memory`, as stored when the event was read
 * (undefined once it is gone).
 */
export interface MemoryEvent {
  kind: "created" | "updated" | "deleted" | "expired" | "bookmark" | (string & {});
  resumeToken: string;
  memoryId?: string;
  apiKeyId?: string;
  at?: Date;
  author?: string;
  change?: string;
  changedFields: string[];
  memory?: Memory;
  relatedId?: string;
  raw: memory.MemoryEvent;
}

export interface WatchOptions extends CallOptions {
  /** The tenant to follow; default the client's apiKeyId. "" follows every tenant the credential covers. */
  apiKeyId?: string;
  /** The `resumeToken` of the last event handled: continue right after it. Default: from now. */
  resumeToken?: string;
  /** End once everything committed so far was delivered (a poll); the last event is a bookmark. */
  stopWhenCaughtUp?: boolean;
}

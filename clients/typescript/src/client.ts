/**
 * `Memsvc`: one HTTP/2 connection to memsvc's gRPC port (connect-node's gRPC transport), the
 * domain's methods on it.
 *
 * Every call has a deadline (the client's `timeoutMs`, or the call's own), sends the bearer
 * token when one is given, and throws a `MemsvcError` when it fails. Idempotent calls are
 * retried on UNAVAILABLE (`RetryPolicy`); writes are sent once.
 */
import { create, type JsonObject } from "@bufbuild/protobuf";
import { createClient, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import * as convert from "./convert.js";
import { fromConnectError } from "./errors.js";
import { CredentialService } from "./gen/memsvc/v1/credentials_pb.js";
import { EngineService, type ReindexProgress as ReindexProgressMessage } from "./gen/memsvc/v1/engine_pb.js";
import {
  CheckHealthRequestSchema,
  CreateMemoriesRequestSchema,
  DeleteMemoryRequestSchema,
  GetMemoryRequestSchema,
  MemoryService,
  type GetMemoryHistoryResponse,
  type MemoryEvent as MemoryEventMessage,
} from "./gen/memsvc/v1/memory_pb.js";
import { GetMemorySettingsRequestSchema, SettingsService } from "./gen/memsvc/v1/settings_pb.js";
import { retryInterceptor, type RetryPolicy } from "./retry.js";
import type {
  AddResult,
  BatchResult,
  CallOptions,
  ExtractInput,
  ExtractResult,
  HealthResult,
  HistoryEntry,
  HistoryOptions,
  InjectOptions,
  InjectResult,
  ListOptions,
  Memory,
  MemoryEvent,
  MemoryHistory,
  MemoryPage,
  MemorySettings,
  MemoryType,
  NewMemory,
  OwnerOptions,
  ReindexOptions,
  ReindexProgress,
  RetrieveOptions,
  RetrieveResult,
  SettingsChanges,
  WatchOptions,
} from "./types.js";

/** memsvc's default gRPC address (`memsvc serve`). */
export const DEFAULT_BASE_URL = "http://127.0.0.1:50051";
/** The default deadline of a call. */
export const DEFAULT_TIMEOUT_MS = 30_000;
/** The server's own message limit (MEMSVC_MAX_MESSAGE_BYTES default): a page of 200 × 32 KiB fits. */
const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

export interface MemsvcOptions {
  /** The server's gRPC address as a URL: `http://host:port` (plaintext HTTP/2) or `https://...`. */
  baseUrl?: string;
  /**
   * A bearer token (MEMSVC_API_TOKENS or a stored credential), sent as
   * `authorization: Bearer <token>`; none on a server without authentication.
   */
  token?: string;
  /** The default owner (tenant) of memories, for every call that names no `apiKeyId`. */
  apiKeyId?: string;
  /** The default deadline of each call in milliseconds (0: none); default 30 000. */
  timeoutMs?: number;
  /** How idempotent calls are retried on UNAVAILABLE; `false` turns retries off. */
  retry?: RetryPolicy | false;
  /** Headers sent with every call, e.g. `{"x-request-id": ...}`. */
  headers?: Record<string, string>;
  /** Connect interceptors, run inside the retries (each attempt passes through them). */
  interceptors?: Interceptor[];
}

/** The connect clients on the SDK's transport, for RPCs it does not wrap (character memory, Qdrant, credentials). */
export interface Services {
  memory: Client<typeof MemoryService>;
  engine: Client<typeof EngineService>;
  settings: Client<typeof SettingsService>;
  credentials: Client<typeof CredentialService>;
}

/**
 * A memsvc client.
 *
 *     const memsvc = new Memsvc({ baseUrl: "http://127.0.0.1:50051", apiKeyId: "user-42" });
 *     await memsvc.memories.add("I prefer dark mode in my editor");
 *     const { memories } = await memsvc.retrieve("what theme do I like?");
 *     memsvc.close();
 */
export class Memsvc {
  /** The stored memories. */
  readonly memories: Memories;
  /** The server's memory engine settings. */
  readonly settings: Settings;
  /** The generated clients on this connection. */
  readonly services: Services;
  /** The transport (for `createClient` of your own). */
  readonly transport: Transport;
  readonly baseUrl: string;
  readonly apiKeyId?: string;
  private readonly session: Http2SessionManager;

  constructor(options: MemsvcOptions = {}) {
    const baseUrl = options.baseUrl ?? DEFAULT_BASE_URL;
    let url: URL;
    try {
      url = new URL(baseUrl);
    } catch {
      throw new TypeError(`baseUrl must be a URL such as ${DEFAULT_BASE_URL}, got ${JSON.stringify(baseUrl)}`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new TypeError("baseUrl must be http:// or https://");
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!(Number.isFinite(timeoutMs) && timeoutMs >= 0)) throw new RangeError("timeoutMs must be a number >= 0 (0: no deadline)");
    const token = options.token;
    if (token !== undefined && (token === "" || token !== token.trim())) {
      throw new TypeError("token must be a non-empty string without surrounding whitespace");
    }
    this.baseUrl = baseUrl;
    this.apiKeyId = options.apiKeyId;
    this.session = new Http2SessionManager(url);
    const headers: [string, string][] = Object.entries(options.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]);
    if (token !== undefined) headers.push(["authorization", `Bearer ${token}`]);
    const interceptors: Interceptor[] = [];
    if (headers.length) {
      interceptors.push((next) => (req) => {
        for (const [k, v] of headers) req.header.set(k, v);
        return next(req);
      });
    }
    if (options.retry !== false) interceptors.push(retryInterceptor(options.retry ?? {}));
    interceptors.push(...(options.interceptors ?? []));
    this.transport = createGrpcTransport({
      baseUrl,
      sessionManager: this.session,
      interceptors,
      defaultTimeoutMs: timeoutMs === 0 ? undefined : timeoutMs,
      readMaxBytes: MAX_MESSAGE_BYTES,
      writeMaxBytes: MAX_MESSAGE_BYTES,
    });
    this.services = {
      memory: createClient(MemoryService, this.transport),
      engine: createClient(EngineService, this.transport),
      settings: createClient(SettingsService, this.transport),
      credentials: createClient(CredentialService, this.transport),
    };
    this.memories = new Memories(this);
    this.settings = new Settings(this);
  }

  /** Closes the connection; calls in flight fail. A closed client reconnects on its next call. */
  close(): void {
    this.session.abort();
  }

  /** @internal The owner of one call: its own, else the client's ("" lets the server refuse). */
  owner(apiKeyId: string | undefined): string {
    return apiKeyId ?? this.apiKeyId ?? "";
  }

  /** @internal Runs one call, its failure as a MemsvcError. */
  async call<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (err) {
      throw fromConnectError(err);
    }
  }

  /**
   * The memories relevant to `query`, ranked, within a token budget ("" returns the most
   * recent). Refused (INVALID_ARGUMENT) without an apiKeyId, with an unknown strategy or a
   * budget out of range.
   */
  async retrieve(query: string, options: RetrieveOptions = {}): Promise<RetrieveResult> {
    const request = convert.retrieveRequest(query, this.owner(options.apiKeyId), options);
    return this.call(async () => convert.toRetrieveResult(await this.services.engine.retrieve(request, callOptions(options))));
  }

  /**
   * A chat request body with the owner's relevant memories injected, ready to send to the
   * provider: OpenAI chat completions (`{messages}`), OpenAI Responses (`{instructions,
   * input}`), Anthropic Messages (`{system, messages}`) or Gemini (`{systemInstruction,
   * contents}`). The query is the last user turn; the body given is not changed.
   */
  async inject(request: JsonObject, options: InjectOptions = {}): Promise<InjectResult> {
    const pb = convert.injectRequest(request, this.owner(options.apiKeyId), options);
    return this.call(async () => convert.toInjectResult(await this.services.engine.inject(pb, callOptions(options))));
  }

  /**
   * Finds facts (preferences, decisions, patterns) in chat text by the server's rules and
   * stores them: give `text`, or a turn as `userMessage` (and `assistantMessage`). By default
   * the server stores in the background (`accepted`); `wait` answers after storing.
   */
  async extract(input: ExtractInput): Promise<ExtractResult> {
    const pb = convert.extractRequest(this.owner(input.apiKeyId), input);
    return this.call(async () => convert.toExtractResult(await this.services.engine.extract(pb, callOptions(input))));
  }

  /**
   * Re-embeds the memories that need it (or copies every memory into Qdrant, `target:
   * "qdrant"`), streaming progress:
   *
   *     for await (const p of memsvc.reindex()) console.log(p.processed, p.pending);
   *
   * One reindex runs per database: a second is refused (ABORTED, reason REINDEX_RUNNING)
   * unless `attach`. The call is made when reading begins (`for await`, or `wait()`); it has
   * no deadline unless `timeoutMs` is given. Stopping the iteration stops listening, never
   * the job.
   */
  reindex(options: ReindexOptions = {}): ReindexStream {
    const request = convert.reindexRequest(options);
    const controller = new AbortController();
    const signal = options.signal ? AbortSignal.any([options.signal, controller.signal]) : controller.signal;
    const start = () => this.services.engine.reindex(request, { timeoutMs: options.timeoutMs ?? 0, signal });
    return new ReindexStream(start, controller);
  }

  /** A create → list → delete round trip under a reserved owner; a failure is `working: false`. */
  async checkHealth(options: CallOptions = {}): Promise<HealthResult> {
    const request = create(CheckHealthRequestSchema);
    return this.call(async () => convert.toHealth(await this.services.memory.checkHealth(request, callOptions(options))));
  }
}

/** The connect call options of a method's options (deadline and cancellation only). */
function callOptions(options: CallOptions): CallOptions {
  return { timeoutMs: options.timeoutMs, signal: options.signal };
}

/** The progress messages of one reindex, ending with the one whose `state` is done, failed or cancelled. */
export class ReindexStream implements AsyncIterable<ReindexProgress> {
  /** The latest message received. */
  last?: ReindexProgress;
  private consumed = false;

  constructor(
    private readonly start: () => AsyncIterable<ReindexProgressMessage>,
    private readonly controller: AbortController,
  ) {}

  async *[Symbol.asyncIterator](): AsyncIterator<ReindexProgress> {
    if (this.consumed) throw new Error("a ReindexStream can be read once");
    this.consumed = true;
    try {
      for await (const message of this.start()) {
        this.last = convert.toProgress(message);
        yield this.last;
      }
    } catch (err) {
      throw fromConnectError(err);
    } finally {
      this.controller.abort();
    }
  }

  /** Reads to the end; the last message (its `state` says how the job ended). */
  async wait(): Promise<ReindexProgress> {
    for await (const _ of this) {
      // read on
    }
    if (!this.last) throw new Error("the reindex stream ended without a message");
    return this.last;
  }

  /** Stops listening (the job itself runs to completion on the server). */
  cancel(): void {
    this.controller.abort();
  }
}

/**
 * Every entry of one memory's history, oldest first, fetched a page (GetMemoryHistory call) at
 * a time as you iterate; or `read()` for the whole `MemoryHistory` with the superseded
 * versions. `id`, `apiKeyId` and `versions` are set once the first page arrived. Read it once.
 */
export class HistoryIterator implements AsyncIterable<HistoryEntry> {
  id?: string;
  apiKeyId?: string;
  /** The facts the memory's key superseded, oldest first (with `validFrom` / `validTo`). */
  versions?: Memory[];
  private consumed = false;

  constructor(private readonly fetch: (pageToken: string) => Promise<GetMemoryHistoryResponse>) {}

  async *[Symbol.asyncIterator](): AsyncIterator<HistoryEntry> {
    if (this.consumed) throw new Error("a HistoryIterator can be read once");
    this.consumed = true;
    let pageToken = "";
    do {
      const page = await this.fetch(pageToken);
      this.id = page.id;
      this.apiKeyId = page.apiKeyId;
      this.versions = page.versions.map(convert.toMemory);
      for (const entry of page.entries) yield convert.toHistoryEntry(entry);
      pageToken = page.nextPageToken;
    } while (pageToken);
  }

  /** Reads every page: the entries and the versions. */
  async read(): Promise<MemoryHistory> {
    const entries: HistoryEntry[] = [];
    for await (const entry of this) entries.push(entry);
    return { id: this.id ?? "", apiKeyId: this.apiKeyId ?? "", entries, versions: this.versions ?? [] };
  }
}

/**
 * The change feed of `memories.watch`: events in commit order, the first a bookmark with the
 * position the stream starts after. The call is made when reading begins. It ends when you
 * stop it (`cancel()`, the `signal` you gave, or leaving the `for await`), quietly; at the
 * end of a `stopWhenCaughtUp` poll; or with a thrown `MemsvcError` when refused or broken.
 * It is never retried or resumed behind your back: resume with the `resumeToken` of the last
 * event you handled (`resumeToken` here is the last one received, bookmarks included).
 */
export class WatchStream implements AsyncIterable<MemoryEvent> {
  /** The token of the last event received. */
  resumeToken?: string;
  private consumed = false;

  constructor(
    private readonly start: () => AsyncIterable<MemoryEventMessage>,
    private readonly controller: AbortController,
    private readonly signal: AbortSignal,
  ) {}

  async *[Symbol.asyncIterator](): AsyncIterator<MemoryEvent> {
    if (this.consumed) throw new Error("a WatchStream can be read once");
    this.consumed = true;
    // Read by hand: connect's response iterator has no return(), and releases the call (its
    // deadline timer included) only when a read ends or fails. Leaving early (a `break` in
    // the caller's loop) aborts the call and reads once more, which then fails at once.
    const messages = this.start()[Symbol.asyncIterator]();
    let ended = false;
    try {
      for (;;) {
        const next = await messages.next();
        if (next.done) {
          ended = true;
          return;
        }
        const event = convert.toMemoryEvent(next.value);
        this.resumeToken = event.resumeToken;
        yield event;
      }
    } catch (err) {
      ended = true;
      if (this.signal.aborted) return; // stopped on purpose: the iteration just ends
      throw fromConnectError(err);
    } finally {
      this.controller.abort();
      if (!ended) messages.next().catch(() => undefined);
    }
  }

  /** Ends the stream (the call is cancelled; a `for await` over it finishes). */
  cancel(): void {
    this.controller.abort();
  }
}

export interface UpdateOptions extends CallOptions {
  content?: string;
  type?: MemoryType;
  key?: string;
  /** Merged into the stored metadata. */
  metadata?: JsonObject;
  keep?: boolean;
  occurredAt?: Date;
}

export interface ClearOptions extends OwnerOptions {
  type?: MemoryType;
  sessionId?: string;
  /** Only memories created before this instant. */
  olderThan?: Date;
}

export interface PageOptions extends ListOptions {
  offset?: number;
  /** 1..200; default 50. */
  limit?: number;
}

export interface IterateOptions extends ListOptions {
  /** Memories fetched per call, 1..200; default 50. `timeoutMs` applies to each page. */
  pageSize?: number;
}

/** `memsvc.memories`: the stored memories of one owner (apiKeyId) at a time. */
export class Memories {
  constructor(private readonly client: Memsvc) {}

  /**
   * Stores one memory. With a `key`, an existing memory of the same (apiKeyId, key) is updated
   * in place instead (content, session, type and expiry replaced, metadata merged) and
   * `created` is false. Refused (INVALID_ARGUMENT, a field violation per bad field) for an
   * empty content, an unknown type, content over 32 KiB, ...; nothing is stored then.
   */
  async add(content: string, options: Omit<NewMemory, "content"> & CallOptions = {}): Promise<AddResult> {
    const item = convert.newMemory({ ...options, content });
    const request = convert.createRequest(item, this.client.owner(options.apiKeyId));
    return this.client.call(async () => convert.toAdded(await this.client.services.memory.createMemory(request, callOptions(options))));
  }

  /**
   * Stores up to 1000 memories in one call and one transaction. An invalid item fails alone
   * (its `error`) while the valid ones are stored; the whole call fails only for no items or
   * more than 1000, an apiKeyId the token may not write, or a full disk.
   */
  async addMany(items: Array<NewMemory | string>, options: OwnerOptions = {}): Promise<BatchResult> {
    const memories = items.map((raw) => {
      const item = convert.newMemory(raw);
      return convert.createRequest(item, this.client.owner(item.apiKeyId ?? options.apiKeyId));
    });
    const request = create(CreateMemoriesRequestSchema, { memories });
    return this.client.call(async () => convert.toBatch(await this.client.services.memory.createMemories(request, callOptions(options))));
  }

  /** One memory by id; NOT_FOUND (also for another tenant's memory). */
  async get(id: string, options: CallOptions = {}): Promise<Memory> {
    const request = create(GetMemoryRequestSchema, { id });
    return this.client.call(async () => convert.toMemory(await this.client.services.memory.getMemory(request, callOptions(options))));
  }

  /**
   * Changes the given fields of one memory (the others stay) and returns it as stored.
   * NOT_FOUND; INVALID_ARGUMENT (nothing is changed).
   */
  async update(id: string, changes: UpdateOptions): Promise<Memory> {
    const request = convert.updateRequest(id, changes);
    return this.client.call(async () => {
      const answer = await this.client.services.memory.updateMemory(request, callOptions(changes));
      if (!answer.memory) throw new Error("UpdateMemory answered without the memory");
      return convert.toMemory(answer.memory);
    });
  }

  /** Deletes one memory and its vectors; NOT_FOUND. */
  async delete(id: string, options: CallOptions = {}): Promise<void> {
    const request = create(DeleteMemoryRequestSchema, { id });
    await this.client.call(() => this.client.services.memory.deleteMemory(request, callOptions(options)));
  }

  /**
   * Every change to one memory, oldest first, with the credential that made it:
   *
   *     for await (const entry of memsvc.memories.history(id)) console.log(entry.event, entry.author);
   *     const { entries, versions } = await memsvc.memories.history(id).read();
   *
   * Fetched a page at a time (`limit` entries per call, 1..1000). `versions` are the facts the
   * memory's key superseded. Throws NOT_FOUND (no such memory, or another tenant's) while
   * reading; FAILED_PRECONDITION when the primary backend keeps no history.
   */
  history(id: string, options: HistoryOptions = {}): HistoryIterator {
    const limit = convert.historyLimit(options.limit);
    return new HistoryIterator((pageToken) =>
      this.client.call(() => this.client.services.memory.getMemoryHistory(convert.historyRequest(id, limit, pageToken), callOptions(options))),
    );
  }

  /**
   * Follows the change feed: created, updated, deleted and expired events of one apiKeyId's
   * memories as they commit (the client's by default; `apiKeyId: ""` for every tenant the
   * credential covers), each with a `resumeToken`:
   *
   *     const controller = new AbortController();
   *     for await (const event of memsvc.memories.watch({ resumeToken: saved, signal: controller.signal })) {
   *       if (event.kind !== "bookmark") handle(event);
   *       saved = event.resumeToken;
   *     }
   *
   * No deadline unless `timeoutMs` is given. Aborting the `signal` (or `cancel()`) ends the
   * iteration quietly. Never retried: after a disconnect, watch again from the last token.
   * Throws PERMISSION_DENIED (a tenant the credential does not cover), INVALID_ARGUMENT (a
   * token this server did not issue) while reading.
   */
  watch(options: WatchOptions = {}): WatchStream {
    const request = convert.watchRequest(this.client.owner(options.apiKeyId), options);
    const controller = new AbortController();
    const signal = options.signal ? AbortSignal.any([options.signal, controller.signal]) : controller.signal;
    const start = () => this.client.services.memory.watchMemories(request, { timeoutMs: options.timeoutMs ?? 0, signal });
    return new WatchStream(start, controller, signal);
  }

  /** Deletes every memory of one owner matching the filters (all without any); how many were deleted. */
  async clear(options: ClearOptions = {}): Promise<number> {
    const request = convert.clearRequest(this.client.owner(options.apiKeyId), options);
    return this.client.call(async () => (await this.client.services.memory.clearMemories(request, callOptions(options))).deletedCount);
  }

  /** One page of memories, newest first, with the total and stats over all that match. */
  async page(options: PageOptions = {}): Promise<MemoryPage> {
    const offset = options.offset ?? 0;
    const filters = { ...options, apiKeyId: this.client.owner(options.apiKeyId) };
    const request = convert.listRequest(filters, offset, options.limit ?? convert.DEFAULT_PAGE_SIZE);
    return this.client.call(async () => convert.toPage(await this.client.services.memory.listMemories(request, callOptions(options)), offset));
  }

  /**
   * Every page of matching memories, newest first, fetched as you iterate. Pages follow by
   * offset; a memory added meanwhile shifts the older ones down a place, so a memory the page
   * before gave may come again (`list` leaves such repeats out).
   */
  async *pages(options: IterateOptions = {}): AsyncGenerator<MemoryPage> {
    const limit = convert.pageSize(options.pageSize ?? convert.DEFAULT_PAGE_SIZE);
    const base = { ...options, apiKeyId: this.client.owner(options.apiKeyId), limit };
    for (let offset = 0; ; ) {
      const page = await this.page({ ...base, offset });
      yield page;
      offset += page.memories.length;
      if (page.memories.length === 0 || offset >= page.total) return;
    }
  }

  /**
   * Every matching memory, newest first, a page at a time as you iterate:
   *
   *     for await (const memory of memsvc.memories.list({ type: "episodic" })) ...
   *
   * No memory comes twice (what the page before gave is skipped).
   */
  async *list(options: IterateOptions = {}): AsyncGenerator<Memory> {
    let previous = new Set<string>();
    for await (const page of this.pages(options)) {
      for (const memory of page.memories) if (!previous.has(memory.id)) yield memory;
      previous = new Set(page.memories.map((m) => m.id));
    }
  }
}

/** `memsvc.settings`: the server's memory engine settings (global to the server; admin). */
export class Settings {
  constructor(private readonly client: Memsvc) {}

  /** Every memory setting, normalized. */
  async get(options: CallOptions = {}): Promise<MemorySettings> {
    const request = create(GetMemorySettingsRequestSchema);
    return this.client.call(async () => convert.toSettings(await this.client.services.settings.getMemorySettings(request, callOptions(options))));
  }

  /**
   * Changes some settings and returns all of them: `update({ enabled: true, maxTokens: 1500 })`.
   * Strict: an unknown name, a wrong type or a value out of range is INVALID_ARGUMENT listing
   * every violation, and nothing is saved.
   */
  async update(changes: SettingsChanges, options: CallOptions = {}): Promise<MemorySettings> {
    const request = convert.settingsRequest(changes);
    return this.client.call(async () =>
      convert.toSettings(await this.client.services.settings.updateMemorySettings(request, callOptions(options))),
    );
  }
}

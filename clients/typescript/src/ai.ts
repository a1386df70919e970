/**
 * memsvc as the memory of a Vercel AI SDK model: a language-model middleware.
 *
 *     import { wrapLanguageModel } from "ai";
 *     import { memsvcMiddleware } from "@memsvc/client/ai";
 *
 *     const model = wrapLanguageModel({
 *       model: yourModel,
 *       middleware: memsvcMiddleware({ client: memsvc, apiKeyId: "user-42", sessionId: "chat-1" }),
 *     });
 *
 * Before each call it retrieves the owner's memories relevant to the last user message and
 * adds them to the prompt; when the call finishes (a generate, or a stream once it ends) it
 * stores the turn in memsvc. Memories are untrusted content (anything a user once said), so
 * they go in as a user-role context message unless `role: "system"` is asked for.
 *
 * A memsvc failure never fails the model call: recall then adds nothing, storing is skipped,
 * and `onError` is told (by default a console warning).
 *
 * Built against the `ai` package's LanguageModelMiddleware of AI SDK 6 (specification v3);
 * this module imports only its types.
 */
import type { LanguageModelMiddleware } from "ai";
import type { Memsvc } from "./client.js";
import type {
  BatchResult,
  ExtractResult,
  NewMemory,
  RetrievedMemory,
  RetrieveResult,
  Scope,
  Strategy,
} from "./types.js";

type TransformParams = NonNullable<LanguageModelMiddleware["transformParams"]>;
type WrapGenerate = NonNullable<LanguageModelMiddleware["wrapGenerate"]>;
type WrapStream = NonNullable<LanguageModelMiddleware["wrapStream"]>;
/** The call options a language model receives (LanguageModelV3CallOptions). */
export type CallParams = Parameters<TransformParams>[0]["params"];
type PromptMessage = CallParams["prompt"][number];
type GenerateResult = Awaited<ReturnType<Parameters<WrapGenerate>[0]["doGenerate"]>>;
type StreamResult = Awaited<ReturnType<Parameters<WrapStream>[0]["doStream"]>>;
type StreamPart = StreamResult["stream"] extends ReadableStream<infer P> ? P : never;

/** The prefix of the memory text, as memsvc's own Inject writes it. */
export const MEMORY_TEXT_PREFIX = "Memory context: ";
/** The providerOptions key that marks the message this middleware added. */
export const MARK = "memsvc";

/** How a finished turn is stored. */
export type StoreMode =
  /** memsvc's Extract RPC: the facts its rules find in the turn (preferences, decisions, ...). */
  | "extract"
  /** The turn itself: the user message and the assistant text as episodic memories (CreateMemories). */
  | "turn"
  /** Nothing is stored. */
  | false;

export interface RecallEvent {
  query: string;
  result: RetrieveResult;
  /** The text added to the prompt; undefined when nothing was. */
  text?: string;
}

export interface StoreEvent {
  userMessage: string;
  assistantMessage: string;
  mode: Exclude<StoreMode, false>;
  result: ExtractResult | BatchResult;
}

export interface MemsvcMiddlewareOptions {
  /** The memsvc client. */
  client: Memsvc;
  /** Whose memories: the owner (tenant) every recall reads and every turn is stored under. */
  apiKeyId: string;
  /** The conversation: stored turns carry it, and `scope: "session"` recalls only its memories. */
  sessionId?: string;
  /**
   * The role of the message the memories go into: "user" (default), a context message just
   * before the last user message; "system" only when you trust what is stored (it joins the
   * leading system messages, where instructions live).
   */
  role?: "user" | "system";
  /** Retrieve and inject memories before each call; default true. */
  recall?: boolean;
  /** How a finished turn is stored; default "extract". */
  store?: StoreMode;
  /** Extract only: answer after storing instead of storing in the server's background. */
  wait?: boolean;
  /** Retrieval options (default: the server's settings and relevance floor). */
  strategy?: Strategy;
  scope?: Scope;
  maxTokens?: number;
  limit?: number;
  minScore?: number;
  /** The text of the memory message; default `"Memory context: "` + one memory a line. */
  format?: (memories: RetrievedMemory[]) => string | undefined;
  /** Told of each recall (what was found and added). */
  onRecall?: (event: RecallEvent) => void;
  /** Told of each stored turn. */
  onStore?: (event: StoreEvent) => void;
  /** Told of a memsvc failure (the model call goes on); default: a console warning. */
  onError?: (error: unknown, phase: "recall" | "store") => void;
}

/** memsvc's own memory text: the prefix and each non-blank memory on its own line. */
export function formatMemories(memories: RetrievedMemory[]): string | undefined {
  const lines = memories.map((m) => m.content.trim()).filter((line) => line !== "");
  return lines.length ? MEMORY_TEXT_PREFIX + lines.join("\n") : undefined;
}

function isMarked(message: PromptMessage): boolean {
  return message.providerOptions?.[MARK] !== undefined;
}

/** The text of the last user message the caller wrote (not one this middleware added). */
export function lastUserText(prompt: CallParams["prompt"]): string {
  for (let i = prompt.length - 1; i >= 0; i--) {
    const message = prompt[i];
    if (message.role !== "user" || isMarked(message)) continue;
    return message.content
      .flatMap((part) => (part.type === "text" ? [part.text] : []))
      .join("\n")
      .trim();
  }
  return "";
}

/** `prompt` with the memory message placed for `role` (a new array; the input is unchanged). */
export function withMemory(prompt: CallParams["prompt"], text: string, role: "user" | "system"): CallParams["prompt"] {
  const providerOptions = { [MARK]: { memory: true } };
  if (role === "system") {
    let leading = 0;
    while (leading < prompt.length && prompt[leading].role === "system") leading++;
    return [...prompt.slice(0, leading), { role: "system", content: text, providerOptions }, ...prompt.slice(leading)];
  }
  let last = prompt.length;
  for (let i = prompt.length - 1; i >= 0; i--) {
    if (prompt[i].role === "user" && !isMarked(prompt[i])) {
      last = i;
      break;
    }
  }
  const message: PromptMessage = { role: "user", content: [{ type: "text", text }], providerOptions };
  return [...prompt.slice(0, last), message, ...prompt.slice(last)];
}

function warn(error: unknown, phase: "recall" | "store"): void {
  console.warn(`memsvc middleware: ${phase} failed, the model call goes on without it: ${String(error)}`);
}

/** The AI SDK middleware (LanguageModelMiddleware, specification v3) giving a model memsvc's memory. */
export function memsvcMiddleware(options: MemsvcMiddlewareOptions): LanguageModelMiddleware {
  const { client, apiKeyId } = options;
  if (!client) throw new TypeError("memsvcMiddleware needs a client (a Memsvc)");
  if (typeof apiKeyId !== "string" || apiKeyId === "") throw new TypeError("memsvcMiddleware needs an apiKeyId");
  const role = options.role ?? "user";
  if (role !== "user" && role !== "system") throw new TypeError('role must be "user" or "system"');
  const mode: StoreMode = options.store ?? "extract";
  const format = options.format ?? formatMemories;
  const onError = options.onError ?? warn;

  async function recall(params: CallParams): Promise<CallParams> {
    if (options.recall === false || params.prompt.some(isMarked)) return params;
    const query = lastUserText(params.prompt);
    if (!query) return params;
    try {
      const result = await client.retrieve(query, {
        apiKeyId,
        sessionId: options.sessionId,
        strategy: options.strategy,
        scope: options.scope,
        maxTokens: options.maxTokens,
        limit: options.limit,
        minScore: options.minScore,
        signal: params.abortSignal,
      });
      const text = format(result.memories);
      options.onRecall?.({ query, result, text });
      return text ? { ...params, prompt: withMemory(params.prompt, text, role) } : params;
    } catch (err) {
      onError(err, "recall");
      return params;
    }
  }

  async function store(params: CallParams, assistantMessage: string): Promise<void> {
    const userMessage = lastUserText(params.prompt);
    if (mode === false || !userMessage) return;
    try {
      let result: ExtractResult | BatchResult;
      if (mode === "extract") {
        result = await client.extract({ apiKeyId, sessionId: options.sessionId, userMessage, assistantMessage, wait: options.wait });
      } else {
        const now = new Date();
        const said = (content: string, speaker: string): NewMemory => ({
          content,
          type: "episodic",
          sessionId: options.sessionId,
          occurredAt: now,
          metadata: { role: speaker, source: "ai-sdk" },
        });
        const items = [said(userMessage, "user"), ...(assistantMessage.trim() ? [said(assistantMessage, "assistant")] : [])];
        result = await client.memories.addMany(items, { apiKeyId });
        const refused = result.items.find((item) => !item.ok);
        if (refused) throw refused.error;
      }
      options.onStore?.({ userMessage, assistantMessage, mode, result });
    } catch (err) {
      onError(err, "store");
    }
  }

  return {
    specificationVersion: "v3",
    transformParams: async ({ params }) => recall(params),
    wrapGenerate: async ({ doGenerate, params }) => {
      const result: GenerateResult = await doGenerate();
      if (result.finishReason.unified !== "tool-calls") {
        const text = result.content.flatMap((part) => (part.type === "text" ? [part.text] : [])).join("");
        await store(params, text);
      }
      return result;
    },
    wrapStream: async ({ doStream, params }) => {
      const { stream, ...rest }: StreamResult = await doStream();
      let text = "";
      let finished = false;
      let failed = false;
      const watch = new TransformStream<StreamPart, StreamPart>({
        transform(part, controller) {
          if (part.type === "text-delta") text += part.delta;
          else if (part.type === "finish") finished = part.finishReason.unified !== "tool-calls";
          else if (part.type === "error") failed = true;
          controller.enqueue(part);
        },
        async flush() {
          if (finished && !failed) await store(params, text);
        },
      });
      return { stream: stream.pipeThrough(watch), ...rest };
    },
  };
}

// The Vercel AI SDK middleware with the `ai` package's own test model (MockLanguageModelV3),
// wrapLanguageModel and generateText / streamText, against a real memsvc: recall injected
// before the call (a user-role message unless role "system" is asked), the turn stored after
// it (Extract, or the turn itself), and memsvc failures that never fail the model call.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { generateText, simulateReadableStream, streamText, wrapLanguageModel } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { Code, Memsvc, MemsvcError } from "@memsvc/client";
import { memsvcMiddleware, type CallParams, type StoreEvent } from "@memsvc/client/ai";
import { freePort, owner, startServer, type MemsvcServer } from "./support/server.js";

const DB_MEMORY = "I will use PostgreSQL for this project";
const QUESTION = "I prefer tea over coffee. Which database will I use for this project?";
const ANSWER = "You said you will use PostgreSQL.";
const PREFIX = "Memory context: ";
const USAGE = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 5, text: 5, reasoning: undefined },
};

let server: MemsvcServer;
let client: Memsvc;

before(async () => {
  server = await startServer();
  client = new Memsvc({ baseUrl: server.baseUrl });
  await client.settings.update({ enabled: true });
});

after(async () => {
  client?.close();
  await server?.stop();
});

function generating(text = ANSWER): MockLanguageModelV3 {
  return new MockLanguageModelV3({
    doGenerate: async () => ({
      content: [{ type: "text", text }],
      finishReason: { unified: "stop", raw: "stop" },
      usage: USAGE,
      warnings: [],
    }),
  });
}

function streaming(deltas: string[]): MockLanguageModelV3 {
  return new MockLanguageModelV3({
    doStream: async () => ({
      stream: simulateReadableStream({
        chunks: [
          { type: "stream-start" as const, warnings: [] },
          { type: "text-start" as const, id: "t1" },
          ...deltas.map((delta) => ({ type: "text-delta" as const, id: "t1", delta })),
          { type: "text-end" as const, id: "t1" },
          { type: "finish" as const, finishReason: { unified: "stop" as const, raw: "stop" }, usage: USAGE },
        ],
      }),
    }),
  });
}

function textOf(message: CallParams["prompt"][number]): string {
  if (message.role === "system") return message.content;
  return message.content.flatMap((part) => (part.type === "text" ? [part.text] : [])).join("");
}

/** A promise of the next StoreEvent, and the onStore callback that settles it. */
function storeSeen(): { stored: Promise<StoreEvent>; onStore: (event: StoreEvent) => void } {
  let onStore!: (event: StoreEvent) => void;
  const stored = new Promise<StoreEvent>((resolve) => (onStore = resolve));
  return { stored, onStore };
}

async function contents(apiKeyId: string): Promise<Map<string, { type: string; sessionId?: string; role?: unknown }>> {
  const found = new Map<string, { type: string; sessionId?: string; role?: unknown }>();
  for await (const m of client.memories.list({ apiKeyId })) {
    found.set(m.content, { type: m.type, sessionId: m.sessionId, role: m.metadata.role });
  }
  return found;
}

describe("memsvcMiddleware with generateText", () => {
  test("injects the recalled memory as a user message before the last user turn and stores the turn's facts", async () => {
    const apiKeyId = owner("ai");
    await client.memories.add(DB_MEMORY, { apiKeyId });
    const model = generating();
    const { stored, onStore } = storeSeen();
    const recalls: string[] = [];
    const errors: unknown[] = [];
    const wrapped = wrapLanguageModel({
      model,
      middleware: memsvcMiddleware({
        client,
        apiKeyId,
        sessionId: "chat-1",
        wait: true,
        onStore,
        onRecall: (event) => recalls.push(event.query),
        onError: (err) => errors.push(err),
      }),
    });

    const result = await generateText({
      model: wrapped,
      system: "You are a helpful assistant.",
      messages: [
        { role: "user", content: "Hello" },
        { role: "assistant", content: "Hi! How can I help?" },
        { role: "user", content: QUESTION },
      ],
    });
    assert.equal(result.text, ANSWER);
    assert.deepEqual(errors, []);
    assert.deepEqual(recalls, [QUESTION]);

    const prompt = model.doGenerateCalls[0].prompt;
    assert.deepEqual(
      prompt.map((m) => m.role),
      ["system", "user", "assistant", "user", "user"],
    );
    assert.equal(textOf(prompt[0]), "You are a helpful assistant.");
    const memory = prompt[3];
    assert.equal(memory.role, "user");
    assert.ok(textOf(memory).startsWith(PREFIX + DB_MEMORY), textOf(memory));
    assert.equal(textOf(prompt[4]), QUESTION);
    assert.ok(prompt.filter((m) => m.role === "system").every((m) => !textOf(m).includes(PREFIX)), "no memory in a system role");

    const event = await stored;
    assert.equal(event.mode, "extract");
    assert.equal(event.userMessage, QUESTION);
    assert.equal(event.assistantMessage, ANSWER);
    const found = await contents(apiKeyId);
    assert.equal(found.get("User prefers tea over coffee")?.sessionId, "chat-1");
    assert.ok(found.has(DB_MEMORY));
  });

  test('role "system" puts the memory after the leading system messages instead', async () => {
    const apiKeyId = owner("ai");
    await client.memories.add(DB_MEMORY, { apiKeyId });
    const model = generating();
    const wrapped = wrapLanguageModel({
      model,
      middleware: memsvcMiddleware({ client, apiKeyId, role: "system", store: false, onError: assert.fail }),
    });
    await generateText({ model: wrapped, system: "You are a helpful assistant.", prompt: QUESTION });
    const prompt = model.doGenerateCalls[0].prompt;
    assert.deepEqual(
      prompt.map((m) => m.role),
      ["system", "system", "user"],
    );
    assert.equal(textOf(prompt[0]), "You are a helpful assistant.");
    assert.ok(textOf(prompt[1]).startsWith(PREFIX + DB_MEMORY));
    assert.equal(textOf(prompt[2]), QUESTION);
    assert.equal((await client.memories.page({ apiKeyId })).total, 1, "store: false stores nothing");
  });

  test("nothing relevant, or recall off, leaves the prompt as the caller wrote it", async () => {
    const apiKeyId = owner("ai");
    await client.memories.add(DB_MEMORY, { apiKeyId });
    for (const options of [{ minScore: 0.99 }, { recall: false }]) {
      const model = generating();
      const wrapped = wrapLanguageModel({
        model,
        middleware: memsvcMiddleware({ client, apiKeyId, store: false, onError: assert.fail, ...options }),
      });
      await generateText({ model: wrapped, prompt: "Write a haiku about the ocean at night" });
      const prompt = model.doGenerateCalls[0].prompt;
      assert.deepEqual(
        prompt.map((m) => m.role),
        ["user"],
      );
      assert.equal(textOf(prompt[0]), "Write a haiku about the ocean at night");
    }
  });
});

describe("memsvcMiddleware with streamText", () => {
  test("stores the user message and the streamed assistant text as episodic memories once the stream ends", async () => {
    const apiKeyId = owner("ai");
    await client.memories.add(DB_MEMORY, { apiKeyId });
    const model = streaming(["You will use ", "PostgreSQL."]);
    const { stored, onStore } = storeSeen();
    const wrapped = wrapLanguageModel({
      model,
      middleware: memsvcMiddleware({ client, apiKeyId, sessionId: "chat-2", store: "turn", onStore, onError: assert.fail }),
    });
    const result = streamText({ model: wrapped, prompt: QUESTION });
    assert.equal(await result.text, "You will use PostgreSQL.");
    const prompt = model.doStreamCalls[0].prompt;
    assert.deepEqual(
      prompt.map((m) => m.role),
      ["user", "user"],
    );
    assert.ok(textOf(prompt[0]).startsWith(PREFIX + DB_MEMORY));

    const event = await stored;
    assert.equal(event.mode, "turn");
    assert.equal(event.assistantMessage, "You will use PostgreSQL.");
    const found = await contents(apiKeyId);
    assert.deepEqual(found.get(QUESTION), { type: "episodic", sessionId: "chat-2", role: "user" });
    assert.deepEqual(found.get("You will use PostgreSQL."), { type: "episodic", sessionId: "chat-2", role: "assistant" });
  });
});

describe("memsvcMiddleware when memsvc fails", () => {
  test("the model call goes on and onError is told of the recall and the store", async () => {
    const down = new Memsvc({ baseUrl: `http://127.0.0.1:${await freePort()}`, retry: false });
    const failures: Array<[string, unknown]> = [];
    const model = generating("Still answering.");
    const wrapped = wrapLanguageModel({
      model,
      middleware: memsvcMiddleware({ client: down, apiKeyId: owner("ai"), onError: (err, phase) => failures.push([phase, err]) }),
    });
    const result = await generateText({ model: wrapped, prompt: QUESTION });
    assert.equal(result.text, "Still answering.");
    assert.deepEqual(
      failures.map(([phase]) => phase),
      ["recall", "store"],
    );
    for (const [, err] of failures) assert.ok(err instanceof MemsvcError && err.code === Code.Unavailable, String(err));
    assert.deepEqual(
      model.doGenerateCalls[0].prompt.map((m) => m.role),
      ["user"],
    );
    down.close();
  });

  test("a refused store (an owner the server rejects) reaches onError with the server's message", async () => {
    const failures: unknown[] = [];
    const wrapped = wrapLanguageModel({
      model: generating(),
      middleware: memsvcMiddleware({
        client,
        apiKeyId: "x".repeat(600),
        store: "turn",
        recall: false,
        onError: (err) => failures.push(err),
      }),
    });
    await generateText({ model: wrapped, prompt: QUESTION });
    assert.equal(failures.length, 1);
    const err = failures[0];
    assert.ok(err instanceof MemsvcError && err.code === Code.InvalidArgument, String(err));
    assert.ok(err.fieldViolations.some((v) => v.field === "apiKeyId"), JSON.stringify(err.fieldViolations));
  });

  test("options are checked when the middleware is made", () => {
    assert.throws(() => memsvcMiddleware({ client, apiKeyId: "" }), TypeError);
    assert.throws(() => memsvcMiddleware({ client, apiKeyId: "a", role: "assistant" as "user" }), TypeError);
  });
});

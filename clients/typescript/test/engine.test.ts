// The engine through the SDK and a real server: retrieve, inject in every provider format,
// extract, reindex's progress stream, settings get / update, and the health round trip.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Code, Memsvc, MemsvcError, type JsonObject, type ReindexProgress } from "@memsvc/client";
import { owner, startServer, type MemsvcServer } from "./support/server.js";

const DB_MEMORY = "I will use PostgreSQL for this project";
const DB_QUESTION = "Which database will I use for this project?";
const OTHERS = ["User prefers concise answers", "User has a dog named Rex", "User lives in Berlin"];
const PREFIX = "Memory context: ";
const FACTS_TEXT = "I prefer concise answers. I usually answer in bullet points.";

let server: MemsvcServer;
let admin: Memsvc;

before(async () => {
  server = await startServer();
  admin = new Memsvc({ baseUrl: server.baseUrl });
  await admin.settings.update({ enabled: true });
});

after(async () => {
  admin?.close();
  await server?.stop();
});

/** A client of a new owner holding the PostgreSQL memory (its id) and three unrelated ones. */
async function stored(): Promise<{ memsvc: Memsvc; dbId: string }> {
  const memsvc = new Memsvc({ baseUrl: server.baseUrl, apiKeyId: owner() });
  const dbId = (await memsvc.memories.add(DB_MEMORY, { key: "decision:db", type: "episodic" })).id;
  await memsvc.memories.addMany(OTHERS);
  return { memsvc, dbId };
}

describe("retrieve", () => {
  test("ranks the relevant memory first and reports how it was answered", async () => {
    const { memsvc, dbId } = await stored();
    const result = await memsvc.retrieve(DB_QUESTION);
    const best = result.memories[0];
    assert.equal(best.id, dbId);
    assert.equal(best.content, DB_MEMORY);
    assert.equal(best.key, "decision:db");
    assert.equal(best.type, "episodic");
    assert.ok(best.score > 0 && best.tokens > 0 && best.tier.length > 0);
    assert.ok(result.totalTokens >= best.tokens);
    assert.equal(result.resolution?.backend, "sqlite");
    assert.ok(result.resolution?.strategyUsed);
    memsvc.close();
  });

  test("limits, budgets, floors and the recent strategy", async () => {
    const { memsvc } = await stored();
    const recent = await memsvc.retrieve("", { strategy: "recent", limit: 2 });
    assert.deepEqual(
      recent.memories.map((m) => m.content),
      ["User lives in Berlin", "User has a dog named Rex"],
    );
    assert.equal((await memsvc.retrieve("", { strategy: "recent", maxTokens: 8 })).memories.length, 1);
    assert.deepEqual((await memsvc.retrieve("haiku about the ocean", { minScore: 0.99 })).memories, []);
    memsvc.close();
  });

  test("reads only the owner's memories", async () => {
    const { memsvc } = await stored();
    assert.deepEqual((await memsvc.retrieve(DB_QUESTION, { apiKeyId: owner("nobody") })).memories, []);
    memsvc.close();
  });

  test("an unknown strategy and a budget out of range are INVALID_ARGUMENT", async () => {
    const { memsvc } = await stored();
    await assert.rejects(memsvc.retrieve(DB_QUESTION, { strategy: "psychic" as "recent", maxTokens: 0 }), (err: unknown) => {
      assert.ok(err instanceof MemsvcError && err.code === Code.InvalidArgument);
      assert.deepEqual(err.fieldViolations.map((v) => v.field).sort(), ["maxTokens", "strategy"]);
      return true;
    });
    memsvc.close();
  });
});

describe("inject", () => {
  const cases: Array<[string, string, JsonObject, (out: JsonObject) => string]> = [
    [
      "openai-chat",
      "openai",
      {
        model: "gpt-4o",
        messages: [
          { role: "system", content: "You are a careful assistant." },
          { role: "user", content: DB_QUESTION },
        ],
      },
      (out: any) => out.messages[0].content,
    ],
    [
      "openai-responses",
      "openai",
      { model: "gpt-4.1", store: false, input: DB_QUESTION, instructions: "You are a careful assistant." },
      (out: any) => out.instructions,
    ],
    [
      "anthropic",
      "anthropic",
      {
        model: "claude-sonnet-4-5",
        max_tokens: 1024,
        system: "You are a careful assistant.",
        messages: [
          { role: "user", content: "Hello" },
          { role: "assistant", content: "Hi! How can I help?" },
          { role: "user", content: DB_QUESTION },
        ],
      },
      (out: any) => out.system,
    ],
    [
      "gemini",
      "gemini",
      {
        systemInstruction: { parts: [{ text: "You are a careful assistant." }] },
        contents: [
          { role: "user", parts: [{ text: "Hello" }] },
          { role: "model", parts: [{ text: "Hi! How can I help?" }] },
          { role: "user", parts: [{ text: DB_QUESTION }] },
        ],
      },
      (out: any) => out.systemInstruction.parts[0].text,
    ],
  ];

  for (const [format, provider, body, memoryOf] of cases) {
    test(`injects into the ${format} format`, async () => {
      const { memsvc, dbId } = await stored();
      const before = JSON.stringify(body);
      const result = await memsvc.inject(body, { provider });
      assert.equal(result.injected, true);
      assert.equal(result.format, format);
      assert.equal(result.role, "system");
      assert.deepEqual(result.memoryIds, [dbId]);
      assert.ok(result.tokens > 0);
      assert.equal(result.skippedReason, "");
      assert.ok(memoryOf(result.request).startsWith(PREFIX + DB_MEMORY), memoryOf(result.request));
      assert.equal(JSON.stringify(body), before, "the caller's body is not changed");
      if (format === "anthropic") assert.equal(result.request.max_tokens, 1024);
      memsvc.close();
    });
  }

  test("as a user turn, cache-safe, opted out, and with nothing relevant", async () => {
    const { memsvc } = await stored();
    const body = cases[0][2] as { messages: JsonObject[] } & JsonObject;
    const asUser = await memsvc.inject(body, { provider: "glm" });
    assert.equal(asUser.injected, true);
    assert.equal(asUser.role, "user");
    const cacheSafe = await memsvc.inject(body, { provider: "openai", cacheSafe: true });
    assert.deepEqual((cacheSafe.request.messages as JsonObject[])[0], body.messages[0]);
    const merged = await memsvc.inject(body, { provider: "openai", systemMessageMustBeFirst: true });
    const first = (merged.request.messages as JsonObject[])[0];
    assert.equal(first.role, "system");
    assert.ok(String(first.content).includes("You are a careful assistant.") && String(first.content).includes(DB_MEMORY));
    const skipped = await memsvc.inject(body, { provider: "openai", noMemory: true });
    assert.equal(skipped.injected, false);
    assert.deepEqual(skipped.request, body);
    assert.ok(skipped.skippedReason);
    const nothing = await memsvc.inject(
      { model: "gpt-4o", messages: [{ role: "user", content: "Write a haiku about the ocean at night" }] },
      { provider: "openai" },
    );
    assert.equal(nothing.injected, false);
    assert.deepEqual(nothing.memoryIds, []);
    assert.ok(nothing.skippedReason);
    memsvc.close();
  });
});

describe("extract", () => {
  test("a dry run reports the facts and stores nothing", async () => {
    const memsvc = new Memsvc({ baseUrl: server.baseUrl, apiKeyId: owner() });
    const result = await memsvc.extract({ userMessage: FACTS_TEXT, dryRun: true });
    assert.deepEqual(new Set(result.facts.map((f) => f.category)), new Set(["preference", "pattern"]));
    assert.ok(result.facts.every((f) => f.content && f.key && f.type));
    assert.equal(result.stored, 0);
    assert.equal(result.skippedReason, "dry run");
    assert.equal((await memsvc.memories.page()).total, 0);
    memsvc.close();
  });

  test("with wait stores the facts before answering", async () => {
    const memsvc = new Memsvc({ baseUrl: server.baseUrl, apiKeyId: owner() });
    const result = await memsvc.extract({ text: FACTS_TEXT, wait: true, sessionId: "chat-1" });
    assert.ok(result.facts.length >= 2);
    assert.equal(result.stored, result.facts.length);
    assert.equal(result.accepted, false);
    const contents = new Set<string>();
    for await (const memory of memsvc.memories.list()) {
      contents.add(memory.content);
      assert.equal(memory.sessionId, "chat-1");
    }
    for (const fact of result.facts) assert.ok(contents.has(fact.content), fact.content);
    memsvc.close();
  });

  test("of a turn without wait is accepted for the background", async () => {
    const memsvc = new Memsvc({ baseUrl: server.baseUrl, apiKeyId: owner() });
    const result = await memsvc.extract({ userMessage: FACTS_TEXT, assistantMessage: "Noted." });
    assert.equal(result.accepted, true);
    assert.ok(result.facts.length > 0);
    memsvc.close();
  });

  test("without an owner nothing is stored and the reason is said", async () => {
    const nobody = new Memsvc({ baseUrl: server.baseUrl });
    const result = await nobody.extract({ text: FACTS_TEXT });
    assert.equal(result.stored, 0);
    assert.equal(result.accepted, false);
    assert.ok(result.skippedReason);
    nobody.close();
  });
});

describe("reindex", () => {
  test("streams monotone progress to done", async () => {
    const memsvc = new Memsvc({ baseUrl: server.baseUrl, apiKeyId: owner("reindex") });
    const total = 600; // more than two batches of 256
    const batch = await memsvc.memories.addMany(Array.from({ length: total }, (_, i) => `bulk memory ${i} about topic ${i % 17}`));
    assert.equal(batch.failedCount, 0);

    const stream = memsvc.reindex({ force: true });
    const messages: ReindexProgress[] = [];
    for await (const progress of stream) messages.push(progress);
    const first = messages[0];
    const last = messages[messages.length - 1];
    assert.equal(first.started, true);
    assert.ok(first.pending >= total, `pending ${first.pending}`);
    assert.equal(first.processed, 0);
    assert.equal(first.finished, false);
    assert.ok(messages.length >= 1 + 3 + 1, `${messages.length} messages`);
    const processed = messages.map((m) => m.processed);
    assert.deepEqual(processed, [...processed].sort((a, b) => a - b));
    assert.ok(messages.slice(0, -1).every((m) => m.state === "running"));
    assert.equal(last.state, "done");
    assert.equal(last.finished, true);
    assert.equal(last.processed, first.pending);
    assert.equal(last.pending, 0);
    assert.equal(last.errors, 0);
    assert.equal(stream.last, last);

    assert.equal((await memsvc.reindex().wait()).state, "done"); // nothing pending: done at once
    const limited = await memsvc.reindex({ force: true, limit: 100 }).wait();
    assert.equal(limited.state, "done");
    assert.equal(limited.processed, 100);

    const semantic = await memsvc.retrieve("topic 3 bulk memory", { strategy: "semantic", limit: 3 });
    assert.ok(semantic.memories.length > 0 && semantic.memories.every((m) => m.vecScore !== undefined));
    assert.notEqual(semantic.resolution?.embeddingSource, "none");
    memsvc.close();
  });

  test("an invalid target is refused before any progress", async () => {
    const received: ReindexProgress[] = [];
    await assert.rejects(
      async () => {
        for await (const progress of admin.reindex({ target: "elsewhere" as "local" })) received.push(progress);
      },
      (err: unknown) => {
        assert.ok(err instanceof MemsvcError && err.code === Code.InvalidArgument);
        assert.match(err.message, /target/);
        return true;
      },
    );
    assert.deepEqual(received, []);
  });
});

describe("settings", () => {
  test("get and update return every setting; null clears a nullable one", async () => {
    const before = await admin.settings.get();
    assert.equal(before.enabled, true);
    assert.equal(before.maxTokens, 2000);
    assert.equal(before.customBaseUrl, null);
    assert.ok(Array.isArray(before.fallbackBackends));
    try {
      const after = await admin.settings.update({ maxTokens: 1500, strategy: "recent", customModelId: "my-model" });
      assert.equal(after.maxTokens, 1500);
      assert.equal(after.strategy, "recent");
      assert.equal(after.customModelId, "my-model");
      assert.equal(after.enabled, true);
      const { raw: _a, ...fetched } = await admin.settings.get();
      const { raw: _b, ...returned } = after;
      assert.deepEqual(fetched, returned);
      assert.equal((await admin.settings.update({ customModelId: null })).customModelId, null);
    } finally {
      await admin.settings.update({ maxTokens: before.maxTokens, strategy: before.strategy });
    }
  });

  test("a refused update lists every violation and saves nothing", async () => {
    const before = await admin.settings.get();
    for (const [changes, field] of [
      [{ maxTokens: 16001, strategy: "psychic", enabled: false }, ["maxTokens", "strategy"]],
      [{ noSuchSetting: true, enabled: false }, ["noSuchSetting"]],
    ] as const) {
      await assert.rejects(admin.settings.update(changes), (err: unknown) => {
        assert.ok(err instanceof MemsvcError && err.code === Code.InvalidArgument);
        assert.deepEqual(err.fieldViolations.map((v) => v.field).sort(), field);
        for (const name of field) assert.match(err.message, new RegExp(name));
        return true;
      });
    }
    const now = await admin.settings.get();
    assert.equal(now.enabled, before.enabled);
    assert.equal(now.maxTokens, before.maxTokens);
    await assert.rejects(admin.settings.update({}), TypeError);
  });
});

describe("checkHealth", () => {
  test("the round trip works and reports its latency", async () => {
    const health = await admin.checkHealth();
    assert.equal(health.working, true);
    assert.ok(health.latencyMs >= 0);
    assert.equal(health.error, undefined);
  });
});

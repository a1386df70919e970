// memsvc.memories through the SDK and a real server: add (and upsert by key), addMany with a
// refused item, get, update, delete, page / pages / list, clear.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Code, Memsvc, MemsvcError } from "@memsvc/client";
import { owner, startServer, type MemsvcServer } from "./support/server.js";

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

function client(apiKeyId = owner()): Memsvc {
  return new Memsvc({ baseUrl: server.baseUrl, apiKeyId });
}

describe("memories.add / get", () => {
  test("stores a memory with every field and reads it back", async () => {
    const memsvc = client();
    const occurredAt = new Date(Date.now() - 3_600_000);
    const expiresAt = new Date(Date.now() + 86_400_000);
    const added = await memsvc.memories.add("User has a dog named Rex", {
      type: "episodic",
      key: "pet:dog",
      sessionId: "chat-1",
      metadata: { source: "test", n: 3 },
      occurredAt,
      expiresAt,
      keep: true,
    });
    assert.equal(added.created, true);
    assert.match(added.id, /\S/);
    const memory = await memsvc.memories.get(added.id);
    assert.equal(memory.id, added.id);
    assert.equal(memory.apiKeyId, memsvc.apiKeyId);
    assert.equal(memory.content, "User has a dog named Rex");
    assert.equal(memory.type, "episodic");
    assert.equal(memory.key, "pet:dog");
    assert.equal(memory.sessionId, "chat-1");
    assert.deepEqual(memory.metadata, { source: "test", n: 3 });
    assert.equal(memory.keep, true);
    assert.equal(memory.occurredAt?.getTime(), occurredAt.getTime());
    assert.equal(memory.expiresAt?.getTime(), expiresAt.getTime());
    assert.ok(memory.createdAt instanceof Date && memory.updatedAt instanceof Date);
    assert.equal(memory.raw.$typeName, "memsvc.v1.Memory");
    memsvc.close();
  });

  test("a second add with the same key updates in place and merges metadata", async () => {
    const memsvc = client();
    const first = await memsvc.memories.add("User is vegetarian", { key: "diet:main", metadata: { a: 1 } });
    const second = await memsvc.memories.add("User is vegan", { key: "diet:main", metadata: { b: 2 } });
    assert.equal(second.id, first.id);
    assert.equal(second.created, false);
    const memory = await memsvc.memories.get(first.id);
    assert.equal(memory.content, "User is vegan");
    assert.deepEqual(memory.metadata, { a: 1, b: 2 });
    assert.equal(memory.type, "factual");
    assert.equal(memory.keep, true, "a durable key (diet:) is kept");
    memsvc.close();
  });

  test("bad input is INVALID_ARGUMENT with the server's message and a field violation; nothing is stored", async () => {
    const memsvc = client();
    await assert.rejects(memsvc.memories.add("   ", { type: "bogus" as "factual" }), (err: unknown) => {
      assert.ok(err instanceof MemsvcError);
      assert.equal(err.code, Code.InvalidArgument);
      assert.equal(err.codeName, "INVALID_ARGUMENT");
      assert.equal(err.reason, "INVALID_ARGUMENT");
      const fields = err.fieldViolations.map((v) => v.field).sort();
      assert.deepEqual(fields, ["content", "type"]);
      assert.match(err.message, /content/);
      assert.ok(err.fieldViolations.every((v) => v.description.length > 0));
      assert.match(err.requestId ?? "", /^[0-9a-f]{32}$/);
      assert.match(String(err), /^MemsvcError: INVALID_ARGUMENT: .+ \[INVALID_ARGUMENT\]$/);
      return true;
    });
    assert.equal((await memsvc.memories.page()).total, 0);
    memsvc.close();
  });

  test("get of a missing memory is NOT_FOUND", async () => {
    const memsvc = client();
    await assert.rejects(memsvc.memories.get("no-such-memory"), (err: unknown) => {
      assert.ok(err instanceof MemsvcError);
      assert.equal(err.code, Code.NotFound);
      assert.match(err.message, /no-such-memory/);
      return true;
    });
    memsvc.close();
  });

  test("a call without any apiKeyId is refused by the server", async () => {
    const nobody = new Memsvc({ baseUrl: server.baseUrl });
    await assert.rejects(nobody.memories.add("orphan"), (err: unknown) => {
      assert.ok(err instanceof MemsvcError && err.code === Code.InvalidArgument);
      assert.deepEqual(
        err.fieldViolations.map((v) => v.field),
        ["apiKeyId"],
      );
      return true;
    });
    nobody.close();
  });
});

describe("memories.addMany", () => {
  test("stores the valid items and reports the refused one with its violations", async () => {
    const memsvc = client();
    const other = owner();
    const result = await memsvc.memories.addMany([
      "User lives in Berlin",
      { content: "User likes jazz", type: "semantic", sessionId: "s1" },
      { content: "", type: "factual" },
      { content: "Another owner's fact", apiKeyId: other },
    ]);
    assert.equal(result.storedCount, 3);
    assert.equal(result.failedCount, 1);
    assert.deepEqual(
      result.items.map((i) => i.ok),
      [true, true, false, true],
    );
    const refused = result.items[2];
    assert.ok(refused.error instanceof MemsvcError);
    assert.equal(refused.error.code, Code.InvalidArgument);
    assert.deepEqual(
      refused.error.fieldViolations.map((v) => v.field),
      ["content"],
    );
    assert.equal(refused.id, undefined);
    const stored = await memsvc.memories.get(result.items[1].id!);
    assert.equal(stored.type, "semantic");
    assert.equal(stored.sessionId, "s1");
    assert.equal((await memsvc.memories.get(result.items[3].id!)).apiKeyId, other);
    assert.equal((await memsvc.memories.page()).total, 2);
    memsvc.close();
  });

  test("no items at all is refused whole", async () => {
    const memsvc = client();
    await assert.rejects(memsvc.memories.addMany([]), (err: unknown) => err instanceof MemsvcError && err.code === Code.InvalidArgument);
    memsvc.close();
  });
});

describe("memories.update / delete", () => {
  test("update changes the given fields and returns the stored memory", async () => {
    const memsvc = client();
    const { id } = await memsvc.memories.add("User drinks coffee", { metadata: { a: 1 } });
    const occurredAt = new Date(Date.now() - 60_000);
    const updated = await memsvc.memories.update(id, {
      content: "User drinks tea",
      type: "semantic",
      key: "preference:drink",
      metadata: { b: 2 },
      keep: true,
      occurredAt,
    });
    assert.equal(updated.id, id);
    assert.equal(updated.content, "User drinks tea");
    assert.equal(updated.type, "semantic");
    assert.equal(updated.key, "preference:drink");
    assert.equal(updated.keep, true);
    assert.equal(updated.metadata.b, 2);
    assert.equal(updated.occurredAt?.getTime(), occurredAt.getTime());
    assert.equal((await memsvc.memories.get(id)).content, "User drinks tea");
    memsvc.close();
  });

  test("an invalid update changes nothing", async () => {
    const memsvc = client();
    const { id } = await memsvc.memories.add("User drinks coffee");
    await assert.rejects(memsvc.memories.update(id, { type: "nonsense" as "factual" }), (err: unknown) => {
      assert.ok(err instanceof MemsvcError && err.code === Code.InvalidArgument);
      assert.deepEqual(
        err.fieldViolations.map((v) => v.field),
        ["type"],
      );
      return true;
    });
    assert.equal((await memsvc.memories.get(id)).type, "factual");
    await assert.rejects(memsvc.memories.update("missing-id", { content: "x" }), (err: unknown) => err instanceof MemsvcError && err.code === Code.NotFound);
    memsvc.close();
  });

  test("delete removes the memory; a second delete is NOT_FOUND", async () => {
    const memsvc = client();
    const { id } = await memsvc.memories.add("Temporary fact");
    await memsvc.memories.delete(id);
    await assert.rejects(memsvc.memories.get(id), (err: unknown) => err instanceof MemsvcError && err.code === Code.NotFound);
    await assert.rejects(memsvc.memories.delete(id), (err: unknown) => err instanceof MemsvcError && err.code === Code.NotFound);
    memsvc.close();
  });
});

describe("memories.page / pages / list / clear", () => {
  test("list walks every page newest first; pages and page report totals and stats", async () => {
    const memsvc = client();
    const contents = Array.from({ length: 7 }, (_, i) => `numbered memory ${i}`);
    for (const content of contents) await memsvc.memories.add(content, { type: content.endsWith("3") ? "episodic" : "factual" });

    const listed: string[] = [];
    for await (const memory of memsvc.memories.list({ pageSize: 3 })) listed.push(memory.content);
    assert.deepEqual(listed, [...contents].reverse());

    const pages = [];
    for await (const page of memsvc.memories.pages({ pageSize: 3 })) pages.push(page);
    assert.deepEqual(
      pages.map((p) => p.memories.length),
      [3, 3, 1],
    );
    assert.deepEqual(
      pages.map((p) => p.hasMore),
      [true, true, false],
    );
    assert.deepEqual(
      pages.map((p) => p.offset),
      [0, 3, 6],
    );

    const page = await memsvc.memories.page({ offset: 2, limit: 2 });
    assert.equal(page.total, 7);
    assert.equal(page.limit, 2);
    assert.deepEqual(
      page.memories.map((m) => m.content),
      ["numbered memory 4", "numbered memory 3"],
    );
    assert.equal(page.stats?.total, 7);
    assert.deepEqual(page.stats?.byType, { factual: 6, episodic: 1, semantic: 0, procedural: 0 });
    assert.ok((page.stats?.tokensUsed ?? 0) > 0);

    const filtered = [];
    for await (const memory of memsvc.memories.list({ type: "episodic" })) filtered.push(memory.content);
    assert.deepEqual(filtered, ["numbered memory 3"]);
    const queried = [];
    for await (const memory of memsvc.memories.list({ query: "MEMORY 5" })) queried.push(memory.content);
    assert.deepEqual(queried, ["numbered memory 5"]);
    memsvc.close();
  });

  test("a page size out of range is refused before any call", async () => {
    const memsvc = client();
    await assert.rejects(async () => {
      for await (const _ of memsvc.memories.list({ pageSize: 0 })) {
        // never reached
      }
    }, RangeError);
    await assert.rejects(memsvc.memories.page({ limit: 201 }), RangeError);
    memsvc.close();
  });

  test("clear deletes what matches the filters and says how many", async () => {
    const memsvc = client();
    await memsvc.memories.addMany([
      { content: "session one fact", sessionId: "one" },
      { content: "session two fact", sessionId: "two" },
      { content: "an old episodic turn", type: "episodic" },
    ]);
    assert.equal(await memsvc.memories.clear({ sessionId: "one" }), 1);
    assert.equal(await memsvc.memories.clear({ type: "episodic", olderThan: new Date(Date.now() + 60_000) }), 1);
    assert.deepEqual(
      (await memsvc.memories.page()).memories.map((m) => m.content),
      ["session two fact"],
    );
    assert.equal(await memsvc.memories.clear(), 1);
    assert.equal((await memsvc.memories.page()).total, 0);
    memsvc.close();
  });
});

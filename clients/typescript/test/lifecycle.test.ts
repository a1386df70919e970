// A memory's lifecycle through the SDK and a real server: memories.history (the author of
// every change, across pages, the superseded versions), memories.watch (events in commit
// order, resuming after a disconnect, a caught-up poll, tenancy, stopped by an AbortSignal,
// never retried), retrieve / inject with asOf, mergedInto of a repeated add and dedupOnWrite.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Code, HistoryIterator, Memsvc, MemsvcError, WatchStream, isRetried, type Interceptor, type MemoryEvent } from "@memsvc/client";
import { freePort, owner, startServer, type MemsvcServer } from "./support/server.js";

const ADMIN_TOKEN = "ts-lifecycle-admin-0123456789";
// The first MEMSVC_API_TOKENS token is the credential `env:1`.
const ADMIN_AUTHOR = "env:1";

let server: MemsvcServer;
let root: Memsvc;

before(async () => {
  server = await startServer({ env: { MEMSVC_API_TOKENS: ADMIN_TOKEN, MEMSVC_WATCH_POLL_S: "0.05" }, token: ADMIN_TOKEN });
  root = new Memsvc({ baseUrl: server.baseUrl, token: ADMIN_TOKEN });
  await root.settings.update({ enabled: true });
});

after(async () => {
  root?.close();
  await server?.stop();
});

function admin(apiKeyId = owner()): Memsvc {
  return new Memsvc({ baseUrl: server.baseUrl, token: ADMIN_TOKEN, apiKeyId });
}

/** A client with a stored credential of its own (`name`), confined to `tenant`. */
async function agent(name: string, tenant: string): Promise<Memsvc> {
  const { token } = await root.services.credentials.createCredential({ id: name, permissions: ["read:memory", "write:memory"], tenants: [tenant] });
  return new Memsvc({ baseUrl: server.baseUrl, token, apiKeyId: tenant });
}

function isError(code: Code) {
  return (err: unknown) => {
    assert.ok(err instanceof MemsvcError, String(err));
    assert.equal(err.code, code, String(err));
    return true;
  };
}

/** The next `count` events of `events` that are changes (bookmarks skipped). */
async function changes(events: AsyncIterator<MemoryEvent>, count: number): Promise<MemoryEvent[]> {
  const out: MemoryEvent[] = [];
  while (out.length < count) {
    const next = await events.next();
    assert.ok(!next.done, `the stream ended after ${out.length} of ${count} changes`);
    if (next.value.kind !== "bookmark") out.push(next.value);
  }
  return out;
}

async function all<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Paris, then Berlin under one key: the id, a time in Paris's span, a time after. */
async function supersede(memsvc: Memsvc): Promise<{ id: string; inParis: Date; after: Date }> {
  const { id } = await memsvc.memories.add("User lives in Paris", { key: "location:home" });
  await memsvc.memories.add("User has a cat named Miso");
  const inParis = new Date();
  await sleep(20);
  assert.equal((await memsvc.memories.add("User lives in Berlin", { key: "location:home" })).id, id);
  return { id, inParis, after: new Date() };
}

describe("memories.history", () => {
  test("names the author of every change, across pages, with the superseded versions", async () => {
    const tenant = owner();
    const a = await agent(`${tenant}-a`, tenant);
    const b = await agent(`${tenant}-b`, tenant);
    const { id } = await a.memories.add("User lives in Paris", { key: "location:home" });
    await b.memories.add("User lives in Berlin", { key: "location:home" });
    await a.memories.update(id, { keep: false });

    const pages = b.memories.history(id, { limit: 1 }); // one call per entry
    assert.ok(pages instanceof HistoryIterator);
    assert.equal(pages.versions, undefined);
    const entries = await all(pages);
    assert.deepEqual(
      entries.map((e) => [e.event, e.author]),
      [
        ["created", `${tenant}-a`],
        ["superseded", `${tenant}-b`],
        ["updated", `${tenant}-a`],
      ],
    );
    assert.equal(entries[0].changes.content, "User lives in Paris");
    assert.equal(entries[1].changes.content, "User lives in Berlin");
    assert.deepEqual(entries[2].changes, { keep: false });
    assert.ok(entries[0].at instanceof Date && entries[0].at <= entries[1].at!);
    assert.deepEqual([pages.id, pages.apiKeyId], [id, tenant]);

    const history = await a.memories.history(id).read();
    assert.deepEqual([history.id, history.apiKeyId, history.entries.length], [id, tenant, 3]);
    const [paris] = history.versions;
    assert.equal(history.versions.length, 1);
    assert.equal(paris.content, "User lives in Paris");
    assert.ok(paris.validFrom instanceof Date && paris.validTo instanceof Date && paris.validTo <= entries[1].at!);
    const current = await a.memories.get(id);
    assert.equal(current.content, "User lives in Berlin");
    assert.equal(current.validTo, undefined);
    assert.ok(current.validFrom instanceof Date && current.validFrom >= paris.validTo);
    a.close();
    b.close();
  });

  test("another tenant's or a missing memory is NOT_FOUND; a bad limit is refused before any call", async () => {
    const tenant = owner();
    const theirs = (await root.memories.add("Someone else's secret", { apiKeyId: owner() })).id;
    const mine = await agent(`${tenant}-mine`, tenant);
    for (const id of [theirs, "no-such-memory"]) await assert.rejects(mine.memories.history(id).read(), isError(Code.NotFound));
    assert.throws(() => mine.memories.history(theirs, { limit: 0 }), RangeError);
    mine.close();
  });

  test("a deleted memory's history is only its deletion", async () => {
    const memsvc = admin();
    const { id } = await memsvc.memories.add("User's PIN is 4471");
    await memsvc.memories.delete(id);
    const history = await memsvc.memories.history(id).read();
    assert.deepEqual(
      history.entries.map((e) => [e.event, e.author, e.changes]),
      [["deleted", ADMIN_AUTHOR, {}]],
    );
    assert.deepEqual(history.versions, []);
    memsvc.close();
  });
});

describe("memories.watch", () => {
  test("gives every change in commit order; aborting the signal ends it quietly", async () => {
    const tenant = owner();
    const memsvc = admin(tenant);
    const controller = new AbortController();
    const stream = memsvc.memories.watch({ signal: controller.signal, timeoutMs: 60_000 });
    assert.ok(stream instanceof WatchStream);
    const events = stream[Symbol.asyncIterator]();
    const start = (await events.next()).value as MemoryEvent;
    assert.equal(start.kind, "bookmark");
    assert.ok(start.resumeToken && start.memory === undefined && start.memoryId === undefined);
    const first = (await memsvc.memories.add("v1", { key: "k" })).id;
    await memsvc.memories.add("v2", { key: "k" });
    const other = (await memsvc.memories.add("a second memory")).id;
    const got = await changes(events, 3);
    // Read before the delete: deleting forgets a memory's history, so a creation not yet read
    // when its memory is deleted is never delivered (only the deletion is).
    await memsvc.memories.delete(other);
    got.push(...(await changes(events, 1)));
    assert.deepEqual(
      got.map((e) => [e.kind, e.change, e.memoryId]),
      [
        ["created", "created", first],
        ["updated", "superseded", first],
        ["created", "created", other],
        ["deleted", "deleted", other],
      ],
    );
    assert.ok(got.every((e) => e.apiKeyId === tenant && e.author === ADMIN_AUTHOR && e.at instanceof Date));
    assert.ok(got[0].changedFields.includes("content"));
    assert.equal(got[1].memory?.content, "v2");
    assert.equal(got[3].memory, undefined);
    assert.equal(stream.resumeToken, got[3].resumeToken);
    const pending = events.next();
    controller.abort();
    assert.deepEqual(await pending, { done: true, value: undefined });
    memsvc.close();
  });

  test("resumes after a disconnect with nothing missed or repeated", async () => {
    const memsvc = admin();
    let handled: MemoryEvent | undefined;
    const seen = memsvc.memories.watch({ timeoutMs: 60_000 });
    let added = "";
    for await (const event of seen) {
      if (event.kind === "bookmark") {
        if (!added) added = (await memsvc.memories.add("before the disconnect")).id;
        continue;
      }
      handled = event;
      break; // leaving the loop ends the stream
    }
    assert.equal(handled?.memoryId, added);
    // Disconnected: what happens meanwhile comes after the last handled token, once each.
    const away = [];
    for (let n = 0; n < 3; n++) away.push((await memsvc.memories.add(`while away ${n}`)).id);
    await memsvc.memories.update(away[0], { content: "while away, changed" });
    const rest = await all(memsvc.memories.watch({ resumeToken: handled!.resumeToken, stopWhenCaughtUp: true, timeoutMs: 30_000 }));
    assert.deepEqual(
      rest.filter((e) => e.kind !== "bookmark").map((e) => [e.kind, e.memoryId]),
      [
        ["created", away[0]],
        ["created", away[1]],
        ["created", away[2]],
        ["updated", away[0]],
      ],
    );
    assert.equal(rest.at(-1)?.kind, "bookmark");
    const again = await all(memsvc.memories.watch({ resumeToken: rest.at(-1)!.resumeToken, stopWhenCaughtUp: true }));
    assert.deepEqual(
      again.filter((e) => e.kind !== "bookmark"),
      [],
    );
    await assert.rejects(all(memsvc.memories.watch({ resumeToken: "9.9.9.9", stopWhenCaughtUp: true })), isError(Code.InvalidArgument));
    memsvc.close();
  });

  test("cancel() ends a stream that is waiting for events", async () => {
    const memsvc = admin();
    const stream = memsvc.memories.watch();
    const events = stream[Symbol.asyncIterator]();
    assert.equal((await events.next()).value?.kind, "bookmark");
    const pending = events.next();
    stream.cancel();
    assert.equal((await pending).done, true);
    memsvc.close();
  });

  test("is confined to the credential's tenants", async () => {
    const tenant = owner();
    const other = owner();
    const reader = await agent(`${tenant}-reader`, tenant);
    const start = (await all(reader.memories.watch({ stopWhenCaughtUp: true }))).at(-1)!.resumeToken;
    await root.memories.add("another tenant's note", { apiKeyId: other });
    const mine = (await root.memories.add("my note", { apiKeyId: tenant })).id;
    // apiKeyId "": every tenant the credential covers, which is only its own.
    const events = await all(reader.memories.watch({ apiKeyId: "", resumeToken: start, stopWhenCaughtUp: true }));
    assert.deepEqual(
      events.filter((e) => e.kind !== "bookmark").map((e) => [e.apiKeyId, e.memoryId]),
      [[tenant, mine]],
    );
    await assert.rejects(all(reader.memories.watch({ apiKeyId: other })), isError(Code.PermissionDenied));
    reader.close();
  });

  test("is sent once when the server is unavailable, while history pages are retried", async () => {
    assert.equal(isRetried("memsvc.v1.MemoryService", "GetMemoryHistory"), true);
    assert.equal(isRetried("memsvc.v1.MemoryService", "WatchMemories"), false);
    const port = await freePort();
    const attempts: string[] = [];
    const counting: Interceptor = (next) => (req) => {
      attempts.push(req.method.name);
      return next(req);
    };
    const memsvc = new Memsvc({ baseUrl: `http://127.0.0.1:${port}`, apiKeyId: owner(), retry: { maxAttempts: 5, initialBackoffMs: 10 }, interceptors: [counting] });
    await assert.rejects(all(memsvc.memories.watch()), isError(Code.Unavailable));
    assert.deepEqual(attempts, ["WatchMemories"]);
    attempts.length = 0;
    await assert.rejects(memsvc.memories.history("any").read(), isError(Code.Unavailable));
    assert.deepEqual(attempts, Array(5).fill("GetMemoryHistory"));
    memsvc.close();
  });
});

describe("asOf, mergedInto, dedupOnWrite", () => {
  test("retrieve asOf answers with the fact as it was", async () => {
    const memsvc = admin();
    const { id, inParis, after: later } = await supersede(memsvc);
    const query = "where does the user live";
    const then = await memsvc.retrieve(query, { strategy: "exact", asOf: inParis, minScore: 0 });
    const contents = then.memories.map((m) => m.content);
    assert.ok(contents.includes("User lives in Paris") && !contents.includes("User lives in Berlin"), String(contents));
    const paris = then.memories.find((m) => m.id === id)!;
    assert.ok(paris.validTo instanceof Date && paris.validTo > inParis);
    assert.ok(paris.validFrom instanceof Date && paris.validFrom <= inParis);
    const now = (await memsvc.retrieve(query, { strategy: "exact", minScore: 0 })).memories.find((m) => m.id === id)!;
    assert.equal(now.content, "User lives in Berlin");
    assert.equal(now.validTo, undefined);
    const afterwards = await memsvc.retrieve(query, { strategy: "exact", asOf: later, minScore: 0 });
    assert.deepEqual(
      afterwards.memories.filter((m) => m.id === id).map((m) => m.content),
      ["User lives in Berlin"],
    );
    await assert.rejects(memsvc.retrieve("x", { asOf: new Date(Date.now() + 86_400_000) }), (err: unknown) => {
      assert.ok(err instanceof MemsvcError && err.code === Code.InvalidArgument && /asOf/.test(err.message), String(err));
      return true;
    });
    await assert.rejects(memsvc.retrieve("x", { asOf: new Date("not a date") }), TypeError);
    memsvc.close();
  });

  test("inject asOf puts in the fact as it was", async () => {
    const memsvc = admin();
    const { inParis } = await supersede(memsvc);
    const body = { model: "gpt-4o", messages: [{ role: "user", content: "Where does the user live? Paris or Berlin?" }] };
    const context = (result: { request: Record<string, unknown> }) => JSON.stringify((result.request.messages as unknown[])[0]);
    const then = await memsvc.inject(body, { provider: "openai", minScore: 0, asOf: inParis });
    assert.ok(then.injected, then.skippedReason);
    assert.ok(context(then).includes("User lives in Paris") && !context(then).includes("Berlin"), context(then));
    const now = await memsvc.inject(body, { provider: "openai", minScore: 0 });
    assert.ok(context(now).includes("User lives in Berlin") && !context(now).includes("Paris"), context(now));
    memsvc.close();
  });

  test("a repeated add is merged into the existing memory, also in a batch", async () => {
    const memsvc = admin();
    const first = await memsvc.memories.add("User's dentist is Dr. Ortega");
    assert.equal(first.created, true);
    assert.equal(first.mergedInto, undefined);
    const again = await memsvc.memories.add("user's dentist is dr. ortega!");
    assert.deepEqual([again.id, again.created, again.mergedInto], [first.id, false, first.id]);
    const merge = (await memsvc.memories.history(first.id).read()).entries.at(-1)!;
    assert.deepEqual([merge.event, merge.changes], ["merged", { mergedContent: "user's dentist is dr. ortega!" }]);
    const batch = await memsvc.memories.addMany(["User's dentist is Dr. Ortega.", "User's dentist is in Porto"]);
    assert.deepEqual(
      batch.items.map((i) => [i.ok, i.id === first.id, i.mergedInto]),
      [
        [true, true, first.id],
        [true, false, undefined],
      ],
    );
    assert.equal((await memsvc.memories.page()).total, 2);
    memsvc.close();
  });

  test("dedupOnWrite: false turns merging off", async () => {
    const memsvc = admin();
    assert.equal((await memsvc.settings.get()).dedupOnWrite, true);
    try {
      assert.equal((await memsvc.settings.update({ dedupOnWrite: false })).dedupOnWrite, false);
      const first = await memsvc.memories.add("User was born in Lisbon");
      const second = await memsvc.memories.add("User was born in Lisbon");
      assert.equal(second.mergedInto, undefined);
      assert.equal(second.created, true);
      assert.notEqual(second.id, first.id);
    } finally {
      await memsvc.settings.update({ dedupOnWrite: true });
    }
    memsvc.close();
  });
});

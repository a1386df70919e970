// The connection through a real server: the bearer token (a server started with
// MEMSVC_API_TOKENS, and a stored credential confined to one tenant), extra headers, retries
// of idempotent calls on UNAVAILABLE (a server that starts late), writes sent once, and the
// deadline.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Code, Memsvc, MemsvcError, codeName, type Interceptor } from "@memsvc/client";
import { freePort, owner, startServer, type MemsvcServer } from "./support/server.js";

const ADMIN_TOKEN = "ts-admin-token-0123456789abcdef";

function counting(): { interceptor: Interceptor; attempts: string[] } {
  const attempts: string[] = [];
  const interceptor: Interceptor = (next) => (req) => {
    attempts.push(req.method.name);
    return next(req);
  };
  return { interceptor, attempts };
}

function isError(code: Code, check?: (err: MemsvcError) => void) {
  return (err: unknown) => {
    assert.ok(err instanceof MemsvcError, String(err));
    assert.equal(err.codeName, codeName(code), `${err}`);
    check?.(err);
    return true;
  };
}

describe("a server that requires a bearer token", () => {
  let server: MemsvcServer;

  before(async () => {
    server = await startServer({ env: { MEMSVC_API_TOKENS: ADMIN_TOKEN }, token: ADMIN_TOKEN });
  });

  after(async () => {
    await server?.stop();
  });

  test("a call without a token is UNAUTHENTICATED with the server's reason", async () => {
    const anonymous = new Memsvc({ baseUrl: server.baseUrl, apiKeyId: owner() });
    await assert.rejects(
      anonymous.memories.add("should not be stored"),
      isError(Code.Unauthenticated, (err) => {
        assert.equal(err.reason, "UNAUTHENTICATED");
        assert.equal(err.domain, "memsvc");
        assert.ok(err.message.length > 0);
      }),
    );
    anonymous.close();
  });

  test("a wrong token is UNAUTHENTICATED; the admin token is let in", async () => {
    const wrong = new Memsvc({ baseUrl: server.baseUrl, apiKeyId: owner(), token: "not-the-token" });
    await assert.rejects(wrong.retrieve("anything"), isError(Code.Unauthenticated, (err) => assert.equal(err.reason, "UNAUTHENTICATED")));
    wrong.close();
    const admin = new Memsvc({ baseUrl: server.baseUrl, apiKeyId: owner(), token: ADMIN_TOKEN });
    await admin.settings.update({ enabled: true });
    const { id } = await admin.memories.add("User likes green tea");
    assert.equal((await admin.memories.get(id)).content, "User likes green tea");
    admin.close();
  });

  test("a credential confined to one tenant is PERMISSION_DENIED for another", async () => {
    const admin = new Memsvc({ baseUrl: server.baseUrl, token: ADMIN_TOKEN });
    const alice = owner("alice");
    const created = await admin.services.credentials.createCredential({
      id: `agent-${alice}`,
      permissions: ["read:memory", "write:memory"],
      tenants: [alice],
    });
    assert.match(created.token, /^msk_/);
    const agent = new Memsvc({ baseUrl: server.baseUrl, token: created.token, apiKeyId: alice });
    const { id } = await agent.memories.add("Alice prefers window seats");
    assert.equal((await agent.memories.get(id)).apiKeyId, alice);
    const bob = owner("bob");
    await assert.rejects(
      agent.memories.add("not Alice's to write", { apiKeyId: bob }),
      isError(Code.PermissionDenied, (err) => assert.match(err.message, /tenant|apiKeyId|bob/i)),
    );
    await assert.rejects(agent.settings.get(), isError(Code.PermissionDenied));
    assert.equal((await admin.memories.page({ apiKeyId: bob })).total, 0, "nothing was written for bob");
    agent.close();
    admin.close();
  });

  test("headers given to the client are sent with every call", async () => {
    const memsvc = new Memsvc({ baseUrl: server.baseUrl, headers: { "X-Request-Id": "ts-sdk-request-42" } });
    await assert.rejects(memsvc.settings.get(), isError(Code.Unauthenticated, (err) => assert.equal(err.requestId, "ts-sdk-request-42")));
    memsvc.close();
  });
});

describe("retries and deadlines", () => {
  test("an idempotent call is retried on UNAVAILABLE until the server is up", async () => {
    const port = await freePort();
    const { interceptor, attempts } = counting();
    const memsvc = new Memsvc({
      baseUrl: `http://127.0.0.1:${port}`,
      apiKeyId: owner(),
      timeoutMs: 120_000,
      retry: { maxAttempts: 1000, initialBackoffMs: 50, maxBackoffMs: 200 },
      interceptors: [interceptor],
    });
    const pending = memsvc.retrieve("anything at all");
    let late: MemsvcServer | undefined;
    try {
      late = await startServer({ port });
      const result = await pending;
      assert.deepEqual(result.memories, []);
      assert.ok(attempts.length > 1, `${attempts.length} attempts`);
      assert.ok(attempts.every((name) => name === "Retrieve"));
    } finally {
      memsvc.close();
      await late?.stop();
    }
  });

  test("a write is sent once: UNAVAILABLE after one attempt", async () => {
    const port = await freePort();
    const { interceptor, attempts } = counting();
    const memsvc = new Memsvc({
      baseUrl: `http://127.0.0.1:${port}`,
      apiKeyId: owner(),
      retry: { maxAttempts: 5, initialBackoffMs: 10 },
      interceptors: [interceptor],
    });
    await assert.rejects(memsvc.memories.add("never sent twice"), isError(Code.Unavailable));
    assert.deepEqual(attempts, ["CreateMemory"]);
    memsvc.close();
  });

  test("retry: false sends an idempotent call once too", async () => {
    const port = await freePort();
    const { interceptor, attempts } = counting();
    const memsvc = new Memsvc({ baseUrl: `http://127.0.0.1:${port}`, apiKeyId: owner(), retry: false, interceptors: [interceptor] });
    await assert.rejects(memsvc.memories.page(), isError(Code.Unavailable));
    assert.deepEqual(attempts, ["ListMemories"]);
    memsvc.close();
  });

  test("the deadline ends the retries with DEADLINE_EXCEEDED", async () => {
    const port = await freePort();
    const { interceptor, attempts } = counting();
    const memsvc = new Memsvc({
      baseUrl: `http://127.0.0.1:${port}`,
      apiKeyId: owner(),
      retry: { maxAttempts: 10_000, initialBackoffMs: 20, maxBackoffMs: 40 },
      interceptors: [interceptor],
    });
    await assert.rejects(memsvc.retrieve("anything", { timeoutMs: 400 }), isError(Code.DeadlineExceeded));
    assert.ok(attempts.length > 1, `${attempts.length} attempts`);
    memsvc.close();
  });

  test("invalid client options are refused at once", () => {
    assert.throws(() => new Memsvc({ baseUrl: "127.0.0.1:50051" }), TypeError);
    assert.throws(() => new Memsvc({ token: " padded " }), TypeError);
    assert.throws(() => new Memsvc({ timeoutMs: -1 }), RangeError);
    assert.throws(() => new Memsvc({ retry: { maxAttempts: 0 } }), RangeError);
  });
});

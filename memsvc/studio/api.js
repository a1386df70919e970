// The studio's only way to the server: the documented REST routes on this origin, with the
// bearer token the person signed in with (kept for this tab's session only).

const TOKEN_KEY = "memsvc.studio.token";

export class ApiError extends Error {
  // A refused or failed call: the HTTP status and the server's own message.
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
    this.reason = body?.details?.find((d) => d.reason)?.reason || "";
    this.metadata = body?.details?.find((d) => d.metadata)?.metadata || {};
  }
}

export function getToken() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(token) {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

function url(path, query) {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null && v !== "") params.set(k, String(v));
  }
  const qs = params.toString();
  return qs ? `${path}?${qs}` : path;
}

function headers() {
  const out = { "content-type": "application/json" };
  const token = getToken();
  if (token) out.authorization = `Bearer ${token}`;
  return out;
}

async function failure(resp) {
  const text = await resp.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch { body = null; }
  const message = body?.message || text || resp.statusText || `HTTP ${resp.status}`;
  return new ApiError(resp.status, message, body);
}

async function send(method, path, { query, body, signal } = {}) {
  let resp;
  try {
    resp = await fetch(url(path, query), {
      method, headers: headers(), body: body === undefined ? undefined : JSON.stringify(body), signal,
    });
  } catch (err) {
    throw new ApiError(0, `the server could not be reached (${err.message})`, null);
  }
  if (!resp.ok) throw await failure(resp);
  return resp;
}

export async function api(method, path, options) {
  const resp = await send(method, path, options);
  const text = await resp.text();
  return text ? JSON.parse(text) : {};
}

// A server-streaming route arrives as one JSON array whose elements come as they are sent;
// each complete element is handed to onMessage as soon as its closing brace arrives. Resolves
// when the server ends the array; rejects with an ApiError when the call is refused, or with
// status 0 when the connection drops or `signal` aborts it.
export async function stream(method, path, body, onMessage, { query, signal } = {}) {
  const resp = await send(method, path, { body, query, signal });
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  const splitter = new ArraySplitter(onMessage);
  try {
    for (;;) {
      let chunk;
      try {
        chunk = await reader.read();
      } catch (err) {
        throw new ApiError(0, `the stream was cut (${err.message})`, null);
      }
      if (chunk.done) break;
      splitter.feed(decoder.decode(chunk.value, { stream: true }));
    }
  } catch (err) {
    reader.cancel().catch(() => {});
    throw err;
  }
}

// The elements of a JSON array of objects, from its text in pieces of any size: each top-level
// object is parsed once its closing brace arrives. Braces and brackets inside strings (escaped
// quotes and backslashes included) are text, not structure; the array's own "[", "," and "]"
// and the whitespace between elements are skipped.
export class ArraySplitter {
  constructor(onMessage) {
    this.onMessage = onMessage;
    this.depth = 0;
    this.inString = false;
    this.escaped = false;
    this.parts = []; // the pieces of an element that began in an earlier chunk
  }

  feed(text) {
    let start = this.depth > 0 ? 0 : -1;
    for (let i = 0; i < text.length; i += 1) {
      const ch = text[i];
      if (this.depth === 0) {
        if (ch === "{") { this.depth = 1; start = i; }
        continue;
      }
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (ch === "\\") this.escaped = true;
        else if (ch === '"') this.inString = false;
      } else if (ch === '"') this.inString = true;
      else if (ch === "{") this.depth += 1;
      else if (ch === "}" && --this.depth === 0) {
        this.parts.push(text.slice(start, i + 1));
        const whole = this.parts.join("");
        this.parts = [];
        start = -1;
        this.onMessage(JSON.parse(whole));
      }
    }
    if (start >= 0) this.parts.push(text.slice(start));
  }
}

// How long a follower waits before its nth reconnection in a row (then the last, each with
// ±20% jitter so many tabs do not come back in step).
const RETRY_MS = [500, 1000, 2000, 4000, 8000, 15000];
// A stream that lasted this long was healthy: the next failure starts the backoff afresh.
const HEALTHY_MS = 5000;

// Refusals a retry cannot fix (a token refused or not allowed this tenant, a store that keeps
// no history: reason NO_HISTORY): the follower stops and says why. The network, the server's
// 5xx, 408 and 429 are retried.
function isFinal(err) {
  return err.status >= 400 && err.status < 500 && err.status !== 408 && err.status !== 429;
}

// Follows a change feed (GET `path`, a server stream that never ends by itself, whose events
// carry resume tokens): reconnects with the last token received when the stream ends or
// fails (with backoff), so a dropped connection loses nothing and repeats nothing.
// `on.event(e)`: each event but bookmarks; `on.start(resumed)`: the stream (re)started,
// `resumed` false when it starts from now (first time, or the server refused the token: what
// happened meanwhile is unknown); `on.state(name, detail)`: connecting | following |
// reconnecting | stopped. close() ends it for good.
export class Follower {
  constructor(path, query, on) {
    Object.assign(this, { path, query, on, token: "", closed: false, stopped: false, failures: 0 });
    this.controller = null;
    this.timer = null;
  }

  start() { this.run(); return this; }

  close() {
    this.closed = true;
    this.controller?.abort();
    clearTimeout(this.timer);
    this.wake?.();
  }

  async run() {
    while (!this.closed) {
      const resumed = Boolean(this.token);
      const began = Date.now();
      let started = false;
      this.controller = new AbortController();
      this.on.state(this.failures ? "reconnecting" : "connecting", "");
      const receive = (msg) => {
        if (this.closed) return;
        if (!msg.kind) throw new ApiError(0, msg.message || "the stream reported an error", msg);
        if (msg.kind !== "bookmark") this.on.event(msg);
        if (msg.resumeToken) this.token = msg.resumeToken;
        if (!started) { started = true; this.on.state("following", ""); this.on.start(resumed); }
      };
      let detail = "the server ended the stream";
      try {
        await stream("GET", this.path, undefined, receive, { query: { ...this.query, resumeToken: this.token }, signal: this.controller.signal });
      } catch (err) {
        if (this.closed) return;
        if (resumed && !started && err.status === 400 && err.reason !== "NO_HISTORY") {
          this.token = ""; // a position this store did not issue (say, it was replaced): start from now
          continue;
        }
        if (!(err instanceof ApiError)) console.error(err); // a fault of the page's own, not the network's
        if (!(err instanceof ApiError) || isFinal(err)) { this.stop(err); return; }
        detail = err.message;
      }
      if (this.closed) return;
      this.failures = started && Date.now() - began >= HEALTHY_MS ? 1 : this.failures + 1;
      this.on.state("reconnecting", detail);
      await this.pause(RETRY_MS[Math.min(this.failures, RETRY_MS.length) - 1] * (0.8 + Math.random() * 0.4));
    }
  }

  stop(err) {
    this.stopped = true;
    this.on.state("stopped", err.message || String(err));
  }

  pause(ms) {
    return new Promise((resolve) => {
      this.wake = resolve;
      this.timer = setTimeout(resolve, ms);
    });
  }
}

// The name a person knows a credential by (as the server names authors of changes). A
// MEMSVC_API_TOKENS token has the id env:N (its place in that list), which says nothing on
// screen; a stored credential is named by whoever created it (such ids cannot contain ":").
export function credentialName(id) {
  const env = /^env:(\d+)$/.exec(id || "");
  if (env) return `admin (MEMSVC_API_TOKENS token ${env[1]})`;
  return id || "";
}

// Who the token is, and so what the page offers.
export class Caller {
  constructor(answer) {
    this.authRequired = Boolean(answer.authRequired);
    const c = answer.credential || {};
    this.id = c.id || "";
    this.permissions = c.permissions || [];
    this.tenants = c.tenants || [];
    this.characters = Boolean(c.characters);
  }

  can(permission) {
    return this.permissions.includes("admin") || this.permissions.includes(permission);
  }

  get admin() { return this.permissions.includes("admin"); }

  // A call without a token on a server that needs one.
  get anonymous() { return this.authRequired && !this.id && this.permissions.length === 0; }

  get anyTenant() { return this.tenants.includes("*"); }

  // The apiKeyId the page starts with: the token's own when it has exactly one.
  get defaultTenant() { return !this.anyTenant && this.tenants.length ? this.tenants[0] : ""; }

  // The name a person knows the credential by (see credentialName).
  get label() { return credentialName(this.id) || "token"; }

  describe() {
    if (!this.authRequired) return "open server (no token needed): full access";
    if (this.admin) return `${this.label}: full access`;
    return `${this.label}: ${this.permissions.join(", ")}; tenants ${this.tenants.join(", ") || "none"}` +
      (this.characters ? "; character memory" : "");
  }
}

export async function whoAmI() {
  return new Caller(await api("GET", "/api/credentials/me"));
}

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

async function send(method, path, { query, body } = {}) {
  let resp;
  try {
    resp = await fetch(url(path, query), {
      method, headers: headers(), body: body === undefined ? undefined : JSON.stringify(body),
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
// each complete element is handed to onMessage as soon as its closing brace arrives.
export async function stream(method, path, body, onMessage) {
  const resp = await send(method, path, { body });
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  const splitter = new ArraySplitter(onMessage);
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    splitter.feed(decoder.decode(value, { stream: true }));
  }
}

class ArraySplitter {
  constructor(onMessage) {
    this.onMessage = onMessage;
    this.depth = 0;
    this.inString = false;
    this.escaped = false;
    this.current = "";
  }

  feed(text) {
    for (const ch of text) {
      if (this.depth === 0 && ch !== "{") continue; // "[", ",", "]" and whitespace between elements
      this.current += ch;
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (ch === "\\") this.escaped = true;
        else if (ch === '"') this.inString = false;
      } else if (ch === '"') this.inString = true;
      else if (ch === "{") this.depth += 1;
      else if (ch === "}" && --this.depth === 0) {
        this.onMessage(JSON.parse(this.current));
        this.current = "";
      }
    }
  }
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

  // The name a person knows the credential by. A MEMSVC_API_TOKENS token has the id env:N
  // (its place in that list), which says nothing on screen; a stored credential is named by
  // whoever created it (such ids cannot contain ":").
  get label() {
    const env = /^env:(\d+)$/.exec(this.id);
    if (env) return `admin (MEMSVC_API_TOKENS token ${env[1]})`;
    return this.id || "token";
  }

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

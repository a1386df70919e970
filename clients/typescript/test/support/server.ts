/**
 * A real memsvc for the tests: `memsvc serve` from the repository's Python venv, in a child
 * process with a temporary data dir, gRPC only (no Envoy, MCP or metrics). The server
 * reports the port it bound (port 0: a free one) in its `server.started` log line; `start`
 * then calls CheckHealth through the SDK until the server answers, and `stop` ends it.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Memsvc } from "@memsvc/client";

/** The package root (this file runs as dist/test/support/server.js). */
export const PACKAGE_ROOT = fileURLToPath(new URL("../../../", import.meta.url));
/** The venv `./scripts/test.sh` sets up, or MEMSVC_PYTHON. */
export const PYTHON = process.env.MEMSVC_PYTHON ?? join(PACKAGE_ROOT, "..", "..", ".venv", "bin", "python");

export interface StartOptions {
  /** Extra environment of the server, e.g. MEMSVC_API_TOKENS. */
  env?: Record<string, string>;
  /** The gRPC port; default 0 (the server picks a free one and reports it). */
  port?: number;
  /** A token the readiness probe sends (a server started with MEMSVC_API_TOKENS needs one). */
  token?: string;
}

export class MemsvcServer {
  readonly lines: string[] = [];
  port = 0;
  private exited: Promise<number | null>;

  constructor(
    readonly proc: ChildProcess,
    readonly dataDir: string,
  ) {
    this.exited = new Promise((resolve) => proc.once("exit", (code) => resolve(code)));
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** The JSON log entries named `event` written so far. */
  events(event: string): Record<string, unknown>[] {
    return this.lines
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((entry) => entry.event === event);
  }

  /** SIGTERM, SIGKILL after 20 s; then the data dir is removed. */
  async stop(): Promise<void> {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      this.proc.kill("SIGTERM");
      const timer = setTimeout(() => this.proc.kill("SIGKILL"), 20_000);
      await this.exited;
      clearTimeout(timer);
    }
    rmSync(this.dataDir, { recursive: true, force: true });
  }

  /** Resolves with the bound port once `server.started` is logged; rejects if the process exits first. */
  started(timeoutMs: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => fail(new Error(`memsvc did not start in ${timeoutMs} ms`)), timeoutMs);
      const fail = (err: Error) => {
        clearTimeout(timer);
        reject(new Error(`${err.message}; its last output:\n${this.lines.slice(-20).join("\n")}`));
      };
      const check = () => {
        const entry = this.events("server.started")[0];
        if (entry) {
          clearTimeout(timer);
          resolve(entry.grpc_port as number);
        }
      };
      this.proc.stderr!.on("data", check);
      void this.exited.then((code) => fail(new Error(`memsvc exited with ${code} before serving`)));
      check();
    });
  }
}

/** Starts memsvc and waits until it answers a real call. */
export async function startServer(options: StartOptions = {}): Promise<MemsvcServer> {
  const dataDir = mkdtempSync(join(tmpdir(), "memsvc-ts-"));
  // The server reads only what the test gives it: none of the caller's MEMSVC_/MEMORY_ settings.
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !k.startsWith("MEMSVC_") && !k.startsWith("MEMORY_")) env[k] = v;
  }
  Object.assign(env, { HOME: dataDir, MEMSVC_LOG_LEVEL: "INFO", ...options.env });
  const args = [
    "-m", "memsvc", "serve",
    "--no-gateway", "--processes", "1",
    "--grpc-port", String(options.port ?? 0),
    "--metrics-port", "-1", "--mcp-port", "-1",
    "--data-dir", join(dataDir, "data"),
  ];
  const proc = spawn(PYTHON, args, { env, stdio: ["ignore", "ignore", "pipe"] });
  const server = new MemsvcServer(proc, dataDir);
  let partial = "";
  proc.stderr!.setEncoding("utf8");
  proc.stderr!.on("data", (chunk: string) => {
    const parts = (partial + chunk).split("\n");
    partial = parts.pop() ?? "";
    server.lines.push(...parts);
  });
  try {
    server.port = await server.started(90_000);
    await untilServing(server.baseUrl, options.token);
  } catch (err) {
    await server.stop();
    throw err;
  }
  return server;
}

/** Calls CheckHealth until it answers `working` (each attempt bounded; 60 s in all). */
async function untilServing(baseUrl: string, token?: string): Promise<void> {
  const client = new Memsvc({ baseUrl, token, timeoutMs: 5000, retry: { maxAttempts: 5, initialBackoffMs: 50 } });
  const deadline = Date.now() + 60_000;
  try {
    for (;;) {
      try {
        if ((await client.checkHealth()).working) return;
      } catch (err) {
        if (Date.now() > deadline) throw err;
      }
      if (Date.now() > deadline) throw new Error(`memsvc at ${baseUrl} never reported working`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  } finally {
    client.close();
  }
}

/** A loopback port nothing listens on right now (for a server started later, or none at all). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      const port = typeof address === "object" && address ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

let counter = 0;
/** An apiKeyId of the test's own. */
export function owner(prefix = "ts"): string {
  counter += 1;
  return `${prefix}-${process.pid}-${counter}-${Math.random().toString(36).slice(2, 8)}`;
}

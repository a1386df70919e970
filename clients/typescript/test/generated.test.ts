// src/gen/ is what protoc-gen-es makes of proto/ now: regenerated into a temp dir and compared
// (scripts/generate.mjs --check, which runs protoc from the repository's Python venv).
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { PACKAGE_ROOT, PYTHON } from "./support/server.js";

const run = promisify(execFile);

test("the committed generated code matches a fresh generation from proto/", async () => {
  const script = join(PACKAGE_ROOT, "scripts", "generate.mjs");
  const result = await run(process.execPath, [script, "--check"], {
    cwd: PACKAGE_ROOT,
    env: { ...process.env, MEMSVC_PYTHON: PYTHON },
  }).catch((err: { stdout?: string; stderr?: string }) => {
    assert.fail(`src/gen drifted from proto/ (run npm run generate):\n${err.stdout ?? ""}${err.stderr ?? ""}`);
  });
  assert.match(result.stdout, /src\/gen is up to date/);
});

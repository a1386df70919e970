// Every `ts` block of README.md, run as written (node ESM, importing the built package by
// its name) against a real memsvc, in order: the quickstart, history / the change feed /
// asOf, then the AI SDK example.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { promisify } from "node:util";
import { PACKAGE_ROOT, startServer, type MemsvcServer } from "./support/server.js";

const run = promisify(execFile);

/** The README's ```ts blocks, in order. */
function blocks(): string[] {
  const readme = readFileSync(join(PACKAGE_ROOT, "README.md"), "utf8");
  return [...readme.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
}

/** What each block must print (its console.log comments say the same). */
const EXPECTED = [
  ["I prefer dark mode in my editor"],
  [
    "created I live in Lisbon\nsuperseded I live in Amsterdam\n",
    "[ [ 'I live in Lisbon', true ] ]",
    "[ 'I live in Lisbon' ]",
    "true",
    "created I started learning the cello",
    "updated updated I play the cello",
  ],
  ["You like dark mode.", "role: 'user'", "Memory context: I prefer dark mode in my editor", "User always uses vim"],
];

let server: MemsvcServer;

before(async () => {
  server = await startServer();
});

after(async () => {
  await server?.stop();
});

test("the README has the quickstart, the lifecycle example and the AI SDK example", () => {
  const found = blocks();
  assert.equal(found.length, EXPECTED.length);
  assert.match(found[0], /^import \{ Memsvc \} from "@memsvc\/client";/);
  assert.match(found[1], /memories\.watch\(/);
  assert.match(found[2], /from "@memsvc\/client\/ai";/);
});

test("each README block runs as written and prints what it says", async () => {
  for (const [i, code] of blocks().entries()) {
    // Inside the package, so `@memsvc/client` resolves to this package itself (its exports).
    const file = join(PACKAGE_ROOT, "dist", "test", `readme-block-${i}.mjs`);
    writeFileSync(file, code);
    try {
      const { stdout } = await run(process.execPath, [file], {
        env: { ...process.env, MEMSVC_URL: server.baseUrl },
        timeout: 60_000,
      });
      for (const expected of EXPECTED[i]) assert.ok(stdout.includes(expected), `block ${i} printed:\n${stdout}`);
    } finally {
      rmSync(file, { force: true });
    }
  }
});

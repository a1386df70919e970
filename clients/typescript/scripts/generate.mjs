#!/usr/bin/env node
// Regenerates src/gen/ from the repository's protos with protoc-gen-es (TypeScript output).
//
//   node scripts/generate.mjs           write src/gen/ (npm run generate)
//   node scripts/generate.mjs --check   generate into a temp dir, exit 1 when src/gen/ drifted
//
// protoc is grpc_tools.protoc from the repository's Python venv (../../.venv, which
// ./scripts/test.sh and ./scripts/run.sh set up; MEMSVC_PYTHON names another interpreter),
// with the same include path as scripts/generate.py: proto/, protoc's well-known types and
// the google/api + google/rpc protos that the googleapis-common-protos wheel ships. The
// google/api and google/rpc files are generated too: memory.proto imports google.rpc.Status
// and the client reads ErrorInfo and BadRequest from a failed call's status details.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const PACKAGE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const REPO_ROOT = resolve(PACKAGE_ROOT, "..", "..");
const PROTO_ROOT = join(REPO_ROOT, "proto");
const GEN_DIR = join(PACKAGE_ROOT, "src", "gen");
const PLUGIN = join(PACKAGE_ROOT, "node_modules", ".bin", "protoc-gen-es");
const GOOGLE_PROTOS = [
  "google/api/annotations.proto",
  "google/api/http.proto",
  "google/rpc/status.proto",
  "google/rpc/error_details.proto",
];
// import_extension=js: the output is ESM compiled by tsc with NodeNext resolution.
const PLUGIN_OPTIONS = "target=ts,import_extension=js";

function python() {
  const chosen = process.env.MEMSVC_PYTHON ?? join(REPO_ROOT, ".venv", "bin", "python");
  if (!existsSync(chosen)) {
    throw new Error(`no Python at ${chosen}: run ./scripts/test.sh once (it sets up .venv) or set MEMSVC_PYTHON`);
  }
  return chosen;
}

/** protoc's own well-known types and the googleapis-common-protos root, as scripts/generate.py finds them. */
function includeDirs(py) {
  const script = [
    "from importlib import resources",
    "from pathlib import Path",
    "import google.api.annotations_pb2 as annotations",
    "print(resources.files('grpc_tools') / '_proto')",
    "print(Path(annotations.__file__).resolve().parent.parent.parent)",
  ].join("\n");
  const [wkt, googleapis] = execFileSync(py, ["-c", script], { encoding: "utf8" }).trim().split("\n");
  return [PROTO_ROOT, wkt, googleapis];
}

function memsvcProtos() {
  return readdirSync(join(PROTO_ROOT, "memsvc", "v1"))
    .filter((name) => name.endsWith(".proto"))
    .sort()
    .map((name) => `memsvc/v1/${name}`);
}

/** Runs protoc with protoc-gen-es, writing the TypeScript files under `out`. */
export function generate(out) {
  if (!existsSync(PLUGIN)) throw new Error(`${PLUGIN} is missing: run npm ci first`);
  const py = python();
  mkdirSync(out, { recursive: true });
  const args = [
    "-m",
    "grpc_tools.protoc",
    ...includeDirs(py).map((dir) => `-I${dir}`),
    `--plugin=protoc-gen-es=${PLUGIN}`,
    `--es_out=${out}`,
    `--es_opt=${PLUGIN_OPTIONS}`,
    ...memsvcProtos(),
    ...GOOGLE_PROTOS,
  ];
  execFileSync(py, args, { stdio: ["ignore", "inherit", "inherit"] });
}

function files(root) {
  if (!existsSync(root)) return [];
  const found = [];
  const walk = (dir) => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else found.push(relative(root, path));
    }
  };
  walk(root);
  return found;
}

/** What differs between a fresh generation in `fresh` and the committed `committed`. */
export function differences(fresh, committed = GEN_DIR) {
  const a = new Set(files(fresh));
  const b = new Set(files(committed));
  const problems = [];
  for (const rel of [...new Set([...a, ...b])].sort()) {
    if (!b.has(rel)) problems.push(`missing from src/gen: ${rel}`);
    else if (!a.has(rel)) problems.push(`not generated (stale): src/gen/${rel}`);
    else if (!readFileSync(join(fresh, rel)).equals(readFileSync(join(committed, rel)))) {
      problems.push(`differs from a fresh generation: src/gen/${rel}`);
    }
  }
  return problems;
}

/** Generates into a temp dir and returns the drift from src/gen (empty: up to date). */
export function check() {
  const tmp = mkdtempSync(join(tmpdir(), "memsvc-ts-gen-"));
  try {
    generate(tmp);
    return differences(tmp);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

function main() {
  if (process.argv.includes("--check")) {
    const problems = check();
    for (const line of problems) console.log(line);
    if (problems.length) {
      console.log("run: npm run generate");
      process.exit(1);
    }
    console.log("src/gen is up to date");
    return;
  }
  rmSync(GEN_DIR, { recursive: true, force: true });
  generate(GEN_DIR);
  for (const rel of files(GEN_DIR)) console.log(join("src", "gen", rel));
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();

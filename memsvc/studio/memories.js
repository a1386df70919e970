// Memories: live search, type filter, paging, stats, add, inline edit, delete, export and
// import of an owner's memories, "compress old" (Summarize) with a dry run first.

import { api } from "./api.js";
import { attempt, bar, clear, confirmAction, download, field, h, perform, showNote } from "./ui.js";

const TYPES = ["factual", "episodic", "procedural", "semantic"];
const PAGE_SIZE = 20;
const EXPORT_PAGE = 200;
// The fields a memory is restored from: what CreateMemory accepts. keep (no age limit) and
// occurredAt (when it happened) come back with it; id, createdAt and the counters are new.
const RESTORED = ["sessionId", "type", "key", "content", "metadata", "expiresAt", "keep", "occurredAt"];

const state = { panel: null, caller: null, page: 1, timer: null, serial: 0 };

function el(name) { return state.panel.querySelector(`[data-el="${name}"]`); }

function owner() { return el("owner").value.trim(); }

export function reset() {
  if (state.panel) clear(state.panel);
  state.caller = null;
}

export function init(panel, caller) {
  state.panel = panel;
  state.caller = caller;
  state.page = 1;
  const canRead = caller.can("read:memory");
  const canWrite = caller.can("write:memory");
  clear(panel,
    h("h2", { class: "sr-only" }, "Memories"),
    toolbar(caller, canRead),
    canRead ? h("div", { class: "cards", dataset: { el: "stats" } }) : null,
    h("div", { dataset: { el: "status" } }),
    canRead ? listSection() : h("p", { class: "note" }, "This token may not read memories (read:memory), so there is no list."),
    canWrite ? addForm() : null,
    canRead || canWrite ? transferSection(canRead, canWrite) : null,
  );
  if (canRead) load();
}

export function shown() {}

function toolbar(caller, canRead) {
  const ownerInput = h("input", { type: "text", dataset: { el: "owner" }, value: caller.defaultTenant,
    placeholder: caller.anyTenant ? "all owners" : caller.tenants.join(", "), autocomplete: "off" });
  const reload = () => schedule(300);
  ownerInput.addEventListener("input", reload);
  if (!canRead) return h("div", { class: "toolbar" }, field("Owner (apiKeyId)", ownerInput));
  const search = h("input", { type: "search", dataset: { el: "search" }, placeholder: "words in key or content" });
  search.addEventListener("input", reload);
  const type = h("select", { dataset: { el: "type" } }, h("option", { value: "" }, "all types"),
    TYPES.map((t) => h("option", { value: t }, t)));
  type.addEventListener("change", () => schedule(0));
  return h("div", { class: "toolbar" }, field("Owner (apiKeyId)", ownerInput), field("Search", search),
    field("Type", type));
}

function listSection() {
  return h("div", { class: "list" },
    h("table", { class: "memories" },
      h("caption", { class: "sr-only" }, "Memories"),
      h("thead", {}, h("tr", {}, ["Key", "Type", "Content", "Owner", "Updated", "Actions"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", { dataset: { el: "rows" } })),
    h("div", { class: "pager" },
      h("button", { type: "button", dataset: { el: "prev" }, onclick: () => { state.page -= 1; load(); } }, "‹ Previous"),
      h("span", { dataset: { el: "page" }, "aria-live": "polite" }),
      h("button", { type: "button", dataset: { el: "next" }, onclick: () => { state.page += 1; load(); } }, "Next ›")));
}

// Typing waits for a pause (debounced); a new filter replaces any reload still waiting, so
// one change gives one listing.
function schedule(delay) {
  clearTimeout(state.timer);
  state.timer = setTimeout(() => { state.page = 1; load(); }, delay);
}

async function load() {
  const rowsEl = el("rows");
  if (!rowsEl) return;
  clearTimeout(state.timer);
  const serial = ++state.serial;
  const query = { apiKeyId: owner(), q: el("search").value.trim(), type: el("type").value, limit: PAGE_SIZE, page: state.page };
  const answer = await attempt(el("status"), () => api("GET", "/api/memory", { query }));
  if (serial !== state.serial) return; // a newer listing was asked for meanwhile
  if (!answer) { clear(rowsEl); return; }
  renderStats(answer.stats || {});
  clear(rowsEl, answer.data.length ? answer.data.map(row) :
    h("tr", {}, h("td", { colspan: 6, class: "empty" }, "No memories match.")));
  const pages = Math.max(1, answer.totalPages || 1);
  el("page").textContent = `Page ${answer.page} of ${pages} · ${answer.total} in all`;
  el("prev").disabled = state.page <= 1;
  el("next").disabled = state.page >= pages;
}

function renderStats(stats) {
  const rate = typeof stats.hitRate === "number" ? stats.hitRate : 0;
  const card = (label, value, extra) => h("div", { class: "card" }, h("div", { class: "card-label" }, label),
    h("div", { class: "card-value" }, value), extra || null);
  clear(el("stats"),
    card("Total entries", String(stats.total ?? 0)),
    card("Tokens used", String(stats.tokensUsed ?? 0)),
    card("Cache hit rate", `${(rate * 100).toFixed(1)}%`, bar(rate, "cache hit rate")));
}

function row(m) {
  const canWrite = state.caller.can("write:memory");
  const tr = h("tr", { dataset: { id: m.id } },
    h("td", { class: "key" }, m.key || "—"),
    h("td", {}, m.type),
    h("td", { class: "content" }, m.content),
    h("td", {}, m.apiKeyId + (m.sessionId ? ` / ${m.sessionId}` : "")),
    h("td", { class: "when" }, (m.updatedAt || "").replace("T", " ").slice(0, 19)),
    h("td", { class: "actions" }, canWrite ? [
      h("button", { type: "button", "aria-label": `Edit memory ${m.key || m.id}`, onclick: () => edit(tr, m) }, "Edit"),
      h("button", { type: "button", class: "danger", "aria-label": `Delete memory ${m.key || m.id}`,
        onclick: (ev) => remove(m, ev.currentTarget) }, "Delete"),
    ] : "read only"));
  return tr;
}

function edit(tr, m) {
  const key = h("input", { type: "text", value: m.key || "", "aria-label": "Key" });
  const type = h("select", { "aria-label": "Type" }, TYPES.map((t) => h("option", { value: t, selected: t === m.type }, t)));
  const content = h("textarea", { rows: 3, "aria-label": "Content" }, m.content);
  const save = async (ev) => {
    const body = { key: key.value, type: type.value, content: content.value };
    const done = await perform(el("status"), () => api("PUT", `/api/memory/${encodeURIComponent(m.id)}`, { body }),
      { control: ev.currentTarget });
    if (done) { showNote(el("status"), "Memory saved."); load(); }
  };
  clear(tr, h("td", {}, key), h("td", {}, type), h("td", { class: "content" }, content),
    h("td", {}, m.apiKeyId), h("td", {}, ""),
    h("td", { class: "actions" }, h("button", { type: "button", class: "primary", onclick: save }, "Save"),
      h("button", { type: "button", onclick: () => tr.replaceWith(row(m)) }, "Cancel")));
  content.focus();
}

async function remove(m, control) {
  const ok = await confirmAction("Delete this memory?", "It is removed with its vectors; this cannot be undone.",
    [`${m.key || "(no key)"}: ${m.content.slice(0, 120)}`]);
  if (!ok) return;
  const done = await perform(el("status"), () => api("DELETE", `/api/memory/${encodeURIComponent(m.id)}`),
    { control, pending: "Deleting…" });
  if (done) { showNote(el("status"), "Memory deleted."); load(); }
}

function addForm() {
  const key = h("input", { type: "text", name: "key", autocomplete: "off", placeholder: "optional; same key = update" });
  const content = h("textarea", { name: "content", rows: 2, required: true });
  const type = h("select", { name: "type" }, TYPES.map((t) => h("option", { value: t, selected: t === "factual" }, t)));
  const form = h("form", { class: "add", dataset: { el: "add" } },
    h("h3", {}, "Add a memory"),
    h("div", { class: "row" }, field("Key", key), field("Type", type)),
    field("Content", content),
    h("button", { type: "submit", class: "primary" }, "Add memory"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const body = { apiKeyId: owner(), type: type.value, content: content.value };
    if (key.value.trim()) body.key = key.value.trim();
    const done = await perform(el("status"), () => api("POST", "/api/memory", { body }), { control: ev.submitter });
    if (done) { showNote(el("status"), done.created === false ? "Memory updated (same key)." : "Memory added."); form.reset(); load(); }
  });
  return form;
}

function transferSection(canRead, canWrite) {
  const file = h("input", { type: "file", accept: "application/json,.json", dataset: { el: "import-file" } });
  file.addEventListener("change", () => { if (file.files[0]) importFile(file.files[0]).finally(() => { file.value = ""; }); });
  const days = h("input", { type: "number", min: 1, max: 365, value: 30, dataset: { el: "older-days" } });
  return h("div", { class: "transfer" },
    h("h3", {}, "Export, import, compress"),
    h("div", { class: "row" },
      canRead ? h("button", { type: "button", onclick: exportAll }, "Export owner as JSON") : null,
      canWrite ? field("Import a JSON export", file, "restored into the owner named in the file, up to 1000 memories per call") : null),
    canWrite ? h("div", { class: "row" }, field("Compress memories older than (days)", days),
      h("button", { type: "button", onclick: compressOld }, "Compress old…")) : null,
    h("div", { dataset: { el: "transfer-status" } }));
}

async function exportAll(ev) {
  const control = ev.currentTarget;
  const status = el("transfer-status");
  const who = owner();
  if (!who) { showNote(status, "Name the owner (apiKeyId) to export.", "error"); return; }
  const memories = await perform(status, async () => {
    const out = [];
    for (let page = 1; ; page += 1) {
      const answer = await api("GET", "/api/memory", { query: { apiKeyId: who, limit: EXPORT_PAGE, page } });
      out.push(...answer.data);
      if (page >= (answer.totalPages || 1)) return out;
    }
  }, { control, pending: "Exporting…" });
  if (!memories) return;
  const doc = { format: "memsvc.memories.v1", apiKeyId: who, exportedAt: new Date().toISOString(), memories };
  download(`memories-${who}.json`, JSON.stringify(doc, null, 2));
  showNote(status, `Exported ${memories.length} memories of ${who}.`);
}

// Each call of POST /api/memory/batch restores up to this many memories: the server's limit
// per CreateMemories call (memsvc.core.memories.MAX_BATCH_ITEMS).
const IMPORT_BATCH = 1000;

function restoredBody(doc, m) {
  const body = { apiKeyId: doc.apiKeyId };
  for (const k of RESTORED) if (m[k] !== undefined && m[k] !== null && m[k] !== "") body[k] = m[k];
  return body;
}

// The memories are restored in the order of the file, IMPORT_BATCH per call (each call one
// transaction on the server). A memory the server refuses is reported and the others are
// still restored; a call refused whole (no permission, say) stops the import there.
async function importFile(file) {
  const status = el("transfer-status");
  let doc;
  try {
    doc = JSON.parse(await file.text());
  } catch (err) {
    showNote(status, `That file is not JSON: ${err.message}`, "error");
    return;
  }
  if (!doc || !Array.isArray(doc.memories) || typeof doc.apiKeyId !== "string") {
    showNote(status, "That file is not a memsvc memories export (it needs apiKeyId and memories).", "error");
    return;
  }
  const total = doc.memories.length;
  let restored = 0;
  const refused = [];
  const done = await perform(status, async () => {
    for (let start = 0; start < total; start += IMPORT_BATCH) {
      const memories = doc.memories.slice(start, start + IMPORT_BATCH).map((m) => restoredBody(doc, m));
      const answer = await api("POST", "/api/memory/batch", { body: { memories } });
      answer.results.forEach((r, i) => { if (!r.success) refused.push({ index: start + i, error: r.error }); });
      restored += answer.storedCount;
      showNote(status, `Importing… ${start + memories.length} of ${total}`);
    }
    return true;
  }, { control: el("import-file"), pending: "Importing…" });
  if (done && !refused.length) showNote(status, `Imported ${restored} memories into ${doc.apiKeyId}.`);
  else if (done) {
    showNote(status, `Imported ${restored} of ${total} memories into ${doc.apiKeyId}; ${refused.length} refused.`, "error");
    status.append(h("ul", {}, ...refused.slice(0, 20).map((r) =>
      h("li", {}, `memory ${r.index + 1}: ${r.error?.message || "refused"}`))));
  } else status.append(h("p", { class: "note" }, `${restored} of ${total} were imported before the refusal.`));
  load();
}

async function compressOld(ev) {
  const control = ev.currentTarget;
  const status = el("transfer-status");
  const who = owner();
  if (!who) { showNote(status, "Name the owner (apiKeyId) whose old memories to compress.", "error"); return; }
  const body = { apiKeyId: who, olderThanDays: Number(el("older-days").value), dryRun: true };
  const preview = await perform(status, () => api("POST", "/api/memory/summarize", { body }),
    { control, pending: "Looking for old memories…" });
  if (!preview) return;
  if (!preview.candidates.length) { showNote(status, "Nothing is old enough to compress."); return; }
  const items = preview.candidates.map((c) => `${c.key || c.id} (${c.type}, ${c.tokens} tokens)`);
  const ok = await confirmAction(`Compress ${items.length} memories into one summary?`,
    `About ${preview.tokensSaved} tokens saved; the originals are replaced by the summary.`, items);
  if (!ok) { showNote(status, "Nothing was compressed."); return; }
  const done = await perform(status, () => api("POST", "/api/memory/summarize", { body: { ...body, dryRun: false } }),
    { control, pending: "Compressing…" });
  if (done) { showNote(status, `Compressed ${done.deletedCount} memories into ${done.summaryIds.length} summary.`); load(); }
}

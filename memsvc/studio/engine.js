// Engine: the status of each part with its reason, reindex with live progress, the
// embedding source, the Qdrant card and the rerank card. Every route here needs admin.

import { api, stream } from "./api.js";
import { attempt, clear, confirmAction, field, h, indicator, perform, showNote } from "./ui.js";

const SOURCES = ["auto", "remote", "static", "transformers"];
// The collection the server uses when none is chosen (memsvc.core.settings.qdrant.
// DEFAULT_COLLECTION; a test checks they agree): the reference API's name, kept so that a
// Qdrant it filled is found. The field shows it as the default it is, empty with this name
// as its placeholder, not prefilled as if someone had typed another product's name.
const DEFAULT_COLLECTION = "omniroute_memory";
const state = { panel: null, running: false };

function el(name) { return state.panel.querySelector(`[data-el="${name}"]`); }

export function reset() { if (state.panel) clear(state.panel); }

export function init(panel, caller) {
  state.panel = panel;
  if (!caller.admin) {
    clear(panel, h("p", { class: "note" }, "The engine's status and settings need an admin token; this one is not."));
    return;
  }
  clear(panel, h("h2", { class: "sr-only" }, "Engine"),
    h("div", { class: "card wide" }, h("div", { class: "card-head" }, h("h3", {}, "Status"),
      h("button", { type: "button", onclick: refresh }, "Refresh")),
      h("div", { class: "indicators", dataset: { el: "indicators" } }), h("div", { dataset: { el: "status-msg" } })),
    h("div", { class: "grid" }, settingsCard(), reindexCard(), qdrantCard(), rerankCard()));
  refresh();
}

export function shown() { if (state.panel && el("indicators")) refresh(); }

async function refresh() {
  const [status, settings, qdrant] = await Promise.all([
    attempt(el("status-msg"), () => api("GET", "/api/memory/engine-status")),
    attempt(el("settings-msg"), () => api("GET", "/api/settings/memory")),
    attempt(el("qdrant-msg"), () => api("GET", "/api/settings/qdrant")),
  ]);
  if (status) renderStatus(status);
  if (settings) { fillSettings(settings); fillRerank(settings); }
  if (qdrant) fillQdrant(qdrant);
}

// Which state each part is in (see ui.indicator): a feature switched off or an embedding
// source not chosen (or still loading) is grey, and so is the vector store while there is
// nothing to embed with; red only for what is set up and failing.
function renderStatus(s) {
  const e = s.embedding || {}, v = s.vectorStore || {}, q = s.qdrant || {}, r = s.rerank || {}, k = s.keyword || {};
  const waiting = ["none", "not_loaded", "loading"].includes(e.state);
  const embeddings = e.available ? "ok" : waiting ? "neutral" : "bad";
  const switchable = (enabled, working) => (!enabled ? "neutral" : working ? "ok" : "bad");
  clear(el("indicators"),
    indicator(k.available ? "ok" : "bad", "Keyword index", k.reason || k.backend),
    indicator(embeddings, "Embeddings", e.reason || [e.source, e.model, e.dimensions ? `${e.dimensions} dims` : ""].filter(Boolean).join(" · ")),
    indicator(v.available ? "ok" : embeddings === "neutral" ? "neutral" : "bad", "Vector store",
      v.reason || `${v.backend} · ${v.rowCount} vectors · ${v.needsReindex} need reindex`),
    indicator(switchable(q.enabled, q.healthy), "Qdrant", q.enabled ? (q.error || `healthy · ${q.latencyMs} ms`) : "disabled"),
    indicator(switchable(r.enabled, r.available), "Rerank", r.enabled ? (r.reason || `${r.provider} ${r.model}`) : (r.reason || "disabled")));
}

function settingsCard() {
  const enabled = h("input", { type: "checkbox", dataset: { el: "enabled" } });
  const source = h("select", { dataset: { el: "source" } }, SOURCES.map((s) => h("option", { value: s }, s)));
  const baseUrl = h("input", { type: "url", dataset: { el: "base-url" }, placeholder: "https://… (remote source)" });
  const model = h("input", { type: "text", dataset: { el: "model-id" }, placeholder: "model id (remote source)" });
  const form = h("form", { class: "card", dataset: { el: "settings-form" } }, h("h3", {}, "Memory and embeddings"),
    h("label", { class: "switch" }, enabled, " Memory enabled (retrieval, injection, extraction)"),
    field("Embedding source", source), field("Remote base URL", baseUrl), field("Remote model", model),
    h("button", { type: "submit", class: "primary" }, "Save"), h("div", { dataset: { el: "settings-msg" } }));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const body = { enabled: enabled.checked, embeddingSource: source.value };
    if (baseUrl.value.trim()) body.customBaseUrl = baseUrl.value.trim();
    if (model.value.trim()) body.customModelId = model.value.trim();
    const saved = await perform(el("settings-msg"), () => api("PUT", "/api/settings/memory", { body }), { control: ev.submitter });
    if (saved) { fillSettings(saved, true); fillRerank(saved); showNote(el("settings-msg"), "Settings saved."); refresh(); }
  });
  return keepsEdits(form);
}

// A form the person has changed since it was last filled keeps their edits: the refresh
// that follows every save, reindex or tab switch answers later than a person types, and
// must not put the stored values back under their hands. A save's own answer fills its
// form always (`force`), which makes it untouched again.
function keepsEdits(form) {
  const edited = () => { form.dataset.edited = "true"; };
  form.addEventListener("input", edited);
  form.addEventListener("change", edited);
  return form;
}

function fillForm(name, force, fill) {
  const form = el(name);
  if (!force && form.dataset.edited === "true") return;
  fill();
  delete form.dataset.edited;
}

function fillSettings(s, force = false) {
  fillForm("settings-form", force, () => {
    el("enabled").checked = Boolean(s.enabled);
    el("source").value = s.embeddingSource;
    el("base-url").value = s.customBaseUrl || "";
    el("model-id").value = s.customModelId || "";
  });
}

function fillRerank(s, force = false) {
  fillForm("rerank-form", force, () => {
    el("rerank-enabled").checked = Boolean(s.rerankEnabled);
    el("rerank-model").value = s.rerankProviderModel || "";
  });
}

function reindexCard() {
  const force = h("input", { type: "checkbox", dataset: { el: "force" } });
  return h("div", { class: "card" }, h("h3", {}, "Reindex"),
    h("label", { class: "switch" }, force, " Re-embed every memory (not only those missing a vector)"),
    h("button", { type: "button", class: "primary", dataset: { el: "reindex" }, onclick: reindex }, "Reindex now"),
    h("progress", { max: 1, value: 0, dataset: { el: "progress" }, "aria-label": "reindex progress" }),
    h("p", { dataset: { el: "progress-text" }, "aria-live": "polite" }, "idle"),
    h("div", { dataset: { el: "reindex-msg" } }));
}

async function reindex() {
  if (state.running) return;
  state.running = true;
  const bar = el("progress"), text = el("progress-text");
  let total = 0, last = null;
  const done = await perform(el("reindex-msg"), () => stream("POST", "/api/memory/reindex", { force: el("force").checked }, (m) => {
    last = m;
    if (m.started) total = m.pending;
    const processed = m.processed || 0;
    bar.max = Math.max(1, total);
    bar.value = Math.min(processed, bar.max);
    text.textContent = `${m.state || "running"} · ${processed} of ${total} · ${m.errors} errors` +
      (m.ratePerSecond ? ` · ${m.ratePerSecond.toFixed(1)}/s` : "") + (m.error ? ` · ${m.error}` : "");
  }).then(() => true), { control: el("reindex"), pending: "Reindexing…" });
  state.running = false;
  if (done && last) {
    if (last.state === "done") bar.value = bar.max;
    showNote(el("reindex-msg"), last.state === "done" ? `Reindexed ${last.processed} memories.` :
      `Reindex ended: ${last.state}${last.error ? ` (${last.error})` : ""}`, last.state === "done" ? "note" : "error");
    refresh();
  }
}

function qdrantCard() {
  const enabled = h("input", { type: "checkbox", dataset: { el: "q-enabled" } });
  const host = h("input", { type: "text", dataset: { el: "q-host" }, autocomplete: "off" });
  const port = h("input", { type: "number", min: 1, max: 65535, dataset: { el: "q-port" } });
  const collection = h("input", { type: "text", dataset: { el: "q-collection" }, autocomplete: "off",
    placeholder: `default: ${DEFAULT_COLLECTION}` });
  const key = h("input", { type: "password", dataset: { el: "q-key" }, autocomplete: "new-password" });
  const query = h("input", { type: "text", dataset: { el: "q-query" }, placeholder: "a test query" });
  const days = h("input", { type: "number", min: 1, max: 365, value: 30, dataset: { el: "q-days" } });
  const form = h("form", { class: "card", dataset: { el: "qdrant-form" } }, h("h3", {}, "Qdrant"),
    h("label", { class: "switch" }, enabled, " Use Qdrant as the vector store"),
    h("div", { class: "row" }, field("Host", host), field("Port", port)),
    field("Collection", collection, "leave empty for the default collection"), field("API key", key, "write-only; leave empty to keep the stored key"),
    h("div", { class: "row" }, h("button", { type: "submit", class: "primary" }, "Save"),
      h("button", { type: "button", onclick: testConnection }, "Test connection")),
    h("div", { class: "row" }, field("Test search", query), h("button", { type: "button", onclick: testSearch }, "Search")),
    h("div", { class: "row" }, field("Clean up points older than (days)", days),
      h("button", { type: "button", class: "danger", onclick: cleanup }, "Clean up…")),
    h("div", { dataset: { el: "qdrant-msg" } }));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const body = { enabled: enabled.checked, host: host.value.trim(), port: Number(port.value), collection: collection.value.trim() || DEFAULT_COLLECTION };
    if (key.value) body.apiKey = key.value;
    const saved = await perform(el("qdrant-msg"), () => api("PUT", "/api/settings/qdrant", { body }), { control: ev.submitter });
    if (saved) { fillQdrant(saved, true); key.value = ""; showNote(el("qdrant-msg"), "Qdrant settings saved."); refresh(); }
  });
  return keepsEdits(form);
}

function fillQdrant(q, force = false) {
  fillForm("qdrant-form", force, () => {
    el("q-enabled").checked = Boolean(q.enabled);
    el("q-host").value = q.host || "";
    el("q-port").value = q.port || "";
    el("q-collection").value = q.collection === DEFAULT_COLLECTION ? "" : q.collection || "";
  });
  el("q-key").placeholder = q.hasApiKey ? `stored: ${q.apiKeyMasked}` : "none stored";
}

async function testConnection(ev) {
  const health = await perform(el("qdrant-msg"), () => api("GET", "/api/settings/qdrant/health"),
    { control: ev.currentTarget, pending: "Testing the connection…" });
  if (!health) return;
  showNote(el("qdrant-msg"), health.ok ? `Connected (${health.mode}) in ${health.latencyMs.toFixed(0)} ms; collection ` +
    `${health.collectionExists ? `exists with ${health.pointsCount} points` : "does not exist yet"}.` :
    `Not reachable: ${health.error}`, health.ok ? "note" : "error");
}

async function testSearch(ev) {
  const answer = await perform(el("qdrant-msg"), () => api("POST", "/api/settings/qdrant/search", { body: { query: el("q-query").value } }),
    { control: ev.currentTarget, pending: "Searching…" });
  if (!answer) return;
  clear(el("qdrant-msg"), h("p", {}, `${answer.results.length} hits in ${answer.latencyMs} ms`),
    h("ol", {}, answer.results.map((r) => h("li", {}, `${r.score.toFixed(3)} · ${r.apiKeyId} · ${r.content}`))));
}

async function cleanup(ev) {
  const control = ev.currentTarget;
  const days = Number(el("q-days").value);
  const ok = await confirmAction("Clean up Qdrant?", `Deletes the Qdrant points of memories older than ${days} days.`);
  if (!ok) return;
  const done = await perform(el("qdrant-msg"), () => api("POST", "/api/settings/qdrant/cleanup", { body: { retentionDays: days } }),
    { control, pending: "Cleaning up…" });
  if (done) showNote(el("qdrant-msg"), `Removed ${done.deletedCount} points.`);
}

function rerankCard() {
  const enabled = h("input", { type: "checkbox", dataset: { el: "rerank-enabled" } });
  const model = h("input", { type: "text", dataset: { el: "rerank-model" }, placeholder: "provider/model" });
  const form = h("form", { class: "card", dataset: { el: "rerank-form" } }, h("h3", {}, "Rerank"),
    h("label", { class: "switch" }, enabled, " Rerank retrieved memories"),
    field("Rerank provider/model", model),
    h("button", { type: "submit", class: "primary" }, "Save"), h("div", { dataset: { el: "rerank-msg" } }));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const body = { rerankEnabled: enabled.checked, rerankProviderModel: model.value.trim() || null };
    const saved = await perform(el("rerank-msg"), () => api("PUT", "/api/settings/memory", { body }), { control: ev.submitter });
    if (saved) { fillRerank(saved, true); fillSettings(saved); showNote(el("rerank-msg"), "Rerank settings saved."); refresh(); }
  });
  return keepsEdits(form);
}

// Playground: a dry run of retrieval (retrieve-preview) for a query, strategy and token
// budget, with each result's score, tier, tokens, vector and keyword scores, and how the
// engine resolved the request (embedding source, vector store, fallback and why).

import { api } from "./api.js";
import { bar, clear, field, h, perform } from "./ui.js";

const STRATEGIES = [["", "settings default"], ["hybrid", "hybrid"], ["semantic", "semantic"], ["recent", "recent"], ["exact", "exact"]];
const state = { panel: null };

function el(name) { return state.panel.querySelector(`[data-el="${name}"]`); }

export function reset() { if (state.panel) clear(state.panel); }

export function shown() {}

export function init(panel, caller) {
  state.panel = panel;
  if (!caller.can("read:memory")) {
    clear(panel, h("p", { class: "note" }, "This token may not read memories (read:memory), so it cannot simulate retrieval."));
    return;
  }
  const ownerInput = h("input", { type: "text", dataset: { el: "owner" }, value: caller.defaultTenant, autocomplete: "off",
    required: !caller.admin });
  const query = h("input", { type: "text", dataset: { el: "query" }, required: true, placeholder: "what the user asks" });
  const strategy = h("select", { dataset: { el: "strategy" } }, STRATEGIES.map(([v, t]) => h("option", { value: v }, t)));
  const budget = h("input", { type: "number", min: 1, max: 16000, placeholder: "settings default", dataset: { el: "budget" } });
  const form = h("form", { class: "playground" },
    h("h2", { class: "sr-only" }, "Playground"),
    h("div", { class: "toolbar" }, field("Owner (apiKeyId)", ownerInput), field("Query", query),
      field("Strategy", strategy), field("Token budget", budget)),
    h("button", { type: "submit", class: "primary" }, "Simulate"));
  form.addEventListener("submit", (ev) => { ev.preventDefault(); simulate(ev.submitter); });
  clear(panel, form, h("div", { dataset: { el: "status" } }),
    h("div", { class: "split" }, h("div", { class: "scroll", dataset: { el: "results" } }), h("aside", { class: "resolution", dataset: { el: "resolution" } })));
}

// The results of an earlier run go the moment a new one starts: what the panel shows is
// always the answer to the query in the form.
async function simulate(control) {
  clear(el("results"));
  clear(el("resolution"));
  const body = { query: el("query").value, apiKeyId: el("owner").value.trim() };
  if (el("strategy").value) body.strategy = el("strategy").value;
  if (el("budget").value) body.maxTokens = Number(el("budget").value);
  const answer = await perform(el("status"), () => api("POST", "/api/memory/retrieve-preview", { body }),
    { control, pending: "Simulating…" });
  if (!answer) return;
  renderResults(answer);
  renderResolution(answer.resolution || {});
}

function renderResults(answer) {
  const rows = answer.memories.map((m, i) => h("tr", { dataset: { id: m.id } },
    h("td", {}, String(i + 1)),
    h("td", { class: "content" }, h("strong", {}, m.key || ""), m.key ? " " : "", m.content),
    h("td", {}, m.score.toFixed(4)),
    h("td", {}, h("span", { class: "tier" }, m.tier)),
    h("td", {}, String(m.tokens)),
    h("td", {}, bar(m.vecScore, "vector score")),
    h("td", {}, bar(m.ftsScore, "keyword score"))));
  clear(el("results"),
    h("p", { class: "budget" }, `${answer.memories.length} ${answer.memories.length === 1 ? "result" : "results"} · ${answer.totalTokensUsed} of ${answer.budgetMaxTokens} tokens`),
    h("table", { class: "results" },
      h("caption", { class: "sr-only" }, "Ranked results"),
      h("thead", {}, h("tr", {}, ["#", "Memory", "Score", "Tier", "Tokens", "Vector", "Keyword"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: 7, class: "empty" }, "Nothing would be retrieved.")))));
}

function renderResolution(r) {
  const item = (label, value) => [h("dt", {}, label), h("dd", { dataset: { name: label } }, value === "" || value === undefined ? "—" : String(value))];
  clear(el("resolution"), h("h3", {}, "Resolution"),
    h("dl", {}, item("Embedding source", r.embeddingSource), item("Embedding model", r.embeddingModel),
      item("Vector store", r.vectorStore), item("Strategy used", r.strategyUsed),
      item("Rerank applied", r.rerankApplied ? "yes" : "no"), item("Fallback", r.fallbackReason || "none")));
}

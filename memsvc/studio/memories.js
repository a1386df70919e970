// Memories: live search, type filter, paging, stats, add, inline edit, delete, export and
// import of an owner's memories, "compress old" (Summarize) with a dry run first. The list
// follows the change feed (WatchMemories): after it lists an owner's memories it applies each
// change as it commits, in place; each memory's history opens in a dialog.

import { api, credentialName, Follower } from "./api.js";
import { attempt, bar, clear, confirmAction, download, field, h, perform, showError, showNote } from "./ui.js";

const TYPES = ["factual", "episodic", "procedural", "semantic"];
const PAGE_SIZE = 20;
const EXPORT_PAGE = 200;
// The fields a memory is restored from: what CreateMemory accepts. keep (no age limit) and
// occurredAt (when it happened) come back with it; id, createdAt and the counters are new.
const RESTORED = ["sessionId", "type", "key", "content", "metadata", "expiresAt", "keep", "occurredAt"];
// A burst of changes asks for the stats and the total once, this long after its last change.
const COUNTS_DELAY_MS = 300;

const state = {
  panel: null, caller: null, page: 1, timer: null, serial: 0,
  filters: {}, // what the shown page was listed with (apiKeyId, q, type)
  rows: new Map(), // id -> { m, tr, edit, gone }: the shown page's memories
  replay: null, // changes that arrived while a listing was in flight: applied again on top of it
  fresh: 0, // memories created meanwhile that belong on an earlier page
  follower: null, // the open change feed (api.Follower) and the owner it follows
  followed: null,
  countsTimer: null, countsSerial: 0,
};

function el(name) { return state.panel?.querySelector(`[data-el="${name}"]`) || null; }

function owner() { return el("owner").value.trim(); }

function when(ts) { return (ts || "").replace("T", " ").slice(0, 19); }

function clip(text, n = 160) { return text.length > n ? `${text.slice(0, n - 1)}…` : text; }

export function reset() {
  stopFollowing();
  closeHistory();
  if (state.panel) clear(state.panel);
  state.caller = null;
}

export function init(panel, caller) {
  stopFollowing();
  closeHistory();
  Object.assign(state, { panel, caller, page: 1, filters: {}, replay: null, fresh: 0 });
  state.rows.clear();
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
}

// On screen: list, and follow the changes from there (unless it follows already).
export function shown() {
  if (!el("rows")) return;
  if (state.follower?.stopped) stopFollowing(); // refused before: try again
  if (!state.follower) load();
}

// Left: the change feed closes; the tab lists afresh when it is shown again.
export function hidden() { stopFollowing(); }

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
  const feed = h("span", { class: "feed", dataset: { el: "feed", state: "off" } },
    h("span", { class: "dot", "aria-hidden": "true" }), h("span", { class: "feed-text" }));
  return h("div", { class: "toolbar" }, field("Owner (apiKeyId)", ownerInput), field("Search", search),
    field("Type", type), feed);
}

function listSection() {
  return h("div", { class: "list" },
    h("button", { type: "button", class: "fresh", hidden: true, dataset: { el: "fresh" },
      onclick: () => { state.page = 1; load(); } }),
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

// What the filters on screen ask for.
function inputs() {
  return { apiKeyId: owner(), q: el("search").value.trim(), type: el("type").value };
}

// The filters on screen (a new owner, search, type or page): list them, then follow that
// owner's changes (every tenant the token covers when no owner is named). Another owner
// closes the old feed first. A listing the server refuses opens none; one that could not
// reach the server opens it all the same: it retries until the server is back, then lists.
async function load() {
  if (!el("rows")) return;
  clearTimeout(state.timer); // this listing reads the filters now: a reload still waiting is moot
  if (state.follower && state.followed !== owner()) stopFollowing();
  const listed = await list(inputs());
  if (listed !== true && !retryable(listed)) return;
  if (!state.follower && !state.panel.hidden) follow(state.filters.apiKeyId);
}

function retryable(err) {
  return Boolean(err?.status !== undefined && (err.status === 0 || err.status >= 500 || err.status === 429));
}

// One page, as the server lists it. Changes the feed delivers meanwhile are applied again on
// top of the answer (applying a change twice, or one the answer already has, changes nothing),
// so a change committed while the listing was on its way is not lost under it. Returns true
// once the page is shown, the error when the listing failed, false when a newer one was asked.
// Without `filters`, the shown page's again (the owner followed, whatever is being typed).
async function list(filters = state.filters) {
  const rowsEl = el("rows");
  if (!rowsEl) return false;
  const serial = ++state.serial;
  if (!state.replay) state.replay = [];
  const query = { ...filters, limit: PAGE_SIZE, page: state.page };
  let failure = null;
  const answer = await attempt(el("status"), () => api("GET", "/api/memory", { query }).catch((err) => {
    failure = err;
    throw err;
  }));
  if (serial !== state.serial) return false; // a newer listing was asked for meanwhile
  const replay = state.replay;
  state.replay = null;
  state.filters = filters;
  setFresh(0);
  if (!answer) { state.rows.clear(); clear(rowsEl); return failure; }
  renderStats(answer.stats || {});
  showRows(answer.data);
  renderPager(answer.total);
  for (const event of replay) apply(event);
  if (replay.length) scheduleCounts();
  return true;
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

function renderPager(total) {
  const pages = Math.max(1, Math.ceil(total / PAGE_SIZE));
  el("page").textContent = `Page ${state.page} of ${pages} · ${total} in all`;
  el("prev").disabled = state.page <= 1;
  el("next").disabled = state.page >= pages;
}

// The stats and the total after changes: one small listing (a page of one) with the shown
// filters, asked once a burst of changes is over.
function scheduleCounts() {
  clearTimeout(state.countsTimer);
  state.countsTimer = setTimeout(counts, COUNTS_DELAY_MS);
}

async function counts() {
  if (!el("rows")) return;
  if (state.replay) { scheduleCounts(); return; } // a listing is on its way: count after it
  const serial = ++state.countsSerial;
  const listing = state.serial;
  const answer = await attempt(null, () => api("GET", "/api/memory", { query: { ...state.filters, limit: 1, page: 1 } }));
  if (!answer || serial !== state.countsSerial || listing !== state.serial || !el("rows")) return;
  renderStats(answer.stats || {});
  renderPager(answer.total);
}

// ---- the shown page ----------------------------------------------------------------------

// Draws a listed page. A row being edited stays as it is (what the person typed is theirs)
// while its memory is still on the page; the memory under it is brought up to date.
function showRows(data) {
  const editing = new Map([...state.rows].filter(([, r]) => r.edit));
  state.rows.clear();
  const trs = data.map((m) => {
    const kept = editing.get(m.id);
    if (!kept) return entryFor(m).tr;
    state.rows.set(m.id, kept);
    changedUnder(kept, m);
    return kept.tr;
  });
  // Rows are put in place one by one: a kept row is never taken out of the page (that would
  // take the focus, and the caret, from its editor).
  const rowsEl = el("rows");
  for (const child of [...rowsEl.children]) if (!trs.includes(child)) child.remove();
  trs.forEach((tr, i) => { if (rowsEl.children[i] !== tr) rowsEl.insertBefore(tr, rowsEl.children[i] || null); });
  syncEmpty();
}

function entryFor(m) {
  const entry = { m, tr: row(m), edit: null, gone: false };
  state.rows.set(m.id, entry);
  return entry;
}

function inOrder() {
  return [...el("rows").querySelectorAll("tr[data-id]")].map((tr) => state.rows.get(tr.dataset.id)).filter(Boolean);
}

function syncEmpty() {
  const rowsEl = el("rows");
  const empty = rowsEl.querySelector("tr.none");
  if (state.rows.size && empty) empty.remove();
  if (!state.rows.size && !empty) {
    rowsEl.append(h("tr", { class: "none" }, h("td", { colspan: 6, class: "empty" }, "No memories match.")));
  }
}

// Protobuf's JSON times are RFC 3339 in UTC with 0, 3, 6 or 9 fractional digits: padded to 9
// they sort as text.
function instant(ts) {
  const parts = /^([^.Z]*)(?:\.(\d+))?Z$/.exec(ts || "");
  return parts ? `${parts[1]}.${(parts[2] || "").padEnd(9, "0")}` : ts || "";
}

// The list's order: newest first by createdAt, then by id (as the server sorts).
function before(a, b) {
  const x = instant(a.createdAt);
  const y = instant(b.createdAt);
  return x !== y ? x > y : a.id > b.id;
}

// Whether a memory belongs to the shown list (the server's q: a case-insensitive substring of
// content or key).
function matches(m) {
  const { apiKeyId, q, type } = state.filters;
  if ((apiKeyId && m.apiKeyId !== apiKeyId) || (type && m.type !== type)) return false;
  if (!q) return true;
  const needle = q.toLowerCase();
  return (m.content || "").toLowerCase().includes(needle) || (m.key || "").toLowerCase().includes(needle);
}

function flash(tr) {
  if (!tr) return;
  tr.classList.remove("flash");
  void tr.offsetWidth; // restart the animation
  tr.classList.add("flash");
}

function setFresh(n) {
  state.fresh = n;
  const button = el("fresh");
  if (!button) return;
  button.hidden = n === 0;
  button.textContent = `${n} new ${n === 1 ? "memory" : "memories"} — show`;
}

// ---- the change feed ---------------------------------------------------------------------

const FEED_WORDS = {
  off: "", connecting: "connecting…", following: "following changes", reconnecting: "reconnecting…",
  stopped: "not following changes",
};

function follow(who) {
  state.followed = who;
  state.follower = new Follower("/api/memory/watch", { apiKeyId: who }, {
    event: onEvent,
    // From a fresh position (the first time, or when the server no longer knew the last one):
    // list once more, so a change made between the listing and the feed's start is not missed.
    start: (resumed) => { if (!resumed) list(); },
    state: showFeed,
  }).start();
}

function stopFollowing() {
  state.follower?.close();
  state.follower = null;
  state.followed = null;
  showFeed("off", "");
}

function following() { return Boolean(state.follower && !state.follower.stopped); }

function showFeed(name, detail) {
  const feed = el("feed");
  if (!feed) return;
  feed.dataset.state = name;
  feed.title = detail || (name === "following" ? "changes made anywhere appear here as they happen" : "");
  clear(feed.querySelector(".feed-text"), FEED_WORDS[name]);
}

function onEvent(event) {
  if (state.replay) state.replay.push(event);
  apply(event);
  scheduleCounts();
  if (event.memoryId && event.memoryId === shownHistory.id) {
    clearTimeout(shownHistory.timer);
    shownHistory.timer = setTimeout(loadHistory, COUNTS_DELAY_MS);
  }
}

// One change, applied to the shown page in place.
function apply(event) {
  const entry = state.rows.get(event.memoryId);
  if (event.kind === "deleted" || event.kind === "expired") {
    if (entry) gone(entry, event);
    return;
  }
  const m = event.memory;
  if (!m?.id) return; // gone since: its own deletion follows
  if (!entry) {
    if (matches(m)) place(m, event.kind === "created");
  } else if (matches(m) || entry.edit) redraw(entry, m);
  else drop(entry);
}

// A memory that now belongs to the list, at its place, newest first. On a later page a new
// memory would push every row down onto the next page under the reader's eyes: it is counted
// in "N new — show" instead.
function place(m, created) {
  const order = inOrder();
  let at = order.findIndex((r) => before(m, r.m));
  if (at < 0) at = order.length;
  if (at === 0 && state.page > 1) {
    if (created) setFresh(state.fresh + 1);
    return;
  }
  if (at === order.length && order.length >= PAGE_SIZE) return; // it belongs on a later page
  const entry = entryFor(m);
  el("rows").insertBefore(entry.tr, order[at]?.tr || null);
  syncEmpty();
  flash(entry.tr);
  // The page keeps its size: its last row moves on to the next page (never a row being edited).
  let extra = inOrder().length - PAGE_SIZE;
  for (const r of inOrder().reverse()) {
    if (extra <= 0) break;
    if (!r.edit) { drop(r); extra -= 1; }
  }
}

function redraw(entry, m) {
  if (instant(m.updatedAt) < instant(entry.m.updatedAt)) return; // older than shown: a replayed change
  if (entry.edit) { changedUnder(entry, m); return; }
  if (JSON.stringify(m) === JSON.stringify(entry.m)) return;
  const tr = row(m);
  entry.tr.replaceWith(tr);
  Object.assign(entry, { m, tr });
  flash(tr);
}

function drop(entry) {
  entry.tr.remove();
  state.rows.delete(entry.m.id);
  syncEmpty();
}

function by(author) { return author ? ` by ${credentialName(author)}` : ""; }

// Deleted or expired: the row goes, unless it is being edited; then the editor keeps what was
// typed, says what happened, and can no longer save. A page left empty shows the one before.
function gone(entry, event) {
  if (entry.edit) {
    entry.gone = true;
    entry.edit.save.disabled = true;
    clear(entry.edit.note, `This memory was ${event.kind} meanwhile${by(event.author)}: it can no longer be saved.`);
    return;
  }
  drop(entry);
  if (!state.rows.size && state.page > 1) { state.page -= 1; list(); }
}

// A memory changed elsewhere while its row is being edited: the fields keep what was typed,
// a note says what the memory says now (Cancel shows it; Save replaces it).
function changedUnder(entry, m) {
  const was = entry.m;
  entry.m = m;
  if (was.content === m.content && was.key === m.key && was.type === m.type) return;
  clear(entry.edit.note, `Changed meanwhile: it now says “${clip(m.content)}”. Save replaces that with what you typed; Cancel shows it.`);
}

// ---- rows --------------------------------------------------------------------------------

function row(m) {
  const canWrite = state.caller.can("write:memory");
  const name = m.key || m.id;
  const history = h("button", { type: "button", "aria-label": `History of memory ${name}`, onclick: () => openHistory(m.id) }, "History");
  return h("tr", { dataset: { id: m.id } },
    h("td", { class: "key" }, m.key || "—"),
    h("td", {}, m.type),
    h("td", { class: "content" }, m.content),
    h("td", {}, m.apiKeyId + (m.sessionId ? ` / ${m.sessionId}` : "")),
    h("td", { class: "when" }, when(m.updatedAt)),
    h("td", { class: "actions" }, canWrite ? [
      h("button", { type: "button", "aria-label": `Edit memory ${name}`, onclick: () => edit(state.rows.get(m.id)) }, "Edit"),
      h("button", { type: "button", class: "danger", "aria-label": `Delete memory ${name}`,
        onclick: (ev) => remove(m.id, ev.currentTarget) }, "Delete"),
      history,
    ] : [history, h("span", { class: "hint" }, "read only")]));
}

function edit(entry) {
  if (!entry || entry.edit) return;
  const { m, tr } = entry;
  const key = h("input", { type: "text", value: m.key || "", "aria-label": "Key" });
  const type = h("select", { "aria-label": "Type" }, TYPES.map((t) => h("option", { value: t, selected: t === m.type }, t)));
  const content = h("textarea", { rows: 3, "aria-label": "Content" }, m.content);
  const note = h("p", { class: "hint edit-note" });
  const save = h("button", { type: "button", class: "primary" }, "Save");
  save.addEventListener("click", async () => {
    const body = { key: key.value, type: type.value, content: content.value };
    const done = await perform(el("status"), () => api("PUT", `/api/memory/${encodeURIComponent(m.id)}`, { body }),
      { control: save });
    if (!done) return;
    showNote(el("status"), "Memory saved.");
    if (state.rows.get(m.id) === entry) endEdit(entry, done.memory || entry.m);
    if (!following()) load();
  });
  entry.edit = { note, save };
  clear(tr, h("td", {}, key), h("td", {}, type), h("td", { class: "content" }, content, note),
    h("td", {}, m.apiKeyId), h("td", {}, ""),
    h("td", { class: "actions" }, save, h("button", { type: "button", onclick: () => endEdit(entry) }, "Cancel")));
  content.focus();
}

// Back from the editor to the row, showing the memory as it is now (or dropping the row when
// it was deleted meanwhile).
function endEdit(entry, m = entry.m) {
  entry.edit = null;
  if (entry.gone) { drop(entry); return; }
  const tr = row(m);
  entry.tr.replaceWith(tr);
  Object.assign(entry, { m, tr });
}

async function remove(id, control) {
  const m = state.rows.get(id)?.m;
  if (!m) return;
  const ok = await confirmAction("Delete this memory?", "It is removed with its vectors; this cannot be undone.",
    [`${m.key || "(no key)"}: ${m.content.slice(0, 120)}`]);
  if (!ok) return;
  const done = await perform(el("status"), () => api("DELETE", `/api/memory/${encodeURIComponent(id)}`),
    { control, pending: "Deleting…" });
  if (!done) return;
  showNote(el("status"), "Memory deleted.");
  const entry = state.rows.get(id);
  if (entry && !entry.edit) drop(entry);
  scheduleCounts();
  if (!following()) load();
}

// ---- history -----------------------------------------------------------------------------

const HISTORY_PAGE = 100;
const shownHistory = { id: "", serial: 0, timer: null };
// The fields of a change in the order a reader looks for them; others follow by name.
const FIELD_ORDER = ["content", "key", "type", "mergedContent", "sessionId", "metadata", "keep", "occurredAt", "expiresAt"];

function historyDialog() {
  const dialog = document.getElementById("history");
  if (!dialog.dataset.ready) {
    dialog.dataset.ready = "true";
    document.getElementById("history-close").addEventListener("click", () => dialog.close());
    dialog.addEventListener("close", () => { shownHistory.id = ""; clearTimeout(shownHistory.timer); });
  }
  return dialog;
}

function closeHistory() {
  const dialog = document.getElementById("history");
  if (dialog?.open) dialog.close();
}

function openHistory(id) {
  const dialog = historyDialog();
  const m = state.rows.get(id)?.m;
  shownHistory.id = id;
  clear(document.getElementById("history-title"), `History of memory ${m?.key || id}`);
  clear(document.getElementById("history-body"), h("p", { class: "note pending" }, "Loading…"));
  if (!dialog.open) dialog.showModal();
  loadHistory();
}

// The first page of the shown memory's history (again when a change to it arrives).
async function loadHistory() {
  const id = shownHistory.id;
  if (!id) return;
  const serial = ++shownHistory.serial;
  const body = document.getElementById("history-body");
  const path = `/api/memory/${encodeURIComponent(id)}/history`;
  try {
    const answer = await api("GET", path, { query: { limit: HISTORY_PAGE } });
    if (serial === shownHistory.serial) clear(body, historyView(answer, path));
  } catch (err) {
    if (serial === shownHistory.serial) showError(body, err);
  }
}

function historyView(answer, path) {
  const m = state.rows.get(answer.id)?.m;
  const entries = h("tbody", {}, answer.entries.map(entryRow));
  const more = h("div", { class: "more" });
  if (answer.nextPageToken) moreButton(more, entries, path, answer.nextPageToken);
  return [
    h("p", { class: "hint" }, `Owner ${answer.apiKeyId} · id ${answer.id}`),
    m ? h("p", { class: "now" }, h("strong", {}, "Now: "), m.content,
      h("span", { class: "hint" }, ` · holds since ${when(m.validFrom || m.createdAt)}`)) : null,
    h("h3", {}, "Changes, oldest first"),
    h("div", { class: "scroll" }, h("table", { class: "history-entries" },
      h("thead", {}, h("tr", {}, ["When", "Change", "By", "What it set"].map((c) => h("th", { scope: "col" }, c)))),
      entries)),
    more,
    h("h3", {}, "Superseded versions"),
    answer.versions.length ? h("div", { class: "scroll" }, h("table", { class: "history-versions" },
      h("thead", {}, h("tr", {}, ["Said", "Valid from", "Valid until"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, answer.versions.map((v) => h("tr", {},
        h("td", { class: "content" }, v.content), h("td", { class: "when" }, when(v.validFrom)),
        h("td", { class: "when" }, when(v.validTo))))))) :
      h("p", { class: "hint" }, "None: no later fact replaced this one."),
  ];
}

function moreButton(target, entries, path, pageToken) {
  const button = h("button", { type: "button" }, "Show later changes");
  button.addEventListener("click", async () => {
    const answer = await perform(target, () => api("GET", path, { query: { limit: HISTORY_PAGE, pageToken } }),
      { control: button, pending: "Loading…" });
    if (!answer) return;
    entries.append(...answer.entries.map(entryRow));
    clear(target);
    if (answer.nextPageToken) moreButton(target, entries, path, answer.nextPageToken);
  });
  clear(target, button);
}

function entryRow(e) {
  return h("tr", { dataset: { event: e.event } },
    h("td", { class: "when" }, when(e.at)),
    h("td", {}, e.event, e.relatedId ? h("span", { class: "hint" }, ` into ${e.relatedId}`) : null),
    h("td", { class: "author" }, credentialName(e.author) || "anyone (no token needed)"),
    h("td", { class: "content" }, changeList(e)));
}

// What a change set. A creation sets every field: those left empty are not worth a line.
function changeList(e) {
  const rank = (k) => (FIELD_ORDER.includes(k) ? FIELD_ORDER.indexOf(k) : FIELD_ORDER.length);
  const empty = (v) => v === null || v === "" || v === false || (typeof v === "object" && !Object.keys(v).length);
  const set = Object.entries(e.changes || {})
    .filter(([, v]) => v !== null && !(e.event === "created" && empty(v)))
    .sort(([a], [b]) => rank(a) - rank(b) || a.localeCompare(b));
  if (!set.length) return "—";
  const shown = (v) => (typeof v !== "string" ? JSON.stringify(v) : /^\d{4}-\d\d-\d\dT[\d:.]+Z$/.test(v) ? when(v) : v);
  return h("dl", { class: "changes" }, set.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, clip(shown(v), 300))]));
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
    if (!done) return;
    showNote(el("status"), done.mergedInto ? "Already remembered: merged into an existing memory." :
      done.created === false ? "Memory updated (same key)." : "Memory added.");
    form.reset();
    if (done.mergedInto) flash(state.rows.get(done.mergedInto)?.tr);
    if (!following()) load(); // when following, the feed brings it
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

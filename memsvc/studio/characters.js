// Characters: the recent-history editor. A save carries the snapshot tokens of what was
// opened; when the file changed meanwhile the server refuses it, and both versions are shown
// so the person reloads or overwrites knowingly: neither side is ever lost silently. Also the
// character rename, the review and Powerful Memory switches, and the legacy scan and purge.

import { api } from "./api.js";
import { attempt, clear, confirmAction, field, h, perform, showNote } from "./ui.js";

const ROLES = ["human", "ai", "system"];
const CONFLICT = "RECENT_FILE_CONFLICT";
const state = { panel: null, caller: null, file: null, snapshot: null, rows: [] };

function el(name) { return state.panel.querySelector(`[data-el="${name}"]`); }

export function reset() { if (state.panel) clear(state.panel); }

export function shown() {}

export function init(panel, caller) {
  state.panel = panel;
  state.caller = caller;
  state.file = null;
  if (!caller.can("read:memory") || !caller.characters) {
    clear(panel, h("p", { class: "note" }, "This token has no access to character memory."));
    return;
  }
  clear(panel, h("h2", { class: "sr-only" }, "Characters"),
    h("div", { class: "split" },
      h("div", { class: "card files" }, h("div", { class: "card-head" }, h("h3", {}, "Recent-history files"),
        h("button", { type: "button", onclick: listFiles }, "Refresh")),
        h("ul", { class: "file-list", dataset: { el: "files" } }), h("div", { dataset: { el: "files-msg" } })),
      h("div", { class: "card editor", dataset: { el: "editor" } }, h("p", { class: "note" }, "Open a file to edit its messages."))),
    h("div", { class: "grid" }, togglesCard(), caller.admin ? legacyCard() : null));
  listFiles();
  loadToggles();
}

async function listFiles() {
  const answer = await attempt(el("files-msg"), () => api("GET", "/api/memory/recent_files"));
  if (!answer) return;
  clear(el("files"), answer.files.length ? answer.files.map((name) => h("li", {},
    h("button", { type: "button", class: name === state.file ? "link current" : "link", onclick: () => openFile(name) }, name))) :
    h("li", { class: "empty" }, "No recent-history files yet."));
}

function characterOf(filename) { return filename.replace(/^recent_/, "").replace(/\.json$/, ""); }

function rowsFrom(content) {
  const messages = JSON.parse(content || "[]");
  return messages.map((m, i) => ({
    role: m.type, text: m.data?.content ?? "", source_index: i,
    theater: Boolean(m.data?.additional_kwargs?.theater),
  }));
}

async function fetchFile(filename) {
  return api("GET", "/api/memory/recent_file", { query: { filename } });
}

async function openFile(filename) {
  const snap = await attempt(el("files-msg"), () => fetchFile(filename));
  if (!snap) return;
  state.file = filename;
  state.snapshot = snap;
  state.rows = rowsFrom(snap.content);
  renderEditor();
  listFiles();
}

function renderEditor(message) {
  const write = state.caller.can("write:memory");
  const list = h("ol", { class: "messages", dataset: { el: "messages" } }, state.rows.map((r, i) => messageRow(r, i, write)));
  clear(el("editor"),
    h("div", { class: "card-head" }, h("h3", {}, `${characterOf(state.file)} · ${state.file}`),
      h("button", { type: "button", onclick: () => openFile(state.file) }, "Reload")),
    list,
    write ? h("div", { class: "row" },
      h("button", { type: "button", onclick: addMessage }, "Add message"),
      h("button", { type: "button", class: "primary", dataset: { el: "save" }, onclick: () => save(false) }, "Save")) :
      h("p", { class: "note" }, "Read only: this token may not write character memory."),
    h("div", { dataset: { el: "editor-msg" } }, message ? h("div", { class: "note", role: "status" }, message) : null),
    state.caller.admin ? renameForm() : null);
}

function messageRow(r, i, write) {
  const label = `Message ${i + 1}`;
  if (r.theater) {
    return h("li", { class: "message theater" }, h("span", { class: "role" }, r.role),
      h("p", { class: "text" }, r.text), h("small", { class: "hint" }, "theater capsule: kept as it is"));
  }
  const role = h("select", { "aria-label": `${label} role`, disabled: !write, onchange: (ev) => { r.role = ev.target.value; } },
    [...new Set([...ROLES, r.role])].map((x) => h("option", { value: x, selected: x === r.role }, x)));
  const text = h("textarea", { rows: 2, "aria-label": `${label} text`, readOnly: !write, oninput: (ev) => { r.text = ev.target.value; } }, r.text);
  return h("li", { class: "message" }, role, text,
    write ? h("button", { type: "button", class: "danger", "aria-label": `Remove message ${i + 1}`,
      onclick: () => { state.rows.splice(i, 1); renderEditor(); } }, "Remove") : null);
}

function addMessage() {
  state.rows.push({ role: "human", text: "" });
  renderEditor();
  const boxes = el("messages").querySelectorAll("textarea");
  boxes[boxes.length - 1]?.focus();
}

function chatFrom(rows, keepIndexes) {
  return rows.map((r) => {
    const item = { role: r.role };
    if (r.theater) item.theater = true;
    else item.text = r.text;
    if (r.source_index !== undefined && (keepIndexes || r.theater)) item.source_index = r.source_index;
    return item;
  });
}

// overwrite: the person chose to replace the version shown beside theirs; the save carries
// that version's tokens, so a change made after it was shown is refused again.
async function save(overwrite) {
  const body = { filename: state.file, fingerprint: state.snapshot.fingerprint,
    identity_token: state.snapshot.identity_token, chat: chatFrom(state.rows, !overwrite) };
  const snap = await perform(el("editor-msg"), async () => {
    try {
      await api("POST", "/api/memory/recent_file/save", { body });
    } catch (err) {
      if (err.status === 409 && err.reason === CONFLICT) return CONFLICT;
      throw err;
    }
    return fetchFile(state.file);
  }, { control: el("save") });
  if (snap === CONFLICT) return showConflict();
  if (!snap) return;
  state.snapshot = snap;
  state.rows = rowsFrom(snap.content);
  renderEditor("Saved.");
}

async function showConflict() {
  const current = await attempt(el("editor-msg"), () => fetchFile(state.file));
  if (!current) return;
  const mine = state.rows;
  const theirs = rowsFrom(current.content);
  const column = (title, rows) => h("div", { class: "version" }, h("h4", {}, title),
    h("ol", {}, rows.map((r) => h("li", {}, h("span", { class: "role" }, r.role), " ", r.text))));
  clear(el("editor-msg"), h("div", { class: "conflict", role: "alert", dataset: { el: "conflict" } },
    h("p", {}, h("strong", {}, "This file changed since you opened it. "),
      "Nothing was saved. Compare both versions, then keep the server's or overwrite it with yours."),
    h("div", { class: "versions" }, column("Your edits (not saved)", mine), column("The server's version now", theirs)),
    h("div", { class: "row" },
      h("button", { type: "button", onclick: () => { state.snapshot = current; state.rows = theirs; renderEditor("Reloaded the server's version; your edits were discarded."); } },
        "Reload the server's version"),
      h("button", { type: "button", class: "danger", onclick: () => { state.snapshot = current; save(true); } },
        "Overwrite with my edits"))));
}

function renameForm() {
  const input = h("input", { type: "text", autocomplete: "off", required: true, dataset: { el: "new-name" } });
  const form = h("form", { class: "rename" }, field("Rename this character to", input),
    h("button", { type: "submit" }, "Rename"), h("div", { dataset: { el: "rename-msg" } }));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const submitter = ev.submitter;
    const oldName = characterOf(state.file), newName = input.value.trim();
    const ok = await confirmAction(`Rename ${oldName} to ${newName}?`,
      "Its files, long-term memories and reflections move to the new name.");
    if (!ok) return;
    const done = await perform(el("rename-msg"), () => api("POST",
      `/api/characters/catgirl/${encodeURIComponent(oldName)}/rename`, { body: { new_name: newName } }),
      { control: submitter, pending: "Renaming…" });
    if (done) { await openFile(`recent_${newName}.json`); showNote(el("editor-msg"), `Renamed ${oldName} to ${newName}.`); }
  });
  return form;
}

function togglesCard() {
  const admin = state.caller.admin;
  const toggle = (name, label, route) => {
    const box = h("input", { type: "checkbox", disabled: !admin, dataset: { el: `toggle-${name}` } });
    box.addEventListener("change", async () => {
      const done = await perform(el("toggles-msg"), () => api("POST", route, { body: { enabled: box.checked } }),
        { control: box });
      if (done) { box.checked = done.enabled; showNote(el("toggles-msg"), `${label}: ${done.enabled ? "on" : "off"}.`); }
      else box.checked = !box.checked;
    });
    return h("label", { class: "switch" }, box, ` ${label}`);
  };
  return h("div", { class: "card" }, h("h3", {}, "Switches"),
    toggle("review", "Review (auto review of recent memory)", "/api/memory/review_config"),
    toggle("powerful", "Powerful Memory", "/api/memory/powerful_memory_config"),
    admin ? null : h("small", { class: "hint" }, "Changing them needs an admin token."),
    h("div", { dataset: { el: "toggles-msg" } }));
}

async function loadToggles() {
  for (const [name, route] of [["review", "/api/memory/review_config"], ["powerful", "/api/memory/powerful_memory_config"]]) {
    const answer = await attempt(el("toggles-msg"), () => api("GET", route));
    if (answer) el(`toggle-${name}`).checked = answer.enabled;
  }
}

function legacyCard() {
  return h("div", { class: "card" }, h("h3", {}, "Legacy storage"),
    h("p", { class: "hint" }, "Memory folders of older app versions. Scanning reads only; purging deletes what you tick."),
    h("div", { class: "row" }, h("button", { type: "button", onclick: scanLegacy }, "Scan"),
      h("button", { type: "button", class: "danger", dataset: { el: "purge" }, disabled: true, onclick: purgeLegacy }, "Purge selected…")),
    h("div", { dataset: { el: "legacy" } }), h("div", { dataset: { el: "legacy-msg" } }));
}

function size(bytes) {
  if (bytes < 0) return "size unknown";
  return bytes < 1024 ? `${bytes} B` : bytes < 1048576 ? `${(bytes / 1024).toFixed(1)} KiB` : `${(bytes / 1048576).toFixed(1)} MiB`;
}

async function scanLegacy(ev) {
  const scan = await perform(el("legacy-msg"), () => api("GET", "/api/memory/legacy/scan"),
    { control: ev?.currentTarget, pending: "Scanning…" });
  if (!scan) return;
  const boxes = [];
  clear(el("legacy"), h("p", {}, `${scan.total_entries} entries, ${size(scan.total_size_bytes)}`),
    scan.legacy_roots.map((root) => h("fieldset", {}, h("legend", {}, `${root.root}${root.exists ? "" : " (missing)"}`),
      root.entries.length ? root.entries.map((e) => {
        const box = h("input", { type: "checkbox", value: e.path, dataset: { path: e.path } });
        box.addEventListener("change", () => { el("purge").disabled = !boxes.some((b) => b.checked); });
        boxes.push(box);
        return h("label", { class: "entry" }, box, ` ${e.name}${e.is_dir ? "/" : ""} · ${size(e.size_bytes)}` +
          (e.is_unlinked ? " · not a registered character" : "") + (e.runtime_has_same_name ? " · also in the runtime folder" : ""));
      }) : h("p", { class: "empty" }, "empty"))));
  el("purge").disabled = true;
}

async function purgeLegacy() {
  const paths = [...el("legacy").querySelectorAll("input[type=checkbox]:checked")].map((b) => b.value);
  if (!paths.length) return;
  const ok = await confirmAction(`Delete ${paths.length} legacy ${paths.length === 1 ? "entry" : "entries"}?`,
    "These are removed from disk, folders with everything inside:", paths);
  if (!ok) return;
  const done = await perform(el("legacy-msg"), () => api("POST", "/api/memory/legacy/purge", { body: { paths } }),
    { control: el("purge"), pending: "Deleting…" });
  if (!done) return;
  await scanLegacy();
  showNote(el("legacy-msg"), `Removed ${done.removed.length}` +
    (done.errors.length ? `; refused: ${done.errors.map((e) => `${e.path}: ${e.error}`).join("; ")}` : "."),
    done.errors.length ? "error" : "note");
}

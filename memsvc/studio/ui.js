// Small DOM helpers: elements built as nodes (never HTML strings, so stored text is shown as
// text), the shared error display and confirmations.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k in el && typeof v !== "string") el[k] = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

export function $(selector, root = document) {
  return root.querySelector(selector);
}

export function clear(el, ...children) {
  el.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

// A refused or failed call, in the panel where it happened: the status and the server's
// message, never an empty panel.
export function showError(target, err) {
  const status = err.status ? `HTTP ${err.status}` : "error";
  const reason = err.reason ? ` (${err.reason})` : "";
  clear(target, h("div", { class: "error", role: "alert" }, h("strong", {}, `${status}${reason}: `), err.message));
}

export function showNote(target, text, kind = "note") {
  clear(target, h("div", { class: kind, role: "status" }, text));
}

// Runs an async action, shows its error in `target` if it throws; returns its result or
// undefined.
export async function attempt(target, action) {
  try {
    const out = await action();
    if (target && target.querySelector(":scope > .error")) clear(target);
    return out;
  } catch (err) {
    if (target) showError(target, err);
    else console.warn(err);
    return undefined;
  }
}

// Every change the person asks for (a Save, Add, Delete, switch, rename, test, reindex…)
// runs through here: the moment it starts, whatever an earlier action left in `target` (its
// "saved" note, its error) is replaced by a `pending` note, and `control`, the button or
// switch that started it, is disabled until the server answers. So what `target` shows
// afterwards is always this action's outcome, never a leftover a person (or a test) could
// take for it. Returns the action's result, or undefined when it failed (the error is shown
// in `target`); the caller then shows its own note of success.
export async function perform(target, action, { control = null, pending = "Saving…" } = {}) {
  if (target) clear(target, h("div", { class: "note pending", role: "status", "aria-busy": "true" }, pending));
  if (control) control.disabled = true;
  try {
    const out = await attempt(target, action);
    if (target && target.querySelector(":scope > .pending")) clear(target);
    return out;
  } finally {
    if (control) control.disabled = false;
  }
}

let dialogResolve = null;

// Asks before something destructive; `items` (optional) lists exactly what it will touch.
export function confirmAction(title, message, items = []) {
  const dialog = $("#confirm");
  clear($("#confirm-title"), title);
  clear($("#confirm-message"), message);
  clear($("#confirm-items"), items.map((item) => h("li", {}, item)));
  $("#confirm-items").hidden = items.length === 0;
  dialog.showModal();
  $("#confirm-cancel").focus();
  return new Promise((resolve) => { dialogResolve = resolve; });
}

export function setupDialog() {
  const dialog = $("#confirm");
  const finish = (answer) => {
    if (dialog.open) dialog.close();
    if (dialogResolve) dialogResolve(answer);
    dialogResolve = null;
  };
  $("#confirm-ok").addEventListener("click", () => finish(true));
  $("#confirm-cancel").addEventListener("click", () => finish(false));
  dialog.addEventListener("cancel", () => finish(false));
}

export function field(labelText, control, hint) {
  const id = control.id || `f-${Math.random().toString(36).slice(2, 9)}`;
  control.id = id;
  return h("div", { class: "field" }, h("label", { for: id }, labelText), control,
    hint ? h("small", { class: "hint" }, hint) : null);
}

// A horizontal bar for a score in [0, 1] (set through the CSSOM, which the page's content
// policy allows, unlike inline style attributes).
export function bar(value, label) {
  const fill = h("span", { class: "bar-fill" });
  const v = typeof value === "number" && Number.isFinite(value) ? Math.max(0, Math.min(1, value)) : null;
  fill.style.width = v === null ? "0" : `${(v * 100).toFixed(1)}%`;
  return h("span", { class: "bar", role: "img", "aria-label": `${label}: ${v === null ? "n/a" : v.toFixed(3)}` },
    fill, h("span", { class: "bar-text" }, v === null ? "—" : v.toFixed(3)));
}

// The state of one part of the engine: "ok" (working, green), "neutral" (switched off, not
// set up, or still loading: a choice or a wait, not a fault, so grey) or "bad" (set up and
// failing: red). Red is kept for faults, so a person can trust it.
const INDICATOR_WORDS = { ok: "available", neutral: "not in use", bad: "unavailable" };

export function indicator(state, label, reason) {
  const words = INDICATOR_WORDS[state];
  return h("div", { class: `indicator ${state}`, dataset: { name: label, state } },
    h("span", { class: "dot", "aria-hidden": "true" }),
    h("span", { class: "ind-label" }, label, h("span", { class: "sr-only" }, ` ${words}`)),
    h("span", { class: "ind-reason" }, reason || words));
}

export function download(filename, text) {
  const blob = new Blob([text], { type: "application/json" });
  const a = h("a", { href: URL.createObjectURL(blob), download: filename });
  document.body.append(a);
  a.click();
  setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 0);
}

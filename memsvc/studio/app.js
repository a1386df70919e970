// Memory Studio: sign-in, tabs, the health dot; each tab lives in its own module.

import { api, ApiError, getToken, setToken, whoAmI } from "./api.js";
import { $, clear, setupDialog, showError } from "./ui.js";
import * as memories from "./memories.js";
import * as playground from "./playground.js";
import * as engine from "./engine.js";
import * as characters from "./characters.js";

const TABS = { memories, playground, engine, characters };
const state = { caller: null };

function selectTab(name, focus = false) {
  for (const key of Object.keys(TABS)) {
    const tab = $(`#tab-${key}`);
    const selected = key === name;
    tab.setAttribute("aria-selected", String(selected));
    tab.tabIndex = selected ? 0 : -1;
    $(`#panel-${key}`).hidden = !selected;
    if (selected && focus) tab.focus();
  }
  if (!state.caller) return;
  // A tab that was left closes what it keeps open (the Memories tab's change feed).
  for (const key of Object.keys(TABS)) if (key !== name) TABS[key].hidden?.();
  TABS[name].shown?.(state.caller);
}

function setupTabs() {
  const names = Object.keys(TABS);
  for (const name of names) {
    const tab = $(`#tab-${name}`);
    tab.addEventListener("click", () => selectTab(name));
    tab.addEventListener("keydown", (ev) => {
      const i = names.indexOf(name);
      const next = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: names.length - 1 }[ev.key];
      if (next === undefined) return;
      ev.preventDefault();
      selectTab(names[(next + names.length) % names.length], true);
    });
  }
}

async function refreshHealth() {
  const dot = $("#health");
  const text = $("#health-text");
  const show = (cls, label) => {
    dot.className = `health ${cls}`;
    dot.setAttribute("aria-label", `server health: ${label}`);
    text.textContent = label;
  };
  try {
    if (state.caller?.can("read:memory")) {
      const h = await api("GET", "/api/memory/health");
      show(h.working ? "ok" : "bad", h.working ? `healthy · ${h.latencyMs} ms` : `unhealthy: ${h.error || "round trip failed"}`);
    } else {
      const h = await api("GET", "/healthz");
      show(h.status === "SERVING" ? "ok" : "bad", h.status === "SERVING" ? "serving" : "not serving");
    }
  } catch (err) {
    show("bad", err instanceof ApiError && err.status === 503 ? "not serving" : `unreachable: ${err.message}`);
  }
}

async function signIn() {
  clear($("#global-error"));
  try {
    state.caller = await whoAmI();
  } catch (err) {
    state.caller = null;
    clear($("#caller"), getToken() ? "signed out: the token was refused" : "sign in with a bearer token");
    showError($("#global-error"), err);
    for (const tab of Object.values(TABS)) tab.reset?.();
    refreshHealth();
    return;
  }
  if (state.caller.anonymous) {
    // No token yet on a server that needs one: nothing to offer but the sign-in.
    clear($("#caller"), "This server needs a bearer token: sign in above.");
    for (const tab of Object.values(TABS)) tab.reset?.();
    refreshHealth();
    return;
  }
  clear($("#caller"), `Signed in as ${state.caller.describe()}`);
  for (const [name, tab] of Object.entries(TABS)) tab.init($(`#panel-${name}`), state.caller);
  const current = Object.keys(TABS).find((k) => $(`#tab-${k}`).getAttribute("aria-selected") === "true");
  selectTab(current || "memories");
  refreshHealth();
}

function setupSignIn() {
  const input = $("#token");
  input.value = getToken();
  $("#signin").addEventListener("submit", (ev) => {
    ev.preventDefault();
    setToken(input.value.trim());
    signIn();
  });
  $("#signout-button").addEventListener("click", () => {
    setToken("");
    input.value = "";
    signIn();
  });
}

document.addEventListener("DOMContentLoaded", () => {
  setupDialog();
  setupTabs();
  setupSignIn();
  signIn();
  setInterval(refreshHealth, 30000);
});

// hotq console: the shared helpers (DOM, formats, API, dialogs, polling,
// rates) and the routing; overview.js and queue.js hold the two pages.
// Plain JavaScript, no build step. It calls only the
// documented /v1 API (see /v1/openapi.json), so everything it does a
// script can do. Payloads and names are only ever set as text, never as
// HTML.
"use strict";

const TOKEN_KEY = "hotq-token";
const $ = (id) => document.getElementById(id);

// ---------------------------------------------------------------- DOM

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Replaces `el`'s children, leaving out null, undefined and false. */
function fill(el, ...children) {
  el.replaceChildren(...children.flat(2).filter((c) => c !== null && c !== undefined && c !== false));
  return el;
}

// ---------------------------------------------------------------- formats

const NUMBER = new Intl.NumberFormat("en-US");
function num(n) { return n === null || n === undefined ? "–" : NUMBER.format(n); }

function age(ms) {
  if (ms === null || ms === undefined) return "–";
  if (ms < 0) ms = 0;
  const s = ms / 1000;
  if (s < 10) return s.toFixed(1) + " s";
  if (s < 60) return Math.floor(s) + " s";
  const m = Math.floor(s / 60);
  if (m < 60) return m + " m " + String(Math.floor(s % 60)).padStart(2, "0") + " s";
  const hours = Math.floor(m / 60);
  if (hours < 24) return hours + " h " + String(m % 60).padStart(2, "0") + " m";
  return Math.floor(hours / 24) + " d " + (hours % 24) + " h";
}

function ageClass(ms) {
  if (ms === null || ms === undefined) return "";
  if (ms > 3600e3) return "age-bad";
  if (ms > 300e3) return "age-warn";
  return "";
}

function rate(r) {
  if (r === null || r === undefined) return "–";
  if (r === 0) return "0";
  if (r < 10) return r.toFixed(1);
  return NUMBER.format(Math.round(r));
}

function bytes(n) {
  if (n < 1024) return n + " B";
  if (n < 1024 * 1024) return (n / 1024).toFixed(1) + " KiB";
  return (n / 1024 / 1024).toFixed(1) + " MiB";
}


/**
 * `text` whole (ids, receipts, payloads): shown clipped by the style,
 * selected whole by one click (user-select: all), and a copy button.
 */
function copyable(text, cls) {
  // The glyph is the style's (::before), so it is no part of the text a row shows or copies.
  const button = h("button", { class: "copy-button", type: "button", title: "copy", "aria-label": "copy" });
  button.addEventListener("click", async () => {
    let copied = true;
    try {
      await navigator.clipboard.writeText(text);
    } catch (_) {
      copied = false; // no clipboard here: the text is still selected whole by a click
    }
    button.className = "copy-button " + (copied ? "copied" : "failed");
    setTimeout(() => { button.className = "copy-button"; }, 1500);
  });
  return h("span", { class: "copyable" }, h("span", { class: "copy " + (cls || ""), title: text }, text), button);
}

/** The row a table shows until its first answer. */
function loadingRow(columns) {
  return h("tr", { class: "loading" }, h("td", { colspan: columns, class: "muted" }, "Loading…"));
}

function numCell(n, col) {
  return h("td", { class: "num" + (n === 0 ? " zero" : ""), dataset: col ? { col } : undefined }, num(n));
}

// ---------------------------------------------------------------- API

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

let tokenPrompt = null;

/**
 * One API call. `body` is sent as JSON, or as it is with `opts.raw`
 * (a pushed payload); `opts.headers` adds headers. A network failure or a
 * 5xx answer shows the error banner; any answer below 500 clears it.
 */
async function api(method, path, body, opts = {}) {
  for (let attempt = 0; attempt < 3; attempt++) {
    const headers = { Accept: "application/json", ...(opts.headers || {}) };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = "Bearer " + token;
    if (body !== undefined) headers["Content-Type"] = opts.raw ? "application/octet-stream" : "application/json";
    let response;
    try {
      response = await fetch(path, {
        method, headers, body: body === undefined ? undefined : opts.raw ? body : JSON.stringify(body),
      });
    } catch (error) {
      problem("api", "The daemon does not answer: " + error.message);
      throw new ApiError(0, "unreachable", "the daemon does not answer");
    }
    const text = await response.text();
    let json = null;
    try { json = text ? JSON.parse(text) : null; } catch (_) { json = null; }
    const code = json && json.error ? json.error.code : "http_" + response.status;
    const message = json && json.error ? json.error.message : text || response.statusText;
    problem("api", response.status >= 500 ? "The daemon answered " + response.status + " " + code + ": " + message : null);
    if (response.status === 204) return null;
    if (response.ok) return json;
    if (response.status === 401) {
      if (token) sessionStorage.removeItem(TOKEN_KEY);
      await askToken(token ? "That token was refused: " + message : "This daemon needs its bearer token.");
      continue;
    }
    throw new ApiError(response.status, code, message);
  }
  throw new ApiError(401, "unauthorized", "no valid token");
}

/** What is wrong, by source ("health", "api"): the banner shows the first, hides when none. */
const problems = new Map();
function problem(source, text) {
  if (text) problems.set(source, text); else problems.delete(source);
  const banner = $("banner");
  if (!banner) return;
  banner.textContent = problems.size ? [...problems.values()][0] : "";
  banner.hidden = problems.size === 0;
}

function enc(name) { return encodeURIComponent(name); }
function root(kind) { return kind === "priority" ? "/v1/pqueues/" : "/v1/queues/"; }

/** Asks for the token once; every call waiting on a 401 shares the prompt. */
function askToken(text) {
  if (!tokenPrompt) {
    const input = h("input", { type: "password", id: "token-input", autocomplete: "off", placeholder: "bearer token" });
    tokenPrompt = dialog({
      title: "Token required",
      text,
      body: input,
      ok: "Use token",
      cancellable: false,
      focus: input,
      action: async () => {
        const value = input.value.trim();
        if (!value) throw new Error("enter the token");
        sessionStorage.setItem(TOKEN_KEY, value);
        $("forget-token").hidden = false;
      },
    }).finally(() => { tokenPrompt = null; });
  }
  return tokenPrompt;
}

// ---------------------------------------------------------------- dialog

/** A modal: resolves with the action's result once it succeeds, or null on cancel. */
function dialog({ title, text, body, ok = "OK", danger = false, cancellable = true, focus, action }) {
  return new Promise((resolve) => {
    const modal = $("modal"), form = $("dialog"), okButton = $("dialog-ok"), cancel = $("dialog-cancel");
    $("dialog-title").textContent = title;
    $("dialog-text").textContent = text || "";
    fill($("dialog-body"), ...(body ? [body] : []));
    $("dialog-error").textContent = "";
    okButton.textContent = ok;
    okButton.className = "button " + (danger ? "danger" : "primary");
    okButton.disabled = false;
    cancel.hidden = !cancellable;
    modal.hidden = false;
    (focus || okButton).focus();
    const close = (value) => {
      modal.hidden = true;
      form.onsubmit = null;
      cancel.onclick = null;
      resolve(value);
    };
    cancel.onclick = () => close(null);
    form.onsubmit = async (event) => {
      event.preventDefault();
      okButton.disabled = true;
      try {
        close(await action());
      } catch (error) {
        $("dialog-error").textContent = error.message;
        okButton.disabled = false;
      }
    };
  });
}

/** Confirms an action, runs its one API call, and reports what happened. */
async function act({ title, text, ok, danger, body, focus, call, report }) {
  const answer = await dialog({ title, text, ok, danger, body, focus, action: call });
  if (answer === null) return;
  notice(report(answer));
  refreshNow();
}

function notice(text, isError) {
  const el = $("notice");
  if (!el) return;
  el.textContent = text;
  el.className = "notice" + (isError ? " error" : "");
  el.hidden = false;
}

// ---------------------------------------------------------------- polling

let view = null;         // the current page: { refresh(): Promise }
let timer = null;
let inFlight = false;

function schedule() {
  clearTimeout(timer);
  const every = Number($("refresh").value);
  if (every > 0) timer = setTimeout(tick, every);
}

async function tick() {
  // One refresh at a time, none while hidden or asking for the token.
  if (inFlight || document.hidden || tokenPrompt) { schedule(); return; }
  inFlight = true;
  try {
    await Promise.all([health(), view ? view.refresh() : null]);
  } finally {
    inFlight = false;
    schedule();
  }
}

function refreshNow() { clearTimeout(timer); tick(); }

async function health() {
  const el = $("health");
  try {
    const response = await fetch("/healthz");
    if (response.ok) {
      el.textContent = "store ok";
      el.className = "health ok";
      problem("health", null);
      return;
    }
    const json = await response.json().catch(() => null);
    const reason = json && json.error ? json.error.message : response.statusText;
    el.textContent = "store unavailable";
    el.className = "health bad";
    problem("health", "The store is unavailable: " + reason);
  } catch (error) {
    el.textContent = "daemon unreachable";
    el.className = "health bad";
    problem("health", "The daemon does not answer: " + error.message);
  }
}

// ---------------------------------------------------------------- rates

/** Push and pop rates from this daemon's counts (GET /v1/traffic), per second. */
const traffic = { fifo: new Map(), priority: new Map() };

async function rates(kind, names) {
  const out = new Map();
  if (!names.length) return out;
  let answer;
  try {
    answer = await api("GET", "/v1/traffic?kind=" + kind + "&queues=" + names.map(enc).join(","));
  } catch (_) {
    return out;
  }
  const seen = traffic[kind];
  for (const name of names) {
    const counts = answer.queues[name] || { pushed: 0, popped: 0 };
    const before = seen.get(name);
    if (before && answer.now_ms > before.at && counts.pushed >= before.pushed && counts.popped >= before.popped) {
      const seconds = (answer.now_ms - before.at) / 1000;
      out.set(name, { push: (counts.pushed - before.pushed) / seconds, pop: (counts.popped - before.popped) / seconds });
    }
    seen.set(name, { at: answer.now_ms, pushed: counts.pushed, popped: counts.popped });
  }
  if (seen.size > 5000) seen.clear();
  return out;
}

/** What a chart covers when several daemons share the store. */
const CHART_NOTE = "Depth, in flight, delayed and oldest age are the store's: the same from every daemon. " +
  "Push, pop, ack, nack and dead-letter rates are this daemon's only: with several daemons on one store, each charts its own traffic.";

// ---------------------------------------------------------------- routing

function setCrumbs(parts) {
  const crumbs = $("crumbs");
  fill(crumbs, ...parts.flatMap(([label, href], i) => [
    i ? h("span", { class: "sep" }, "/") : null,
    href ? h("a", { href }, label) : h("span", {}, label),
  ]));
}

function route() {
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, query] = hash.split("?");
  const match = path.match(/^\/queue\/(fifo|priority)\/(.+)$/);
  if (match) {
    const page = queuePage(match[1], decodeURIComponent(match[2]));
    view = page;
    inFlight = true;
    Promise.all([health(), page.start()]).finally(() => { inFlight = false; schedule(); });
  } else {
    view = overview(new URLSearchParams(query || ""));
    refreshNow();
  }
}

window.addEventListener("hashchange", route);
document.addEventListener("visibilitychange", () => { if (!document.hidden) refreshNow(); });
document.addEventListener("DOMContentLoaded", () => {
  $("refresh").addEventListener("change", refreshNow);
  $("forget-token").hidden = !sessionStorage.getItem(TOKEN_KEY);
  $("forget-token").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    location.reload();
  });
  $("modal").addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !$("dialog-cancel").hidden) $("dialog-cancel").click();
  });
  route();
});

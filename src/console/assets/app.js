// hotq console. Plain JavaScript, no build step. It calls only the
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

/** An item id's random part (the key's last bytes before its terminator). */
function shortId(id) { return id.length > 16 ? "…" + id.slice(-14, -2) : id; }

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

async function api(method, path, body) {
  for (let attempt = 0; attempt < 3; attempt++) {
    const headers = { Accept: "application/json" };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = "Bearer " + token;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(path, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (response.status === 204) return null;
    const text = await response.text();
    let json = null;
    try { json = text ? JSON.parse(text) : null; } catch (_) { json = null; }
    if (response.ok) return json;
    const code = json && json.error ? json.error.code : "http_" + response.status;
    const message = json && json.error ? json.error.message : text || response.statusText;
    if (response.status === 401) {
      if (token) sessionStorage.removeItem(TOKEN_KEY);
      await askToken(token ? "That token was refused: " + message : "This daemon needs its bearer token.");
      continue;
    }
    throw new ApiError(response.status, code, message);
  }
  throw new ApiError(401, "unauthorized", "no valid token");
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
  const el = $("health"), banner = $("banner");
  try {
    const response = await fetch("/healthz");
    if (response.ok) {
      el.textContent = "store ok";
      el.className = "health ok";
      banner.hidden = true;
      return;
    }
    const json = await response.json().catch(() => null);
    const reason = json && json.error ? json.error.message : response.statusText;
    el.textContent = "store unavailable";
    el.className = "health bad";
    banner.textContent = "The store is unavailable: " + reason;
    banner.hidden = false;
  } catch (error) {
    el.textContent = "daemon unreachable";
    el.className = "health bad";
    banner.textContent = "The daemon does not answer: " + error.message;
    banner.hidden = false;
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

// ---------------------------------------------------------------- overview

const NAME_CHARS = "-.0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz";

/** The `after` that lists every name starting with `prefix` first. */
function afterForPrefix(prefix) {
  if (!prefix) return null;
  const last = NAME_CHARS.indexOf(prefix[prefix.length - 1]);
  if (last < 0) return undefined;
  if (last === 0) return prefix.length > 1 ? prefix.slice(0, -1) : null;
  return prefix.slice(0, -1) + NAME_CHARS[last - 1] + "z".repeat(Math.max(0, 128 - prefix.length));
}

const COLUMNS = [
  ["queue", "Queue", false], ["depth", "Depth", true], ["leased", "In flight", true],
  ["delayed", "Delayed", true], ["grouped", "Grouped", true], ["waiting", "Waiting pops", true],
  ["oldest_item_age_ms", "Oldest", true], ["push", "Push/s", true], ["pop", "Pop/s", true],
];

function overview(params) {
  const state = {
    kind: params.get("kind") === "priority" ? "priority" : "fifo",
    prefix: params.get("prefix") || "",
    limit: Number(params.get("limit")) || 50,
    cursors: [], // `after` of each page before this one
    after: undefined,
    sort: "queue", asc: true,
    queues: [], next: null, rates: new Map(),
  };
  state.after = afterForPrefix(state.prefix);

  const filter = h("input", { type: "text", class: "filter", id: "filter", placeholder: "name prefix…", value: state.prefix, spellcheck: "false" });
  const limit = h("select", { class: "plain", id: "limit" }, [20, 50, 100].map((n) => h("option", { value: n, selected: n === state.limit }, n + " / page")));
  const kinds = h("div", { class: "seg" },
    h("button", { id: "kind-fifo", class: state.kind === "fifo" ? "on" : "", onclick: () => go({ kind: "fifo" }) }, "FIFO"),
    h("button", { id: "kind-priority", class: state.kind === "priority" ? "on" : "", onclick: () => go({ kind: "priority" }) }, "Priority"));
  const go = (change) => {
    const next = new URLSearchParams({ kind: state.kind, prefix: state.prefix, limit: state.limit, ...change });
    if (!next.get("prefix")) next.delete("prefix");
    location.hash = "#/?" + next.toString();
  };
  let typing = null;
  filter.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => go({ prefix: filter.value.trim() }), 300);
  });
  limit.addEventListener("change", () => go({ limit: limit.value }));

  const head = h("tr", {}, COLUMNS.map(([key, label, numeric]) => {
    const th = h("th", { class: "sortable" + (numeric ? " num" : ""), dataset: { key } }, label);
    th.addEventListener("click", () => {
      state.asc = state.sort === key ? !state.asc : !numeric;
      state.sort = key;
      render();
    });
    return th;
  }), h("th", {}, ""));
  const body = h("tbody", { id: "queues" });
  const status = h("span", { class: "muted small", id: "page-status" });
  const prev = h("button", { class: "button tiny", id: "page-prev", onclick: () => { state.after = state.cursors.pop(); load(); } }, "‹ Prev");
  const next = h("button", { class: "button tiny", id: "page-next", onclick: () => { state.cursors.push(state.after); state.after = state.next; load(); } }, "Next ›");
  const error = h("p", { class: "error", id: "overview-error" });

  fill($("main"), 
    h("div", { class: "toolbar" }, h("h1", {}, "Queues"), kinds, filter, limit, h("span", { class: "spacer" })),
    h("div", { class: "notice", id: "notice", hidden: true }),
    h("div", { class: "panel" },
      h("div", { class: "table-wrap" }, h("table", { id: "queue-table" }, h("thead", {}, head), body)),
      h("div", { class: "pager" }, status, h("span", { class: "spacer" }), error, prev, next)));
  setCrumbs([]);

  function sortValue(q, key) {
    if (key === "push" || key === "pop") {
      const r = state.rates.get(q.queue);
      return r ? r[key] : -1;
    }
    if (key === "oldest_item_age_ms") return q[key] === null ? -1 : q[key];
    return q[key];
  }

  /** Rows in the sorted order, each dead-letter queue under its source when both are shown. */
  function ordered() {
    const queues = state.queues.slice().sort((a, b) => {
      const x = sortValue(a, state.sort), y = sortValue(b, state.sort);
      const c = x < y ? -1 : x > y ? 1 : a.queue < b.queue ? -1 : 1;
      return state.asc ? c : -c;
    });
    const names = new Set(queues.map((q) => q.queue));
    const dlqOf = new Map();
    for (const q of queues) {
      const source = q.queue.endsWith(".dead") ? q.queue.slice(0, -5) : null;
      if (source && names.has(source)) dlqOf.set(source, q);
    }
    const rows = [];
    for (const q of queues) {
      const source = q.queue.endsWith(".dead") ? q.queue.slice(0, -5) : null;
      if (source && dlqOf.get(source) === q) continue;
      rows.push([q, false]);
      if (dlqOf.has(q.queue)) rows.push([dlqOf.get(q.queue), true]);
    }
    return rows;
  }

  function render() {
    for (const th of head.children) {
      th.classList.toggle("sorted", th.dataset.key === state.sort);
      th.classList.toggle("asc", th.dataset.key === state.sort && state.asc);
    }
    const rows = ordered().map(([q, under]) => {
      const dead = q.queue.endsWith(".dead");
      const r = state.rates.get(q.queue);
      const link = "#/queue/" + state.kind + "/" + enc(q.queue);
      return h("tr", { class: under ? "dlq" : "", dataset: { queue: q.queue } },
        h("td", { class: "name" }, h("a", { href: link }, q.queue),
          dead ? h("span", { class: "badge dlq", title: "dead-letter queue" }, "DLQ") : null,
          q.paused ? h("span", { class: "badge paused" }, "paused") : null),
        numCell(q.depth, "depth"), numCell(q.leased, "leased"), numCell(q.delayed, "delayed"),
        numCell(q.grouped, "grouped"), numCell(q.waiting, "waiting"),
        h("td", { class: "num " + ageClass(q.oldest_item_age_ms), dataset: { col: "oldest" } }, age(q.oldest_item_age_ms)),
        h("td", { class: "num", dataset: { col: "push" } }, rate(r ? r.push : null)),
        h("td", { class: "num", dataset: { col: "pop" } }, rate(r ? r.pop : null)),
        h("td", { class: "num" }, h("a", { href: link, class: "small" }, "open ›")));
    });
    fill(body, ...rows);
    if (!rows.length) {
      fill(body, h("tr", {}, h("td", { colspan: COLUMNS.length + 1, class: "muted" },
        state.prefix ? "No queue starts with “" + state.prefix + "”." : "No queues yet: push an item to create one.")));
    }
    const page = state.cursors.length + 1;
    status.textContent = "page " + page + " · " + state.queues.length + " queue" + (state.queues.length === 1 ? "" : "s") +
      " · sorted within the page";
    prev.disabled = state.cursors.length === 0;
    next.disabled = !state.next;
  }

  async function load() {
    if (state.after === undefined) {
      error.textContent = "a queue name holds only A-Z a-z 0-9 . _ -";
      state.queues = [];
      render();
      return;
    }
    let path = "/v1/queues?kind=" + state.kind + "&limit=" + state.limit;
    if (state.after) path += "&after=" + enc(state.after);
    try {
      const answer = await api("GET", path);
      let queues = answer.queues;
      let nextCursor = answer.next;
      if (state.prefix) {
        queues = queues.filter((q) => q.queue.startsWith(state.prefix));
        const last = answer.queues[answer.queues.length - 1];
        // Names come in order: once past the prefix, nothing more matches.
        if (last && !last.queue.startsWith(state.prefix) && last.queue > state.prefix) nextCursor = null;
      }
      state.queues = queues;
      state.next = nextCursor;
      state.rates = await rates(state.kind, queues.map((q) => q.queue));
      error.textContent = "";
    } catch (e) {
      error.textContent = e.message;
    }
    render();
  }

  return { refresh: load };
}

// ---------------------------------------------------------------- queue page

function queuePage(kind, name) {
  const fifo = kind === "fifo";
  const dead = name.endsWith(".dead");
  const base = root(kind) + enc(name);
  const page = { stats: null, settings: null, dlq: null };

  const tiles = h("div", { class: "tiles", id: "tiles" });
  const title = h("h1", {}, name);
  const badges = h("span", { id: "badges" });
  const actions = h("div", { class: "actions", id: "actions" });
  const itemsBody = h("tbody", { id: "items" });
  const itemsCount = h("span", { class: "count" });
  const itemsMore = h("span", { class: "muted small" });
  const leasesBody = h("tbody", { id: "leases" });
  const leasesCount = h("span", { class: "count" });
  const groupsBody = h("tbody", { id: "groups" });
  const dlqBody = h("tbody", { id: "dlq-items" });
  const dlqTitle = h("span", {}, "Dead-letter queue");
  const dlqPanel = h("div", { class: "panel", id: "dlq-panel", hidden: true });
  const settingsForm = h("form", { class: "settings", id: "settings" });
  const sectionError = h("p", { class: "error", id: "queue-error" });

  const itemHead = (withOrigin) => h("tr", {},
    h("th", {}, "Id"), h("th", { class: "num" }, "Age"), h("th", { class: "num" }, "Size"),
    kind === "priority" ? h("th", { class: "num" }, "Priority") : null,
    h("th", {}, "Payload"), h("th", {}, "Group"), h("th", { class: "num" }, "Deliveries"),
    withOrigin ? [h("th", {}, "From"), h("th", { class: "num" }, "Died after")] : null,
    h("th", {}, ""));

  fill($("main"), 
    h("div", { class: "toolbar" }, title, badges, h("span", { class: "spacer" }), actions),
    h("div", { class: "notice", id: "notice", hidden: true }),
    sectionError,
    tiles,
    h("div", { class: "panel" },
      h("h2", {}, "Items", itemsCount, h("span", { class: "spacer" }), itemsMore),
      h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, itemHead(dead)), itemsBody))),
    h("div", { class: "grid2" },
      h("div", {},
        fifo ? h("div", { class: "panel" },
          h("h2", {}, "Leases in flight", leasesCount),
          h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, h("tr", {},
            h("th", {}, "Receipt"), h("th", { class: "num" }, "Delivery"), h("th", { class: "num" }, "Expires in"),
            h("th", { class: "num" }, "Age"), h("th", {}, "Group"), h("th", {}, ""))), leasesBody))) : null,
        fifo ? h("div", { class: "panel" },
          h("h2", {}, "Message groups"),
          h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, h("tr", {},
            h("th", {}, "Group"), h("th", {}, "Head"), h("th", { class: "num" }, "Waiting"),
            h("th", { class: "num" }, "Next waiting for"))), groupsBody))) : null),
      fifo ? h("div", { class: "panel" }, h("h2", {}, "Settings"), settingsForm) : null),
    dlqPanel);
  setCrumbs([[kind === "priority" ? "priority queues" : "queues", "#/?kind=" + kind], [name]]);
  dlqPanel.append(
    h("h2", {}, dlqTitle, h("span", { class: "spacer" }),
      h("button", { class: "button tiny", id: "dlq-redrive", onclick: () => redrive(page.dlq) }, "Redrive all…")),
    h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, itemHead(true)), dlqBody)));

  // ------------------------------------------------------------ actions

  function redrive(queue) {
    const input = h("input", { type: "number", min: 1, max: 1000, id: "redrive-max", placeholder: "all (up to 1,000)" });
    return act({
      title: "Redrive " + queue,
      text: "Moves dead letters back to the queues they came from, as fresh items. Leave empty for all (at most 1,000 per call).",
      body: input, ok: "Redrive", focus: input,
      call: () => api("POST", "/v1/queues/" + enc(queue) + "/redrive" + (input.value ? "?max=" + Number(input.value) : "")),
      report: (a) => "Redrove " + num(a.redriven) + " item" + (a.redriven === 1 ? "" : "s") + " from " + queue + ".",
    });
  }

  function renderActions() {
    const paused = page.stats && page.stats.paused;
    fill(actions, 
      paused
        ? h("button", { class: "button primary", id: "act-resume", onclick: () => act({
            title: "Resume " + name, text: "Pops waiting on it are served at once, on every daemon.", ok: "Resume",
            call: () => api("POST", base + "/resume"), report: () => name + " resumed: it hands items out again." }) }, "Resume")
        : h("button", { class: "button", id: "act-pause", onclick: () => act({
            title: "Pause " + name, text: "It keeps taking pushes but hands nothing out (pops wait or answer empty) until resumed; leases in flight still settle.", ok: "Pause",
            call: () => api("POST", base + "/pause"), report: () => name + " paused: nothing is handed out." }) }, "Pause"),
      dead ? h("button", { class: "button", id: "act-redrive", onclick: () => redrive(name) }, "Redrive…") : null,
      fifo ? h("button", { class: "button danger", id: "act-purge", onclick: () => act({
        title: "Purge " + name, text: "Drops every visible and delayed item pushed before now. Leased items stay leased.", ok: "Purge", danger: true,
        call: () => api("POST", base + "/purge"),
        report: (a) => "Purged " + num(a.purged) + " item" + (a.purged === 1 ? "" : "s") + " (" + num(a.items) + " visible, " + num(a.delayed) + " delayed)" + (a.done ? "." : "; more remain, purge again.") }) }, "Purge…") : null,
      fifo ? h("button", { class: "button danger", id: "act-delete", onclick: () => act({
        title: "Delete " + name, text: "Deletes the queue and everything it holds: items, delayed items, leases (their receipts stop working), settings.", ok: "Delete queue", danger: true,
        call: () => api("DELETE", base),
        report: (a) => "Deleted " + name + ": " + num(a.items) + " items, " + num(a.delayed) + " delayed, " + num(a.leased) + " leased." }) }, "Delete…") : null);
  }

  function deleteItem(queue, item) {
    return act({
      title: "Delete this item?", text: "Item " + item.id.slice(0, 16) + "… of " + queue + " (" + bytes(item.size) + "). If a worker takes it first, nothing is deleted.",
      ok: "Delete item", danger: true,
      call: () => api("DELETE", root(kind) + enc(queue) + "/items/" + item.id),
      report: () => "Deleted one item from " + queue + ".",
    });
  }

  function nack(lease) {
    return act({
      title: "Release this lease?", text: "Nacks receipt " + lease.receipt + ": the item goes back to the queue now (or to its dead-letter queue if out of deliveries).",
      ok: "Release",
      call: () => api("POST", base + "/nack/" + lease.receipt),
      report: (a) => "Released: the item " + (a.outcome === "dead_lettered" ? "went to " + (a.dead_letter_queue || "its dead-letter queue") : "is back in " + name) + ".",
    });
  }

  // ------------------------------------------------------------ rendering

  function payloadCell(item) {
    return h("td", { class: "payload" },
      item.encoding === "hex" ? h("span", { class: "badge hex" }, "hex") : null,
      item.payload, item.truncated ? h("span", { class: "more" }, " … (" + bytes(item.size) + ")") : null);
  }

  function itemRow(queue, item, withOrigin) {
    return h("tr", { dataset: { item: item.id } },
      h("td", { class: "mono", title: item.id }, shortId(item.id)),
      h("td", { class: "num " + ageClass(Date.now() - item.enqueued_at_ms) }, age(Date.now() - item.enqueued_at_ms)),
      h("td", { class: "num" }, bytes(item.size)),
      kind === "priority" ? h("td", { class: "num" }, num(item.priority)) : null,
      payloadCell(item),
      h("td", { class: "mono" }, item.group || ""),
      numCell(item.deliveries),
      withOrigin ? [h("td", {}, item.dead_letter_from
        ? h("a", { href: "#/queue/fifo/" + enc(item.dead_letter_from) }, item.dead_letter_from) : "–"),
      h("td", { class: "num" }, item.dead_letter_deliveries === null ? "–" : num(item.dead_letter_deliveries) + "×")] : null,
      h("td", { class: "num" }, h("button", { class: "button tiny danger", title: "delete this item", onclick: () => deleteItem(queue, item) }, "Delete")));
  }

  function empty(body, columns, text) {
    fill(body, h("tr", {}, h("td", { colspan: columns, class: "muted" }, text)));
  }

  function renderStats(stats, r) {
    const tile = (label, value, col, cls) => h("div", { class: "tile", dataset: { tile: col } },
      h("div", { class: "label" }, label), h("div", { class: "value " + (cls || "") }, value));
    fill(tiles, 
      tile("Depth", num(stats.depth), "depth"), tile("In flight", num(stats.leased), "leased"),
      tile("Delayed", num(stats.delayed), "delayed"), tile("Grouped", num(stats.grouped), "grouped"),
      tile("Waiting pops", num(stats.waiting), "waiting"),
      tile("Oldest", age(stats.oldest_item_age_ms), "oldest", ageClass(stats.oldest_item_age_ms)),
      tile("Push/s", rate(r ? r.push : null), "push"), tile("Pop/s", rate(r ? r.pop : null), "pop"));
    fill(badges, 
      h("span", { class: "badge kind" }, kind === "priority" ? "priority" : "FIFO"),
      dead ? h("span", { class: "badge dlq" }, "DLQ") : null,
      stats.paused ? h("span", { class: "badge paused", id: "paused-badge" }, "paused") : null);
  }

  async function loadItems(queue, body, withOrigin, countEl, moreEl) {
    const answer = await api("GET", root(kind) + enc(queue) + "/items?limit=50");
    const columns = 8 + (withOrigin ? 2 : 0) + (kind === "priority" ? 1 : 0);
    if (!answer.items.length) empty(body, columns, "No visible items.");
    else fill(body, ...answer.items.map((item) => itemRow(queue, item, withOrigin)));
    if (countEl) countEl.textContent = answer.items.length ? "first " + answer.items.length : "";
    if (moreEl) moreEl.textContent = answer.next ? "showing the first 50; leased, delayed and group-waiting items are not listed" : "";
  }

  async function loadLeases() {
    const answer = await api("GET", base + "/leases?limit=100");
    leasesCount.textContent = answer.leases.length ? String(answer.leases.length) + (answer.next ? "+" : "") : "";
    if (!answer.leases.length) return empty(leasesBody, 6, "No leases in flight.");
    const now = Date.now();
    fill(leasesBody, ...answer.leases.map((lease) => h("tr", { dataset: { receipt: lease.receipt } },
      h("td", { class: "mono", title: lease.receipt }, lease.receipt.slice(0, 14) + "…"),
      h("td", { class: "num" }, num(lease.delivery_count)),
      h("td", { class: "num" }, age(lease.lease_expires_at_ms - now)),
      h("td", { class: "num" }, lease.enqueued_at_ms ? age(now - lease.enqueued_at_ms) : "–"),
      h("td", { class: "mono" }, lease.group || ""),
      h("td", { class: "num" }, h("button", { class: "button tiny", onclick: () => nack(lease) }, "Release")))));
  }

  async function loadGroups() {
    const answer = await api("GET", base + "/groups?limit=50");
    if (!answer.groups.length) return empty(groupsBody, 4, "No message groups.");
    const now = Date.now();
    fill(groupsBody, ...answer.groups.map((g) => h("tr", {},
      h("td", { class: "mono" }, g.group),
      h("td", {}, g.head === "handing_off" ? "handing off" : "out"),
      h("td", { class: "num" }, (g.waiting >= g.waiting_capped_at ? "≥ " : "") + num(g.waiting)),
      h("td", { class: "num" }, g.next_enqueued_at_ms ? age(now - g.next_enqueued_at_ms) : "–"))));
  }

  const SETTINGS = [
    ["max_deliveries", "Max deliveries", "number"], ["default_lease_ms", "Default lease (ms)", "number"],
    ["dead_letter_queue", "Dead-letter queue", "text"], ["dedup_window_ms", "Dedup window (ms)", "number"],
    ["delivery_delay_ms", "Delivery delay (ms)", "number"],
  ];

  function renderSettings(answer) {
    const inputs = new Map();
    const message = h("p", { class: "error", id: "settings-error" });
    const saved = h("span", { class: "muted small", id: "settings-saved" });
    fill(settingsForm, ...SETTINGS.flatMap(([key, label, type]) => {
      const stored = answer.stored[key];
      const effective = answer.settings[key];
      const input = h("input", { type, id: "setting-" + key, name: key,
        value: stored === undefined || stored === null ? "" : stored,
        placeholder: effective === null || effective === undefined ? "none (default)" : String(effective) + " (default)" });
      inputs.set(key, input);
      return [h("label", { for: "setting-" + key }, label), input];
    }), h("div", { class: "row-buttons" },
      h("button", { class: "button primary", type: "submit", id: "settings-save" }, "Save"),
      h("span", { class: "muted small" }, "empty = the daemon's default"), saved), message);
    settingsForm.onsubmit = async (event) => {
      event.preventDefault();
      const change = {};
      for (const [key, , type] of SETTINGS) {
        const raw = inputs.get(key).value.trim();
        const before = answer.stored[key];
        const value = raw === "" ? null : type === "number" ? Number(raw) : raw;
        if (value !== (before === undefined ? null : before)) change[key] = value;
      }
      message.textContent = "";
      saved.textContent = "";
      if (!Object.keys(change).length) { saved.textContent = "nothing changed"; return; }
      try {
        const next = await api("PUT", base + "/settings", change);
        page.settings = next;
        renderSettings(next);
        $("settings-saved").textContent = "saved";
        loadDlq();
      } catch (e) {
        message.textContent = e.message; // the API's own validation message
      }
    };
  }

  async function loadDlq() {
    const target = dead ? null : (page.settings ? page.settings.settings.dead_letter_queue : fifo ? name + ".dead" : null);
    page.dlq = target;
    dlqPanel.hidden = !target;
    if (!target) return;
    fill(dlqTitle, "Dead-letter queue ", h("a", { href: "#/queue/fifo/" + enc(target) }, target));
    await loadItems(target, dlqBody, true);
  }

  async function refresh() {
    try {
      const [stats, r] = await Promise.all([api("GET", base), rates(kind, [name])]);
      page.stats = stats;
      renderStats(stats, r.get(name));
      renderActions();
      const loads = [loadItems(name, itemsBody, dead, itemsCount, itemsMore)];
      if (fifo) loads.push(loadLeases(), loadGroups(), loadDlq());
      await Promise.all(loads);
      sectionError.textContent = "";
    } catch (e) {
      sectionError.textContent = e.message;
    }
  }

  async function start() {
    if (fifo) {
      try {
        page.settings = await api("GET", base + "/settings");
        renderSettings(page.settings);
      } catch (e) {
        fill(settingsForm, h("p", { class: "error" }, e.message));
      }
    }
    await refresh();
  }

  return { refresh, start };
}

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

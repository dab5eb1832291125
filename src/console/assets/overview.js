// hotq console: the queues overview (see app.js for the helpers it uses).
"use strict";
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

/** How many of the page's busiest queues the overview charts. */
const BUSIEST_CHARTED = 3;

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
    loaded: false, // no "no queues" before the first answer
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
  const body = h("tbody", { id: "queues" }, loadingRow(COLUMNS.length + 1));
  const status = h("span", { class: "muted small", id: "page-status" });
  const prev = h("button", { class: "button tiny", id: "page-prev", onclick: () => { state.after = state.cursors.pop(); load(); } }, "‹ Prev");
  const next = h("button", { class: "button tiny", id: "page-next", onclick: () => { state.cursors.push(state.after); state.after = state.next; load(); } }, "Next ›");
  const error = h("p", { class: "error", id: "overview-error" });
  const daemonCharts = chartsPanel("This daemon, all " + (state.kind === "priority" ? "priority" : "FIFO") + " queues",
    "/v1/history?kind=" + state.kind, CHART_NOTE);
  const busiest = h("div", { class: "busiest", id: "busiest" });
  const busiestPanels = new Map(); // queue name → its charts panel

  fill($("main"), 
    h("div", { class: "toolbar" }, h("h1", {}, "Queues"), kinds, filter, limit, h("span", { class: "spacer" })),
    h("div", { class: "notice", id: "notice", hidden: true }),
    daemonCharts.el,
    busiest,
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
    if (!state.loaded) return;
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
      state.loaded = true;
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
      await Promise.all([daemonCharts.refresh(), refreshBusiest()]);
      state.loaded = true;
      error.textContent = "";
    } catch (e) {
      error.textContent = e.message;
      if (!state.loaded) fill(body, h("tr", { class: "loading" }, h("td", { colspan: COLUMNS.length + 1, class: "muted" }, "Not loaded: " + e.message)));
    }
    render();
  }

  /** Charts of the page's busiest queues: the most pushed and popped, then the deepest. */
  function refreshBusiest() {
    const busy = (q) => { const r = state.rates.get(q.queue); return (r ? r.push + r.pop : 0) * 1e9 + q.depth + q.leased; };
    const top = state.queues.filter((q) => busy(q) > 0).sort((a, b) => busy(b) - busy(a)).slice(0, BUSIEST_CHARTED);
    for (const name of [...busiestPanels.keys()]) {
      if (!top.some((q) => q.queue === name)) busiestPanels.delete(name);
    }
    for (const q of top) {
      if (!busiestPanels.has(q.queue)) {
        busiestPanels.set(q.queue, chartsPanel("Busiest: " + q.queue,
          "/v1/history?kind=" + state.kind + "&queue=" + enc(q.queue), CHART_NOTE));
      }
    }
    fill(busiest, top.map((q) => busiestPanels.get(q.queue).el));
    return Promise.all(top.map((q) => busiestPanels.get(q.queue).refresh()));
  }

  return { refresh: load };
}

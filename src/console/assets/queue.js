// hotq console: one queue's page (see app.js for the helpers it uses).
"use strict";
// ---------------------------------------------------------------- queue page

function queuePage(kind, name) {
  const fifo = kind === "fifo";
  const dead = name.endsWith(".dead");
  const base = root(kind) + enc(name);
  const page = { stats: null, settings: null, dlq: null, sqs: null };

  const tiles = h("div", { class: "tiles", id: "tiles" }, h("div", { class: "tile loading muted" }, "Loading…"));
  const title = h("h1", {}, name);
  const badges = h("span", { id: "badges" });
  const actions = h("div", { class: "actions", id: "actions" });
  const itemColumns = 8 + (dead ? 2 : 0) + (fifo ? 0 : 1);
  const itemsBody = h("tbody", { id: "items" }, loadingRow(itemColumns));
  const itemsCount = h("span", { class: "count" });
  const itemsMore = h("span", { class: "muted small" });
  const leasesBody = h("tbody", { id: "leases" }, loadingRow(7));
  const leasesCount = h("span", { class: "count" });
  const groupsBody = h("tbody", { id: "groups" }, loadingRow(4));
  const dlqBody = h("tbody", { id: "dlq-items" }, loadingRow(10));
  const dlqTitle = h("span", {}, "Dead-letter queue");
  const dlqPanel = h("div", { class: "panel", id: "dlq-panel", hidden: true });
  const settingsForm = h("form", { class: "settings", id: "settings" });
  const sqsBody = h("tbody", { id: "sqs-attributes" });
  const sqsPanel = h("div", { class: "panel", id: "sqs-panel", hidden: true },
    h("h2", {}, "SQS"), h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, h("tr", {},
      h("th", {}, "SQS"), h("th", {}, "Value"), h("th", {}, "hotq"), h("th", {}, "Value"))), sqsBody)));
  const sectionError = h("p", { class: "error", id: "queue-error" });
  const history = chartsPanel("History", "/v1/history?kind=" + kind + "&queue=" + enc(name), CHART_NOTE);

  // A dead-letter queue is FIFO, whatever its origin's kind.
  const itemHead = (itemsKind, withOrigin) => h("tr", {},
    h("th", {}, "Id"), h("th", { class: "num" }, "Age"), h("th", { class: "num" }, "Size"),
    itemsKind === "priority" ? h("th", { class: "num" }, "Priority") : null,
    h("th", {}, "Payload"), h("th", {}, "Group"), h("th", { class: "num" }, "Deliveries"),
    withOrigin ? [h("th", {}, "From"), h("th", { class: "num" }, "Died after")] : null,
    h("th", {}, ""));

  fill($("main"), 
    h("div", { class: "toolbar" }, title, badges, h("span", { class: "spacer" }), actions),
    h("div", { class: "notice", id: "notice", hidden: true }),
    sectionError,
    tiles,
    sqsPanel,
    history.el,
    h("div", { class: "panel" },
      h("h2", {}, "Items", itemsCount, h("span", { class: "spacer" }), itemsMore),
      h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, itemHead(kind, dead)), itemsBody))),
    h("div", { class: "grid2" },
      h("div", {},
        h("div", { class: "panel" },
          h("h2", {}, "Leases in flight", leasesCount),
          h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, h("tr", {},
            h("th", {}, "Receipt"), h("th", { class: "num" }, "Delivery"), h("th", { class: "num" }, "Expires in"),
            h("th", { class: "num" }, "Age"), h("th", {}, "Payload"), h("th", {}, "Group"), h("th", {}, ""))), leasesBody))),
        fifo ? h("div", { class: "panel" },
          h("h2", {}, "Message groups"),
          h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, h("tr", {},
            h("th", {}, "Group"), h("th", {}, "Head"), h("th", { class: "num" }, "Waiting"),
            h("th", { class: "num" }, "Next waiting for"))), groupsBody))) : null),
      h("div", {},
        h("div", { class: "panel" }, h("h2", {}, "Send a message"), sendPanel()),
        h("div", { class: "panel" }, h("h2", {}, "Peek"), peekPanel()),
        h("div", { class: "panel" }, h("h2", {}, "Settings"), settingsForm))),
    dlqPanel);
  setCrumbs([[kind === "priority" ? "priority queues" : "queues", "#/?kind=" + kind], [name]]);
  dlqPanel.append(
    h("h2", {}, dlqTitle, h("span", { class: "spacer" }),
      h("button", { class: "button tiny", id: "dlq-redrive", onclick: () => redrive(page.dlq) }, "Redrive all…")),
    h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, itemHead("fifo", true)), dlqBody)));

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
      h("button", { class: "button danger", id: "act-purge", onclick: () => act({
        title: "Purge " + name, text: "Drops every visible and delayed item pushed before now. Leased items stay leased.", ok: "Purge", danger: true,
        call: () => api("POST", base + "/purge"),
        report: (a) => "Purged " + num(a.purged) + " item" + (a.purged === 1 ? "" : "s") + " (" + num(a.items) + " visible, " + num(a.delayed) + " delayed)" + (a.done ? "." : "; more remain, purge again.") }) }, "Purge…"),
      h("button", { class: "button danger", id: "act-delete", onclick: () => act({
        title: "Delete " + name, text: "Deletes the queue and everything it holds: items, delayed items, leases (their receipts stop working), settings.", ok: "Delete queue", danger: true,
        call: () => api("DELETE", base),
        report: (a) => "Deleted " + name + ": " + num(a.items) + " items, " + num(a.delayed) + " delayed, " + num(a.leased) + " leased." }) }, "Delete…"));
  }

  function deleteItem(itemsKind, queue, item) {
    return act({
      title: "Delete this item?", text: "Item " + item.id.slice(0, 16) + "… of " + queue + " (" + bytes(item.size) + "). If a worker takes it first, nothing is deleted.",
      ok: "Delete item", danger: true,
      call: () => api("DELETE", root(itemsKind) + enc(queue) + "/items/" + item.id),
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

  // ------------------------------------------------------------ send and peek

  /** Sends one message through the push call; the API checks every field. */
  function sendPanel() {
    const field = (label, input) => [h("label", { for: input.id }, label), input];
    const body = h("textarea", { id: "send-body", rows: 3, placeholder: "payload (text)", spellcheck: "false" });
    const delay = h("input", { type: "number", id: "send-delay", placeholder: "0 (the queue's delivery delay)" });
    const dedup = h("input", { type: "text", id: "send-dedup", placeholder: "none" });
    const group = fifo ? h("input", { type: "text", id: "send-group", placeholder: "none" }) : null;
    const priority = fifo ? null : h("input", { type: "number", id: "send-priority", placeholder: "0" });
    const result = h("span", { class: "muted small", id: "send-result" });
    const error = h("p", { class: "error", id: "send-error" });
    const form = h("form", { class: "settings", id: "send" },
      field("Body", body), field("Delay (ms)", delay), field("Dedup id", dedup),
      fifo ? field("Group", group) : field("Priority", priority),
      h("div", { class: "row-buttons" }, h("button", { class: "button primary", type: "submit", id: "send-submit" }, "Send"), result),
      error);
    form.onsubmit = async (event) => {
      event.preventDefault();
      const query = new URLSearchParams();
      if (delay.value.trim()) query.set("delay_ms", delay.value.trim());
      if (group && group.value.trim()) query.set("group", group.value.trim());
      if (priority && priority.value.trim()) query.set("priority", priority.value.trim());
      const headers = dedup.value ? { "hotq-dedup-id": dedup.value } : {};
      error.textContent = result.textContent = "";
      try {
        const answer = await api("POST", base + "/items" + (query.toString() ? "?" + query : ""), body.value, { raw: true, headers });
        result.textContent = answer.duplicate ? "a duplicate: nothing stored"
          : answer.visible_at_ms ? "sent, visible in " + age(answer.visible_at_ms - Date.now()) : "sent";
        refreshNow();
      } catch (e) {
        error.textContent = e.message; // the API's own refusal
      }
    };
    return form;
  }

  /** The next N items, read through the items listing: nothing is taken. */
  function peekPanel() {
    const count = h("input", { type: "number", id: "peek-n", value: 5, title: "1 to 100 (the API checks it)" });
    const list = h("tbody", { id: "peek-items" });
    const error = h("p", { class: "error", id: "peek-error" });
    const form = h("form", { class: "peek", id: "peek" },
      h("label", { for: "peek-n" }, "Next"), count, h("span", {}, "items"),
      h("button", { class: "button", type: "submit", id: "peek-submit" }, "Peek"), error);
    form.onsubmit = async (event) => {
      event.preventDefault();
      error.textContent = "";
      try {
        const answer = await api("GET", base + "/items?limit=" + encodeURIComponent(count.value.trim()));
        if (!answer.items.length) return empty(list, 4, "No visible items.");
        fill(list, ...answer.items.map((item) => h("tr", { dataset: { item: item.id } },
          h("td", { class: "mono id" }, copyable(item.id)),
          fifo ? h("td", { class: "mono" }, groupOf(item)) : h("td", { class: "num" }, num(item.priority)),
          payloadCell(item))));
      } catch (e) {
        error.textContent = e.message;
      }
    };
    return h("div", {}, form, h("div", { class: "table-wrap" }, h("table", {}, list)));
  }

  // ------------------------------------------------------------ rendering

  function payloadCell(item) {
    if (item.sqs) return sqsPayloadCell(item);
    return h("td", { class: "payload" },
      item.encoding === "hex" ? h("span", { class: "badge hex" }, "hex") : null,
      copyable(item.payload, "payload-text"), item.truncated ? h("span", { class: "more" }, " … (" + bytes(item.size) + ")") : null);
  }

  /**
   * An SQS message as SQS shows it: its body (not the envelope hotq stores
   * it in), its attributes, its MessageId on hover.
   */
  function sqsPayloadCell(item) {
    const m = item.sqs;
    const attrs = Object.entries(m.attributes || {}).map(([name, v]) =>
      h("span", { class: "attr", dataset: { attribute: name } }, name + " = " +
        (v.StringValue !== undefined ? v.StringValue : "(" + v.DataType + ", " + (v.BinaryValue || "").length + " base64 chars)")));
    return h("td", { class: "payload", title: "MessageId " + m.message_id },
      h("span", { class: "badge sqs" }, "SQS"),
      copyable(m.body, "sqs-body"), m.body_truncated ? h("span", { class: "more" }, " … (" + bytes(item.size) + " stored)") : null,
      attrs.length ? h("div", { class: "attrs small muted" }, ...attrs) : null);
  }

  /** A group as its sender named it: an SQS MessageGroupId as sent. */
  function groupOf(item) {
    return (item.sqs && item.sqs.message_group_id) || item.group || "";
  }

  /**
   * Deliveries of an item: a dead letter's count is the deliveries it died
   * after plus those since in this queue, so it agrees with "Died after".
   */
  function deliveriesCell(item) {
    if (item.dead_letter_deliveries === null) return numCell(item.deliveries, "deliveries");
    const total = item.dead_letter_deliveries + item.deliveries;
    return h("td", { class: "num", dataset: { col: "deliveries" },
      title: num(item.dead_letter_deliveries) + " in " + item.dead_letter_from + " before it died, " + num(item.deliveries) + " here" }, num(total));
  }

  function itemRow(itemsKind, queue, item, withOrigin) {
    return h("tr", { dataset: { item: item.id } },
      h("td", { class: "mono id" }, copyable(item.id)),
      h("td", { class: "num " + ageClass(Date.now() - item.enqueued_at_ms) }, age(Date.now() - item.enqueued_at_ms)),
      h("td", { class: "num" }, bytes(item.size)),
      itemsKind === "priority" ? h("td", { class: "num" }, num(item.priority)) : null,
      payloadCell(item),
      h("td", { class: "mono" }, groupOf(item)),
      deliveriesCell(item),
      withOrigin ? [h("td", {}, item.dead_letter_from
        ? h("a", { href: "#/queue/" + (item.dead_letter_from_priority === null ? "fifo" : "priority") + "/" + enc(item.dead_letter_from) },
          item.dead_letter_from) : "–"),
      h("td", { class: "num", dataset: { col: "died-after" } }, item.dead_letter_deliveries === null ? "–" : num(item.dead_letter_deliveries) + "×")] : null,
      h("td", { class: "num" }, h("button", { class: "button tiny danger delete-item", title: "delete this item", onclick: () => deleteItem(itemsKind, queue, item) }, "Delete")));
  }

  function empty(body, columns, text) {
    fill(body, h("tr", {}, h("td", { colspan: columns, class: "muted" }, text)));
  }

  /**
   * A queue with fairness keys: its largest tenants' backlog (the stats
   * name at most 10, largest first; the tile shows 3, its title all).
   * Nothing for a queue without keys.
   */
  function fairTile(keys) {
    if (!keys.length) return null;
    const shown = (k) => (k.key === "" ? "(no key)" : k.key) + " " + num(k.items);
    return h("div", { class: "tile wide", dataset: { tile: "fair" }, title: keys.map(shown).join("\n") },
      h("div", { class: "label" }, "Largest tenants"),
      h("div", { class: "value small" }, keys.slice(0, 3).map(shown).join(" · ")));
  }

  /**
   * The limits in force (the settings' effective values): the rate with
   * its burst, and the leases in flight against `leases_max` (amber at
   * the limit: leased pops then wait for an ack, nack or expiry). Nothing
   * for a queue without limits.
   */
  function limitTiles(stats) {
    const limits = page.settings ? page.settings.settings : {};
    const rateLimit = limits.pop_rate_max === null || limits.pop_rate_max === undefined ? null :
      h("div", { class: "tile wide", dataset: { tile: "rate-limit" }, title: "pop_rate_max, pop_rate_burst: held pops wait or answer empty" },
        h("div", { class: "label" }, "Rate limit"),
        h("div", { class: "value" }, num(limits.pop_rate_max) + "/s", h("span", { class: "muted small" }, " (burst " + num(limits.pop_rate_burst) + ")")));
    const leasesMax = limits.leases_max;
    const leases = leasesMax === null || leasesMax === undefined ? null :
      h("div", { class: "tile", dataset: { tile: "leases-limit" }, title: "leases in flight / leases_max" },
        h("div", { class: "label" }, "Leases"),
        h("div", { class: "value " + (stats.leased >= leasesMax ? "age-warn" : "") }, num(stats.leased) + " / " + num(leasesMax)));
    return [rateLimit, leases];
  }

  function renderStats(stats, r) {
    const tile = (label, value, col, cls) => h("div", { class: "tile", dataset: { tile: col } },
      h("div", { class: "label" }, label), h("div", { class: "value " + (cls || "") }, value));
    fill(tiles, 
      tile("Depth", num(stats.depth), "depth"), tile("In flight", num(stats.leased), "leased"),
      tile("Delayed", num(stats.delayed), "delayed"), tile("Grouped", num(stats.grouped), "grouped"),
      tile("Waiting pops", num(stats.waiting), "waiting"), tile("Expired", num(stats.expired), "expired"),
      tile("Oldest", age(stats.oldest_item_age_ms), "oldest", ageClass(stats.oldest_item_age_ms)),
      tile("Push/s", rate(r ? r.push : null), "push"), tile("Pop/s", rate(r ? r.pop : null), "pop"),
      ...limitTiles(stats), fairTile(stats.fair_backlog || []));
    fill(badges, 
      h("span", { class: "badge kind" }, kind === "priority" ? "priority" : "FIFO"),
      dead ? h("span", { class: "badge dlq" }, "DLQ") : null,
      page.sqs ? h("span", { class: "badge sqs", id: "sqs-badge" }, page.sqs.queue_type === "fifo" ? "SQS FIFO" : "SQS standard") : null,
      stats.paused ? h("span", { class: "badge paused", id: "paused-badge" }, "paused") : null);
  }

  async function loadItems(itemsKind, queue, body, withOrigin, countEl, moreEl) {
    const answer = await api("GET", root(itemsKind) + enc(queue) + "/items?limit=50");
    const columns = 8 + (withOrigin ? 2 : 0) + (itemsKind === "priority" ? 1 : 0);
    // Rendered after the call: a table shows "Loading…" until its first answer.
    if (!answer.items.length) empty(body, columns, "No visible items.");
    else fill(body, ...answer.items.map((item) => itemRow(itemsKind, queue, item, withOrigin)));
    if (countEl) countEl.textContent = answer.items.length ? "first " + answer.items.length : "";
    if (moreEl) moreEl.textContent = answer.next ? "showing the first 50; leased, delayed and group-waiting items are not listed" : "";
    return answer;
  }

  async function loadLeases() {
    // A page that read its share of the store-wide due index may end short,
    // even empty, with a next: follow a few pages for the first 100.
    let answer = await api("GET", base + "/leases?limit=100");
    for (let pages = 1; pages < 10 && answer.next && answer.leases.length < 100; pages++) {
      const more = await api("GET", base + "/leases?limit=" + (100 - answer.leases.length) + "&after=" + answer.next);
      answer = { leases: answer.leases.concat(more.leases), next: more.next };
    }
    leasesCount.textContent = answer.leases.length ? String(answer.leases.length) + (answer.next ? "+" : "") : "";
    if (!answer.leases.length) { empty(leasesBody, 7, "No leases in flight."); return answer; }
    const now = Date.now();
    fill(leasesBody, ...answer.leases.map((lease) => h("tr", { dataset: { receipt: lease.receipt } },
      h("td", { class: "mono id" }, copyable(lease.receipt)),
      h("td", { class: "num" }, num(lease.delivery_count)),
      h("td", { class: "num" }, age(lease.lease_expires_at_ms - now)),
      h("td", { class: "num" }, lease.enqueued_at_ms ? age(now - lease.enqueued_at_ms) : "–"),
      lease.size ? payloadCell(lease) : h("td", { class: "muted" }, "–"),
      h("td", { class: "mono" }, groupOf(lease)),
      h("td", { class: "num" }, h("button", { class: "button tiny release", onclick: () => nack(lease) }, "Release")))));
    return answer;
  }

  /**
   * Where a group's head is, from the same refresh's items and leases: the
   * API knows only "handing off" or not; visible or leased shows in the
   * tables, and the label names only what the pages shown can tell.
   */
  function headState(g, items, leases) {
    if (g.head === "handing_off") return "handing off";
    if (items.items.some((item) => item.group === g.group)) return "visible";
    if (leases.leases.some((lease) => lease.group === g.group)) return "leased";
    if (items.next || leases.next) return "not in the pages shown";
    return "delayed or being handed out";
  }

  async function loadGroups(itemsAnswer, leasesAnswer) {
    const answer = await api("GET", base + "/groups?limit=50");
    if (!answer.groups.length) return empty(groupsBody, 4, "No message groups.");
    const now = Date.now();
    fill(groupsBody, ...answer.groups.map((g) => h("tr", { dataset: { group: g.group } },
      h("td", { class: "mono" }, g.group),
      h("td", { dataset: { col: "head" } }, headState(g, itemsAnswer, leasesAnswer)),
      h("td", { class: "num" }, (g.waiting >= g.waiting_capped_at ? "≥ " : "") + num(g.waiting)),
      h("td", { class: "num" }, g.next_enqueued_at_ms ? age(now - g.next_enqueued_at_ms) : "–"))));
  }

  const SETTINGS = [
    ["max_deliveries", "Max deliveries", "number"], ["default_lease_ms", "Default lease (ms)", "number"],
    ["dead_letter_queue", "Dead-letter queue", "text"], ["dedup_window_ms", "Dedup window (ms)", "number"],
    ["delivery_delay_ms", "Delivery delay (ms)", "number"],
    ["pop_rate_max", "Rate limit (items/s)", "number"], ["pop_rate_burst", "Rate burst (items)", "number"],
    ["leases_max", "Max leases in flight", "number"],
    ["leases_per_key_max", "Max leases per tenant", "number"],
    ["pop_rate_per_key_max", "Rate limit per tenant (items/s)", "number"],
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
        refresh(); // the limit tiles, the dead-letter queue
      } catch (e) {
        message.textContent = e.message; // the API's own validation message
      }
    };
  }

  /**
   * A queue created through SQS, as SQS shows it: type, URL, ARN, and its
   * attributes under their SQS names next to the hotq settings they are.
   */
  async function loadSqs() {
    if (!fifo) return;
    const view = await api("GET", base + "/sqs");
    page.sqs = view.created_through_sqs ? view : null;
    sqsPanel.hidden = !page.sqs;
    if (!page.sqs) return;
    const a = view.attributes, hq = view.hotq;
    const ms = (v) => v === null || v === undefined ? "default" : num(v) + " ms";
    const row = (sqsName, sqsValue, hotqName, hotqValue) => h("tr", { dataset: { sqs: sqsName } },
      h("td", { class: "mono" }, sqsName), h("td", { class: "mono sqs-value" }, sqsValue === undefined ? "–" : copyable(String(sqsValue))),
      h("td", { class: "mono" }, hotqName || ""), h("td", { class: "mono hotq-value" }, hotqValue === undefined ? "" : String(hotqValue)));
    const policy = a.RedrivePolicy ? JSON.parse(a.RedrivePolicy) : null;
    fill(sqsBody,
      row("QueueUrl", view.queue_url), row("QueueArn", view.queue_arn),
      row("Type", view.queue_type === "fifo" ? "FIFO (FifoQueue = true)" : "standard", "message groups", view.queue_type === "fifo" ? "MessageGroupId" : "none"),
      row("VisibilityTimeout", a.VisibilityTimeout + " s", "default_lease_ms", ms(hq.default_lease_ms)),
      row("maxReceiveCount", view.max_receive_count === null ? "none (no RedrivePolicy)" : view.max_receive_count, "max_deliveries", hq.max_deliveries === null ? "default" : hq.max_deliveries),
      row("deadLetterTargetArn", policy ? policy.deadLetterTargetArn : "none", "dead_letter_queue", hq.dead_letter_queue || "none"),
      row("DelaySeconds", a.DelaySeconds + " s", "delivery_delay_ms", ms(hq.delivery_delay_ms)),
      ...Object.keys(a).filter((k) => !["QueueArn", "VisibilityTimeout", "DelaySeconds", "RedrivePolicy"].includes(k))
        .map((k) => row(k, a[k])));
  }

  async function loadDlq() {
    const target = dead ? null : (page.settings ? page.settings.settings.dead_letter_queue : name + ".dead");
    page.dlq = target;
    dlqPanel.hidden = !target;
    if (!target) return;
    fill(dlqTitle, "Dead-letter queue ", h("a", { href: "#/queue/fifo/" + enc(target) }, target));
    await loadItems("fifo", target, dlqBody, true);
  }

  async function refresh() {
    try {
      // Settings too, for the limit tiles (a change made elsewhere shows);
      // the form keeps what it was rendered with.
      const [stats, r, settings] = await Promise.all([api("GET", base), rates(kind, [name]), api("GET", base + "/settings"), loadSqs()]);
      page.stats = stats;
      page.settings = settings;
      renderStats(stats, r.get(name));
      renderActions();
      const [items, leases] = await Promise.all([
        loadItems(kind, name, itemsBody, dead, itemsCount, itemsMore), loadLeases(), loadDlq(), history.refresh()]);
      if (fifo) await loadGroups(items, leases);
      sectionError.textContent = "";
    } catch (e) {
      sectionError.textContent = e.message;
    }
  }

  async function start() {
    try {
      page.settings = await api("GET", base + "/settings");
      renderSettings(page.settings);
    } catch (e) {
      fill(settingsForm, h("p", { class: "error" }, e.message));
    }
    await refresh();
  }

  return { refresh, start };
}

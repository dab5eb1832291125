// hotq console: charts of the last 15 minutes or hour, from GET /v1/history.
// SVG drawn here in a few dozen lines: no library, no CDN (the page's CSP
// allows only its own origin), nothing to build.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";

function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs || {})) el.setAttribute(key, value);
  el.append(...children);
  return el;
}

/** Points of a gauge: its value at each sample. */
function gaugePoints(samples, field, scale = 1) {
  return samples.map((s) => ({ at: s.at_ms, v: s[field] * scale, count: null }));
}

/** Points of a rate: a count's change over the time between two samples
 * (none where the count fell: this daemon restarted or forgot the queue). */
function ratePoints(samples, count) {
  const points = [];
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1], b = samples[i];
    const seconds = (b.at_ms - a.at_ms) / 1000;
    const change = count(b) - count(a);
    if (seconds > 0 && change >= 0) points.push({ at: b.at_ms, v: change / seconds, count: count(b) });
  }
  return points;
}

// Each chart: its title, and its series [key, label, points(samples)].
const CHARTS = [
  ["items", "Items", [
    ["depth", "depth", (s) => gaugePoints(s, "depth")],
    ["leased", "in flight", (s) => gaugePoints(s, "leased")],
    ["delayed", "delayed", (s) => gaugePoints(s, "delayed")]]],
  ["traffic", "Push/s, pop/s", [
    ["pushed", "push/s", (s) => ratePoints(s, (x) => x.pushed)],
    ["popped_direct", "pop direct", (s) => ratePoints(s, (x) => x.popped_direct)],
    ["popped_staged", "pop staged", (s) => ratePoints(s, (x) => x.popped - x.popped_direct)]]],
  ["settled", "Acks, nacks, DLQ /s", [
    ["acked", "ack/s", (s) => ratePoints(s, (x) => x.acked)],
    ["nacked", "nack/s", (s) => ratePoints(s, (x) => x.nacked)],
    ["dead_lettered", "dead/s", (s) => ratePoints(s, (x) => x.dead_lettered)]]],
  ["oldest", "Oldest item", [["oldest", "age", (s) => gaugePoints(s, "oldest_age_s", 1000)]]],
];

const CHART_W = 300, CHART_H = 80, CHART_PAD = 3;

/** One chart of `samples` over the window [from, to] (ms since the epoch). */
function chart([id, title, series], samples, from, to) {
  const lines = series.map(([key, label, points]) => [key, label, points(samples).filter((p) => p.at >= from)]);
  const top = Math.max(1, ...lines.flatMap(([, , points]) => points.map((p) => p.v)));
  const x = (at) => (CHART_PAD + (at - from) / (to - from) * (CHART_W - 2 * CHART_PAD)).toFixed(1);
  const y = (v) => (CHART_H - CHART_PAD - v / top * (CHART_H - 2 * CHART_PAD)).toFixed(1);
  const plot = svg("svg", { viewBox: `0 0 ${CHART_W} ${CHART_H}`, class: "plot", preserveAspectRatio: "none" },
    svg("line", { x1: 0, x2: CHART_W, y1: CHART_H - CHART_PAD, y2: CHART_H - CHART_PAD, class: "axis" }),
    ...lines.map(([key, , points], i) => {
      const last = points[points.length - 1];
      const attrs = { class: "line s" + i, "data-series": key, "data-points": points.length,
        points: points.map((p) => x(p.at) + "," + y(p.v)).join(" ") };
      if (last) Object.assign(attrs, { "data-last": last.v, "data-last-at": last.at });
      if (last && last.count !== null) attrs["data-count"] = last.count;
      return svg("polyline", attrs);
    }));
  const shown = (v) => (id === "oldest" ? age(v) : id === "items" ? num(v) : rate(v));
  return h("figure", { class: "chart", dataset: { chart: id } },
    h("figcaption", {}, title, h("span", { class: "muted" }, " · max " + shown(top))),
    plot,
    h("div", { class: "legend" }, lines.map(([, label, points], i) => h("span", { class: "key s" + i },
      label + " " + (points.length ? shown(points[points.length - 1].v) : "–")))));
}

/** The charts of one history answer over the last `minutes`, or since the
 * first sample when the history is shorter (so the lines span the width). */
function charts(history, minutes) {
  const to = history.now_ms;
  const first = history.samples.length ? history.samples[0].at_ms : to;
  const from = Math.min(Math.max(to - minutes * 60e3, first), to - 1000);
  return [h("p", { class: "chart-span muted small" }, "the last " + age(to - from)),
    h("div", { class: "chart-row" }, CHARTS.map((spec) => chart(spec, history.samples, from, to)))];
}

/**
 * A charts panel: `path` is the history call; `note` says what it covers.
 * Returns { el, refresh() }; the window (15 min or 1 h) is kept per tab.
 */
function chartsPanel(title, path, note) {
  const body = h("div", { class: "charts" }, h("p", { class: "muted loading" }, "Loading…"));
  const choice = h("select", { class: "plain chart-window" },
    [[15, "last 15 min"], [60, "last hour"]].map(([m, label]) =>
      h("option", { value: m, selected: String(m) === (sessionStorage.getItem("hotq-chart-min") || "15") }, label)));
  let last = null;
  const draw = () => { if (last) fill(body, charts(last, Number(choice.value))); };
  choice.addEventListener("change", () => { sessionStorage.setItem("hotq-chart-min", choice.value); draw(); });
  const el = h("div", { class: "panel charts-panel" },
    h("h2", {}, title, h("span", { class: "spacer" }), choice),
    h("p", { class: "chart-note muted small" }, note), body);
  return {
    el,
    async refresh() {
      last = await api("GET", path);
      if (!last.samples.length) fill(body, h("p", { class: "muted" }, "No samples yet: the daemon samples every " + age(last.interval_ms) + "."));
      else draw();
    },
  };
}

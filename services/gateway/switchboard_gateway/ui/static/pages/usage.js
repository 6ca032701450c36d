// Usage and cost: GET /api/usage (rows per agent, UTC day and model, and the agent's budget
// limits) and GET /api/sessions (each session's usage), drawn with uPlot (vendored, served at
// /web/vendor/) with the budget limits as dashed lines, and the same figures as tables.
// Each chart's element keeps its uPlot instance as `.chart` (its data: `.chart.data`).

import { h } from "/ui/dom.js";
import { cell, table } from "/ui/pages/common.js";

const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"];
const LIMIT = "#e5534b";
const AXIS = { stroke: "#8b949e", grid: { stroke: "rgba(139, 148, 158, 0.25)" }, ticks: { stroke: "rgba(139, 148, 158, 0.4)" } };
const DAY_S = 86400;
const TOP_SESSIONS = 30;

let uPlotModule = null;
function loadUPlot() {
  if (!document.querySelector('link[href="/web/vendor/uPlot.min.css"]')) {
    document.head.append(h("link", { rel: "stylesheet", href: "/web/vendor/uPlot.min.css" }));
  }
  uPlotModule ??= import("/web/vendor/uPlot.esm.js").then((m) => m.default);
  return uPlotModule;
}

// SB_BUDGET: per-agent limits replace the defaults for that agent (runs/budget.py for_agent).
function limitOf(budget, agent, name) {
  if (!budget) return null;
  const limits = budget.agents?.[agent] ?? budget;
  return limits[name] ?? null;
}

function sum(rows, keyOf, field) {
  const out = new Map();
  for (const r of rows) out.set(keyOf(r), (out.get(keyOf(r)) ?? 0) + r[field]);
  return out;
}

function totalsBy(rows, keyOf) {
  const out = new Map();
  for (const r of rows) {
    const t = out.get(keyOf(r)) ?? { input_tokens: 0, output_tokens: 0, tokens: 0, cost_usd: 0, calls: 0 };
    for (const f of Object.keys(t)) t[f] += r[f];
    out.set(keyOf(r), t);
  }
  return [...out.entries()].sort((a, b) => b[1].tokens - a[1].tokens);
}

function chartBox(id, title, note) {
  return h(
    "figure",
    { class: "chart", "data-chart": id, "aria-labelledby": `${id}-title` },
    h("figcaption", { id: `${id}-title` }, title, note ? h("span", { class: "muted" }, ` · ${note}`) : ""),
  );
}

function width(root) {
  return Math.max(280, Math.min(root.clientWidth || 800, 1100) - 24);
}

// A line chart per agent over UTC days, with each agent's daily limit as a dashed line.
function dayChart(uPlot, box, root, rows, budget, field, limitName, label) {
  const days = [...new Set(rows.map((r) => r.day))].sort();
  const xs = days.map((d) => Date.parse(`${d}T00:00:00Z`) / 1000);
  const agents = [...new Set(rows.map((r) => r.agent))].sort();
  const data = [xs];
  const series = [{}];
  agents.forEach((agent, i) => {
    const per = sum(rows.filter((r) => r.agent === agent), (r) => r.day, field);
    data.push(days.map((d) => per.get(d) ?? 0));
    series.push({ label: agent, stroke: PALETTE[i % PALETTE.length], width: 2, points: { show: true, size: 7 } });
  });
  agents.forEach((agent) => {
    const limit = limitOf(budget, agent, limitName);
    if (limit === null) return;
    data.push(days.map(() => limit));
    series.push({ label: `${agent} limit (${limitName})`, stroke: LIMIT, width: 1.5, dash: [6, 4], points: { show: false } });
  });
  const lo = xs.length ? xs[0] - DAY_S / 2 : 0;
  const hi = xs.length ? xs[xs.length - 1] + DAY_S / 2 : DAY_S;
  box.chart = new uPlot(
    {
      width: width(root),
      height: 260,
      series,
      scales: { x: { time: true, range: () => [lo, hi] }, y: { range: (u, min, max) => [0, Math.max(max, 1) * 1.1] } },
      axes: [{ ...AXIS }, { ...AXIS, label, size: 70 }],
    },
    data,
    box,
  );
}

// Bars per session (the most used first), with the session limit of each one's agent.
function sessionChart(uPlot, box, root, sessions, budget) {
  const top = sessions.slice(0, TOP_SESSIONS);
  const xs = top.map((_, i) => i);
  const data = [xs, top.map((s) => s.usage.input_tokens + s.usage.output_tokens)];
  const series = [{}, { label: "tokens", stroke: PALETTE[0], fill: "rgba(31, 119, 180, 0.5)", paths: uPlot.paths.bars({ size: [0.6, 60] }), points: { show: false } }];
  const limits = top.map((s) => limitOf(budget, s.agent, "session_tokens"));
  if (limits.some((l) => l !== null)) {
    data.push(limits);
    series.push({ label: "limit (session_tokens)", stroke: LIMIT, width: 1.5, dash: [6, 4], points: { show: false }, paths: uPlot.paths.stepped({ align: 1 }) });
  }
  box.chart = new uPlot(
    {
      width: width(root),
      height: 260,
      series,
      scales: { x: { time: false, range: () => [-0.5, Math.max(top.length, 1) - 0.5] }, y: { range: (u, min, max) => [0, Math.max(max, 1) * 1.1] } },
      axes: [
        { ...AXIS, values: (u, ticks) => ticks.map((t) => (Number.isInteger(t) && top[t] ? String(t + 1) : "")) },
        { ...AXIS, label: "tokens", size: 70 },
      ],
    },
    data,
    box,
  );
}

const TOTALS = ["Input tokens", "Output tokens", "Tokens", "Cost (USD)", "Model calls"];
function totalsCells(t) {
  return [cell(t.input_tokens, "num"), cell(t.output_tokens, "num"), cell(t.tokens, "num"), cell(t.cost_usd.toFixed(4), "num"), cell(t.calls, "num")];
}

function budgetList(budget) {
  if (!budget) return h("p", { class: "muted" }, "No budget is set (SB_BUDGET).");
  const items = [];
  const add = (scope, limits) => {
    for (const [name, value] of Object.entries(limits)) if (name !== "agents") items.push(h("li", {}, `${scope}: ${name} = ${value}`));
  };
  add("every agent", budget);
  for (const [agent, limits] of Object.entries(budget.agents ?? {})) add(agent, limits);
  return h("ul", { class: "budget" }, items);
}

export async function render(root, ctx) {
  const [usage, { sessions }, uPlot] = await Promise.all([
    ctx.api.get("/api/usage"),
    ctx.api.get("/api/sessions?limit=1000"),
    loadUPlot(),
  ]);
  const rows = usage.rows;
  const used = sessions
    .map((s) => ({ ...s, tokens: s.usage.input_tokens + s.usage.output_tokens }))
    .filter((s) => s.tokens > 0 || s.usage.calls > 0)
    .sort((a, b) => b.tokens - a.tokens);
  const t = usage.total;
  const dayTokens = chartBox("day-tokens", "Tokens per day and agent", "UTC days; dashed: the agent's daily limit");
  const dayCost = chartBox("day-cost", "Cost per day and agent (USD)", "dashed: the agent's daily limit");
  const perSession = chartBox("session-tokens", `Tokens per session (the ${TOP_SESSIONS} most used)`, "dashed: the session limit");
  root.append(
    h("h1", {}, "Usage and cost"),
    h("p", { class: "summary" }, `In all: ${t.tokens} tokens (${t.input_tokens} in, ${t.output_tokens} out), ${t.cost_usd.toFixed(4)} USD, ${t.calls} model calls.`),
    h("h2", {}, "Budget"),
    budgetList(usage.budget),
    dayTokens,
    dayCost,
    perSession,
    h("h2", {}, "Per agent"),
    table("Usage per agent", "usage-agents", ["Agent", ...TOTALS], h("tbody", {}, totalsBy(rows, (r) => r.agent).map(([a, x]) => h("tr", {}, h("th", { scope: "row" }, a), totalsCells(x))))),
    h("h2", {}, "Per model"),
    table("Usage per model", "usage-models", ["Model", ...TOTALS], h("tbody", {}, totalsBy(rows, (r) => r.model).map(([m, x]) => h("tr", {}, h("th", { scope: "row" }, m), totalsCells(x))))),
    h("h2", {}, "Per day, agent and model"),
    table("Usage per day, agent and model", "usage-rows", ["Day", "Agent", "Model", ...TOTALS], h("tbody", {}, rows.map((r) => h("tr", {}, h("th", { scope: "row" }, r.day), cell(r.agent), cell(r.model), totalsCells(r))))),
    h("h2", {}, "Per session"),
    table(
      "Usage per session",
      "usage-sessions",
      ["#", "Session", "Agent", ...TOTALS],
      h(
        "tbody",
        {},
        used.map((s, i) =>
          h(
            "tr",
            {},
            cell(i + 1, "num"),
            h("th", { scope: "row" }, h("a", { href: `#/sessions/${encodeURIComponent(s.session_key)}` }, s.session_key)),
            cell(s.agent),
            totalsCells({ ...s.usage, tokens: s.tokens }),
          ),
        ),
      ),
    ),
  );
  dayChart(uPlot, dayTokens, root, rows, usage.budget, "tokens", "agent_daily_tokens", "tokens");
  dayChart(uPlot, dayCost, root, rows, usage.budget, "cost_usd", "agent_daily_usd", "USD");
  sessionChart(uPlot, perSession, root, used, usage.budget);
}

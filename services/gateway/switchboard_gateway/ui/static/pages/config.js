// Configuration (GET /api/config): the gateway's effective settings, read-only, secrets shown as
// "**********" (the gateway never sends their values), and the findings of
// `switchboard security audit` computed from the gateway's environment.

import { h } from "/ui/dom.js";
import { cell, table } from "/ui/pages/common.js";

const SETTINGS = ["Variable", "Value", "Set", "What it does"];
const FINDINGS = ["Severity", "Check", "Finding", "Fix"];

function shown(value) {
  if (value === "" || value === null || value === undefined) return h("span", { class: "muted" }, "(empty)");
  return h("code", { class: "value" }, typeof value === "string" ? value : JSON.stringify(value));
}

export async function render(root, ctx) {
  const data = await ctx.api.get("/api/config");
  const search = h("input", { id: "config-search", type: "search", placeholder: "SB_…", autocomplete: "off" });
  const changedOnly = h("input", { id: "config-changed", type: "checkbox" });
  const body = h("tbody");
  const order = { critical: 0, warning: 1, ok: 2 };
  const counts = data.audit.reduce((c, f) => ({ ...c, [f.severity]: (c[f.severity] ?? 0) + 1 }), {});
  root.append(
    h("h1", {}, "Configuration"),
    h(
      "p",
      { class: "muted" },
      "The gateway's view: the settings the gateway runs with, and an audit of the environment it was given. Other services may have settings of their own (docs/web-ui.md).",
    ),
    h("h2", {}, "Security audit"),
    h("p", { class: "summary" }, `${counts.critical ?? 0} critical, ${counts.warning ?? 0} warnings, ${counts.ok ?? 0} fine.`),
    table(
      "Security audit findings",
      "config-audit",
      FINDINGS,
      h(
        "tbody",
        {},
        [...data.audit]
          .sort((a, b) => (order[a.severity] ?? 3) - (order[b.severity] ?? 3))
          .map((f) => h("tr", { "data-severity": f.severity }, h("th", { scope: "row", class: `severity ${f.severity}` }, f.severity), cell(f.check), h("td", { class: "words" }, f.detail), h("td", { class: "words" }, f.fix))),
      ),
    ),
    h("h2", {}, "Gateway settings"),
    h(
      "div",
      { class: "toolbar" },
      h("label", { for: "config-search" }, "Search settings"),
      search,
      changedOnly,
      h("label", { for: "config-changed" }, "Only the ones set"),
    ),
    table("Gateway settings", "config-settings", SETTINGS, body),
  );
  const draw = () => {
    const words = search.value.trim().toLowerCase().split(/\s+/).filter(Boolean);
    const rows = data.settings.filter((s) => {
      const hay = `${s.env} ${s.description}`.toLowerCase();
      return words.every((w) => hay.includes(w)) && (!changedOnly.checked || !s.default);
    });
    body.replaceChildren(
      ...rows.map((s) =>
        h(
          "tr",
          { "data-env": s.env },
          h("th", { scope: "row" }, h("code", {}, s.env)),
          h("td", { class: "words" }, shown(s.value), s.secret ? h("span", { class: "muted" }, " (secret)") : ""),
          cell(s.default ? "default" : "set"),
          h("td", { class: "words" }, s.description),
        ),
      ),
    );
  };
  search.addEventListener("input", draw);
  changedOnly.addEventListener("change", draw);
  draw();
}

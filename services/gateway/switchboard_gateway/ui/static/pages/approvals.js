// Approvals: the tool calls waiting for a person (GET /api/approvals?status=awaiting_approval)
// with their tool, arguments, session, requester and age; Approve and Deny post the decision
// (POST /api/approvals/{id}). The list refreshes itself every few seconds while the page is open.

import { h } from "/ui/dom.js";
import { ago, cell, poll, table } from "/ui/pages/common.js";

const COLUMNS = ["Tool", "Arguments", "Session", "Requested by", "Agent", "Waiting for", "Decision"];
const POLL_S = 3;

// The requester is the session's peer: <agent>:<channel>:<peer...>.
function requester(key) {
  const parts = key.split(":");
  return parts.length > 2 ? `${parts.slice(2).join(":")} (${parts[1]})` : key;
}

export async function render(root, ctx) {
  const status = h("p", { class: "status", role: "status" });
  const count = h("p", { class: "muted" });
  const body = h("tbody");
  const refresh = h("button", { type: "button", class: "quiet" }, "Refresh");
  root.append(
    h("h1", {}, "Approvals"),
    h("div", { class: "toolbar" }, refresh),
    count,
    table("Waiting approvals", "approvals", COLUMNS, body),
    status,
  );

  const decide = async (a, decision) => {
    const done = await ctx.api.post(`/api/approvals/${encodeURIComponent(a.id)}`, { decision });
    status.textContent = `${done.status === "approved" ? "Approved" : "Denied"}: ${a.tool} in ${a.session_key}.`;
    await load();
  };
  const row = (a) =>
    h(
      "tr",
      { "data-approval": a.id },
      h("th", { scope: "row" }, h("code", {}, a.tool)),
      h("td", {}, h("pre", { class: "args" }, JSON.stringify(a.args, null, 2))),
      h("td", {}, h("a", { href: `#/sessions/${encodeURIComponent(a.session_key)}` }, a.session_key)),
      cell(requester(a.session_key)),
      cell(a.agent),
      cell(ago(a.requested_at_ms)),
      h(
        "td",
        {},
        h(
          "div",
          { class: "buttons" },
          h("button", { type: "button", onclick: () => decide(a, "approve").catch(() => {}) }, "Approve"),
          h("button", { type: "button", class: "quiet", onclick: () => decide(a, "deny").catch(() => {}) }, "Deny"),
        ),
      ),
    );
  const load = async () => {
    const { approvals } = await ctx.api.get("/api/approvals?status=awaiting_approval&limit=200");
    body.replaceChildren(...approvals.map(row));
    count.textContent = approvals.length ? `${approvals.length} waiting` : "Nothing is waiting for a decision.";
  };
  refresh.addEventListener("click", () => load().catch(() => {}));
  await load();
  poll(root, POLL_S, load);
}

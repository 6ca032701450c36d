// Pairing: the pending requests (GET /api/pairing) with Approve, Approve as owner and Deny
// (POST /api/pairing/{channel}/{code}/approve|deny), and the paired senders and groups
// (GET /api/pairing/paired) with Revoke (DELETE /api/pairing/paired/{channel}/{sender}?account=).
// Refreshes itself every few seconds while the page is open.

import { h, time } from "/ui/dom.js";
import { cell, poll, table, until } from "/ui/pages/common.js";

const PENDING = ["Channel", "Account", "Sender or group", "Code", "First words", "Expires", "Decision"];
const PAIRED = ["Channel", "Account", "Sender or group", "Role", "Approved by", "Approved at", "Action"];
const POLL_S = 5;

function who(r) {
  return r.chat_id && r.chat_id !== r.sender ? `${r.sender} in ${r.chat_id}` : r.sender;
}

export async function render(root, ctx) {
  const status = h("p", { class: "status", role: "status" });
  const pendingBody = h("tbody");
  const pairedBody = h("tbody");
  const pendingCount = h("p", { class: "muted" });
  const pairedCount = h("p", { class: "muted" });
  const refresh = h("button", { type: "button", class: "quiet" }, "Refresh");
  root.append(
    h("h1", {}, "Pairing"),
    h("div", { class: "toolbar" }, refresh),
    status,
    h("h2", {}, "Pending requests"),
    pendingCount,
    table("Pending pairing requests", "pairing-pending", PENDING, pendingBody),
    h("h2", {}, "Paired senders and groups"),
    pairedCount,
    table("Paired senders and groups", "pairing-paired", PAIRED, pairedBody),
  );

  const act = (fn) => () => fn().catch(() => {});
  const base = (r) => `/api/pairing/${encodeURIComponent(r.channel)}/${encodeURIComponent(r.code)}`;
  const approve = async (r, owner) => {
    const p = await ctx.api.post(`${base(r)}/approve`, owner ? { owner: true } : {});
    status.textContent = `Paired ${p.sender} on ${p.channel} (${p.account}) as ${p.role}.`;
    await load();
  };
  const deny = async (r) => {
    await ctx.api.post(`${base(r)}/deny`);
    status.textContent = `Denied ${who(r)} on ${r.channel}.`;
    await load();
  };
  const revoke = async (p) => {
    if (!confirm(`Revoke ${p.sender} on ${p.channel} (${p.account})?`)) return;
    const path = `/api/pairing/paired/${encodeURIComponent(p.channel)}/${encodeURIComponent(p.sender)}`;
    await ctx.api.delete(`${path}?account=${encodeURIComponent(p.account)}`);
    status.textContent = `Revoked ${p.sender} on ${p.channel} (${p.account}).`;
    await load();
  };
  const pendingRow = (r) =>
    h(
      "tr",
      { "data-code": r.code },
      h("th", { scope: "row" }, r.channel),
      cell(r.account || "default"),
      cell(who(r)),
      h("td", {}, h("code", {}, r.code)),
      h("td", { class: "words" }, r.text),
      h("td", { title: time(r.expires_at_ms) }, until(r.expires_at_ms)),
      h(
        "td",
        {},
        h(
          "div",
          { class: "buttons" },
          h("button", { type: "button", onclick: act(() => approve(r, false)) }, "Approve"),
          h("button", { type: "button", class: "quiet", onclick: act(() => approve(r, true)) }, "Approve as owner"),
          h("button", { type: "button", class: "quiet", onclick: act(() => deny(r)) }, "Deny"),
        ),
      ),
    );
  const pairedRow = (p) =>
    h(
      "tr",
      {},
      h("th", { scope: "row" }, p.channel),
      cell(p.account),
      cell(p.sender),
      cell(p.role),
      cell(p.approved_by),
      cell(time(p.approved_at_ms)),
      h("td", {}, h("button", { type: "button", class: "quiet", onclick: act(() => revoke(p)) }, "Revoke")),
    );
  const load = async () => {
    const [{ requests }, { senders }] = await Promise.all([
      ctx.api.get("/api/pairing"),
      ctx.api.get("/api/pairing/paired"),
    ]);
    pendingBody.replaceChildren(...requests.map(pendingRow));
    pairedBody.replaceChildren(...senders.map(pairedRow));
    pendingCount.textContent = requests.length ? `${requests.length} waiting` : "No pending requests.";
    pairedCount.textContent = senders.length ? `${senders.length} paired` : "Nobody is paired yet.";
  };
  refresh.addEventListener("click", act(load));
  await load();
  poll(root, POLL_S, load);
}

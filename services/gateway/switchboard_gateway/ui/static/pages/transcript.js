// A session's transcript (GET /api/sessions/{key}/history): user and assistant messages (the
// assistant's text as Markdown through /web/markdown.js, plain text until that module is
// there), tool calls with their arguments and results, and the actions on the session: reset,
// abort, compact, delete (each its own route) and the model and queue mode (PATCH).

import { clear, h, time } from "/ui/dom.js";

const QUEUE_MODES = ["default", "queue", "followup", "collect", "steer", "interrupt"];
let markdown = null; // a promise of renderMarkdown, or of null when it cannot be loaded

function loadMarkdown() {
  markdown ??= import("/web/markdown.js").then(
    (m) => (typeof m.renderMarkdown === "function" ? m.renderMarkdown : null),
    () => null,
  );
  return markdown;
}

function blocksOf(content) {
  if (typeof content === "string") return [{ type: "text", text: content }];
  return Array.isArray(content) ? content : [];
}

function resultText(content) {
  if (typeof content === "string") return content;
  return blocksOf(content)
    .map((b) => (b.type === "text" ? b.text : `[${b.type}]`))
    .join("\n");
}

function pretty(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

function toolCard(block) {
  const card = h(
    "li",
    { class: "tool-card", "data-call-id": block.id, "data-status": "pending" },
    h("p", { class: "tool-head" }, "Tool call ", h("code", { class: "tool-name" }, block.name)),
    h("p", { class: "label" }, "Arguments"),
    h("pre", { class: "tool-args" }, pretty(block.input ?? {})),
  );
  return card;
}

function attachResult(card, block, at) {
  card.dataset.status = block.is_error ? "error" : "done";
  card.append(
    h("p", { class: "label" }, block.is_error ? "Result (error)" : "Result", at ? ` · ${time(at)}` : ""),
    h("pre", { class: "tool-result" }, resultText(block.content)),
  );
  // Shown when the history carries them (the executor's attestation, the call's timings).
  if (block.isolation) {
    card.append(h("p", { class: "label" }, "Isolation"), h("pre", { class: "tool-isolation" }, pretty(block.isolation)));
  }
  if (block.duration_ms !== undefined) card.append(h("p", { class: "muted" }, `Took ${block.duration_ms} ms`));
}

async function message(m, cards, renderMarkdown) {
  const blocks = blocksOf(m.content);
  const results = blocks.filter((b) => b.type === "tool_result");
  const loose = [];
  for (const r of results) {
    const card = cards.get(r.tool_use_id);
    if (card) attachResult(card, r, m.created_at_ms);
    else loose.push(r);
  }
  const rest = blocks.filter((b) => b.type !== "tool_result");
  if (!rest.length && !loose.length) return null;
  const who = m.role === "assistant" ? "Assistant" : m.role === "user" ? "User" : m.role;
  const body = h("div", { class: "body" });
  const tools = h("ol", { class: "tools" });
  for (const b of rest) {
    if (b.type === "text") {
      if (m.role === "assistant" && renderMarkdown) body.append(h("div", { class: "text md" }, renderMarkdown(b.text)));
      else body.append(h("div", { class: "text plain" }, b.text));
    } else if (b.type === "tool_use") {
      const card = toolCard(b);
      cards.set(b.id, card);
      tools.append(card);
    } else {
      body.append(h("p", { class: "muted" }, `[${b.type}]`));
    }
  }
  for (const r of loose) {
    const card = toolCard({ id: r.tool_use_id, name: "?" });
    attachResult(card, r, m.created_at_ms);
    tools.append(card);
  }
  if (tools.childElementCount) body.append(tools);
  return h(
    "li",
    { class: `msg ${m.role}`, "data-run-id": m.run_id },
    h("p", { class: "msg-head" }, h("strong", {}, who), " · ", h("time", {}, time(m.created_at_ms))),
    body,
  );
}

function actions(key, ctx, status, reload) {
  const path = `/api/sessions/${encodeURIComponent(key)}`;
  const say = (text) => (status.textContent = text);
  const act = (label, run) =>
    h("button", { type: "button", onclick: () => run().catch(() => say(`${label} failed.`)) }, label);
  const model = h("input", { id: "session-model", placeholder: "provider:model or default", required: true });
  const queue = h("select", { id: "session-queue" }, QUEUE_MODES.map((q) => h("option", { value: q }, q)));
  const form = (label, field, id, body) =>
    h(
      "form",
      {
        class: "inline",
        onsubmit: (event) => {
          event.preventDefault();
          ctx.api
            .patch(path, body())
            .then((r) => say(`Model: ${r.model}; queue mode: ${r.queue_mode}.`))
            .catch(() => say(`${label} failed.`));
        },
      },
      h("label", { for: id }, label),
      field,
      h("button", { type: "submit" }, `Set ${label.toLowerCase()}`),
    );
  return h(
    "section",
    { class: "actions", "aria-label": "Session actions" },
    h(
      "div",
      { class: "buttons" },
      act("Reset", async () => {
        if (!confirm(`Reset ${key}? Its transcript starts afresh.`)) return;
        const r = await ctx.api.post(`${path}/reset`);
        say(`Reset: ${r.messages_removed} messages removed.`);
        await reload();
      }),
      act("Abort", async () => {
        const r = await ctx.api.post(`${path}/abort`);
        say(r.aborted ? "Aborted the run in progress." : "No run was in progress.");
      }),
      act("Compact", async () => {
        say("Compacting…");
        const r = await ctx.api.post(`${path}/compact`, {});
        say(r.compacted ? `Compacted ${r.messages_compacted} messages (${r.tokens_before} → ${r.tokens_after} tokens).` : `Not compacted: ${r.note}`);
        await reload();
      }),
      act("Delete", async () => {
        if (!confirm(`Delete ${key}? Its transcript and settings are removed.`)) return;
        await ctx.api.delete(path);
        ctx.navigate("sessions");
      }),
    ),
    form("Model", model, "session-model", () => ({ model: model.value.trim() })),
    form("Queue mode", queue, "session-queue", () => ({ queue_mode: queue.value })),
  );
}

export async function render(root, ctx) {
  const key = ctx.params.id;
  const status = h("p", { class: "status", role: "status" });
  const list = h("ol", { class: "transcript", "aria-label": "Transcript" });
  const reload = async () => {
    const [history, renderMarkdown] = await Promise.all([
      ctx.api.get(`/api/sessions/${encodeURIComponent(key)}/history`),
      loadMarkdown(),
    ]);
    const cards = new Map();
    const items = [];
    for (const m of history.messages) {
      const item = await message(m, cards, renderMarkdown);
      if (item) items.push(item);
    }
    clear(list).append(...items);
    if (!items.length) list.append(h("li", { class: "muted" }, "No messages."));
  };
  root.append(
    h("p", {}, h("a", { href: "#/sessions" }, "← All sessions")),
    h("h1", {}, "Session ", h("code", {}, key)),
    actions(key, ctx, status, reload),
    status,
    list,
  );
  await reload();
}

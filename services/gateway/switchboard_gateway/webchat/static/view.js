// Switchboard WebChat: how the conversation is drawn (messages, streamed answers, tool cards,
// the history). The user's text and the tool cards are set with textContent; the assistant's
// text is Markdown, drawn by the shared renderer (/web/markdown.js: parsed, then sanitised, never
// set as HTML unsanitised). webchat.js drives it.
//
// Streaming: the growing text of an answer is rendered again as it grows, at most once per
// animation frame (a table or a code block takes shape while it streams; marked and DOMPurify
// take well under a millisecond for a reply of a few kilobytes), and at once when the run ends.
import { renderMarkdown } from "/web/markdown.js";

const SUMMARY_CHARS = 200;

// onDecide(approvalId, "approve" | "deny") -> Promise: the tool card's approval buttons.
// loadMedia(url) -> Promise of a data: URL: a file the agent sent (GET /api/media/..., with
// the token).
export function createWebChatView(list, onDecide, loadMedia) {
  const runs = new Map(); // run id -> {el, body, text}
  const tools = new Map(); // call id -> card elements
  const ui = { messages: list };

  function shorten(text) {
    const line = String(text).split(/\s+/).join(" ").trim();
    return line.length <= SUMMARY_CHARS ? line : line.slice(0, SUMMARY_CHARS - 1) + "\u2026";
  }

  // --- rendering ---------------------------------------------------------------------------

  function nearBottom() {
    const m = ui.messages;
    return m.scrollHeight - m.scrollTop - m.clientHeight < 80;
  }

  function add(el) {
    const stick = nearBottom();
    ui.messages.append(el);
    if (stick) ui.messages.scrollTop = ui.messages.scrollHeight;
    return el;
  }

  function bubble(role, label) {
    const li = document.createElement("li");
    li.className = `msg ${role}`;
    const who = document.createElement("span");
    who.className = "who";
    who.textContent = label;
    li.append(who);
    return li;
  }

  // images: data: URLs shown; files: the names of the other files sent (voice notes...).
  function userMessage(text, images, files) {
    const li = bubble("user", "You");
    li.append(document.createTextNode(text));
    for (const src of images || []) li.append(picture(src, "attachment"));
    for (const name of files || []) {
      const span = document.createElement("span");
      span.className = "file";
      span.textContent = `Attached: ${name}`;
      li.append(span);
    }
    return add(li);
  }

  function picture(src, alt) {
    const img = document.createElement("img");
    img.className = "media";
    img.alt = alt;
    if (src) img.src = src;
    return img;
  }

  // A message of the agent's message tool: its text and files, in the run's bubble.
  function chatMessage(r, p) {
    const box = document.createElement("div");
    box.className = "sent";
    if (p.text) {
      const text = document.createElement("div");
      text.className = "text md";
      text.replaceChildren(renderMarkdown(p.text));
      box.append(text);
    }
    for (const m of p.media || []) {
      if (!String(m.mime).startsWith("image/")) {
        const span = document.createElement("span");
        span.className = "note";
        span.textContent = `[a ${m.mime || "file"} was sent]`;
        box.append(span);
        continue;
      }
      const img = picture("", "image sent by the assistant");
      img.dataset.ref = m.ref;
      box.append(img);
      loadMedia(m.url).then(
        (src) => { img.src = src; },
        (err) => { img.alt = `the image could not be loaded: ${err.message}`; },
      );
    }
    r.body.append(box);
  }

  function systemNote(text) {
    const li = bubble("system", "");
    li.textContent = text;
    return add(li);
  }

  function run(runId) {
    let r = runs.get(runId);
    if (!r) {
      const li = bubble("assistant", "Assistant");
      li.dataset.runId = runId;
      const body = document.createElement("div");
      body.className = "body";
      li.append(body);
      r = { el: li, body, text: null };
      runs.set(runId, r);
      add(li);
    }
    return r;
  }

  // A piece of the answer's text: kept raw, drawn as Markdown (now, or on the next frame).
  function appendText(r, text, now) {
    if (!r.text) {
      const el = document.createElement("div");
      el.className = "text md";
      r.body.append(el);
      r.text = { el, raw: "", frame: 0 };
    }
    r.text.raw += text;
    if (now) draw(r.text);
    else if (!r.text.frame) {
      const part = r.text;
      part.frame = requestAnimationFrame(() => draw(part));
    }
  }

  function draw(part) {
    if (part.frame) cancelAnimationFrame(part.frame);
    part.frame = 0;
    const stick = nearBottom();
    part.el.replaceChildren(renderMarkdown(part.raw));
    if (stick) ui.messages.scrollTop = ui.messages.scrollHeight;
  }

  function flush(r) {
    if (r.text && r.text.frame) draw(r.text);
  }

  function toolCard(r, callId, name) {
    let card = tools.get(callId);
    if (!card) {
      const el = document.createElement("div");
      el.className = "tool-card";
      el.setAttribute("role", "group");
      el.setAttribute("aria-label", `Tool call ${name}`);
      el.dataset.callId = callId;
      const head = document.createElement("div");
      head.className = "tool-head";
      const nameEl = document.createElement("span");
      nameEl.className = "tool-name";
      nameEl.textContent = name;
      const status = document.createElement("span");
      status.className = "tool-status";
      const args = document.createElement("p");
      args.className = "tool-args";
      const result = document.createElement("p");
      result.className = "tool-result";
      result.hidden = true;
      head.append(nameEl, status);
      el.append(head, args, result);
      card = { el, status, args, result };
      tools.set(callId, card);
      flush(r);
      r.body.append(el);
      r.text = null; // text after the card starts a new paragraph below it
    }
    return card;
  }

  function setTool(card, status, label) {
    card.el.dataset.status = status;
    card.status.textContent = label;
  }

  function toolResult(card, summary, isError) {
    setTool(card, isError ? "failed" : "done", isError ? "failed" : "done");
    card.result.hidden = false;
    card.result.textContent = summary ? `\u2192 ${summary}` : "\u2192 (no output)";
  }

  function approvalButtons(card, approvalId, status) {
    if (card.decide) card.decide.remove();
    card.decide = null;
    const waiting = !status || status === "awaiting_approval" || status === "pending";
    if (!waiting || !approvalId || !onDecide) return;
    const row = document.createElement("div");
    row.className = "tool-decide";
    const problem = document.createElement("span");
    problem.className = "note";
    for (const [decision, label] of [["approve", "Approve"], ["deny", "Deny"]]) {
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = label;
      button.dataset.decision = decision;
      button.addEventListener("click", async () => {
        for (const b of row.querySelectorAll("button")) b.disabled = true;
        try {
          await onDecide(approvalId, decision);
        } catch (err) {
          problem.textContent = err.message;
          for (const b of row.querySelectorAll("button")) b.disabled = false;
        }
      });
      row.append(button);
    }
    row.append(problem);
    card.decide = row;
    card.el.append(row);
  }

  function note(r, text) {
    const span = document.createElement("span");
    span.className = "note";
    span.textContent = text;
    r.body.append(span);
  }

  // --- history -----------------------------------------------------------------------------

  function blocks(content) {
    if (typeof content === "string") return [{ type: "text", text: content }];
    return Array.isArray(content) ? content : [];
  }

  function renderHistory(messages) {
    ui.messages.replaceChildren();
    runs.clear();
    tools.clear();
    const done = new Set();
    for (const m of messages) {
      if (m.run_id) done.add(m.run_id);
      const parts = blocks(m.content);
      if (m.role === "user") {
        const texts = parts.filter((b) => b.type === "text").map((b) => b.text);
        if (texts.length) userMessage(texts.join("\n\n"));
        for (const b of parts.filter((p) => p.type === "tool_result")) {
          const card = tools.get(b.tool_use_id);
          const out = typeof b.content === "string" ? b.content : JSON.stringify(b.content);
          if (card) toolResult(card, shorten(out), Boolean(b.is_error));
        }
      } else if (m.role === "assistant") {
        const r = run(m.run_id || `history-${Math.random()}`);
        for (const b of parts) {
          if (b.type === "text" && b.text) appendText(r, b.text, true);
          if (b.type === "tool_use") {
            const card = toolCard(r, b.id, b.name);
            card.args.textContent = shorten(JSON.stringify(b.input || {}));
            setTool(card, "running", "no result");
          }
        }
      }
    }
    ui.messages.scrollTop = ui.messages.scrollHeight;
    return done;
  }

  function apply(frame) {
    const p = frame.payload;
    switch (frame.event) {
      case "lifecycle": {
        const r = run(p.run_id);
        if (p.phase === "start") {
          r.el.setAttribute("aria-busy", "true");
        } else {
          flush(r);
          r.el.setAttribute("aria-busy", "false");
          if (!r.body.textContent && p.text) appendText(r, p.text, true);
          if (p.status && p.status !== "completed") note(r, `Run ${p.status}.`);
        }
        break;
      }
      case "assistant":
        appendText(run(p.run_id), p.text);
        break;
      case "tool": {
        const card = toolCard(run(p.run_id), p.call_id, p.tool);
        if (p.phase === "start") {
          card.args.textContent = p.summary;
          setTool(card, "running", "running\u2026");
        } else if (p.phase === "approval") {
          setTool(card, "waiting", `approval ${p.status || "pending"}`);
          approvalButtons(card, p.approval_id, p.status);
        } else if (p.phase === "result") {
          toolResult(card, p.summary, p.is_error);
        }
        break;
      }
      case "message": {
        const r = run(p.run_id);
        chatMessage(r, p);
        const card = tools.get(p.call_id);
        if (card) toolResult(card, "shown in the chat", false);
        break;
      }
      case "run_error":
        note(run(p.run_id), `Error: ${p.message}`);
        break;
      default:
        break;
    }
  }

  function clear() {
    list.replaceChildren();
    runs.clear();
    tools.clear();
  }

  // A bubble drawn before renderHistory replaced the list, put back at its end.
  function restore(li) {
    return add(li);
  }

  return { apply, clear, renderHistory, restore, systemNote, userMessage };
}

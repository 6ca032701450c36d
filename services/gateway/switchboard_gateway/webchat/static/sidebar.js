// WebChat's sidebar: the conversations (the socket's `sessions` method), newest first, each
// opened by a click and renamed in place (names kept by prefs.js). webchat.js drives it.

import { setTitle, titleOf } from "./prefs.js";

const when = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });

// A conversation's name: the one given, else when it was last active.
export function titleFor(item) {
  const given = titleOf(item.session);
  if (given) return given;
  if (!item.message_count) return "New chat";
  return `Chat of ${when.format(new Date(item.updated_at_ms))}`;
}

// list: the <ul>; onOpen(session): a conversation chosen; onRenamed(session): a name changed.
export function createSidebar(list, onOpen, onRenamed) {
  let items = [];
  let current = null;

  function meta(item) {
    if (!item.message_count) return "no messages yet";
    const n = item.message_count === 1 ? "1 message" : `${item.message_count} messages`;
    return `${when.format(new Date(item.updated_at_ms))} · ${n}`;
  }

  function entry(item) {
    const li = document.createElement("li");
    li.className = "conv";
    li.dataset.session = item.session;
    const open = document.createElement("button");
    open.type = "button";
    open.className = "conv-open";
    const name = document.createElement("span");
    name.className = "conv-name";
    name.textContent = titleFor(item);
    const detail = document.createElement("span");
    detail.className = "conv-meta";
    detail.textContent = meta(item);
    open.append(name, detail);
    if (item.session === current) open.setAttribute("aria-current", "page");
    open.addEventListener("click", () => onOpen(item.session));
    const rename = document.createElement("button");
    rename.type = "button";
    rename.className = "conv-rename";
    rename.textContent = "Rename";
    rename.setAttribute("aria-label", `Rename ${titleFor(item)}`);
    rename.addEventListener("click", () => editing(li, item));
    li.append(open, rename);
    return li;
  }

  function editing(li, item) {
    const form = document.createElement("form");
    form.className = "conv-edit";
    const input = document.createElement("input");
    input.type = "text";
    input.maxLength = 80;
    input.value = titleOf(item.session) || titleFor(item);
    input.setAttribute("aria-label", "Name of the conversation");
    const save = document.createElement("button");
    save.type = "submit";
    save.textContent = "Save";
    const cancel = document.createElement("button");
    cancel.type = "button";
    cancel.textContent = "Cancel";
    form.append(input, save, cancel);
    const done = (changed) => {
      render();
      if (changed) onRenamed(item.session);
      list.querySelector(`li[data-session="${item.session}"] .conv-rename`)?.focus();
    };
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      setTitle(item.session, input.value);
      done(true);
    });
    cancel.addEventListener("click", () => done(false));
    input.addEventListener("keydown", (ev) => {
      if (ev.key === "Escape") {
        ev.preventDefault();
        ev.stopPropagation(); // not the page's Esc (stop the answer)
        done(false);
      }
    });
    li.replaceChildren(form);
    input.focus();
    input.select();
  }

  function render() {
    const shown = [...items];
    if (current && !shown.some((i) => i.session === current)) {
      shown.unshift({ session: current, updated_at_ms: Date.now(), message_count: 0 });
    }
    list.replaceChildren(...shown.map(entry));
  }

  return {
    // sessions: the `sessions` payload's list; session: the one on show.
    update(sessions, session) {
      items = sessions;
      current = session;
      render();
    },
    select(session) {
      current = session;
      render();
    },
    item(session) {
      return (
        items.find((i) => i.session === session) || {
          session,
          updated_at_ms: Date.now(),
          message_count: 0,
        }
      );
    },
  };
}

// Helpers the Control UI's pages share: relative times, a poll that stops when its page is left,
// a table in its scrolling box.

import { h } from "/ui/dom.js";

export function ago(ms, now = Date.now()) {
  if (!ms) return "";
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} d`;
}

export function until(ms, now = Date.now()) {
  if (!ms) return "";
  return ms <= now ? "expired" : `in ${ago(now, ms)}`;
}

// Calls load() every `seconds` while `root` is in the document (the page is open); a failure is
// already shown by the API wrapper, the next tick tries again.
export function poll(root, seconds, load) {
  const timer = setInterval(() => {
    if (!root.isConnected) clearInterval(timer);
    else load().catch(() => {});
  }, seconds * 1000);
  return timer;
}

export function table(label, cls, columns, body) {
  return h(
    "div",
    { class: "table-wrap", tabindex: "0", role: "region", "aria-label": label },
    h("table", { class: cls }, h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c)))), body),
  );
}

export function cell(text, cls) {
  return h("td", cls ? { class: cls } : {}, text ?? "");
}

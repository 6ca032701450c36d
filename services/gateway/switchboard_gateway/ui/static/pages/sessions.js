// Sessions: the list (GET /api/sessions) with a search by key, agent or channel, sorted by last
// activity, with the usage the API gives; #/sessions/<key> is a session's transcript
// (transcript.js).

import { h, time } from "/ui/dom.js";

const COLUMNS = ["Session", "Agent", "Channel", "Last activity", "Messages", "Input tokens", "Output tokens", "Cost (USD)", "Model calls"];

export function channelOf(key) {
  // <agent>:<channel>:<peer...>
  return key.split(":")[1] || "";
}

function row(s) {
  const href = `#/sessions/${encodeURIComponent(s.session_key)}`;
  return h(
    "tr",
    {},
    h("th", { scope: "row" }, h("a", { href }, s.session_key)),
    h("td", {}, s.agent),
    h("td", {}, channelOf(s.session_key)),
    h("td", {}, h("time", { datetime: new Date(s.updated_at_ms).toISOString() }, time(s.updated_at_ms))),
    h("td", { class: "num" }, s.message_count),
    h("td", { class: "num" }, s.usage.input_tokens),
    h("td", { class: "num" }, s.usage.output_tokens),
    h("td", { class: "num" }, s.usage.cost_usd.toFixed(4)),
    h("td", { class: "num" }, s.usage.calls),
  );
}

export async function render(root, ctx) {
  if (ctx.params.id) {
    const transcript = await import("/ui/pages/transcript.js");
    return transcript.render(root, ctx);
  }
  const search = h("input", { id: "session-search", type: "search", placeholder: "key, agent or channel" });
  const order = h(
    "select",
    { id: "session-order" },
    h("option", { value: "desc" }, "Most recent first"),
    h("option", { value: "asc" }, "Oldest first"),
  );
  const refresh = h("button", { type: "button" }, "Refresh");
  const count = h("p", { class: "muted", role: "status" });
  const body = h("tbody");
  root.append(
    h("h1", {}, "Sessions"),
    h(
      "div",
      { class: "toolbar" },
      h("label", { for: "session-search" }, "Search sessions"),
      search,
      h("label", { for: "session-order" }, "Sort by last activity"),
      order,
      refresh,
    ),
    count,
    h(
      "div",
      { class: "table-wrap", tabindex: "0", role: "region", "aria-label": "Sessions table" },
      h(
        "table",
        { class: "sessions" },
        h("thead", {}, h("tr", {}, COLUMNS.map((c) => h("th", { scope: "col" }, c)))),
        body,
      ),
    ),
  );

  let sessions = [];
  const draw = () => {
    const words = search.value.trim().toLowerCase().split(/\s+/).filter(Boolean);
    const shown = sessions
      .filter((s) => {
        const hay = `${s.session_key} ${s.agent} ${channelOf(s.session_key)}`.toLowerCase();
        return words.every((w) => hay.includes(w));
      })
      .sort((a, b) => (order.value === "asc" ? 1 : -1) * (a.updated_at_ms - b.updated_at_ms));
    body.replaceChildren(...shown.map(row));
    count.textContent = `${shown.length} of ${sessions.length} sessions`;
  };
  const load = async () => {
    count.textContent = "Loading…";
    sessions = (await ctx.api.get("/api/sessions?limit=1000")).sessions;
    draw();
  };
  search.addEventListener("input", draw);
  order.addEventListener("change", draw);
  refresh.addEventListener("click", () => load().catch(() => {}));
  await load();
}

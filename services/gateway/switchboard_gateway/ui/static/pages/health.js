// Health (GET /api/health): every service of the registry with each replica that answered
// (readiness, failing checks, version), the work queues' backlogs and the dead letters.
// Refreshes itself every few seconds while the page is open.

import { h } from "/ui/dom.js";
import { cell, poll, table } from "/ui/pages/common.js";

const POLL_S = 10;
const SERVICES = ["Service", "Replica", "Ready", "Failing checks", "Version"];
const QUEUES = ["Queue", "Stream / consumer", "Pending", "Unacknowledged", "Redelivered", "Waiting pulls"];

function readyCell(ok, text) {
  return h("td", { class: ok ? "state ok" : "state bad", "data-ready": ok ? "yes" : "no" }, text);
}

function serviceRows(s) {
  if (!s.replicas.length) {
    return [h("tr", { "data-service": s.name }, h("th", { scope: "row" }, s.name), cell("none answered"), readyCell(false, "not ready"), cell(""), cell(""))];
  }
  return s.replicas.map((r) =>
    h(
      "tr",
      { "data-service": s.name },
      h("th", { scope: "row" }, s.name),
      cell(r.instance),
      readyCell(r.ready, r.ready ? "ready" : "not ready"),
      cell(r.failing.join(", ")),
      cell(r.version),
    ),
  );
}

function queueRow(q) {
  const where = `${q.stream} / ${q.consumer}`;
  if (q.error) return h("tr", {}, h("th", { scope: "row" }, q.queue), cell(where), h("td", { colspan: "4", class: "muted" }, q.error));
  return h("tr", { "data-queue": q.queue }, h("th", { scope: "row" }, q.queue), cell(where), cell(q.pending, "num"), cell(q.ack_pending, "num"), cell(q.redelivered, "num"), cell(q.waiting_pulls, "num"));
}

export async function render(root, ctx) {
  const summary = h("p", { class: "summary", role: "status" });
  const services = h("tbody");
  const queues = h("tbody");
  const dead = h("div");
  const refresh = h("button", { type: "button", class: "quiet" }, "Refresh");
  root.append(
    h("h1", {}, "Health"),
    h("div", { class: "toolbar" }, refresh),
    summary,
    h("h2", {}, "Services and replicas"),
    table("Services and replicas", "health-services", SERVICES, services),
    h("h2", {}, "Backlogs"),
    table("Queue backlogs", "health-queues", QUEUES, queues),
    h("h2", {}, "Dead letters"),
    dead,
    h("h2", {}, "Model failovers"),
    h("p", { class: "muted" }, "Counted by each agent replica as sb_agent_failovers_total on its /metrics (Prometheus, Grafana); the gateway cannot read them."),
  );
  const load = async () => {
    const health = await ctx.api.get("/api/health");
    const replicas = health.services.reduce((n, s) => n + s.replicas.length, 0);
    const down = health.services.filter((s) => !s.ready).map((s) => s.name);
    summary.textContent = down.length
      ? `Not ready: ${down.join(", ")} (${replicas} replicas answered).`
      : `Every service is ready (${health.services.length} services, ${replicas} replicas).`;
    services.replaceChildren(...health.services.flatMap(serviceRows));
    queues.replaceChildren(...health.queues.map(queueRow));
    const d = health.dead_letters;
    dead.replaceChildren(
      d.error
        ? h("p", { class: "muted" }, d.error)
        : h(
            "div",
            {},
            h("p", { class: "dead-total" }, `${d.messages} messages in ${d.stream} (kept 7 days).`),
            Object.keys(d.subjects).length
              ? h("ul", {}, Object.entries(d.subjects).map(([subject, n]) => h("li", {}, h("code", {}, subject), `: ${n}`)))
              : "",
          ),
    );
  };
  refresh.addEventListener("click", () => load().catch(() => {}));
  await load();
  poll(root, POLL_S, load);
}

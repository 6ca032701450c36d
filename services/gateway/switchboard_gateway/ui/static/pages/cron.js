// Cron: the scheduled jobs (GET /api/cron) with their schedule, next run, last run and last
// result; a form that adds a job (POST /api/cron) or changes one (PATCH /api/cron/{name}); per
// job Edit, Run now (POST /api/cron/{name}/run, its result shown) and Delete (DELETE, asks first).

import { h, time } from "/ui/dom.js";
import { cell, table } from "/ui/pages/common.js";

const COLUMNS = ["Job", "Schedule", "Message", "Deliver to", "Next run", "Last run", "Last result", "Runs", "Actions"];
const KINDS = [
  ["every", "Every (30s, 1h30m)"],
  ["cron", "Cron expression"],
  ["at", "Once at (ISO time or +10m)"],
];

function schedule(j) {
  if (j.cron) return `cron ${j.cron}${j.timezone ? ` (${j.timezone})` : ""}`;
  if (j.every) return `every ${j.every}`;
  if (j.at) return `at ${time(Date.parse(j.at))}`;
  return j.kind;
}

function iso(text) {
  return text ? time(Date.parse(text)) : "";
}

function field(id, label, input) {
  return h("div", { class: "field" }, h("label", { for: id }, label), input);
}

export async function render(root, ctx) {
  const status = h("p", { class: "status", role: "status" });
  const body = h("tbody");
  const count = h("p", { class: "muted" });
  const input = (id, attrs = {}) => h("input", { id, name: id, ...attrs });
  const name = input("cron-name", { required: true, pattern: "[A-Za-z0-9][A-Za-z0-9_.\\-]*", autocomplete: "off" });
  const kind = h("select", { id: "cron-kind" }, KINDS.map(([v, t]) => h("option", { value: v }, t)));
  const when = input("cron-when", { required: true, placeholder: "1h", autocomplete: "off" });
  const zone = input("cron-timezone", { placeholder: "UTC", autocomplete: "off" });
  const session = input("cron-session", { placeholder: "cron:<name>", autocomplete: "off" });
  const message = h("textarea", { id: "cron-message", rows: "3", required: true });
  const channel = input("cron-channel", { placeholder: "telegram", autocomplete: "off" });
  const to = input("cron-to", { placeholder: "chat id", autocomplete: "off" });
  const account = input("cron-account", { placeholder: "default", autocomplete: "off" });
  const submit = h("button", { type: "submit" }, "Add job");
  const cancel = h("button", { type: "button", class: "quiet", hidden: true }, "Cancel edit");
  const legend = h("legend", {}, "Add a job");
  const form = h(
    "form",
    { class: "cron-form", "aria-label": "Cron job" },
    h(
      "fieldset",
      {},
      legend,
      field("cron-name", "Name", name),
      field("cron-kind", "Schedule type", kind),
      field("cron-when", "Schedule", when),
      field("cron-timezone", "Time zone (cron only)", zone),
      field("cron-session", "Session key (optional)", session),
      field("cron-message", "Message", message),
      field("cron-channel", "Deliver to channel (optional)", channel),
      field("cron-to", "Deliver to chat", to),
      field("cron-account", "Deliver to account", account),
      h("div", { class: "buttons" }, submit, cancel),
    ),
  );
  root.append(
    h("h1", {}, "Cron jobs"),
    count,
    table("Cron jobs", "cron-jobs", COLUMNS, body),
    status,
    form,
  );

  let editing = null; // the job being changed, or null when the form adds one
  const placeholder = () => {
    when.placeholder = { every: "1h", cron: "0 9 * * 1-5", at: "+10m" }[kind.value];
  };
  const reset = () => {
    editing = null;
    form.reset();
    name.disabled = false;
    legend.textContent = "Add a job";
    submit.textContent = "Add job";
    cancel.hidden = true;
    placeholder();
  };
  const edit = (j) => {
    editing = j;
    name.value = j.name;
    name.disabled = true;
    kind.value = j.cron ? "cron" : j.at && !j.every ? "at" : "every";
    when.value = j.cron || j.every || j.at || "";
    zone.value = j.timezone || "";
    session.value = j.session_key === `cron:${j.name}` ? "" : j.session_key;
    message.value = j.message || "";
    channel.value = j.deliver_to?.channel || "";
    to.value = j.deliver_to?.to || "";
    account.value = j.deliver_to?.account || "";
    legend.textContent = `Change ${j.name}`;
    submit.textContent = "Save changes";
    cancel.hidden = false;
    placeholder();
    name.closest("form").scrollIntoView({ block: "nearest" });
    when.focus();
  };
  const jobBody = () => {
    const job = { [kind.value]: when.value.trim(), message: message.value };
    if (kind.value === "cron" && zone.value.trim()) job.timezone = zone.value.trim();
    if (editing?.cron && kind.value !== "cron") job.cron = ""; // the cron expression goes
    if (session.value.trim()) job.session_key = session.value.trim();
    if (channel.value.trim()) {
      job.deliver_to = { channel: channel.value.trim(), to: to.value.trim() };
      if (account.value.trim()) job.deliver_to.account = account.value.trim();
    }
    return job;
  };
  const save = async () => {
    if (editing) {
      const j = await ctx.api.patch(`/api/cron/${encodeURIComponent(editing.name)}`, jobBody());
      status.textContent = `Saved ${j.name}; next run ${iso(j.next_run) || "none"}.`;
    } else {
      const j = await ctx.api.post("/api/cron", { name: name.value.trim(), kind: "message", ...jobBody() });
      status.textContent = `Added ${j.name}; next run ${iso(j.next_run) || "none"}.`;
    }
    reset();
    await load();
  };
  const runNow = async (j) => {
    status.textContent = `Running ${j.name}…`;
    const ran = await ctx.api.post(`/api/cron/${encodeURIComponent(j.name)}/run`);
    status.textContent = ran.error ? `${j.name} failed: ${ran.error}` : `Ran ${j.name}: ${ran.result}`;
    await load();
  };
  const remove = async (j) => {
    if (!confirm(`Delete the job ${j.name}?`)) return;
    await ctx.api.delete(`/api/cron/${encodeURIComponent(j.name)}`);
    status.textContent = `Deleted ${j.name}.`;
    if (editing?.name === j.name) reset();
    await load();
  };
  const act = (fn) => () => fn().catch(() => {});
  const row = (j) =>
    h(
      "tr",
      { "data-job": j.name },
      h("th", { scope: "row" }, j.name, j.enabled ? "" : h("span", { class: "muted" }, " (disabled)")),
      cell(schedule(j)),
      h("td", { class: "words" }, j.message || j.url || j.path || ""),
      cell(j.deliver_to ? `${j.deliver_to.channel}:${j.deliver_to.to} (${j.deliver_to.account})` : ""),
      cell(iso(j.next_run)),
      cell(iso(j.last_run)),
      h("td", { class: j.last_error ? "last-result failed" : "last-result" }, j.last_error || j.last_result || ""),
      cell(j.runs, "num"),
      h(
        "td",
        {},
        h(
          "div",
          { class: "buttons" },
          h("button", { type: "button", "aria-label": `Run now: ${j.name}`, onclick: act(() => runNow(j)) }, "Run now"),
          h("button", { type: "button", class: "quiet", "aria-label": `Edit ${j.name}`, onclick: () => edit(j) }, "Edit"),
          h("button", { type: "button", class: "quiet", "aria-label": `Delete ${j.name}`, onclick: act(() => remove(j)) }, "Delete"),
        ),
      ),
    );
  const load = async () => {
    const { jobs } = await ctx.api.get("/api/cron");
    body.replaceChildren(...jobs.map(row));
    count.textContent = jobs.length ? `${jobs.length} jobs` : "No jobs yet.";
  };
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    save().catch(() => {});
  });
  kind.addEventListener("change", placeholder);
  cancel.addEventListener("click", reset);
  reset();
  await load();
}

// The Control UI's shell: login, navigation, theme and a hash router. Each page is a module
// /ui/pages/<name>.js exporting `async function render(root, ctx)`, ctx = {api, navigate,
// params}; params.id is the decoded rest of the route (#/sessions/<key> -> params.id = key).

import { api, configure, login, logout, resume } from "/ui/api.js";
import { clear, h } from "/ui/dom.js";

// module: null for the pages not built yet.
const PAGES = [
  { name: "sessions", title: "Sessions", module: "/ui/pages/sessions.js" },
  { name: "approvals", title: "Approvals", module: "/ui/pages/approvals.js" },
  { name: "pairing", title: "Pairing", module: "/ui/pages/pairing.js" },
  { name: "cron", title: "Cron", module: "/ui/pages/cron.js" },
  { name: "usage", title: "Usage", module: "/ui/pages/usage.js" },
  { name: "health", title: "Health", module: "/ui/pages/health.js" },
  { name: "config", title: "Configuration", module: "/ui/pages/config.js" },
];
const THEME_KEY = "switchboard.ui.theme";

const $ = (id) => document.getElementById(id);
const nav = $("nav");
const pageRoot = $("page");
const loginForm = $("login");
const errorBox = $("error");
let rendering = 0; // the latest navigation wins when pages load slowly

function showError(message) {
  errorBox.textContent = message;
  errorBox.hidden = !message;
}

function showLogin(message = "") {
  nav.hidden = true;
  $("logout").hidden = true;
  clear(pageRoot);
  loginForm.hidden = false;
  const note = $("login-error");
  note.textContent = message;
  note.hidden = !message;
  $("token").focus();
}

function navigate(path) {
  location.hash = `#/${path}`;
}

function route() {
  const [name, ...rest] = location.hash.replace(/^#\/?/, "").split("/");
  const page = PAGES.find((p) => p.name === name) || PAGES[0];
  let id = "";
  try {
    id = decodeURIComponent(rest.join("/"));
  } catch {
    id = "";
  }
  return { page, params: { id } };
}

async function render() {
  const ticket = ++rendering;
  const { page, params } = route();
  showError("");
  for (const link of nav.querySelectorAll("a")) {
    if (link.dataset.page === page.name) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  document.title = `${page.title} · Switchboard Control`;
  const root = h("div", { class: "page" });
  clear(pageRoot).append(root);
  if (!page.module) {
    root.append(h("h1", {}, page.title), h("p", { class: "muted" }, "Not built yet."));
    return;
  }
  try {
    const module = await import(page.module);
    if (ticket !== rendering) return;
    await module.render(root, { api, navigate, params });
  } catch (err) {
    if (ticket === rendering && !err.status) showError(`This page failed: ${err.message}`);
  }
}

function buildNav() {
  clear(nav).append(
    h("ul", {}, PAGES.map((p) => h("li", {}, h("a", { href: `#/${p.name}`, "data-page": p.name }, p.title)))),
  );
}

function enter() {
  loginForm.hidden = true;
  nav.hidden = false;
  $("logout").hidden = false;
  if (!location.hash) history.replaceState(null, "", "#/sessions");
  render();
}

function effectiveTheme() {
  const chosen = localStorage.getItem(THEME_KEY);
  if (chosen === "dark" || chosen === "light") return chosen;
  return matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

function applyTheme() {
  const chosen = localStorage.getItem(THEME_KEY);
  if (chosen) document.documentElement.dataset.theme = chosen;
  else delete document.documentElement.dataset.theme;
  const dark = effectiveTheme() === "dark";
  $("code-light").disabled = dark; // highlight.js's theme for code blocks
  $("code-dark").disabled = !dark;
  const button = $("theme");
  button.textContent = dark ? "Light mode" : "Dark mode";
  button.setAttribute("aria-label", dark ? "Switch to light mode" : "Switch to dark mode");
}

$("theme").addEventListener("click", () => {
  localStorage.setItem(THEME_KEY, effectiveTheme() === "dark" ? "light" : "dark");
  applyTheme();
});
matchMedia("(prefers-color-scheme: dark)").addEventListener("change", applyTheme);

loginForm.addEventListener("submit", async (event) => {
  event.preventDefault();
  const field = $("token");
  try {
    await login(field.value);
    field.value = "";
    enter();
  } catch (err) {
    field.value = "";
    showLogin(err.message || "The login failed.");
  }
});

$("logout").addEventListener("click", async () => {
  try {
    await logout();
  } finally {
    showLogin("Logged out.");
  }
});

configure({
  // The cookie is gone, expired, or the gateway token changed since the login.
  onUnauthorized: () => showLogin("Your session has ended. Log in again."),
  onError: showError,
});
window.addEventListener("hashchange", () => {
  if (loginForm.hidden) render();
});

applyTheme();
buildNav();
resume()
  .then((ok) => (ok ? enter() : showLogin()))
  .catch((err) => showLogin(err.message));

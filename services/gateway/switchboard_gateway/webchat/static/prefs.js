// What WebChat remembers in this browser (localStorage): the colour theme chosen with the
// toggle, and the names given to conversations. Nothing secret: the gateway token stays in the
// tab's sessionStorage (webchat.js).

const THEME_KEY = "switchboard.webchat.theme";
const TITLES_KEY = "switchboard.webchat.titles";
const TITLE_CHARS = 80;

const dark = window.matchMedia("(prefers-color-scheme: dark)");

function read(key) {
  try {
    return localStorage.getItem(key);
  } catch {
    return null; // storage disabled: nothing remembered
  }
}

function write(key, value) {
  try {
    localStorage.setItem(key, value);
  } catch (err) {
    console.warn("could not remember", key, err);
  }
}

// --- theme -----------------------------------------------------------------------------------

// "dark" | "light": the toggle's choice, or the system's while none was made.
export function currentTheme() {
  const chosen = read(THEME_KEY);
  if (chosen === "dark" || chosen === "light") return chosen;
  return dark.matches ? "dark" : "light";
}

// The page's classes (theme-dark / theme-light on <html>) and the code blocks' theme.
export function applyTheme(button) {
  const theme = currentTheme();
  const root = document.documentElement;
  root.classList.toggle("theme-dark", theme === "dark");
  root.classList.toggle("theme-light", theme === "light");
  const light = document.getElementById("code-light");
  const darkSheet = document.getElementById("code-dark");
  if (light) light.media = theme === "light" ? "all" : "not all";
  if (darkSheet) darkSheet.media = theme === "dark" ? "all" : "not all";
  // A toggle: its name stays "Dark mode", aria-pressed says whether it is on.
  if (button) button.setAttribute("aria-pressed", String(theme === "dark"));
}

export function setUpTheme(button) {
  applyTheme(button);
  button.addEventListener("click", () => {
    write(THEME_KEY, currentTheme() === "dark" ? "light" : "dark");
    applyTheme(button);
  });
  dark.addEventListener("change", () => applyTheme(button));
}

// --- conversation names ----------------------------------------------------------------------

function titles() {
  try {
    const data = JSON.parse(read(TITLES_KEY) || "{}");
    return data && typeof data === "object" ? data : {};
  } catch {
    return {};
  }
}

export function titleOf(session) {
  const title = titles()[session];
  return typeof title === "string" ? title : "";
}

export function setTitle(session, title) {
  const all = titles();
  const clean = String(title).replace(/\s+/g, " ").trim().slice(0, TITLE_CHARS);
  if (clean) all[session] = clean;
  else delete all[session];
  write(TITLES_KEY, JSON.stringify(all));
  return clean;
}

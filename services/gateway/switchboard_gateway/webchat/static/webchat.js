// Switchboard WebChat: the page. The gateway token is asked once and kept in sessionStorage
// (this tab only); it travels in the socket's connect request (socket.js), never in a URL.
// Drawing is view.js's, the conversation list sidebar.js's, the remembered theme and names
// prefs.js's, voice notes voice.js's.
import { setTitle, setUpTheme, titleOf } from "./prefs.js";
import { createSidebar, titleFor } from "./sidebar.js";
import { createSocket } from "./socket.js";
import { createWebChatView } from "./view.js";
import { setUpVoice } from "./voice.js";

const TOKEN_KEY = "switchboard.webchat.token";
const SESSION_KEY = "switchboard.webchat.session";
const NARROW = window.matchMedia("(max-width: 720px)");
const $ = (id) => document.getElementById(id);

const ui = {
  status: $("status"),
  login: $("login"),
  loginForm: $("login-form"),
  loginError: $("login-error"),
  token: $("token"),
  chat: $("chat"),
  chatTitle: $("chat-title"),
  messages: $("messages"),
  composer: $("composer"),
  input: $("input"),
  attach: $("attach"),
  attached: $("attached"),
  record: $("record"),
  stop: $("stop"),
  menu: $("menu"),
  sidebar: $("sidebar"),
  conversations: $("conversations"),
  newChat: $("new-chat"),
  signOut: $("sign-out"),
  theme: $("theme"),
};
const view = createWebChatView(
  ui.messages,
  (approvalId, decision) => request("decide", { approval_id: approvalId, decision }),
  loadMedia,
);
const sidebar = createSidebar(ui.conversations, openSession, () => {
  showTitle();
  refreshList();
});

const socket = createSocket({
  token: () => token(),
  session: () => session(),
  connected: onConnected,
  event: onEvent,
  status: setStatus,
  refused: () => {
    sessionStorage.removeItem(TOKEN_KEY);
    showLogin("The gateway refused this token.");
  },
});
const request = socket.request;

const state = {
  buffered: null, // events held while the history loads
  echoes: null, // the user's messages drawn while the history loads
  running: new Set(), // run ids started and not ended
  recorded: [], // voice notes recorded for the next message (File)
};

// --- storage ---------------------------------------------------------------------------------

const token = () => sessionStorage.getItem(TOKEN_KEY);
const session = () => sessionStorage.getItem(SESSION_KEY);

function setStatus(text) {
  ui.status.textContent = text;
}

// --- files -----------------------------------------------------------------------------------

const readAs = (blob, how) =>
  new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error || new Error("could not read the file"));
    reader[how](blob);
  });

// A file the agent sent, fetched with the token (never in a URL), as a data: URL.
async function loadMedia(url) {
  const res = await fetch(url, { headers: { Authorization: `Bearer ${token()}` } });
  if (!res.ok) throw new Error(`HTTP ${res.status}`);
  return readAs(await res.blob(), "readAsDataURL");
}

// The chosen files as send's attachments: base64 in the frame.
async function attachments() {
  const out = [];
  for (const file of [...ui.attach.files, ...state.recorded]) {
    const url = await readAs(file, "readAsDataURL");
    out.push({ data: url.slice(url.indexOf(",") + 1), name: file.name, mime: file.type, url });
  }
  return out;
}

// --- history and the conversation list -------------------------------------------------------

async function loadHistory() {
  state.buffered = state.buffered || [];
  state.echoes = state.echoes || [];
  try {
    const payload = await request("history", {});
    const done = view.renderHistory(payload.messages);
    const held = state.buffered;
    const echoes = state.echoes;
    state.buffered = null;
    state.echoes = null;
    // A message sent while the history loaded is drawn again after it, unless the history
    // already holds its run (the run's events name the messages it answers).
    const inHistory = new Set();
    for (const frame of held) {
      if (done.has(frame.payload.run_id)) {
        for (const id of frame.payload.message_ids || []) inHistory.add(id);
      }
    }
    for (const li of echoes) {
      if (!inHistory.has(li.dataset.messageId)) view.restore(li);
    }
    for (const frame of held) {
      if (!done.has(frame.payload.run_id)) applyEvent(frame);
    }
  } catch (err) {
    state.buffered = null;
    state.echoes = null;
    view.systemNote(`Could not load the history: ${err.message}`);
  }
}

async function refreshList() {
  try {
    const payload = await request("sessions", {});
    sidebar.update(payload.sessions, session());
    showTitle();
  } catch (err) {
    console.warn("could not list the conversations:", err);
  }
}

function showTitle() {
  const title = titleFor(sidebar.item(session()));
  ui.chatTitle.textContent = title;
  document.title = `${title} · Switchboard WebChat`;
}

// --- events ----------------------------------------------------------------------------------

function applyEvent(frame) {
  view.apply(frame);
  if (frame.event !== "lifecycle") return;
  if (frame.payload.phase === "start") state.running.add(frame.payload.run_id);
  else {
    state.running.delete(frame.payload.run_id);
    refreshList(); // its last activity and message count changed
  }
  ui.stop.disabled = state.running.size === 0;
}

function onEvent(frame) {
  if (frame.event === "gap") {
    loadHistory();
    return;
  }
  if (state.buffered) state.buffered.push(frame);
  else applyEvent(frame);
}

// --- the socket ----------------------------------------------------------------------------

function onConnected(payload, first) {
  sessionStorage.setItem(SESSION_KEY, payload.session);
  showChat();
  sidebar.select(payload.session);
  showTitle();
  refreshList();
  if (first) loadHistory();
}

// Another conversation (null: a new one): the socket follows one session, so it reconnects.
function openSession(id) {
  if (id && id === session() && socket.connected) {
    closeSidebar();
    return;
  }
  socket.disconnect();
  if (id) sessionStorage.setItem(SESSION_KEY, id);
  else sessionStorage.removeItem(SESSION_KEY);
  state.running.clear();
  ui.stop.disabled = true;
  view.clear();
  closeSidebar();
  socket.restart();
  ui.input.focus();
}

// --- the page --------------------------------------------------------------------------------

function showLogin(error) {
  socket.disconnect();
  ui.chat.hidden = true;
  ui.sidebar.hidden = true;
  ui.menu.hidden = true;
  ui.signOut.hidden = true;
  ui.login.hidden = false;
  ui.loginError.textContent = error || "";
  setStatus("Not connected");
  ui.token.focus();
}

function showChat() {
  if (!ui.chat.hidden) return;
  ui.login.hidden = true;
  ui.chat.hidden = false;
  ui.signOut.hidden = false;
  ui.menu.hidden = false;
  layout();
  ui.input.focus();
}

// Wide: the sidebar beside the chat. Narrow (a phone): behind the Chats button.
function layout() {
  if (ui.chat.hidden) return;
  const open = !NARROW.matches || ui.menu.getAttribute("aria-expanded") === "true";
  ui.sidebar.hidden = !open;
  document.body.classList.toggle("narrow", NARROW.matches);
}

function closeSidebar() {
  ui.menu.setAttribute("aria-expanded", "false");
  layout();
}

ui.menu.addEventListener("click", () => {
  const open = ui.menu.getAttribute("aria-expanded") !== "true";
  ui.menu.setAttribute("aria-expanded", String(open));
  layout();
  if (open) ui.newChat.focus();
});
NARROW.addEventListener("change", layout);

ui.loginForm.addEventListener("submit", (ev) => {
  ev.preventDefault();
  const value = ui.token.value.trim();
  if (!value) return;
  sessionStorage.setItem(TOKEN_KEY, value);
  ui.token.value = "";
  ui.loginError.textContent = "";
  socket.restart();
});

async function send() {
  const text = ui.input.value.trim();
  if (!text && !ui.attach.files.length && !state.recorded.length) return;
  if (!socket.connected) {
    setStatus("Not connected yet; the message was not sent.");
    return;
  }
  let files = [];
  if (ui.attach.files.length || state.recorded.length) {
    // Read before anything is drawn (without files the message is drawn at once, as before).
    try {
      files = await attachments();
    } catch (err) {
      setStatus(`The file could not be read: ${err.message}`);
      return;
    }
  }
  ui.input.value = "";
  ui.attach.value = "";
  state.recorded = [];
  ui.attached.textContent = "";
  const images = files.filter((f) => f.mime.startsWith("image/")).map((f) => f.url);
  const others = files.filter((f) => !f.mime.startsWith("image/")).map((f) => f.name);
  const li = view.userMessage(text, images, others);
  if (state.echoes) state.echoes.push(li); // the history being loaded would wipe it
  const here = session();
  const first = ui.messages.querySelectorAll(".msg.user").length === 1;
  if (text && first && !titleOf(here) && !sidebar.item(here).message_count) {
    setTitle(here, text.split("\n")[0].slice(0, 60)); // a new chat is named by its first line
    showTitle();
  }
  try {
    const sent = files.map(({ data, name, mime }) => ({ data, name, mime }));
    const payload = await request("send", sent.length ? { text, attachments: sent } : { text });
    li.dataset.messageId = payload.message_id;
    if (payload.status === "answered") view.systemNote(payload.answer || "");
    refreshList();
  } catch (err) {
    li.classList.add("failed");
    const span = document.createElement("span");
    span.className = "note";
    span.textContent = `Not sent: ${err.message}`;
    li.append(span);
  }
}

async function stop() {
  try {
    await request("abort", {});
    setStatus("Stopping the answer\u2026");
  } catch (err) {
    setStatus(`Could not stop: ${err.message}`);
  }
}

ui.composer.addEventListener("submit", (ev) => {
  ev.preventDefault();
  send();
});
ui.input.addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
    ev.preventDefault();
    send();
  }
});
ui.stop.addEventListener("click", stop);
document.addEventListener("keydown", (ev) => {
  if (ui.chat.hidden) return;
  if (ev.key === "Escape" && state.running.size) {
    ev.preventDefault();
    stop();
  } else if (ev.key === "Escape" && NARROW.matches && !ui.sidebar.hidden) {
    closeSidebar();
    ui.menu.focus();
  } else if ((ev.ctrlKey || ev.metaKey) && !ev.altKey && ev.key.toLowerCase() === "k") {
    ev.preventDefault();
    openSession(null);
  }
});
function showAttached() {
  const files = [...ui.attach.files, ...state.recorded];
  ui.attached.textContent = files.map((f) => f.name).join(", ");
}
ui.attach.addEventListener("change", showAttached);
setUpVoice(
  ui.record,
  (file) => {
    state.recorded.push(file);
    showAttached();
    setStatus(socket.connected ? "Connected" : "Not connected");
  },
  setStatus,
);
ui.newChat.addEventListener("click", () => openSession(null));
ui.signOut.addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  showLogin("");
});

setUpTheme(ui.theme);
if (token()) socket.connect();
else showLogin("");

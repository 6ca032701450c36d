// Switchboard WebChat: the page's client of WS /webchat/ws (docs/webchat-protocol.md).
// The gateway token is asked once and kept in sessionStorage (this tab only); it travels in
// the socket's connect request, never in a URL. Drawing is view.js's.
(() => {
  "use strict";

  const TOKEN_KEY = "switchboard.webchat.token";
  const SESSION_KEY = "switchboard.webchat.session";
  const $ = (id) => document.getElementById(id);

  const ui = {
    status: $("status"),
    login: $("login"),
    loginForm: $("login-form"),
    loginError: $("login-error"),
    token: $("token"),
    chat: $("chat"),
    messages: $("messages"),
    composer: $("composer"),
    input: $("input"),
    attach: $("attach"),
    attached: $("attached"),
    newChat: $("new-chat"),
    signOut: $("sign-out"),
  };
  const view = window.createWebChatView(
    ui.messages,
    (approvalId, decision) => request("decide", { approval_id: approvalId, decision }),
    loadMedia,
  );

  const state = {
    ws: null,
    connected: false,
    epoch: null,
    lastSeq: null,
    attempt: 0,
    retryTimer: null,
    nextId: 1,
    pending: new Map(), // request id -> {resolve, reject}
    buffered: null, // events held while the history loads
    echoes: null, // the user's messages drawn while the history loads
  };

  // --- storage -------------------------------------------------------------------------------

  const token = () => sessionStorage.getItem(TOKEN_KEY);
  const session = () => sessionStorage.getItem(SESSION_KEY);

  function setStatus(text) {
    ui.status.textContent = text;
  }

  // --- files ---------------------------------------------------------------------------------

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
    for (const file of ui.attach.files) {
      const url = await readAs(file, "readAsDataURL");
      out.push({ data: url.slice(url.indexOf(",") + 1), name: file.name, mime: file.type, url });
    }
    return out;
  }

  // --- history -------------------------------------------------------------------------------

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
        if (!done.has(frame.payload.run_id)) view.apply(frame);
      }
    } catch (err) {
      state.buffered = null;
      state.echoes = null;
      view.systemNote(`Could not load the history: ${err.message}`);
    }
  }

  // --- events --------------------------------------------------------------------------------

  function onEvent(frame) {
    state.lastSeq = frame.seq;
    if (frame.event === "gap") {
      loadHistory();
      return;
    }
    if (state.buffered) state.buffered.push(frame);
    else view.apply(frame);
  }

  // --- the socket ----------------------------------------------------------------------------

  function request(method, params) {
    return new Promise((resolve, reject) => {
      if (!state.ws || state.ws.readyState !== WebSocket.OPEN) {
        reject(new Error("not connected"));
        return;
      }
      const id = `r${state.nextId++}`;
      state.pending.set(id, { resolve, reject });
      state.ws.send(JSON.stringify({ type: "req", id, method, params }));
    });
  }

  function onResponse(frame) {
    const waiting = state.pending.get(frame.id);
    if (!waiting) return;
    state.pending.delete(frame.id);
    if (frame.ok) waiting.resolve(frame.payload);
    else {
      const err = new Error(frame.error.message);
      err.code = frame.error.code;
      waiting.reject(err);
    }
  }

  function connect() {
    clearTimeout(state.retryTimer);
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(`${scheme}//${location.host}/webchat/ws`);
    state.ws = ws;
    setStatus("Connecting\u2026");
    ws.onopen = () => {
      const params = { token: token() };
      if (session()) params.session = session();
      if (state.epoch !== null && state.lastSeq !== null) {
        params.epoch = state.epoch;
        params.last_seq = state.lastSeq;
      }
      const id = `c${state.nextId++}`;
      state.pending.set(id, { resolve: onConnected, reject: () => {} });
      ws.send(JSON.stringify({ type: "req", id, method: "connect", params }));
    };
    ws.onmessage = (message) => {
      if (ws !== state.ws) return;
      let frame;
      try {
        frame = JSON.parse(message.data);
      } catch {
        return;
      }
      if (frame.type === "res") onResponse(frame);
      else if (frame.type === "event") onEvent(frame);
    };
    ws.onclose = (ev) => onClosed(ws, ev);
  }

  function onConnected(payload) {
    const first = state.epoch === null;
    sessionStorage.setItem(SESSION_KEY, payload.session);
    state.connected = true;
    state.attempt = 0;
    if (!payload.resumed) state.lastSeq = payload.seq;
    state.epoch = payload.epoch;
    setStatus("Connected");
    showChat();
    if (first) loadHistory();
  }

  function onClosed(ws, ev) {
    if (ws !== state.ws) return;
    state.ws = null;
    state.connected = false;
    for (const waiting of state.pending.values()) waiting.reject(new Error("disconnected"));
    state.pending.clear();
    if (ev.code === 4401) {
      sessionStorage.removeItem(TOKEN_KEY);
      showLogin("The gateway refused this token.");
      return;
    }
    const base = ev.code === 4000 ? 100 : Math.min(15000, 500 * 2 ** state.attempt);
    const delay = Math.round(base * (0.5 + Math.random() / 2));
    state.attempt += 1;
    setStatus(`Disconnected; reconnecting in ${Math.ceil(delay / 1000)} s\u2026`);
    state.retryTimer = setTimeout(connect, delay);
  }

  function disconnect() {
    clearTimeout(state.retryTimer);
    const ws = state.ws;
    state.ws = null;
    state.connected = false;
    if (ws) ws.close(1000, "bye");
  }

  // --- the page ------------------------------------------------------------------------------

  function showLogin(error) {
    disconnect();
    ui.chat.hidden = true;
    ui.newChat.hidden = true;
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
    ui.newChat.hidden = false;
    ui.signOut.hidden = false;
    ui.input.focus();
  }

  ui.loginForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const value = ui.token.value.trim();
    if (!value) return;
    sessionStorage.setItem(TOKEN_KEY, value);
    ui.token.value = "";
    ui.loginError.textContent = "";
    state.epoch = null;
    state.lastSeq = null;
    connect();
  });

  async function send() {
    const text = ui.input.value.trim();
    if (!text && !ui.attach.files.length) return;
    if (!state.connected) {
      setStatus("Not connected yet; the message was not sent.");
      return;
    }
    let files = [];
    if (ui.attach.files.length) {
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
    ui.attached.textContent = "";
    const images = files.filter((f) => f.mime.startsWith("image/")).map((f) => f.url);
    const li = view.userMessage(text, images);
    if (state.echoes) state.echoes.push(li); // the history being loaded would wipe it
    try {
      const sent = files.map(({ data, name, mime }) => ({ data, name, mime }));
      const payload = await request("send", sent.length ? { text, attachments: sent } : { text });
      li.dataset.messageId = payload.message_id;
      if (payload.status === "answered") view.systemNote(payload.answer || "");
    } catch (err) {
      li.classList.add("failed");
      const span = document.createElement("span");
      span.className = "note";
      span.textContent = `Not sent: ${err.message}`;
      li.append(span);
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
  ui.attach.addEventListener("change", () => {
    ui.attached.textContent = Array.from(ui.attach.files, (f) => f.name).join(", ");
  });
  ui.newChat.addEventListener("click", () => {
    disconnect();
    sessionStorage.removeItem(SESSION_KEY);
    state.epoch = null;
    state.lastSeq = null;
    view.clear();
    connect();
  });
  ui.signOut.addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    showLogin("");
  });

  if (token()) connect();
  else showLogin("");
})();

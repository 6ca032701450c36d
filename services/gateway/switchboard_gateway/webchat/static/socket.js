// WebChat's socket: WS /webchat/ws (docs/webchat-protocol.md). It connects with the token (in
// the connect request, never in the URL), resumes after a drop (epoch and last seq, backoff
// 0.5 s doubling to 15 s with jitter; at once after the lifetime close, 4000), and matches
// responses to requests. webchat.js decides what the page does with it.

// hooks: token() and session() (what to connect with), connected(payload), event(frame),
// status(text), refused() (close 4401: the token is wrong).
export function createSocket(hooks) {
  const state = {
    ws: null,
    connected: false,
    epoch: null,
    lastSeq: null,
    attempt: 0,
    retryTimer: null,
    nextId: 1,
    pending: new Map(), // request id -> {resolve, reject}
  };

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
    hooks.status("Connecting\u2026");
    ws.onopen = () => {
      const params = { token: hooks.token() };
      const session = hooks.session();
      if (session) params.session = session;
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
      else if (frame.type === "event") {
        state.lastSeq = frame.seq;
        hooks.event(frame);
      }
    };
    ws.onclose = (ev) => onClosed(ws, ev);
  }

  function onConnected(payload) {
    const first = state.epoch === null;
    state.connected = true;
    state.attempt = 0;
    if (!payload.resumed) state.lastSeq = payload.seq;
    state.epoch = payload.epoch;
    hooks.status("Connected");
    hooks.connected(payload, first);
  }

  function onClosed(ws, ev) {
    if (ws !== state.ws) return;
    state.ws = null;
    state.connected = false;
    for (const waiting of state.pending.values()) waiting.reject(new Error("disconnected"));
    state.pending.clear();
    if (ev.code === 4401) {
      hooks.refused();
      return;
    }
    const base = ev.code === 4000 ? 100 : Math.min(15000, 500 * 2 ** state.attempt);
    const delay = Math.round(base * (0.5 + Math.random() / 2));
    state.attempt += 1;
    hooks.status(`Disconnected; reconnecting in ${Math.ceil(delay / 1000)} s\u2026`);
    state.retryTimer = setTimeout(connect, delay);
  }

  function disconnect() {
    clearTimeout(state.retryTimer);
    const ws = state.ws;
    state.ws = null;
    state.connected = false;
    if (ws) ws.close(1000, "bye");
  }

  // A fresh start (another session, or a new token): no position to resume from.
  function restart() {
    disconnect();
    state.epoch = null;
    state.lastSeq = null;
    connect();
  }

  return {
    request,
    connect,
    disconnect,
    restart,
    get connected() {
      return state.connected;
    },
  };
}

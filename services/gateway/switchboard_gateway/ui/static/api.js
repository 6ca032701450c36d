// The gateway's API as the Control UI calls it: the login's cookie goes by itself (HttpOnly,
// SameSite=Strict), the CSRF token in X-CSRF-Token; errors come back as ApiError with the
// gateway's message, shown to the user; a 401 sends the user to the login form.

let csrf = "";
const hooks = { unauthorized: () => {}, error: () => {} };

export class ApiError extends Error {
  constructor(status, message, code = null) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function configure({ onUnauthorized, onError }) {
  hooks.unauthorized = onUnauthorized;
  hooks.error = onError;
}

async function send(method, path, body, { quiet = false, withCsrf = true } = {}) {
  const headers = { Accept: "application/json" };
  if (withCsrf) headers["X-CSRF-Token"] = csrf;
  const init = { method, headers, credentials: "same-origin", cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    const error = new ApiError(0, `The gateway did not answer (${err.message}).`);
    if (!quiet) hooks.error(error.message);
    throw error;
  }
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    const message = data?.error?.message || `${response.status} ${response.statusText}`;
    const error = new ApiError(response.status, message, data?.error?.code ?? null);
    if (!quiet) {
      if (response.status === 401) hooks.unauthorized(message);
      else hooks.error(message);
    }
    throw error;
  }
  return data;
}

// ctx.api of every page: request(method, path, body) and its shorthands; each resolves to the
// parsed JSON answer or rejects with an ApiError (already shown to the user).
export const api = {
  request: (method, path, body) => send(method, path, body),
  get: (path) => send("GET", path),
  post: (path, body) => send("POST", path, body),
  patch: (path, body) => send("PATCH", path, body),
  delete: (path) => send("DELETE", path),
};

// The login: the token goes once, in a POST body, never in a URL.
export async function login(token) {
  const answer = await send("POST", "/ui/login", { token }, { quiet: true, withCsrf: false });
  csrf = answer.csrf;
}

// A reloaded page: the cookie's CSRF token again (false when there is no valid cookie).
export async function resume() {
  try {
    csrf = (await send("GET", "/ui/session", undefined, { quiet: true, withCsrf: false })).csrf;
    return true;
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return false;
    throw err;
  }
}

export async function logout() {
  csrf = "";
  await send("POST", "/ui/logout", undefined, { quiet: true, withCsrf: false });
}

// API client: JSON GETs against the server's /api/v1 routes, with the bearer
// token from localStorage, errors turned into ApiError with the server's
// message, and a 401 turned into a token prompt (app.js listens for
// "rastro:unauthorized").

import {qs} from './dom.js';

const TOKEN_KEY = 'rastro.token';

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function token() {
  try { return localStorage.getItem(TOKEN_KEY) || ''; } catch { return ''; }
}

export function setToken(t) {
  try {
    if (t) localStorage.setItem(TOKEN_KEY, t); else localStorage.removeItem(TOKEN_KEY);
  } catch { /* storage disabled: the token lives for this page only */ }
}

export function headers(extra) {
  const hd = {Accept: 'application/json', ...extra};
  const t = token();
  if (t) hd.Authorization = 'Bearer ' + t;
  return hd;
}

// fail turns a non-2xx response into an ApiError carrying the server's
// {"error": "..."} message (or the start of the body).
export async function fail(resp, path, sentToken = token()) {
  let msg = '';
  try {
    const text = await resp.text();
    try { msg = JSON.parse(text).error || text; } catch { msg = text; }
  } catch { /* body unreadable */ }
  msg = (msg || resp.statusText || 'request failed').slice(0, 500);
  // A 401 to a request sent with an older token (one the user has replaced
  // since) does not ask again.
  if (resp.status === 401 && sentToken === token()) window.dispatchEvent(new CustomEvent('rastro:unauthorized'));
  return new ApiError(resp.status, resp.status + ' from ' + path.split('?')[0] + ': ' + msg);
}

// get fetches path (with params as a query string) and decodes its JSON.
export async function get(path, params, signal) {
  const url = path + (params ? qs(params) : '');
  let resp;
  const sent = token();
  try {
    resp = await fetch(url, {headers: headers(), signal, credentials: 'same-origin'});
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'cannot reach the server (' + e.message + ')');
  }
  if (!resp.ok) throw await fail(resp, url, sent);
  return resp.json();
}

// enc encodes one path segment.
export const enc = encodeURIComponent;

// post sends body as JSON to path and decodes the JSON answer.
export async function post(path, body, signal) {
  let resp;
  const sent = token();
  try {
    resp = await fetch(path, {method: 'POST', headers: headers({'Content-Type': 'application/json'}), body: JSON.stringify(body), signal, credentials: 'same-origin'});
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'cannot reach the server (' + e.message + ')');
  }
  if (!resp.ok) throw await fail(resp, path, sent);
  return resp.json();
}

// sqlSupported asks once whether the backend has the SQL mode: POST
// /api/v1/sql answers 501 before reading the body when it has not, and 400
// to the empty statement when it has. Any other answer (401, no server)
// counts as not known yet and is asked again next time.
let sqlAnswer = null;
export function sqlSupported() {
  if (!sqlAnswer) {
    sqlAnswer = fetch('/api/v1/sql', {method: 'POST', headers: headers({'Content-Type': 'application/json'}), body: '{"sql": ""}', credentials: 'same-origin'})
      .then(r => {
        if (r.status === 501) return false;
        if (r.status === 400) return true;
        sqlAnswer = null;
        return false;
      }, () => { sqlAnswer = null; return false; });
  }
  return sqlAnswer;
}

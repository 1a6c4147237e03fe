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

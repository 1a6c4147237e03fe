// The app shell: navigation, the shared time range, theme, the token prompt
// and the client-side router. Pages are ES modules loaded on demand with
// import(); each exports render(root, ctx) and may return a cleanup function.
// Every page keeps its state in the URL (path and query string), so a link
// reproduces what it shows.

import {h, fill, qs, link} from './lib/dom.js';
import {setToken, token, sqlSupported} from './lib/api.js';

const ROUTES = [
  [/^\/(search)?$/, 'search'],
  [/^\/traces\/([^/]+)$/, 'trace'],
  [/^\/llm$/, 'llm'],
  [/^\/sessions(?:\/(.+))?$/, 'sessions'],
  [/^\/services$/, 'services'],
  [/^\/journeys$/, 'journeys'],
  [/^\/tail$/, 'tail'],
  [/^\/logs$/, 'logs'],
  [/^\/explore$/, 'metrics'],
  [/^\/sql$/, 'sql'],
];

const NAV = [
  ['/search', 'Search', 'search'],
  ['/llm', 'LLM', 'llm'],
  ['/sessions', 'Sessions', 'sessions'],
  ['/services', 'Services', 'services'],
  ['/journeys', 'Journeys', 'journeys'],
  ['/logs', 'Logs', 'logs'],
  ['/explore', 'Metrics', 'metrics'],
  ['/tail', 'Live tail', 'tail'],
  ['/sql', 'SQL', 'sql'], // shown once the backend says it has the SQL mode
];

const RANGES = ['15m', '1h', '6h', '24h', '7d'];
// The API's and the CLI's window rule: a page without a range shows the
// last 24 hours (docs/api.md#time-windows).
const DEFAULT_SINCE = '24h';
const THEME_KEY = 'rastro.theme';

const state = {cleanup: null, ctrl: null, gen: 0, page: '', sql: false};
const main = h('main', {id: 'main', tabindex: '-1'});
const navEl = h('nav', {class: 'top', 'aria-label': 'Main'});
const rangeEl = h('div', {class: 'range'});
const tokenDialog = buildTokenDialog();

// ---- theme ----------------------------------------------------------------

function storedTheme() {
  try { return localStorage.getItem(THEME_KEY) || ''; } catch { return ''; }
}

function effectiveTheme() {
  return storedTheme() || (matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light');
}

function applyTheme() {
  const t = storedTheme();
  if (t) document.documentElement.dataset.theme = t; else delete document.documentElement.dataset.theme;
  themeBtn.textContent = effectiveTheme() === 'dark' ? '☀ Light' : '☾ Dark';
}

const themeBtn = h('button', {type: 'button', class: 'ghost', id: 'theme-toggle', title: 'Switch light/dark theme (saved in this browser)', onclick: () => {
  try { localStorage.setItem(THEME_KEY, effectiveTheme() === 'dark' ? 'light' : 'dark'); } catch { /* not saved */ }
  applyTheme();
}});

// ---- navigation -----------------------------------------------------------

export function navigate(url, replace) {
  if (url === location.pathname + location.search) return;
  if (replace) history.replaceState(null, '', url); else history.pushState(null, '', url);
  route();
}

// setParams merges changes into the query string and navigates (push by
// default); a value of '' or null removes the parameter.
function setParams(changes, replace) {
  const p = new URLSearchParams(location.search);
  for (const k in changes) {
    const v = changes[k];
    if (v == null || v === '') p.delete(k); else p.set(k, v);
  }
  const s = p.toString();
  navigate(location.pathname + (s ? '?' + s : ''), replace);
}

function timeParams() {
  const p = new URLSearchParams(location.search);
  return {since: p.get('since') || '', until: p.get('until') || ''};
}

function renderNav(page) {
  const tp = timeParams();
  fill(navEl, h('a', {href: '/', class: 'brand'}, 'rastro'),
    NAV.filter(([, , id]) => id !== 'sql' || state.sql || page === 'sql').map(([path, label, id]) => link(path + qs(id === 'tail' ? {} : tp), {class: id === page ? 'active' : null, 'aria-current': id === page ? 'page' : null}, label)));
}

// ---- time range -----------------------------------------------------------

function localInput(ns) {
  const d = new Date(ns / 1e6);
  const p = n => String(n).padStart(2, '0');
  return d.getFullYear() + '-' + p(d.getMonth() + 1) + '-' + p(d.getDate()) + 'T' + p(d.getHours()) + ':' + p(d.getMinutes());
}

function renderRange(mod) {
  if (mod.noTime) { rangeEl.hidden = true; return; }
  rangeEl.hidden = false;
  const def = mod.defaultSince || DEFAULT_SINCE;
  const {since, until} = timeParams();
  const cur = since || def;
  const relative = RANGES.includes(cur) && !until;
  const sel = h('select', {id: 'range', 'aria-label': 'Time range', onchange: () => {
    if (sel.value === 'custom') { custom.hidden = false; from.focus(); return; }
    setParams({since: sel.value === def ? '' : sel.value, until: ''});
  }},
  RANGES.map(r => h('option', {value: r, selected: relative && r === cur}, 'Last ' + r)),
  h('option', {value: 'custom', selected: !relative}, relative ? 'Custom…' : 'Custom range'));
  const now = Date.now() * 1e6;
  const parse = v => { const t = Date.parse(v); return isNaN(t) ? null : t * 1e6; };
  const fromNs = relative ? null : (parse(cur) ?? null);
  const from = h('input', {type: 'datetime-local', id: 'range-from', 'aria-label': 'From', value: localInput(fromNs ?? now - 3600e9)});
  const to = h('input', {type: 'datetime-local', id: 'range-to', 'aria-label': 'To', value: localInput(until ? (parse(until) ?? now) : now)});
  const custom = h('form', {class: 'custom-range', onsubmit: e => {
    e.preventDefault();
    const f = new Date(from.value), t = new Date(to.value);
    if (isNaN(f) || isNaN(t) || f >= t) { to.setCustomValidity('the end must be after the start'); to.reportValidity(); return; }
    setParams({since: f.toISOString(), until: t.toISOString()});
  }}, from, '→', to, h('button', {type: 'submit'}, 'Apply'));
  custom.hidden = relative;
  if (!relative && since && !RANGES.includes(cur)) sel.title = cur + (until ? ' → ' + until : '');
  fill(rangeEl, sel, custom);
}

// ---- token prompt ---------------------------------------------------------

function buildTokenDialog() {
  const input = h('input', {type: 'password', id: 'token-input', autocomplete: 'off', 'aria-label': 'API token'});
  const d = h('dialog', {class: 'token', 'aria-labelledby': 'token-title'},
    h('form', {method: 'dialog', onsubmit: e => {
      e.preventDefault();
      setToken(input.value.trim());
      d.close();
      route();
    }},
    h('h2', {id: 'token-title'}, 'This server needs an API token'),
    h('p', null, 'The API answered 401. Enter a token; it is kept in this browser (localStorage) and sent as Authorization: Bearer on every request.'),
    input,
    h('div', {class: 'row'}, h('button', {type: 'submit'}, 'Save token'),
      h('button', {type: 'button', class: 'ghost', onclick: () => { setToken(''); input.value = ''; d.close(); }}, 'Clear'))));
  window.addEventListener('rastro:unauthorized', () => {
    if (!d.open) { input.value = token(); d.showModal(); input.focus(); }
  });
  return d;
}

// ---- router ---------------------------------------------------------------

async function route() {
  const gen = ++state.gen;
  if (state.ctrl) state.ctrl.abort();
  if (state.cleanup) { try { state.cleanup(); } catch (e) { console.error(e); } }
  state.cleanup = null;
  const focusId = document.activeElement && main.contains(document.activeElement) ? document.activeElement.id : '';
  const path = location.pathname;
  let page = '', arg = '';
  for (const [re, name] of ROUTES) {
    const m = re.exec(path);
    if (m) { page = name; arg = m[1] && name !== 'search' ? decodeURIComponent(m[1]) : ''; break; }
  }
  renderNav(page);
  if (!state.sql) {
    sqlSupported().then(ok => {
      if (ok && !state.sql) { state.sql = true; if (gen === state.gen) renderNav(page); }
    });
  }
  if (!page) {
    rangeEl.hidden = true;
    fill(main, h('h1', null, 'Not found'), h('p', null, 'No page at ', h('code', null, path), '. ', link('/search', null, 'Search traces')));
    return;
  }
  let mod;
  try {
    mod = await import('./pages/' + page + '.js');
  } catch (e) {
    fill(main, h('div', {class: 'error'}, 'Could not load the page: ' + e.message));
    return;
  }
  if (gen !== state.gen) return;
  renderRange(mod);
  const ctrl = new AbortController();
  state.ctrl = ctrl;
  const p = new URLSearchParams(location.search);
  const ctx = {
    arg, params: p, signal: ctrl.signal, navigate, setParams,
    since: p.get('since') || mod.defaultSince || DEFAULT_SINCE, until: p.get('until') || '',
    alive: () => gen === state.gen,
  };
  document.title = (mod.title || page) + ' · rastro';
  main.replaceChildren();
  main.dataset.page = page;
  try {
    state.cleanup = mod.render(main, ctx) || null;
  } catch (e) {
    console.error(e);
    fill(main, h('div', {class: 'error'}, 'This page failed: ' + e.message));
  }
  if (focusId) {
    const el = document.getElementById(focusId);
    if (el) el.focus();
  }
}

// In-app links: same-origin paths navigate with pushState.
document.addEventListener('click', e => {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const a = e.target.closest && e.target.closest('a[href]');
  if (!a || a.target || a.hasAttribute('download')) return;
  const href = a.getAttribute('href');
  if (href[0] !== '/' || href[1] === '/' || href.startsWith('/api/') || href.startsWith('/ui/')) return;
  e.preventDefault();
  navigate(href);
});

document.addEventListener('keydown', e => {
  const t = e.target;
  const typing = t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT' || t.isContentEditable);
  if (e.key === '/' && !typing && !e.ctrlKey && !e.metaKey) {
    const box = main.querySelector('[data-search]');
    if (box) { e.preventDefault(); box.focus(); box.select && box.select(); }
  }
});

window.addEventListener('popstate', route);
window.addEventListener('rastro:navigate', e => navigate(e.detail));

document.body.append(
  h('header', {class: 'app'}, navEl, rangeEl, themeBtn),
  main, tokenDialog);
applyTheme();
matchMedia('(prefers-color-scheme: dark)').addEventListener('change', applyTheme);
route();

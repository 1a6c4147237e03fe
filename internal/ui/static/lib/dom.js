// DOM builders. Text is only ever set with textContent or text nodes: no
// HTML parsing anywhere in the app. Event handlers are functions passed as
// on* props (never attribute strings), and href/src accept only same-origin
// paths the app builds itself.

const SVG_NS = 'http://www.w3.org/2000/svg';

// safePath returns p when it is a same-origin path ("/x", not "//host" or
// "/\host"); anything else (javascript:, data:, http:) throws.
export function safePath(p) {
  p = String(p);
  if (p[0] !== '/' || p[1] === '/' || p[1] === '\\') throw new Error('refusing a non-path URL: ' + p);
  return p;
}

function setProps(el, props) {
  for (const k in props) {
    const v = props[k];
    if (v == null || v === false) continue;
    if (k.startsWith('on')) {
      if (typeof v !== 'function') throw new Error('event handler ' + k + ' must be a function');
      el.addEventListener(k.slice(2), v);
    } else if (k === 'class') el.setAttribute('class', v);
    else if (k === 'text') el.textContent = v;
    else if (k === 'style') for (const s in v) el.style.setProperty(s, v[s]);
    else if (k === 'dataset') for (const d in v) el.dataset[d] = v[d];
    else if (k === 'href' || k === 'src' || k === 'action' || k === 'xlink:href') el.setAttribute(k, safePath(v));
    else if (k === 'value' || k === 'checked' || k === 'selected' || k === 'indeterminate') el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
}

function add(el, children) {
  for (const c of children) {
    if (c == null || c === false || c === true) continue;
    if (Array.isArray(c)) add(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

// h builds an HTML element: h('a', {href: '/x', class: 'y'}, 'text', child).
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  if (props) setProps(el, props);
  add(el, children);
  return el;
}

// s builds an SVG element the same way.
export function s(tag, props, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  if (props) setProps(el, props);
  add(el, children);
  return el;
}

// clear removes every child of el and appends the given children.
export function fill(el, ...children) {
  el.replaceChildren();
  add(el, children);
  return el;
}

// link is an in-app link; app.js turns its clicks into pushState navigation.
export function link(path, props, ...children) {
  return h('a', {...props, href: path}, ...children);
}

// qs builds "?a=1&b=2" from an object, leaving out empty values.
export function qs(params) {
  const u = new URLSearchParams();
  for (const k in params) {
    const v = params[k];
    if (v == null || v === '') continue;
    if (Array.isArray(v)) v.forEach(x => u.append(k, x));
    else u.set(k, v);
  }
  const t = u.toString();
  return t ? '?' + t : '';
}

// errorBox renders an API error message as text.
export function errorBox(err) {
  return h('div', {class: 'error', role: 'alert'}, err && err.message ? err.message : String(err));
}

export function loading(what) {
  return h('div', {class: 'muted loading'}, 'Loading ' + (what || '') + '…');
}

export function empty(text) {
  return h('div', {class: 'muted empty'}, text);
}

// foldText shows long text folded, with a "show more" toggle.
export function foldText(text, max = 600, cls = 'text') {
  text = text == null ? '' : String(text);
  const lines = text.split('\n');
  if (text.length <= max && lines.length <= 12) return h('div', {class: cls}, text);
  const short = lines.length > 12 ? lines.slice(0, 12).join('\n').slice(0, max) : text.slice(0, max);
  const body = h('div', {class: cls}, short + '…');
  let open = false;
  const btn = h('button', {type: 'button', class: 'link-btn', onclick: () => {
    open = !open;
    body.textContent = open ? text : short + '…';
    btn.textContent = open ? 'show less' : 'show more (' + text.length.toLocaleString() + ' chars)';
  }}, 'show more (' + text.length.toLocaleString() + ' chars)');
  return h('div', null, body, btn);
}

// table builds a sortable table. cols: [{key, label, get(row), fmt(v,row) ->
// node|string, num, cls}]. opts.sort / opts.dir is the current sort,
// opts.onSort(key) changes it, opts.onOpen(row) opens a row (click, Enter).
// Rows are keyboard-navigable with j/k and the arrow keys.
export function table(cols, rows, opts = {}) {
  const sorted = sortRows(cols, rows, opts.sort, opts.dir);
  const head = h('tr', null, cols.map(c => {
    const active = opts.sort === c.key;
    const label = c.label + (active ? (opts.dir === 'asc' ? ' ▲' : ' ▼') : '');
    return h('th', {class: c.num ? 'num' : null, 'aria-sort': active ? (opts.dir === 'asc' ? 'ascending' : 'descending') : null},
      opts.onSort && c.sortable !== false ? h('button', {type: 'button', class: 'th-btn', onclick: () => opts.onSort(c.key)}, label) : label);
  }));
  const body = h('tbody');
  for (const r of sorted) {
    const tr = h('tr', {tabindex: opts.onOpen ? '0' : null, class: opts.rowClass ? opts.rowClass(r) : null},
      cols.map(c => {
        const v = c.get ? c.get(r) : r[c.key];
        return h('td', {class: (c.num ? 'num ' : '') + (c.cls || '')}, c.fmt ? c.fmt(v, r) : v);
      }));
    if (opts.rowData) Object.assign(tr.dataset, opts.rowData(r));
    if (opts.onOpen) {
      tr.addEventListener('click', e => { if (!e.target.closest('a,button')) opts.onOpen(r, e); });
      tr.addEventListener('keydown', e => { if (e.key === 'Enter') opts.onOpen(r, e); });
    }
    body.appendChild(tr);
  }
  const t = h('table', {class: 'grid' + (opts.onOpen ? ' clickable' : '')}, h('thead', null, head), body);
  t.addEventListener('keydown', e => rowNav(e, body));
  return h('div', {class: 'table-wrap'}, t);
}

export function sortRows(cols, rows, key, dir) {
  const c = cols.find(c => c.key === key);
  if (!c) return rows;
  const get = c.sortGet || c.get || (r => r[c.key]);
  const m = dir === 'asc' ? 1 : -1;
  return rows.slice().sort((a, b) => {
    const x = get(a), y = get(b);
    if (x === y) return 0;
    if (x == null) return 1;
    if (y == null) return -1;
    return (x < y ? -1 : 1) * m;
  });
}

// rowNav moves focus between the rows of a tbody with j/k and the arrows.
export function rowNav(e, body) {
  const tr = e.target.closest && e.target.closest('tr');
  if (!tr || tr.parentNode !== body) return;
  let next = null;
  if (e.key === 'j' || e.key === 'ArrowDown') next = tr.nextElementSibling;
  else if (e.key === 'k' || e.key === 'ArrowUp') next = tr.previousElementSibling;
  else return;
  e.preventDefault();
  if (next) next.focus();
}

// debounce delays fn until ms after the last call.
export function debounce(fn, ms) {
  let t;
  return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); };
}

// copyText copies text to the clipboard, falling back to a selected input.
export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const i = h('input', {value: text});
    document.body.appendChild(i);
    i.select();
    const ok = document.execCommand('copy');
    i.remove();
    return ok;
  }
}

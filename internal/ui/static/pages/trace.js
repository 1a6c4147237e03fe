// Trace: a virtualised waterfall (collapsible span tree, timing bars,
// critical path), search within the trace, and a span detail panel that
// shows LLM calls as a conversation.

import {h, fill, errorBox, loading, link, qs, foldText, copyText, debounce} from '../lib/dom.js';
import {get, enc} from '../lib/api.js';
import {dur, time, num, usd} from '../lib/fmt.js';
import {vlist} from '../lib/vlist.js';
import {isLLM, info, conversation, pretty} from '../lib/llm.js';
import {PALETTE} from '../lib/chart.js';

export const title = 'Trace';
export const noTime = true;

const ROW = 26;

export function render(root, ctx) {
  fill(root, loading('trace ' + ctx.arg));
  let cleanup = () => {};
  // The trace's log records come with it; a store without logs (501) or a
  // failed request leaves the trace readable, with the reason in its place.
  const logs = get('/api/v1/traces/' + enc(ctx.arg) + '/logs', {limit: 1000}, ctx.signal)
    .then(d => ({records: d.logs || [], more: !!d.next_cursor}))
    .catch(e => (e.name === 'AbortError' ? {records: []} : {records: [], error: e.status === 501 ? null : e.message}));
  Promise.all([get('/api/v1/traces/' + enc(ctx.arg), null, ctx.signal), logs]).then(([d, l]) => {
    if (ctx.alive()) cleanup = draw(root, ctx, d, l);
  }).catch(e => {
    if (e.name !== 'AbortError') fill(root, h('h1', null, 'Trace ', h('span', {class: 'mono'}, ctx.arg)), errorBox(e));
  });
  return () => cleanup();
}

const colorCache = new Map();
function color(svc) {
  if (!colorCache.has(svc)) {
    let x = 0;
    for (let i = 0; i < svc.length; i++) x = (x * 31 + svc.charCodeAt(i)) >>> 0;
    colorCache.set(svc, PALETTE[x % PALETTE.length]);
  }
  return colorCache.get(svc);
}

// buildTree links spans to parents and orders children by start time.
// Spans whose parent is missing become roots.
export function buildTree(spans) {
  const byId = new Map();
  const nodes = spans.map(s => ({s, children: [], parent: null, depth: 0, crit: false, hay: null}));
  for (const n of nodes) byId.set(n.s.span_id, n);
  const roots = [];
  for (const n of nodes) {
    const p = n.s.parent_span_id && byId.get(n.s.parent_span_id);
    if (p && p !== n) { n.parent = p; p.children.push(n); } else roots.push(n);
  }
  const byStart = (a, b) => a.s.start_time_unix_nano - b.s.start_time_unix_nano;
  roots.sort(byStart);
  const stack = roots.slice().reverse();
  const seen = new Set();
  while (stack.length) {
    const n = stack.pop();
    if (seen.has(n)) continue; // a parent cycle: show each span once
    seen.add(n);
    n.children.sort(byStart);
    for (let i = n.children.length - 1; i >= 0; i--) { n.children[i].depth = n.depth + 1; stack.push(n.children[i]); }
  }
  return {byId, roots, nodes};
}

// markCritical walks from the root to the child that ends last before its
// parent's end, repeatedly, and marks those spans.
export function markCritical(root) {
  let cur = root;
  const seen = new Set();
  while (cur && !seen.has(cur)) {
    seen.add(cur);
    cur.crit = true;
    const end = cur.s.end_time_unix_nano;
    let best = null;
    for (const c of cur.children) {
      if (c.s.end_time_unix_nano <= end && (!best || c.s.end_time_unix_nano > best.s.end_time_unix_nano)) best = c;
    }
    cur = best;
  }
}

function draw(root, ctx, data, logs) {
  const spans = data.spans || [];
  // Log records by span id, oldest first; "" holds those of no span.
  const logsBySpan = new Map();
  for (const r of (logs.records || []).slice().reverse()) {
    const k = r.span_id || '';
    if (!logsBySpan.has(k)) logsBySpan.set(k, []);
    logsBySpan.get(k).push(r);
  }
  const t0 = performance.now();
  const {byId, roots, nodes} = buildTree(spans);
  let start = Infinity, end = -Infinity, errors = 0;
  for (const s of spans) {
    start = Math.min(start, s.start_time_unix_nano);
    end = Math.max(end, s.end_time_unix_nano);
    if (s.status === 'error') errors++;
  }
  const total = Math.max(1, end - start);
  const main = roots.reduce((a, b) => (!a || b.s.duration_ns > a.s.duration_ns ? b : a), null);
  if (main) markCritical(main);
  const collapsed = new Set();
  const params = new URLSearchParams(location.search);
  let selected = byId.get(params.get('span')) || null;
  let query = params.get('find') || '';
  let onlyMatches = params.get('filter') === '1';
  let matches = new Set();
  let visible = [];

  const services = new Set(spans.map(s => s.service));
  const rootNode = roots.find(r => !r.s.parent_span_id) || main;
  const otlp = '/api/v1/traces/' + enc(data.trace_id) + '?format=otlp';
  const copyBtn = h('button', {type: 'button', class: 'ghost', id: 'copy-link', onclick: async () => {
    copyBtn.textContent = (await copyText(location.href)) ? 'Link copied' : 'Copy failed';
  }}, 'Copy link');
  const findInput = h('input', {type: 'search', id: 'find', 'data-search': '', placeholder: 'Find in trace (name, attribute text)…', value: query, 'aria-label': 'Find in trace', autocomplete: 'off'});
  const findCount = h('span', {class: 'muted small', id: 'find-count'});
  const onlyBox = h('input', {type: 'checkbox', id: 'find-only', checked: onlyMatches});
  const scroller = h('div', {class: 'wf-scroll', tabindex: '0', 'aria-label': 'Spans; arrows or j/k move, left/right collapse/expand, Escape closes the details'});
  const detail = h('aside', {class: 'detail', id: 'span-detail', 'aria-label': 'Span details', hidden: true});
  const ticks = h('div', {class: 'wf-ticks'}, [0, 0.25, 0.5, 0.75, 1].map(f => {
    const sp = h('span', null, dur(total * f));
    sp.style.left = (f * 100) + '%';
    if (f === 0) sp.style.transform = 'none';
    if (f === 1) sp.style.transform = 'translateX(-100%)';
    return sp;
  }));

  fill(root,
    h('div', {class: 'trace-head'},
      h('h1', null, rootNode ? rootNode.s.name : 'Trace'),
      h('span', {class: 'mono muted small'}, data.trace_id),
      h('span', {class: 'spacer'}),
      copyBtn,
      h('a', {href: otlp, download: 'trace-' + data.trace_id + '.json', class: 'ghost', id: 'download-otlp', role: 'button'}, 'Download OTLP JSON')),
    h('div', {class: 'row small', id: 'trace-summary'},
      h('span', {class: 'badge'}, time(start)),
      h('span', {class: 'badge acc'}, dur(total)),
      h('span', {class: 'badge', id: 'span-count'}, spans.length + ' spans'),
      h('span', {class: 'badge'}, services.size + ' services'),
      errors ? h('span', {class: 'badge err'}, errors + ' errors') : null,
      h('span', {class: 'legend-crit muted'}, 'critical path'),
      h('span', {class: 'spacer'}),
      h('div', {class: 'find'}, findInput, findCount, h('label', {class: 'small'}, onlyBox, ' only matches'))),
    h('div', {class: 'trace-body'},
      h('div', {class: 'wf', id: 'waterfall'},
        h('div', {class: 'wf-head'}, h('div', null, 'Span'), h('div', null, ticks)),
        scroller),
      detail));

  function rebuild() {
    visible = [];
    const show = onlyMatches && query ? new Set() : null;
    if (show) for (const n of matches) for (let p = n; p && !show.has(p); p = p.parent) show.add(p);
    const stack = roots.slice().reverse();
    const seen = new Set();
    while (stack.length) {
      const n = stack.pop();
      if (seen.has(n)) continue;
      seen.add(n);
      if (show && !show.has(n)) continue;
      visible.push(n);
      if (!collapsed.has(n)) for (let i = n.children.length - 1; i >= 0; i--) stack.push(n.children[i]);
    }
  }

  function row(i) {
    const n = visible[i], s = n.s;
    const left = (s.start_time_unix_nano - start) / total * 100;
    const width = Math.max(s.duration_ns / total * 100, 0.05);
    const bar = h('div', {class: 'wf-bar'});
    bar.style.left = left + '%';
    bar.style.width = width + '%';
    bar.style.background = color(s.service);
    const d = h('span', {class: 'wf-dur'}, dur(s.duration_ns));
    if (left + width <= 85) d.style.left = (left + width + 0.5) + '%';
    else if (left > 15) d.style.right = (100 - left + 0.5) + '%';
    else { d.style.right = (100 - left - width + 0.5) + '%'; d.classList.add('inside'); }
    const name = h('div', {class: 'wf-name'},
      n.children.length ? h('button', {type: 'button', class: 'wf-tog', tabindex: '-1', 'aria-label': collapsed.has(n) ? 'expand' : 'collapse', onclick: e => { e.stopPropagation(); toggle(n); }}, collapsed.has(n) ? '▶' : '▼') : h('span', {class: 'wf-tog'}),
      h('span', {class: 'wf-dot'}), h('span', {class: 'nm'}, s.name || '(no name)'), h('span', {class: 'svc'}, s.service),
      isLLM(s) ? h('span', {class: 'badge acc'}, 'LLM') : null,
      collapsed.has(n) ? h('span', {class: 'badge'}, '+' + countBelow(n)) : null);
    name.style.paddingLeft = (4 + n.depth * 14) + 'px';
    name.children[1].style.background = color(s.service);
    const el = h('div', {class: 'wf-row' + (n === selected ? ' sel' : '') + (n.crit ? ' crit' : '') + (s.status === 'error' ? ' err' : '') + (query && matches.has(n) ? ' match' : '') + (onlyMatches && query && !matches.has(n) ? ' dim' : ''),
      role: 'row', 'aria-selected': String(n === selected), dataset: {spanId: s.span_id}, title: s.name,
      onclick: () => select(n)}, name, h('div', {class: 'wf-bar-cell'}, bar, d));
    return el;
  }

  rebuild();
  const list = vlist(scroller, ROW, () => visible.length, row);

  function toggle(n) {
    if (collapsed.has(n)) collapsed.delete(n); else collapsed.add(n);
    rebuild();
    list.now(true);
  }

  function setURL(changes) {
    const u = new URLSearchParams(location.search);
    for (const k in changes) { if (changes[k]) u.set(k, changes[k]); else u.delete(k); }
    const q = u.toString();
    history.replaceState(null, '', location.pathname + (q ? '?' + q : ''));
  }

  function reveal(n) {
    let changed = false;
    for (let p = n.parent; p; p = p.parent) if (collapsed.delete(p)) changed = true;
    if (changed) rebuild();
    const i = visible.indexOf(n);
    if (i >= 0) list.scrollTo(i);
  }

  function select(n, keepFocus) {
    selected = n;
    setURL({span: n ? n.s.span_id : ''});
    if (n) reveal(n);
    list.now(true);
    showDetail(n);
    if (!keepFocus) scroller.focus({preventScroll: true});
  }

  function showDetail(n) {
    if (!n) { detail.hidden = true; detail.replaceChildren(); return; }
    detail.hidden = false;
    fill(detail, spanDetail(n.s, start, () => select(null), logsBySpan.get(n.s.span_id) || [], logs));
  }

  function runFind() {
    matches = new Set();
    const q = query.toLowerCase();
    if (q) {
      for (const n of nodes) {
        if (n.hay == null) n.hay = haystack(n.s);
        if (n.hay.includes(q)) matches.add(n);
      }
    }
    findCount.textContent = q ? matches.size + ' of ' + spans.length + ' spans match' : '';
    rebuild();
    list.now(true);
  }

  const findNext = () => {
    if (!matches.size) return;
    const order = nodes.filter(n => matches.has(n)).sort((a, b) => a.s.start_time_unix_nano - b.s.start_time_unix_nano);
    const i = selected ? order.findIndex(n => n.s.start_time_unix_nano > selected.s.start_time_unix_nano || (n.s.start_time_unix_nano === selected.s.start_time_unix_nano && n !== selected && order.indexOf(n) > order.indexOf(selected))) : 0;
    select(order[i < 0 ? 0 : i], true);
  };
  findInput.addEventListener('input', debounce(() => { query = findInput.value.trim(); setURL({find: query}); runFind(); }, 150));
  findInput.addEventListener('keydown', e => {
    if (e.key === 'Enter') { e.preventDefault(); query = findInput.value.trim(); setURL({find: query}); runFind(); findNext(); }
    if (e.key === 'Escape') { findInput.value = ''; query = ''; setURL({find: ''}); runFind(); }
  });
  onlyBox.addEventListener('change', () => { onlyMatches = onlyBox.checked; setURL({filter: onlyMatches ? '1' : ''}); rebuild(); list.now(true); });

  scroller.addEventListener('keydown', e => {
    const i = selected ? visible.indexOf(selected) : -1;
    let next = null;
    switch (e.key) {
      case 'ArrowDown': case 'j': next = visible[Math.min(visible.length - 1, i + 1)]; break;
      case 'ArrowUp': case 'k': next = visible[Math.max(0, i - 1)]; break;
      case 'Home': next = visible[0]; break;
      case 'End': next = visible[visible.length - 1]; break;
      case 'ArrowLeft': if (selected) { if (selected.children.length && !collapsed.has(selected)) toggle(selected); else if (selected.parent) next = selected.parent; } break;
      case 'ArrowRight': case 'Enter': if (selected && collapsed.has(selected)) toggle(selected); break;
      case 'Escape': if (selected) select(null); break;
      default: return;
    }
    e.preventDefault();
    if (next) select(next);
  });
  const onEsc = e => { if (e.key === 'Escape' && selected && !scroller.contains(e.target) && e.target !== findInput) select(null); };
  document.addEventListener('keydown', onEsc);

  if (query) runFind();
  if (selected) { reveal(selected); list.now(true); showDetail(selected); }
  root.dataset.renderMs = String(Math.round(performance.now() - t0));
  return () => { list.destroy(); document.removeEventListener('keydown', onEsc); };
}

function countBelow(n) {
  let c = 0;
  const st = [...n.children];
  while (st.length) { const x = st.pop(); c++; st.push(...x.children); }
  return c;
}

function haystack(s) {
  const parts = [s.name, s.service, s.status_message || ''];
  const add = o => { for (const k in o) parts.push(k, typeof o[k] === 'string' ? o[k] : JSON.stringify(o[k])); };
  add(s.attributes);
  for (const e of s.events || []) { parts.push(e.name); add(e.attributes); }
  return parts.join('\n').toLowerCase();
}

// ---- span details -------------------------------------------------------------

function valueText(v) {
  return typeof v === 'string' ? v : v === undefined ? '' : JSON.stringify(v);
}

function kv(obj) {
  const keys = Object.keys(obj || {}).filter(k => obj[k] !== undefined);
  if (!keys.length) return h('div', {class: 'muted small'}, 'none');
  return h('div', {class: 'kv'}, keys.sort().map(k => {
    const v = valueText(obj[k]);
    const p = v.length < 20000 ? pretty(v) : null;
    return [h('div', null, k), h('div', null, p != null && p.length < 4000 ? h('pre', {class: 'val'}, p) : foldText(p != null ? p : v, 400, 'val'))];
  }));
}

// logSection lists a span's log records: time from the span's start,
// severity, body, attributes.
function logSection(s, records, logs) {
  const out = [h('h3', null, 'Logs (' + records.length + (logs.more ? '+' : '') + ')')];
  if (logs.error) out.push(h('div', {class: 'error small'}, 'Logs could not be read: ' + logs.error));
  for (const r of records) {
    const sev = r.severity_number >= 17 ? ' err' : r.severity_number >= 13 ? ' acc' : '';
    out.push(h('div', {class: 'event log-record'},
      h('div', {class: 'row small'},
        h('span', {class: 'muted'}, '+' + dur(Math.max(0, Number(r.time_unix_nano || 0) - s.start_time_unix_nano))),
        h('span', {class: 'badge' + sev}, r.severity_text || r.severity),
        r.event_name ? h('span', {class: 'badge'}, r.event_name) : null),
      foldText(valueText(r.body), 600, 'val'),
      Object.keys(r.attributes || {}).length ? kv(r.attributes) : null));
  }
  return h('section', {id: 'span-logs'}, out);
}

function spanDetail(s, traceStart, close, records, logs) {
  const llm = isLLM(s) ? info(s) : null;
  const out = [
    h('div', {class: 'row'}, h('h2', {class: 'grow'}, s.name || '(no name)'),
      h('button', {type: 'button', class: 'ghost', id: 'close-detail', 'aria-label': 'Close details (Escape)', onclick: close}, '✕')),
    h('div', {class: 'row small'},
      h('span', {class: 'badge'}, s.service),
      h('span', {class: 'badge'}, s.kind),
      h('span', {class: 'badge' + (s.status === 'error' ? ' err' : s.status === 'ok' ? ' ok' : '')}, 'status ' + s.status),
      h('span', {class: 'badge acc'}, dur(s.duration_ns)),
      h('span', {class: 'badge'}, '+' + dur(s.start_time_unix_nano - traceStart))),
    s.status_message ? h('div', {class: 'error', id: 'status-message'}, s.status_message) : null,
  ];
  if (llm) out.push(llmSection(s, llm));
  if (records.length || logs.error) out.push(logSection(s, records, logs));
  out.push(h('h3', null, 'Attributes'), kv(s.attributes));
  out.push(h('h3', null, 'Events (' + (s.events || []).length + ')'));
  for (const e of s.events || []) {
    out.push(h('div', {class: 'event'}, h('div', null, h('b', null, e.name), ' ', h('span', {class: 'muted small'}, '+' + dur(e.time_unix_nano - s.start_time_unix_nano))), kv(e.attributes)));
  }
  if (s.links && s.links.length) {
    out.push(h('h3', null, 'Links (' + s.links.length + ')'));
    for (const l of s.links) {
      out.push(h('div', {class: 'event'}, link('/traces/' + enc(l.trace_id) + qs({span: l.span_id}), {class: 'mono'}, l.trace_id + ' / ' + l.span_id), kv(l.attributes)));
    }
  }
  out.push(h('h3', null, 'Resource'), kv(s.resource));
  if (s.scope) {
    out.push(h('h3', null, 'Scope'), h('div', {class: 'mono small'}, (s.scope.name || '') + ' ' + (s.scope.version || '')), s.scope.attributes ? kv(s.scope.attributes) : null);
  }
  out.push(h('h3', null, 'Identifiers'), kv({trace_id: s.trace_id, span_id: s.span_id, parent_span_id: s.parent_span_id || '(root)', start_time: s.start_time, trace_state: s.trace_state}));
  return out;
}

function llmSection(s, l) {
  const tokens = l.input_tokens != null || l.output_tokens != null;
  const cost = h('span', {class: 'badge', id: 'llm-cost'}, l.cost_usd != null ? usd(l.cost_usd) : 'cost …');
  if (s.llm) {
    // The server's own reading: priced from its table (or sent by the
    // client), and whether this span's usage counts in the totals.
    if (l.cost_usd == null) cost.textContent = 'no price for this model';
    if (!l.counted) cost.textContent += ' (not billed: usage counted on its children)';
    if (l.cost_source) cost.title = l.cost_source === 'client' ? 'sent by the client' : 'computed from the server\'s price table';
  } else if (l.cost_usd == null) loadCost(s, cost);
  return h('section', {class: 'llm', id: 'llm-section'},
    h('h3', null, 'LLM call'),
    h('div', {class: 'row small'},
      l.model ? h('span', {class: 'badge acc', id: 'llm-model'}, l.model) : null,
      l.provider ? h('span', {class: 'badge'}, l.provider) : null,
      l.operation ? h('span', {class: 'badge'}, l.operation) : null,
      tokens ? h('span', {class: 'badge', id: 'llm-tokens'}, num(l.input_tokens || 0) + ' in / ' + num(l.output_tokens || 0) + ' out tokens') : null,
      l.cache_read_tokens ? h('span', {class: 'badge'}, num(l.cache_read_tokens) + ' cached') : null,
      h('span', {class: 'badge'}, 'latency ' + dur(s.duration_ns)),
      l.ttft_s != null ? h('span', {class: 'badge'}, 'first token ' + dur(l.ttft_s * 1e9)) : null,
      cost),
    (l.input_messages || []).length || (l.output_messages || []).length
      ? h('div', {id: 'conversation'}, conversation(l.input_messages, l.output_messages))
      : h('div', {class: 'muted small'}, 'No prompt or completion recorded on this span.'));
}

// loadCost asks the LLM statistics for this one span (narrow window, exact
// ids): the server prices it from its table, as the totals do.
async function loadCost(s, el) {
  const ms = Date.parse(s.start_time);
  if (isNaN(ms)) { el.textContent = 'cost –'; return; }
  try {
    const d = await get('/api/v1/llm/stats', {
      q: `{ span:id = "${s.span_id}" && trace:id = "${s.trace_id}" }`,
      since: s.start_time, until: new Date(ms + 2).toISOString(),
    });
    const g = d.groups && d.groups[0];
    el.textContent = g && g.counted_spans ? usd(g.cost_usd) : 'not billed (usage counted on its children)';
    if (g && g.counted_spans) el.title = 'computed by the server from its price table, or sent by the client';
  } catch (e) {
    el.textContent = 'cost unavailable';
    el.title = e.message;
  }
}

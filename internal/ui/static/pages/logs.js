// Logs: search log records (GET /api/v1/logs) by words, service, lowest
// severity and trace, newest first, a page at a time; or follow them live
// (GET /api/v1/logs/tail) with the same filters. Every filter lives in the
// URL; `live=1` is the live mode.

import {h, fill, qs, errorBox, loading, empty, foldText} from '../lib/dom.js';
import {get, enc} from '../lib/api.js';
import {stream} from '../lib/sse.js';
import {time, num} from '../lib/fmt.js';

export const title = 'Logs';

const FILTERS = ['content', 'service', 'severity', 'trace_id'];
const SEVERITIES = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'];
const PAGE = 100;
const LIVE_MAX = 5000; // rows kept in live mode; older ones are forgotten

const valueText = v => typeof v === 'string' ? v : v == null ? '' : JSON.stringify(v);

function sevClass(n) {
  return n >= 17 ? ' err' : n >= 13 ? ' acc' : '';
}

// row renders one record: time, severity, service, trace link, body and,
// folded, its attributes.
function row(r, ctx) {
  const attrs = Object.keys(r.attributes || {});
  const trace = r.trace_id ? h('a', {href: '/traces/' + enc(r.trace_id) + (r.span_id ? '?span=' + enc(r.span_id) : ''),
    class: 'mono', title: 'Open the trace', onclick: e => { e.preventDefault(); ctx.navigate(e.currentTarget.getAttribute('href')); }},
  r.trace_id.slice(0, 8)) : h('span', {class: 'muted'}, '–');
  return h('div', {class: 'log-row', dataset: {traceId: r.trace_id || '', severity: String(r.severity_number || 0)}},
    h('span', {class: 'mono small'}, time(r.time)),
    h('span', null, h('span', {class: 'badge' + sevClass(r.severity_number)}, r.severity_text || r.severity || '–')),
    h('span', {class: 'small'}, r.service || ''),
    h('span', null, trace),
    h('div', {class: 'log-body'}, foldText(valueText(r.body), 600, 'val'),
      attrs.length ? h('details', {class: 'small'}, h('summary', null, attrs.length + (attrs.length === 1 ? ' attribute' : ' attributes')),
        h('div', {class: 'kv'}, attrs.sort().map(k => [h('div', null, k), h('div', {class: 'mono'}, valueText(r.attributes[k]))]))) : null));
}

export function render(root, ctx) {
  const p = ctx.params;
  const live = p.get('live') === '1';
  const f = {};
  for (const k of FILTERS) f[k] = p.get(k) || '';

  const content = h('input', {id: 'log-content', type: 'search', 'data-search': '', placeholder: 'Words in the body or attributes', value: f.content, 'aria-label': 'Words'});
  const service = h('input', {id: 'log-service', type: 'search', placeholder: 'any service', value: f.service, 'aria-label': 'Service', list: 'log-services'});
  const services = h('datalist', {id: 'log-services'});
  const severity = h('select', {id: 'log-severity', 'aria-label': 'Lowest severity'},
    h('option', {value: ''}, 'any severity'),
    SEVERITIES.map(s => h('option', {value: s, selected: f.severity.toLowerCase() === s}, s + ' and above')),
    f.severity && !SEVERITIES.includes(f.severity.toLowerCase()) ? h('option', {value: f.severity, selected: true}, f.severity + ' and above') : null);
  const traceIn = h('input', {id: 'log-trace', type: 'search', class: 'mono', placeholder: 'trace id', value: f.trace_id, 'aria-label': 'Trace id', size: 34});
  const liveBtn = h('button', {type: 'button', id: 'log-live', class: 'ghost', 'aria-pressed': String(live),
    onclick: () => ctx.setParams({live: live ? '' : '1'})}, live ? 'Stop live' : 'Live');
  const form = h('form', {class: 'qbar', role: 'search', onsubmit: e => {
    e.preventDefault();
    ctx.setParams({content: content.value.trim(), service: service.value.trim(), severity: severity.value, trace_id: traceIn.value.trim()});
  }}, h('div', {class: 'qwrap'}, content), service, services, severity, traceIn, h('button', {type: 'submit', id: 'log-search'}, 'Search'), liveBtn);
  severity.addEventListener('change', () => form.requestSubmit());
  const status = h('div', {class: 'small muted', id: 'log-status', role: 'status'});
  const list = h('div', {class: 'log-list', id: 'log-list', 'aria-label': 'Log records, newest first'});
  const more = h('div');
  fill(root, h('h1', null, 'Logs'), form, status, list, more);

  get('/api/v1/services', {since: ctx.since, until: ctx.until}, ctx.signal)
    .then(d => fill(services, (d.services || []).map(s => h('option', {value: s.name})))).catch(() => {});

  const params = {};
  for (const k of FILTERS) if (f[k]) params[k] = f[k];
  const expose = o => { window.__rastroLogs = o; };

  if (live) {
    const st = {rows: 0, received: 0, dropped: 0, open: false, error: ''};
    const draw = () => {
      status.textContent = [st.error || (st.open ? 'live: records appear as the server acknowledges them' : 'connecting…'),
        num(st.received) + ' received', st.dropped ? num(st.dropped) + ' skipped by the server (client too slow)' : ''].filter(Boolean).join(' · ');
      expose({live: true, open: st.open, received: st.received, rows: list.children.length, dropped: st.dropped});
    };
    const ctrl = new AbortController();
    ctx.signal.addEventListener('abort', () => ctrl.abort());
    stream('/api/v1/logs/tail' + qs({...params, max_rate: 1000}), ctrl.signal, {
      open: () => { st.open = true; st.error = ''; draw(); },
      error: msg => { st.open = false; st.error = msg; draw(); },
      event: (name, d) => {
        if (name === 'logs') {
          const recs = d.logs || [];
          st.received += recs.length;
          const frag = document.createDocumentFragment();
          for (const r of recs.slice().reverse()) frag.appendChild(row(r, ctx));
          list.prepend(frag);
          while (list.children.length > LIVE_MAX) list.lastChild.remove();
        } else if (name === 'dropped' || name === 'limited') st.dropped += d[name] || 0;
        draw();
      },
    });
    draw();
    return () => ctrl.abort();
  }

  // Search mode: a page at a time, newest first.
  let shown = 0;
  const page = cursor => {
    fill(more, loading('log records'));
    get('/api/v1/logs', {...params, since: ctx.since, until: ctx.until, limit: PAGE, cursor}, ctx.signal).then(d => {
      const recs = d.logs || [];
      for (const r of recs) list.appendChild(row(r, ctx));
      shown += recs.length;
      if (!shown) {
        fill(more, empty('No log records match in this time range.' + (d.hint ? ' ' + d.hint : '')));
      } else if (d.next_cursor) {
        fill(more, h('button', {type: 'button', id: 'log-more', class: 'ghost', onclick: () => page(d.next_cursor)}, 'Older records'));
      } else fill(more);
      status.textContent = num(shown) + (d.next_cursor ? '+' : '') + ' records' + (d.window && d.window.description ? ' · ' + d.window.description : '');
      expose({live: false, rows: shown, more: !!d.next_cursor});
    }).catch(e => { if (e.name !== 'AbortError') fill(more, errorBox(e)); });
  };
  page('');
}

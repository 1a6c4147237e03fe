// Search: a TraceQL box with completion, facets, full text, a histogram of
// the loaded results and a sortable results table (traces or spans).

import {h, fill, table, errorBox, loading, empty, qs} from '../lib/dom.js';
import {get, enc} from '../lib/api.js';
import {dur, time, num, rangeNs} from '../lib/fmt.js';

export const title = 'Search';

const FILTERS = ['q', 'content', 'service', 'name', 'status', 'min_duration', 'max_duration'];
const KINDS = ['server', 'client', 'internal', 'producer', 'consumer', 'unspecified'];

// modelFilter adds an LLM model condition (any dialect's model attribute)
// to a TraceQL filter.
function withModel(q, model) {
  if (!model) return q;
  const v = JSON.stringify(model);
  const cond = `(span.gen_ai.request.model = ${v} || span.gen_ai.response.model = ${v} || span.llm.model_name = ${v})`;
  const m = /^\s*\{([\s\S]*)\}\s*$/.exec(q || '');
  const inner = m ? m[1].trim() : '';
  return '{ ' + (inner ? '(' + inner + ') && ' : '') + cond + ' }';
}

export function render(root, ctx) {
  const p = ctx.params;
  const view = p.get('view') === 'spans' ? 'spans' : 'traces';
  const limit = Math.min(10000, Math.max(1, parseInt(p.get('limit') || '50', 10) || 50));
  const sort = {key: p.get('sort') || '', dir: p.get('dir') === 'asc' ? 'asc' : 'desc'};
  const filters = {since: ctx.since, until: ctx.until};
  for (const k of FILTERS) filters[k] = p.get(k) || '';
  filters.q = withModel(filters.q, p.get('model'));

  // ---- query bar
  const qInput = h('input', {id: 'q', type: 'search', 'data-search': '', autocomplete: 'off', spellcheck: 'false',
    placeholder: '{ span.http.response.status_code >= 500 }   ( / to focus )', value: p.get('q') || '', 'aria-label': 'TraceQL filter',
    role: 'combobox', 'aria-autocomplete': 'list', 'aria-controls': 'q-complete', 'aria-expanded': 'false'});
  const list = h('ul', {class: 'complete', id: 'q-complete', role: 'listbox', hidden: true});
  const content = h('input', {id: 'content', type: 'search', class: 'content-input', placeholder: 'Full text: words or "a phrase"', value: p.get('content') || '', 'aria-label': 'Full-text search'});
  const form = h('form', {class: 'qbar', role: 'search', onsubmit: e => {
    e.preventDefault();
    ctx.setParams({q: qInput.value.trim(), content: content.value.trim(), limit: ''});
  }}, h('div', {class: 'qwrap'}, qInput, list), content, h('button', {type: 'submit', id: 'search-btn'}, 'Search'));
  completion(qInput, list, ctx);

  // ---- facets
  const facet = (id, label, key, options, current) => h('label', null, label,
    h('select', {id, onchange: e => ctx.setParams(key === 'service' ? {service: e.target.value, name: ''} : {[key]: e.target.value})},
      h('option', {value: ''}, 'any'),
      options.map(o => h('option', {value: o.value, selected: o.value === current}, o.label)),
      current && !options.some(o => o.value === current) ? h('option', {value: current, selected: true}, current) : null));
  const svcBox = h('div');
  const opBox = h('div');
  const modelBox = h('div');
  const chips = h('div', {class: 'row'});
  for (const k of ['min_duration', 'max_duration']) {
    if (p.get(k)) chips.appendChild(h('span', {class: 'chip'}, (k === 'min_duration' ? '≥ ' : '≤ ') + durLabel(p.get(k)),
      h('button', {type: 'button', 'aria-label': 'remove ' + k, onclick: () => ctx.setParams({[k]: ''})}, '×')));
  }
  const facets = h('aside', {class: 'facets', 'aria-label': 'Filters'},
    svcBox, opBox,
    facet('f-status', 'Status', 'status', ['error', 'ok', 'unset'].map(v => ({value: v, label: v})), p.get('status') || ''),
    modelBox, chips,
    h('a', {href: '/search' + qs({since: p.get('since'), until: p.get('until')}), class: 'small'}, 'Clear all filters'));
  fill(svcBox, facet('f-service', 'Service', 'service', [], p.get('service') || ''));
  fill(opBox, facet('f-name', 'Operation', 'name', [], p.get('name') || ''));
  fill(modelBox, facet('f-model', 'LLM model', 'model', [], p.get('model') || ''));
  const win = {since: ctx.since, until: ctx.until};
  get('/api/v1/services', win, ctx.signal).then(d => {
    fill(svcBox, facet('f-service', 'Service', 'service', d.services.map(s => ({value: s.name, label: s.name + ' (' + num(s.count) + ')'})), p.get('service') || ''));
  }).catch(() => {});
  if (p.get('service')) {
    get('/api/v1/services/' + enc(p.get('service')) + '/operations', win, ctx.signal).then(d => {
      fill(opBox, facet('f-name', 'Operation', 'name', d.operations.map(s => ({value: s.name, label: s.name + ' (' + num(s.count) + ')'})), p.get('name') || ''));
    }).catch(() => {});
  }
  Promise.all(['gen_ai.request.model', 'llm.model_name'].map(k => get('/api/v1/attributes/' + enc(k) + '/values', {...win, limit: 100}, ctx.signal).then(d => d.values).catch(() => [])))
    .then(([a, b]) => {
      const seen = new Map();
      for (const v of [...a, ...b]) seen.set(v.name, (seen.get(v.name) || 0) + v.count);
      fill(modelBox, facet('f-model', 'LLM model', 'model', [...seen].sort((x, y) => y[1] - x[1]).map(([v, c]) => ({value: v, label: v + ' (' + num(c) + ')'})), p.get('model') || ''));
    }).catch(() => {});

  // ---- results
  const tabs = h('div', {class: 'tabs', role: 'group', 'aria-label': 'Result kind'},
    ['traces', 'spans'].map(v => h('button', {type: 'button', id: 'view-' + v, 'aria-pressed': String(v === view), onclick: () => ctx.setParams({view: v === 'traces' ? '' : v, sort: '', dir: '', limit: ''})}, v === 'traces' ? 'Traces' : 'Spans')));
  const count = h('span', {class: 'muted small', id: 'result-count'});
  const histo = h('div', {class: 'histo'});
  const results = h('div', {id: 'results'}, loading('results'));
  const more = h('div', {class: 'more'});
  fill(root, h('h1', null, 'Search'), form,
    h('div', {class: 'search-layout'}, facets,
      h('section', {class: 'grow'}, h('div', {class: 'row'}, tabs, count), histo, results, more)));

  let rows = [];
  let cursor = '';
  const cols = view === 'traces' ? traceCols() : spanCols();
  const drawTable = () => {
    if (!rows.length) { fill(results, empty('No ' + view + ' match these filters in this time range.')); return; }
    fill(results, table(cols, rows, {
      sort: sort.key, dir: sort.dir,
      onSort: key => {
        sort.dir = sort.key === key && sort.dir === 'desc' ? 'asc' : 'desc';
        sort.key = key;
        const u = new URLSearchParams(location.search);
        u.set('sort', key); u.set('dir', sort.dir);
        history.replaceState(null, '', location.pathname + '?' + u);
        drawTable();
        const th = results.querySelector('th[aria-sort] button');
        if (th) th.focus();
      },
      onOpen: r => ctx.navigate('/traces/' + enc(r.trace_id) + (view === 'spans' ? qs({span: r.span_id}) : '')),
      rowData: r => (view === 'spans' ? {traceId: r.trace_id, spanId: r.span_id} : {traceId: r.trace_id}),
      rowClass: r => ((view === 'traces' ? r.error_count : r.status === 'error') ? 'has-err' : null),
    }));
    drawHisto(histo, rows, ctx, view);
  };

  const load = async () => {
    try {
      if (view === 'traces') {
        const d = await get('/api/v1/traces', {...filters, limit}, ctx.signal);
        rows = d.traces || [];
        count.textContent = rows.length + (rows.length >= limit ? '+' : '') + ' traces' + warn(d);
        fill(more, rows.length >= limit ? h('button', {type: 'button', class: 'ghost', id: 'load-more', onclick: () => ctx.setParams({limit: String(limit + 50)}, true)}, 'Load more') : null);
      } else {
        const d = await get('/api/v1/spans', {...filters, limit: 100, cursor}, ctx.signal);
        rows = rows.concat(d.spans || []);
        cursor = d.next_cursor || '';
        count.textContent = rows.length + (cursor ? '+' : '') + ' spans' + warn(d);
        fill(more, cursor ? h('button', {type: 'button', class: 'ghost', id: 'load-more', onclick: e => { e.target.disabled = true; load(); }}, 'Load more') : null);
      }
      drawTable();
    } catch (e) {
      if (e.name !== 'AbortError') fill(results, errorBox(e));
    }
  };
  load();
}

const warn = d => (d.warnings && d.warnings.length ? ' (incomplete: ' + d.warnings.length + ' warnings)' : '');

function durLabel(v) {
  return /^\d+$/.test(v) ? dur(Number(v)) : v;
}

function traceCols() {
  return [
    {key: 'start', label: 'Start', get: r => r.start_time_unix_nano, fmt: v => h('span', {class: 'nowrap'}, time(v))},
    {key: 'root', label: 'Root span', get: r => r.root_name, fmt: (v, r) => [h('span', {class: 'muted'}, (r.root_service || '?') + ' '), v || h('i', {class: 'muted'}, '(root not received)')]},
    {key: 'duration', label: 'Duration', num: true, get: r => r.duration_ns, fmt: dur},
    {key: 'spans', label: 'Spans', num: true, get: r => r.span_count},
    {key: 'errors', label: 'Errors', num: true, get: r => r.error_count, fmt: v => (v ? h('span', {class: 'status-error'}, v) : '0')},
    {key: 'services', label: 'Services', get: r => (r.services || []).join(', '), cls: 'trunc'},
  ];
}

function spanCols() {
  return [
    {key: 'start', label: 'Start', get: r => r.start_time_unix_nano, fmt: v => h('span', {class: 'nowrap'}, time(v))},
    {key: 'service', label: 'Service', get: r => r.service},
    {key: 'name', label: 'Name', get: r => r.name, cls: 'trunc'},
    {key: 'duration', label: 'Duration', num: true, get: r => r.duration_ns, fmt: dur},
    {key: 'status', label: 'Status', get: r => r.status, fmt: v => h('span', {class: 'status-' + v}, v)},
    {key: 'trace', label: 'Trace', get: r => r.trace_id, fmt: v => h('span', {class: 'mono muted'}, v.slice(0, 12) + '…')},
  ];
}

// drawHisto bins the loaded results by start time over the window.
async function drawHisto(el, rows, ctx, view) {
  const {chart} = await import('../lib/chart.js');
  let {from, to} = rangeNs(ctx.since, ctx.until);
  const times = rows.map(r => r.start_time_unix_nano);
  if (!isFinite(from) || from < Math.min(...times) - 7 * 864e11) from = Math.min(...times);
  const n = 60, stepNs = Math.max(1, (to - from) / n);
  const xs = Array.from({length: n}, (_, i) => from + i * stepNs);
  const ok = new Array(n).fill(0), bad = new Array(n).fill(0);
  for (const r of rows) {
    const i = Math.min(n - 1, Math.floor((r.start_time_unix_nano - from) / stepNs));
    if (i < 0) continue;
    const err = view === 'traces' ? r.error_count > 0 : r.status === 'error';
    (err ? bad : ok)[i]++;
  }
  fill(el, chart({xs, type: 'bar', height: 90, label: 'Loaded results by start time', series: [
    {name: 'ok', values: ok, color: 'var(--accent)'}, {name: 'with errors', values: bad, color: 'var(--err)'}],
  onClick: i => ctx.setParams({since: new Date(xs[i] / 1e6).toISOString(), until: new Date((xs[i] + stepNs) / 1e6).toISOString(), limit: ''})}),
  h('div', {class: 'histo-caption'}, 'Start times of the ' + rows.length + ' loaded ' + view + ' (this counts the results loaded below, not every match; click a bar to zoom in)'));
}

// ---- completion -------------------------------------------------------------

function completion(input, list, ctx) {
  let attrs = null; // promise of attribute names
  const values = new Map(); // key -> promise of values
  let items = [], sel = -1, replaceFrom = 0, gen = 0;
  const win = {since: ctx.since, until: ctx.until};

  const close = () => { list.hidden = true; items = []; sel = -1; input.setAttribute('aria-expanded', 'false'); };
  const show = (opts, from) => {
    items = opts.slice(0, 40);
    replaceFrom = from;
    sel = items.length ? 0 : -1;
    if (!items.length) { close(); return; }
    fill(list, items.map((it, i) => h('li', {role: 'option', id: 'q-opt-' + i, 'aria-selected': String(i === sel),
      onmousedown: e => { e.preventDefault(); accept(i); }}, h('span', null, it.label), it.hint ? h('span', {class: 'muted'}, it.hint) : null)));
    list.hidden = false;
    input.setAttribute('aria-expanded', 'true');
  };
  const mark = () => list.querySelectorAll('li').forEach((li, i) => {
    li.setAttribute('aria-selected', String(i === sel));
    if (i === sel) li.scrollIntoView({block: 'nearest'});
  });
  const accept = i => {
    const it = items[i];
    const pos = input.selectionStart;
    const v = input.value;
    input.value = v.slice(0, replaceFrom) + it.insert + v.slice(pos);
    const caret = replaceFrom + it.insert.length;
    input.setSelectionRange(caret, caret);
    close();
    input.focus();
    if (it.again) suggest();
  };

  async function suggest() {
    const my = ++gen;
    const before = input.value.slice(0, input.selectionStart);
    let m = /((?:span|resource)?\.[\w.\-/@]+|status|kind)\s*(=|!=|=~|!~)\s*("?)([^"&|()]*)$/.exec(before);
    if (m) {
      const [, key, , quote, part] = m;
      const from = before.length - part.length - quote.length;
      let vals;
      if (key === 'status') vals = ['ok', 'error', 'unset'].map(v => ({label: v, insert: v + ' '}));
      else if (key === 'kind') vals = KINDS.map(v => ({label: v, insert: v + ' '}));
      else {
        const bare = key.startsWith('.') ? key.slice(1) : key;
        if (!values.has(bare)) values.set(bare, get('/api/v1/attributes/' + enc(bare) + '/values', {...win, limit: 50}).then(d => d.values).catch(() => []));
        const vs = await values.get(bare);
        const numeric = vs.length && vs.every(v => /^-?\d+(\.\d+)?$|^(true|false)$/.test(v.name));
        vals = vs.filter(v => v.name.toLowerCase().includes(part.toLowerCase()))
          .map(v => ({label: v.name, hint: num(v.count), insert: (numeric ? v.name : JSON.stringify(v.name)) + ' '}));
      }
      if (my === gen) show(vals, from);
      return;
    }
    m = /(?:^|[\s{(!&|])((span|resource)?\.([\w.\-/@]*))$/.exec(before);
    if (m) {
      const [, tok, scope, part] = m;
      if (!attrs) attrs = get('/api/v1/attributes', win).then(d => d.attributes).catch(() => []);
      const all = await attrs;
      const seen = new Set();
      const opts = [];
      for (const a of all) {
        const [sc, ...rest] = a.name.split('.');
        const k = rest.join('.');
        if (scope && sc !== scope) continue;
        if (!k.toLowerCase().includes(part.toLowerCase())) continue;
        const ins = (scope ? scope + '.' : '.') + k;
        if (seen.has(ins)) continue;
        seen.add(ins);
        opts.push({label: ins, hint: scope ? '' : sc, insert: ins + ' = ', again: true, starts: k.toLowerCase().startsWith(part.toLowerCase())});
      }
      opts.sort((a, b) => (b.starts - a.starts) || a.label.localeCompare(b.label));
      if (my === gen) show(opts, before.length - tok.length);
      return;
    }
    close();
  }

  input.addEventListener('input', suggest);
  input.addEventListener('blur', () => setTimeout(close, 100));
  input.addEventListener('keydown', e => {
    if (list.hidden) {
      if (e.key === 'Escape') input.blur();
      return;
    }
    if (e.key === 'ArrowDown') { e.preventDefault(); sel = (sel + 1) % items.length; mark(); } else if (e.key === 'ArrowUp') { e.preventDefault(); sel = (sel - 1 + items.length) % items.length; mark(); } else if ((e.key === 'Enter' || e.key === 'Tab') && sel >= 0) { e.preventDefault(); accept(sel); } else if (e.key === 'Escape') { e.preventDefault(); close(); }
  });
}

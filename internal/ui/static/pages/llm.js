// LLM: totals, measures over time split by a dimension, the grouped table,
// top sessions and users by cost, and the price table's provenance.

import {h, fill, table, errorBox, loading, link, qs, empty} from '../lib/dom.js';
import {get} from '../lib/api.js';
import {num, usd, ms, pct, rangeNs, toNs} from '../lib/fmt.js';
import {chart, buckets, indexOf, legendEl, PALETTE} from '../lib/chart.js';

export const title = 'LLM';

// Calls: counted LLM spans plus calls known only from the GenAI client
// metrics (from_metrics, docs/llm.md).
const calls = p => (p.counted_spans || 0) + (p.from_metrics ? p.from_metrics.calls : 0);

const DIMS = ['model', 'provider', 'service', 'user', 'agent', 'operation'];
const METRICS = [
  ['cost', 'Cost (USD)', p => p.cost_usd, usd, true],
  ['tokens', 'Tokens (in + out)', p => p.input_tokens + p.output_tokens, num, true],
  ['calls', 'Calls', calls, num, true],
  ['errors', 'Errors', p => p.errors, num, true],
  ['p50', 'Latency p50', p => (p.latency_ms ? p.latency_ms.p50 : null), ms, false],
  ['p95', 'Latency p95', p => (p.latency_ms ? p.latency_ms.p95 : null), ms, false],
];

export function render(root, ctx) {
  const by = DIMS.includes(ctx.params.get('by')) ? ctx.params.get('by') : 'model';
  const win = {since: ctx.since, until: ctx.until};
  const cards = h('div', {class: 'cards', id: 'llm-totals'}, loading('totals'));
  const charts = h('div', {id: 'llm-charts'}, loading('time series'));
  const groups = h('div', {id: 'llm-groups'});
  const sessions = h('div', {id: 'top-sessions'});
  const users = h('div', {id: 'top-users'});
  const prices = h('div', {class: 'footer-line', id: 'prices'}, 'prices: …');
  const dimSel = h('select', {id: 'llm-by', 'aria-label': 'Split by', onchange: e => ctx.setParams({by: e.target.value === 'model' ? '' : e.target.value})},
    DIMS.map(d => h('option', {value: d, selected: d === by}, d)));
  fill(root, h('h1', null, 'LLM usage'), cards,
    h('div', {class: 'row'}, h('h2', {class: 'grow'}, 'Over time'), h('label', {class: 'small muted'}, 'split by ', dimSel)),
    charts, h('h2', null, 'By ' + by), groups,
    h('div', {class: 'two-col'}, h('div', null, h('h2', null, 'Top sessions by cost'), sessions), h('div', null, h('h2', null, 'Top users by cost'), users)),
    prices);

  const fail = el => e => { if (e.name !== 'AbortError') fill(el, errorBox(e)); };

  get('/api/v1/llm/stats', win, ctx.signal).then(d => {
    const g = (d.groups && d.groups[0]) || d.totals || {};
    const lat = g.latency_ms || {};
    const card = (k, v, id) => h('div', {class: 'card stat', id}, h('div', {class: 'v'}, v), h('div', {class: 'k'}, k));
    fill(cards,
      card('cost', usd(g.cost_usd || 0), 'total-cost'),
      card('LLM calls', num(calls(g))),
      card('input tokens', num(g.input_tokens || 0)),
      card('output tokens', num(g.output_tokens || 0)),
      card('errors (' + pct(g.errors || 0, g.spans || 0) + ' of spans)', num(g.errors || 0)),
      card('latency p50', ms(lat.p50)),
      card('latency p95', ms(lat.p95)),
      card('LLM spans', num(g.spans || 0)));
  }).catch(fail(cards));

  // Hourly buckets come from the stored per-block aggregates; finer ones read
  // every LLM span of the window (docs/api.md). Past 3 hours, hourly.
  const span = rangeNs(ctx.since, ctx.until);
  const tsStep = span.to - span.from > 3 * 3600e9 ? {step: '1h'} : {};
  get('/api/v1/llm/timeseries', {...win, ...tsStep, group_by: by}, ctx.signal).then(d => {
    const pts = d.points || [];
    if (!pts.length) { fill(charts, empty('No LLM spans in this time range.')); return; }
    const step = d.step_seconds * 1e9;
    const {from, to} = rangeNs(ctx.since, ctx.until);
    const first = Math.min(from, ...pts.map(p => toNs(p.time)));
    const xs = buckets(first, Math.max(to, toNs(pts[pts.length - 1].time) + step), step);
    const keyOf = p => p.key[by] || '';
    const cost = new Map();
    for (const p of pts) cost.set(keyOf(p), (cost.get(keyOf(p)) || 0) + p.cost_usd + p.spans * 1e-9);
    const keys = [...cost.keys()].sort((a, b) => cost.get(b) - cost.get(a));
    const top = keys.slice(0, 8);
    const colors = new Map(top.map((k, i) => [k, PALETTE[i]]));
    const boxes = METRICS.map(([id, label, f, fmt, additive]) => {
      const series = new Map(top.map(k => [k, new Array(xs.length).fill(additive ? 0 : null)]));
      if (additive && keys.length > top.length) series.set('other', new Array(xs.length).fill(0));
      for (const p of pts) {
        const i = indexOf(xs, toNs(p.time), step);
        const k = colors.has(keyOf(p)) ? keyOf(p) : 'other';
        if (i < 0 || !series.has(k)) continue;
        const v = f(p);
        if (v != null) series.get(k)[i] = additive ? series.get(k)[i] + v : v;
      }
      return h('div', {class: 'chart-box', id: 'chart-' + id}, h('div', {class: 'small'}, h('b', null, label), h('span', {class: 'muted'}, ' per ' + (d.step_seconds >= 3600 ? d.step_seconds / 3600 + ' h' : d.step_seconds / 60 + ' min'))),
        chart({xs, type: additive ? 'bar' : 'line', height: 130, yfmt: fmt, label, noLegend: true,
          series: [...series].map(([k, values]) => ({name: k || '(none)', values, color: colors.get(k) || '#9ca3af'}))}));
    });
    const names = top.map(k => ({name: k || '(none)', color: colors.get(k)}));
    if (keys.length > top.length) names.push({name: 'other', color: '#9ca3af'});
    fill(charts, legendEl(names), h('div', {class: 'two-col'}, boxes));
  }).catch(fail(charts));

  get('/api/v1/llm/stats', {...win, group_by: by}, ctx.signal).then(d => {
    const rows = d.groups || [];
    if (!rows.length) { fill(groups, empty('No LLM spans in this time range.')); return; }
    const sort = {key: ctx.params.get('sort') || 'cost', dir: ctx.params.get('dir') || 'desc'};
    const cols = [
      {key: 'key', label: by, get: r => r.key[by] || '(none)', fmt: v => (by === 'user' && v !== '(none)' ? link('/journeys' + qs({key: 'user.id', value: v, since: ctx.params.get('since')}), null, v) : v)},
      {key: 'calls', label: 'Calls', num: true, get: calls, fmt: num},
      {key: 'spans', label: 'Spans', num: true, get: r => r.spans, fmt: num},
      {key: 'in', label: 'Input tokens', num: true, get: r => r.input_tokens, fmt: num},
      {key: 'out', label: 'Output tokens', num: true, get: r => r.output_tokens, fmt: num},
      {key: 'cost', label: 'Cost', num: true, get: r => r.cost_usd, fmt: usd},
      {key: 'errors', label: 'Errors', num: true, get: r => r.errors, fmt: (v, r) => num(v) + ' (' + pct(v, r.spans) + ')'},
      {key: 'p50', label: 'p50', num: true, get: r => r.latency_ms && r.latency_ms.p50, fmt: ms},
      {key: 'p95', label: 'p95', num: true, get: r => r.latency_ms && r.latency_ms.p95, fmt: ms},
    ];
    const draw = () => fill(groups, table(cols, rows, {sort: sort.key, dir: sort.dir, onSort: k => {
      sort.dir = sort.key === k && sort.dir === 'desc' ? 'asc' : 'desc'; sort.key = k;
      const u = new URLSearchParams(location.search); u.set('sort', k); u.set('dir', sort.dir);
      history.replaceState(null, '', location.pathname + '?' + u);
      draw();
    }}));
    draw();
  }).catch(fail(groups));

  // The server ranks and cuts (top=11 leaves room for the unset value).
  const top = (el, key, path) => get('/api/v1/llm/stats', {...win, group_by: key, top: 11, sort: 'cost'}, ctx.signal).then(d => {
    const rows = (d.groups || []).filter(g => g.key[key]).slice(0, 10);
    if (!rows.length) { fill(el, empty('None in this time range.')); return; }
    fill(el, table([
      {key: 'k', label: key, get: r => r.key[key], fmt: v => link(path(v), null, v), sortable: false},
      {key: 'calls', label: 'Calls', num: true, get: calls, fmt: num},
      {key: 'tokens', label: 'Tokens', num: true, get: r => r.input_tokens + r.output_tokens, fmt: num},
      {key: 'cost', label: 'Cost', num: true, get: r => r.cost_usd, fmt: usd},
    ], rows, {onOpen: r => ctx.navigate(path(r.key[key]))}));
  }).catch(fail(el));
  top(sessions, 'session', v => '/sessions/' + encodeURIComponent(v));
  top(users, 'user', v => '/journeys' + qs({key: 'user.id', value: v, since: ctx.params.get('since') || '7d'}));

  get('/api/v1/llm/prices', {models: 'false'}, ctx.signal).then(d => {
    prices.textContent = 'prices: ' + (d.source || 'unknown source') + ', as of ' + (d.as_of || 'unknown date') + ' (' + num(d.count || 0) + ' entries; USD per million tokens)';
  }).catch(e => { if (e.name !== 'AbortError') prices.textContent = 'prices: unavailable (' + e.message + ')'; });
}

// Metrics: chart the metric store through the Prometheus API under /prom
// (docs/metrics.md). A builder (metric name, label filters, function, group
// by) writes a PromQL query; the query box shows the one that ran and takes
// any query of the server's subset. Exemplars are dots that open their
// trace. Every choice lives in the URL: metric, match (the selector's
// matchers, `a="x",b!="y"`), fn, by (comma-separated labels) and q (a
// query typed by hand, which then wins over the builder).

import {h, fill, errorBox, loading, empty} from '../lib/dom.js';
import {get, enc} from '../lib/api.js';
import {num, rangeNs, time} from '../lib/fmt.js';
import {chart, PALETTE} from '../lib/chart.js';

export const title = 'Metrics';

const FNS = {
  raw: 'raw value',
  rate: 'rate (per second)',
  p50: 'p50 (histogram_quantile)',
  p95: 'p95 (histogram_quantile)',
  p99: 'p99 (histogram_quantile)',
};
// Query steps: about 240 points across the range, never finer than the span
// metrics' 15 s.
const STEPS = [15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400];
const MAX_SERIES = 50;
const MAX_DOTS = 500;
const MATCHER = /\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*")\s*,?/gy;

// fnsFor lists the functions that make sense for a metric, the default first.
export function fnsFor(metric) {
  if (metric.endsWith('_bucket')) return ['p95', 'p50', 'p99', 'rate', 'raw'];
  if (metric.endsWith('_total') || metric.endsWith('_count') || metric.endsWith('_sum')) return ['rate', 'raw'];
  return ['raw', 'rate'];
}

// matchers splits `a="x", b!~"y"` into [{name, op, value (quoted)}]; null
// when the text is not a list of matchers.
export function matchers(text) {
  const out = [];
  MATCHER.lastIndex = 0;
  let m;
  while (MATCHER.lastIndex < text.length && (m = MATCHER.exec(text))) out.push({name: m[1], op: m[2], value: m[3]});
  return MATCHER.lastIndex === text.length || !text.trim() ? out : null;
}

const matcherText = ms => ms.map(m => m.name + m.op + m.value).join(', ');

// stepFor picks the query step (seconds) for a range of rangeS seconds.
function stepFor(rangeS) {
  return STEPS.find(s => rangeS / s <= 240) || STEPS[STEPS.length - 1];
}

const durText = s => s % 3600 === 0 ? s / 3600 + 'h' : s % 60 === 0 ? s / 60 + 'm' : s + 's';

// build writes the builder's PromQL. The rate window is two steps and at
// least one minute, so that it holds at least two of the span metrics'
// 15-second points.
export function build(st, stepS) {
  const sel = st.metric + (st.match ? '{' + st.match + '}' : '');
  const win = '[' + durText(Math.max(60, 2 * stepS)) + ']';
  const by = st.by.join(', ');
  if (st.fn === 'rate') return by ? `sum by (${by}) (rate(${sel}${win}))` : `rate(${sel}${win})`;
  if (st.fn[0] === 'p') {
    const q = '0.' + st.fn.slice(1);
    return `histogram_quantile(${q}, sum by (${['le', ...st.by].join(', ')}) (rate(${sel}${win})))`;
  }
  return by ? `sum by (${by}) (${sel})` : sel;
}

// seriesName names a result series by its labels (by the query when it has
// none).
function seriesName(metric, showName, query) {
  const keys = Object.keys(metric).filter(k => k !== '__name__').sort();
  if (!keys.length && !(showName && metric.__name__) && query) return query;
  const body = '{' + keys.map(k => k + '=' + JSON.stringify(metric[k])).join(', ') + '}';
  return (showName && metric.__name__ ? metric.__name__ : '') + (keys.length || !showName ? body : '');
}

function fmtValue(v) {
  const a = Math.abs(v);
  if (a === 0) return '0';
  if (a < 1e-3) return v.toExponential(1);
  if (a >= 1e4) return num(v);
  return String(Number(v.toPrecision(3)));
}

export function render(root, ctx) {
  window.__rastroMetrics = {done: false};
  const p = ctx.params;
  const st = {
    metric: p.get('metric') || '',
    match: p.get('match') || '',
    fn: p.get('fn') || '',
    by: (p.get('by') || '').split(',').map(s => s.trim()).filter(Boolean),
    q: p.get('q') || '',
  };
  const fns = st.metric ? fnsFor(st.metric) : ['raw'];
  if (!FNS[st.fn]) st.fn = fns[0];
  else if (!fns.includes(st.fn)) fns.push(st.fn); // from the URL: shown, and the server judges it
  // A match that is not a list of matchers (typed into the URL) is kept
  // whole: one chip, and the server says what is wrong with it.
  const parsed = matchers(st.match) || [{name: st.match, op: '', value: ''}];

  // go navigates to the page with changes applied to the state, keeping
  // the time range; a builder change drops a hand-typed query.
  const go = changes => {
    const next = {...st, q: '', ...changes};
    const u = new URLSearchParams();
    const tp = new URLSearchParams(location.search);
    if (next.metric) u.set('metric', next.metric);
    if (next.match) u.set('match', next.match);
    if (next.metric && next.fn !== fnsFor(next.metric)[0]) u.set('fn', next.fn);
    if (next.by.length) u.set('by', next.by.join(','));
    if (next.q) u.set('q', next.q);
    for (const k of ['since', 'until']) if (tp.get(k)) u.set(k, tp.get(k));
    const s = u.toString();
    ctx.navigate(location.pathname + (s ? '?' + s : ''));
  };

  // ---- metric picker ----
  const filter = h('input', {id: 'mx-filter', type: 'search', placeholder: 'filter metric names', 'aria-label': 'Filter metric names', size: 18});
  const metricSel = h('select', {id: 'mx-metric', 'aria-label': 'Metric', onchange: () => go({metric: metricSel.value, match: '', fn: fnsFor(metricSel.value)[0], by: []})},
    st.metric ? h('option', {value: st.metric, selected: true}, st.metric) : h('option', {value: ''}, 'loading metric names…'));
  let names = [];
  const drawNames = () => {
    const f = filter.value.trim().toLowerCase();
    const shown = names.filter(n => !f || n.toLowerCase().includes(f) || n === st.metric);
    fill(metricSel, h('option', {value: '', selected: !st.metric}, shown.length ? 'choose a metric (' + shown.length + ')' : 'no metric matches'),
      shown.map(n => h('option', {value: n, selected: n === st.metric}, n)));
  };
  filter.addEventListener('input', drawNames);

  // ---- builder ----
  const fnSel = h('select', {id: 'mx-fn', 'aria-label': 'Function', disabled: !st.metric, onchange: () => go({fn: fnSel.value})},
    fns.map(f => h('option', {value: f, selected: f === st.fn}, FNS[f])));
  const chips = h('span', {class: 'chips', id: 'mx-matchers'}, parsed.map((m, i) =>
    h('span', {class: 'chip'}, m.name + m.op + m.value, h('button', {type: 'button', title: 'Remove this filter', 'aria-label': 'Remove filter ' + m.name,
      onclick: () => go({match: matcherText(parsed.filter((_, j) => j !== i))})}, '×'))));
  const labelSel = h('select', {id: 'mx-label', 'aria-label': 'Label'}, h('option', {value: ''}, 'label'));
  const opSel = h('select', {id: 'mx-op', 'aria-label': 'Operator'}, ['=', '!=', '=~', '!~'].map(o => h('option', {value: o}, o)));
  const valueIn = h('input', {id: 'mx-value', type: 'text', list: 'mx-values', placeholder: 'value', 'aria-label': 'Label value', size: 16});
  const values = h('datalist', {id: 'mx-values'});
  const addForm = h('form', {class: 'row mx-row', id: 'mx-add', onsubmit: e => {
    e.preventDefault();
    if (!labelSel.value) { labelSel.focus(); return; }
    go({match: matcherText([...parsed, {name: labelSel.value, op: opSel.value, value: JSON.stringify(valueIn.value)}])});
  }}, labelSel, opSel, valueIn, values, h('button', {type: 'submit', class: 'ghost', disabled: !st.metric}, 'Add filter'));
  const byBox = h('span', {id: 'mx-by', class: 'row'});

  // ---- query box ----
  const qIn = h('input', {id: 'mx-query', type: 'text', 'data-search': '', spellcheck: 'false', autocomplete: 'off',
    placeholder: 'PromQL, e.g. sum by (service) (rate(traces_spanmetrics_calls_total[1m]))', 'aria-label': 'PromQL query'});
  const qForm = h('form', {class: 'qbar', role: 'search', onsubmit: e => { e.preventDefault(); go({q: qIn.value.trim()}); }},
    h('div', {class: 'qwrap'}, qIn), h('button', {type: 'submit', id: 'mx-run'}, 'Run'),
    st.q ? h('button', {type: 'button', class: 'ghost', id: 'mx-reset', onclick: () => go({})}, 'Back to the builder') : null);

  const status = h('div', {class: 'small muted', id: 'mx-status', role: 'status'});
  const out = h('div', {class: 'chart-box', id: 'mx-chart'});
  fill(root, h('h1', null, 'Metrics'),
    h('div', {class: 'row mx-row'}, filter, metricSel, fnSel, chips), addForm,
    h('div', {class: 'row small mx-row'}, h('span', {class: 'muted'}, 'sum by'), byBox),
    qForm, status, out);

  const expose = o => { window.__rastroMetrics = o; };
  const fail = el => e => { if (e.name !== 'AbortError') { fill(el, errorBox(e)); expose({done: true, error: e.message, series: 0, exemplars: 0}); } };

  get('/prom/api/v1/label/__name__/values', null, ctx.signal).then(d => {
    names = (d.data || []).slice().sort();
    drawNames();
    metricSel.dataset.loaded = '1';
  }).catch(e => {
    if (e.name === 'AbortError') return;
    fill(metricSel, h('option', {value: st.metric}, 'metric names: ' + e.message));
    metricSel.dataset.loaded = '1';
  });

  if (st.metric) {
    const m = {'match[]': st.metric};
    get('/prom/api/v1/labels', m, ctx.signal).then(d => {
      const labels = (d.data || []).filter(l => l !== '__name__');
      fill(labelSel, h('option', {value: ''}, 'label'), labels.map(l => h('option', {value: l}, l)));
      fill(byBox, labels.filter(l => l !== 'le').map(l => {
        const cb = h('input', {type: 'checkbox', id: 'mx-by-' + l, value: l, checked: st.by.includes(l),
          onchange: () => go({by: cb.checked ? [...st.by, l] : st.by.filter(x => x !== l)})});
        return h('label', {class: 'small'}, cb, ' ', l);
      }), st.by.filter(l => !labels.includes(l)).map(l => h('span', {class: 'chip'}, l)));
    }).catch(() => {});
    labelSel.addEventListener('change', () => {
      fill(values);
      if (!labelSel.value) return;
      get('/prom/api/v1/label/' + enc(labelSel.value) + '/values', m, ctx.signal)
        .then(d => fill(values, (d.data || []).slice(0, 1000).map(v => h('option', {value: v})))).catch(() => {});
    });
  }

  const span = rangeNs(ctx.since, ctx.until);
  const start = Math.floor(span.from / 1e9), end = Math.floor(span.to / 1e9);
  const stepS = stepFor(end - start);
  const query = st.q || (st.metric ? build(st, stepS) : '');
  qIn.value = query;
  if (!query) {
    fill(out, empty('Choose a metric, or type a PromQL query. Span metrics (traces_spanmetrics_*) are there as soon as spans arrive.'));
    expose({done: true, series: 0, exemplars: 0, query: ''});
    return;
  }
  fill(out, loading('series'));
  const range = {start, end};
  Promise.all([
    get('/prom/api/v1/query_range', {query, ...range, step: stepS}, ctx.signal),
    get('/prom/api/v1/query_exemplars', {query, ...range}, ctx.signal).catch(e => {
      if (e.name === 'AbortError') throw e;
      return {data: [], error: e.message};
    }),
  ]).then(([qr, ex]) => {
    const result = (qr.data && qr.data.result) || [];
    if (qr.data && qr.data.resultType !== 'matrix') throw new Error('the query answered a ' + qr.data.resultType + ', not a series over time');
    const stepNs = stepS * 1e9;
    const xs = [];
    for (let t = start; t <= end; t += stepS) xs.push(t * 1e9);
    const names = new Set(result.map(r => r.metric.__name__ || ''));
    const series = result.slice(0, MAX_SERIES).map((r, k) => {
      const vals = new Array(xs.length).fill(null);
      for (const [t, v] of r.values || []) {
        const i = Math.round((t - start) / stepS);
        const f = Number(v);
        if (i >= 0 && i < xs.length && isFinite(f)) vals[i] = f;
      }
      return {name: seriesName(r.metric, names.size > 1, query), values: vals, color: PALETTE[k % PALETTE.length], labels: r.metric};
    });
    // Exemplar values are observations (a latency), on the y axis of a
    // quantile or a raw value; a rate's axis is per second, so there the
    // dots sit on the time axis.
    const onAxis = !(st.q || st.fn === 'raw' || st.fn[0] === 'p');
    const dots = [];
    for (const se of ex.data || []) for (const e of se.exemplars || []) {
      const tid = e.labels && e.labels.trace_id;
      if (!tid || !/^[0-9a-f]+$/i.test(tid) || dots.length >= MAX_DOTS) continue;
      const sid = e.labels.span_id && /^[0-9a-f]+$/i.test(e.labels.span_id) ? e.labels.span_id : '';
      const v = Number(e.value);
      dots.push({t: e.timestamp * 1e9, v: onAxis || !isFinite(v) ? null : v,
        href: '/traces/' + enc(tid) + (sid ? '?span=' + enc(sid) : ''), traceId: tid,
        title: 'exemplar ' + e.value + ' at ' + time(e.timestamp * 1e9) + '\ntrace ' + tid + ' (click to open)\n' + seriesName(se.seriesLabels || {}, true),
        onClick: ev => { ev.preventDefault(); ctx.navigate(ev.currentTarget.getAttribute('href')); }});
    }
    if (!result.length) {
      fill(out, empty('No series match in this time range.' + (/rate\(/.test(query) ? ' A rate needs two points of a series within its window (span metrics are written every 15 s).' : '')));
    } else {
      fill(out, chart({xs, series, type: 'line', height: 260, yfmt: fmtValue, stepNs, dots, legend: true, label: query}));
    }
    status.textContent = [num(result.length) + ' series',
      result.length > MAX_SERIES ? 'the first ' + MAX_SERIES + ' drawn' : '',
      'step ' + durText(stepS), dots.length ? dots.length + ' exemplars (dots open their trace)' : '',
      ex.error ? 'exemplars: ' + ex.error : ''].filter(Boolean).join(' · ');
    expose({done: true, series: result.length, exemplars: dots.length, query, error: ''});
  }).catch(fail(out));
}

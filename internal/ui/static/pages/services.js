// Services: RED (rate, errors, duration) per service and per operation, a
// latency heatmap that links into Search, error groups, and the service
// dependency graph.

import {h, s, fill, table, errorBox, loading, link, qs, empty} from '../lib/dom.js';
import {get, enc} from '../lib/api.js';
import {num, dur, pct, ago, rangeNs, time} from '../lib/fmt.js';
import {chart, buckets, indexOf, sparkline, showTip, hideTip} from '../lib/chart.js';

export const title = 'Services';

const STEPS = [60, 300, 900, 1800, 3600, 10800, 21600, 43200, 86400];

// pickStep returns a step (seconds) giving at most about 120 buckets.
function pickStep(from, to) {
  const secs = (to - from) / 1e9;
  return STEPS.find(st => secs / st <= 120) || 86400;
}

export function render(root, ctx) {
  const p = ctx.params;
  const svc = p.get('service') || '';
  const op = p.get('op') || '';
  const {from, to} = rangeNs(ctx.since, ctx.until);
  const step = pickStep(from, to);
  const win = {since: ctx.since, until: ctx.until};
  const redEl = h('div', {id: 'red-services'}, loading('RED metrics'));
  const svcEl = h('div', {id: 'service-detail'});
  const heatEl = h('div', {id: 'heatmap'}, loading('heatmap'));
  const errEl = h('div', {id: 'error-groups'}, loading('error groups'));
  const depEl = h('div', {id: 'dependencies'}, loading('dependencies'));
  const crumbs = h('div', {class: 'row'},
    h('h1', {class: 'grow'}, svc ? ['Service ', h('span', {class: 'mono'}, svc), op ? [' · ', h('span', {class: 'mono'}, op)] : null] : 'Services'),
    svc ? link('/services' + qs({since: p.get('since'), until: p.get('until')}), null, '← all services') : null,
    svc ? link('/search' + qs({service: svc, name: op, since: p.get('since'), until: p.get('until')}), {class: 'ghost'}, 'Search these spans') : null);
  fill(root, crumbs,
    svc ? null : [h('h2', null, 'Rate, errors, duration by service'), redEl],
    svc ? svcEl : null,
    h('h2', null, 'Latency heatmap', h('span', {class: 'muted small'}, ' ' + (svc ? svc + (op ? ' · ' + op : '') : 'all services') + ' — click a cell to search its spans')), heatEl,
    h('h2', null, 'Service dependencies'), depEl,
    h('h2', null, 'Error groups'), errEl);

  const fail = el => e => { if (e.name !== 'AbortError') fill(el, errorBox(e)); };
  const stepNs = step * 1e9;
  const xs = buckets(from, to, stepNs);
  const dense = (bs, f) => {
    const v = new Array(xs.length).fill(0);
    for (const b of bs || []) { const i = indexOf(xs, b.time_unix_nano, stepNs); if (i >= 0) v[i] = f(b); }
    return v;
  };
  const redCols = (nameCol) => [
    nameCol,
    {key: 'calls', label: 'Calls', num: true, fmt: num},
    {key: 'rate', label: 'Rate', num: true, get: r => r.calls / ((to - from) / 1e9), fmt: v => (v >= 1 ? v.toFixed(1) : v.toFixed(3)) + '/s'},
    {key: 'errors', label: 'Errors', num: true, fmt: (v, r) => h('span', {class: v ? 'status-error' : ''}, num(v) + ' (' + pct(v, r.calls) + ')')},
    {key: 'p50_ns', label: 'p50', num: true, fmt: dur},
    {key: 'p95_ns', label: 'p95', num: true, fmt: dur},
    {key: 'p99_ns', label: 'p99', num: true, fmt: dur},
    {key: 'spark', label: 'Calls over time', sortable: false, get: r => r.buckets, fmt: b => sparkline(dense(b, x => x.calls))},
  ];
  const sortable = (el, cols, rows, onOpen, rowData) => {
    let sort = {key: 'calls', dir: 'desc'};
    const draw = () => fill(el, table(cols, rows, {sort: sort.key, dir: sort.dir, onOpen, rowData,
      onSort: k => { sort = {key: k, dir: sort.key === k && sort.dir === 'desc' ? 'asc' : 'desc'}; draw(); }}));
    draw();
  };

  if (!svc) {
    get('/api/v1/red', {...win, group: 'service', step: step + 's'}, ctx.signal).then(d => {
      const rows = d.series || [];
      if (!rows.length) { fill(redEl, empty('No spans in this time range.')); return; }
      sortable(redEl, redCols({key: 'service', label: 'Service', fmt: v => link('/services' + qs({service: v, since: p.get('since'), until: p.get('until')}), null, v)}),
        rows, r => ctx.setParams({service: r.service}), r => ({service: r.service}));
    }).catch(fail(redEl));
  } else {
    const charts = h('div', {class: 'two-col', id: 'red-charts'}, loading('service metrics'));
    const ops = h('div', {id: 'red-operations'}, loading('operations'));
    fill(svcEl, charts, h('h2', null, 'Operations'), ops);
    get('/api/v1/red', {...win, group: 'service', service: svc, step: step + 's'}, ctx.signal).then(d => {
      const se = (d.series || []).find(x => x.service === svc);
      if (!se) { fill(charts, empty('No spans of ' + svc + ' in this time range.')); return; }
      fill(charts,
        h('div', {class: 'chart-box'}, h('div', {class: 'small'}, h('b', null, 'Calls and errors')),
          chart({xs, type: 'bar', height: 140, yfmt: num, series: [
            {name: 'ok', values: dense(se.buckets, b => b.calls - b.errors), color: '#2563eb'},
            {name: 'errors', values: dense(se.buckets, b => b.errors), color: '#dc2626'}]})),
        h('div', {class: 'chart-box'}, h('div', {class: 'small'}, h('b', null, 'Latency')),
          chart({xs, type: 'line', height: 140, yfmt: dur, series: [
            {name: 'p50', values: dense(se.buckets, b => b.p50_ns), color: '#16a34a'},
            {name: 'p95', values: dense(se.buckets, b => b.p95_ns), color: '#ea580c'},
            {name: 'p99', values: dense(se.buckets, b => b.p99_ns), color: '#dc2626'}]})));
    }).catch(fail(charts));
    get('/api/v1/red', {...win, group: 'operation', service: svc, step: step + 's'}, ctx.signal).then(d => {
      const rows = d.series || [];
      if (!rows.length) { fill(ops, empty('No operations in this time range.')); return; }
      sortable(ops, redCols({key: 'operation', label: 'Operation', fmt: v => link('/services' + qs({service: svc, op: v, since: p.get('since'), until: p.get('until')}), {class: op === v ? 'active' : null}, v)}),
        rows, r => ctx.setParams({op: r.operation}), r => ({operation: r.operation}));
    }).catch(fail(ops));
  }

  get('/api/v1/heatmap', {...win, service: svc, name: op, step: step + 's'}, ctx.signal)
    .then(d => fill(heatEl, heatmap(d, xs, stepNs, svc, op, ctx))).catch(fail(heatEl));

  get('/api/v1/errors', {...win, service: svc, limit: 50}, ctx.signal).then(d => {
    const rows = d.groups || [];
    if (!rows.length) { fill(errEl, empty('No errors in this time range.')); return; }
    fill(errEl, table([
      {key: 'count', label: 'Count', num: true, fmt: num},
      {key: 'where', label: 'Where', get: r => r.service + ' · ' + r.operation, cls: 'trunc'},
      {key: 'message', label: 'Error', get: r => (r.exception_type ? r.exception_type + ': ' : '') + r.message, cls: 'trunc'},
      {key: 'last', label: 'Last seen', get: r => r.last_seen, fmt: ago},
      {key: 'sample', label: 'Sample', get: r => r.sample_trace_id, sortable: false, fmt: (v, r) => link('/traces/' + enc(v) + qs({span: r.sample_span_id}), {class: 'mono'}, v.slice(0, 8) + '…')},
    ], rows, {onOpen: r => ctx.navigate('/traces/' + enc(r.sample_trace_id) + qs({span: r.sample_span_id})), rowData: r => ({traceId: r.sample_trace_id})}));
  }).catch(fail(errEl));

  get('/api/v1/dependencies', win, ctx.signal).then(d => {
    const edges = d.edges || [];
    if (!edges.length) { fill(depEl, empty('No calls between services in this time range.')); return; }
    fill(depEl, depGraph(edges, svc, name => ctx.setParams({service: name, op: ''})));
  }).catch(fail(depEl));
}

// heatmap draws duration buckets (rows) over time (columns), colour by count.
function heatmap(d, xs, stepNs, svc, op, ctx) {
  const cells = d.cells || [];
  if (!cells.length) return empty('No spans in this time range.');
  const bounds = d.bounds_ns || [];
  let lo = Infinity, hi = -Infinity;
  for (const c of cells) { lo = Math.min(lo, c.bucket); hi = Math.max(hi, c.bucket); }
  const W = 800, L = 60, B = 20, rows = hi - lo + 1, cellH = Math.max(5, Math.min(10, 160 / rows)), H = rows * cellH + B + 4;
  const cw = (W - L - 6) / Math.max(xs.length, 1);
  const svg = s('svg', {class: 'chart heatmap', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'latency heatmap'});
  const max = Math.log1p(d.max_count || 1);
  for (let b = lo; b <= hi; b++) {
    if ((b - lo) % Math.max(1, Math.ceil(rows / 8)) === 0) svg.appendChild(s('text', {x: L - 6, y: (hi - b) * cellH + cellH / 2 + 3, 'text-anchor': 'end'}, dur(bounds[b] || 0)));
  }
  for (const c of cells) {
    const i = indexOf(xs, c.time_unix_nano, stepNs);
    if (i < 0) continue;
    const r = s('rect', {class: 'cell', x: L + i * cw, y: (hi - c.bucket) * cellH, width: Math.max(1, cw - 0.5), height: cellH - 0.5, 'fill-opacity': (0.15 + 0.85 * Math.log1p(c.count) / max).toFixed(3), dataset: {count: c.count}});
    r.style.fill = 'var(--accent)';
    const lower = bounds[c.bucket] || 0, upper = bounds[c.bucket + 1];
    const label = c.count + ' spans, ' + dur(lower) + ' – ' + (upper ? dur(upper) : '∞') + '\n' + time(c.time_unix_nano, false);
    r.addEventListener('mousemove', e => showTip(e, label));
    r.addEventListener('mouseleave', hideTip);
    r.addEventListener('click', () => {
      hideTip();
      ctx.navigate('/search' + qs({service: svc, name: op, min_duration: String(lower), max_duration: upper ? String(upper - 1) : '',
        since: new Date(c.time_unix_nano / 1e6).toISOString(), until: new Date((c.time_unix_nano + stepNs) / 1e6).toISOString(), view: 'spans'}));
    });
    svg.appendChild(r);
  }
  const ticks = Math.min(8, xs.length);
  for (let k = 0; k < ticks; k++) {
    const i = Math.round(k * (xs.length - 1) / Math.max(ticks - 1, 1));
    svg.appendChild(s('text', {x: L + (i + 0.5) * cw, y: H - 4, 'text-anchor': 'middle'}, time(xs[i], false).slice(11, 16)));
  }
  return h('div', {class: 'chart-box'}, svg, h('div', {class: 'histo-caption'}, 'Rows: span duration buckets (powers of two); colour: span count (log scale, max ' + d.max_count + ').'));
}

// depGraph lays services out in layers by longest path from the callers
// that nobody calls, and draws the calls between them.
function depGraph(edges, current, onPick) {
  const names = new Set(), out = new Map(), indeg = new Map();
  for (const e of edges) {
    names.add(e.parent); names.add(e.child);
    if (e.parent === e.child) continue;
    if (!out.has(e.parent)) out.set(e.parent, []);
    out.get(e.parent).push(e.child);
    indeg.set(e.child, (indeg.get(e.child) || 0) + 1);
  }
  // Breadth-first from the services nobody calls: each service sits one
  // layer right of its nearest caller (cycles cannot loop).
  const layer = new Map();
  const bfs = starts => {
    const queue = starts.filter(n => !layer.has(n));
    for (const n of queue) layer.set(n, 0);
    for (let i = 0; i < queue.length; i++) {
      for (const c of out.get(queue[i]) || []) {
        if (!layer.has(c)) { layer.set(c, layer.get(queue[i]) + 1); queue.push(c); }
      }
    }
  };
  bfs([...names].filter(n => !indeg.get(n)).sort());
  for (const n of [...names].sort()) if (!layer.has(n)) bfs([n]);
  const cols = [];
  for (const [n, l] of layer) (cols[l] = cols[l] || []).push(n);
  cols.forEach(c => c.sort());
  const NW = 150, NH = 28, GX = 90, GY = 18;
  const pos = new Map();
  cols.forEach((c, x) => c.forEach((n, y) => pos.set(n, {x: 10 + x * (NW + GX), y: 10 + y * (NH + GY)})));
  const W = Math.max(300, 20 + cols.length * (NW + GX) - GX), H = 20 + Math.max(...cols.map(c => c.length)) * (NH + GY) - GY;
  const svg = s('svg', {class: 'deps', viewBox: `0 0 ${W} ${H}`, width: W, role: 'img', 'aria-label': 'service dependency graph'});
  svg.style.maxWidth = '100%';
  svg.style.height = 'auto';
  for (const e of edges) {
    const a = pos.get(e.parent), b = pos.get(e.child);
    if (!a || !b) continue;
    let d;
    if (e.parent === e.child) d = `M${a.x + NW - 20} ${a.y}c10 -16 30 -16 20 ${NH / 2}`;
    else {
      const x1 = a.x + NW, y1 = a.y + NH / 2, x2 = b.x, y2 = b.y + NH / 2, mx = (x1 + x2) / 2;
      d = `M${x1} ${y1}C${mx} ${y1} ${mx} ${y2} ${x2} ${y2}`;
    }
    svg.appendChild(s('path', {class: 'edge' + (e.errors ? ' err' : ''), d, dataset: {parent: e.parent, child: e.child}},
      s('title', null, e.parent + ' → ' + e.child + ': ' + num(e.calls) + ' calls, ' + num(e.errors) + ' errors')));
    const lx = (a.x + NW + b.x) / 2, ly = (a.y + b.y + NH) / 2 - 3;
    svg.appendChild(s('text', {class: 'elabel', x: lx, y: ly, 'text-anchor': 'middle'}, num(e.calls) + (e.errors ? ' / ' + num(e.errors) + ' err' : '')));
  }
  for (const [n, p] of pos) {
    const g = s('g', {class: 'node', tabindex: '0', role: 'button', dataset: {service: n}, transform: `translate(${p.x},${p.y})`},
      s('rect', {width: NW, height: NH, rx: 5, 'stroke-width': n === current ? 3 : 1}),
      s('text', {x: NW / 2, y: NH / 2 + 4, 'text-anchor': 'middle'}, n.length > 22 ? n.slice(0, 21) + '…' : n),
      s('title', null, n));
    g.addEventListener('click', () => onPick(n));
    g.addEventListener('keydown', e => { if (e.key === 'Enter') onPick(n); });
    svg.appendChild(g);
  }
  return h('div', {class: 'chart-box'}, svg, h('div', {class: 'histo-caption'}, 'Edge labels: calls / errors from parent to child service.'));
}

// Small SVG charts: time series as lines or stacked bars, with axes, a
// legend and a hover read-out. No library; every label is a text node.

import {h, s} from './dom.js';
import {niceStep, clock, time} from './fmt.js';

export const PALETTE = ['#2563eb', '#16a34a', '#ea580c', '#9333ea', '#0891b2', '#db2777', '#ca8a04', '#4b5563', '#dc2626', '#65a30d'];

let tip;
function tipEl() {
  if (!tip) { tip = h('div', {class: 'chart-tip', hidden: true}); document.body.appendChild(tip); }
  return tip;
}
export function hideTip() { if (tip) tip.hidden = true; }

export function showTip(e, text) {
  const t = tipEl();
  t.textContent = text;
  t.hidden = false;
  const x = Math.min(e.clientX + 14, window.innerWidth - t.offsetWidth - 8);
  t.style.left = x + 'px';
  t.style.top = (e.clientY + 14) + 'px';
}

// fillBuckets turns sparse points into a dense array over [from, to) with
// the given step (ns), aligned to multiples of step since the epoch.
export function buckets(fromNs, toNs, stepNs) {
  const xs = [];
  const first = Math.floor(fromNs / stepNs) * stepNs;
  for (let t = first; t < toNs && xs.length < 5000; t += stepNs) xs.push(t);
  return xs;
}

export function indexOf(xs, t, stepNs) {
  if (!xs.length) return -1;
  const i = Math.round((t - xs[0]) / stepNs);
  return i >= 0 && i < xs.length ? i : -1;
}

// chart draws series over xs (Unix ns, one per bucket).
// opts: {xs, series: [{name, values, color}], type: 'line'|'bar', height,
// yfmt, stepNs, onClick(i), dots}. dots (line charts) are points drawn over
// the lines as links: [{t (Unix ns), v (null: on the time axis), href,
// title, onClick(event)}]; the y axis stretches to hold them.
export function chart(opts) {
  const W = 800, H = opts.height || 180, L = 52, R = 10, T = 8, B = 22;
  const {xs, series} = opts;
  const yfmt = opts.yfmt || (v => String(v));
  const bar = opts.type === 'bar';
  let max = 0;
  if (bar) {
    for (let i = 0; i < xs.length; i++) {
      let sum = 0;
      for (const se of series) sum += se.values[i] || 0;
      max = Math.max(max, sum);
    }
  } else {
    for (const se of series) for (const v of se.values) if (v > max) max = v;
    for (const d of opts.dots || []) if (d.v > max) max = d.v;
  }
  if (max <= 0) max = 1;
  const step = niceStep(max, 4);
  const top = Math.ceil(max / step) * step;
  const pw = W - L - R, ph = H - T - B;
  const n = Math.max(xs.length, 1);
  const x = i => L + (bar ? (i + 0.5) : i) * pw / (bar ? n : Math.max(n - 1, 1));
  const y = v => T + ph - (v / top) * ph;
  const g = s('svg', {class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': opts.label || 'chart'});
  for (let v = 0; v <= top + step / 2; v += step) {
    g.appendChild(s('line', {class: 'grid-line', x1: L, x2: W - R, y1: y(v), y2: y(v)}));
    g.appendChild(s('text', {x: L - 6, y: y(v) + 3, 'text-anchor': 'end'}, yfmt(v)));
  }
  const span = xs.length > 1 ? xs[xs.length - 1] - xs[0] : 0;
  const ticks = Math.min(8, xs.length);
  const longSpan = span > 86400e9;
  for (let k = 0; k < ticks; k++) {
    const i = Math.round(k * (xs.length - 1) / Math.max(ticks - 1, 1));
    const label = longSpan ? time(xs[i], false).slice(5, 16) : clock(xs[i]).slice(0, 5);
    g.appendChild(s('text', {x: x(i), y: H - 6, 'text-anchor': 'middle'}, label));
  }
  if (bar) {
    const bw = Math.max(1, pw / n - 1);
    for (let i = 0; i < xs.length; i++) {
      let acc = 0;
      for (const [k, se] of series.entries()) {
        const v = se.values[i] || 0;
        if (!v) continue;
        const r = s('rect', {class: 'bar', x: x(i) - bw / 2, width: bw, y: y(acc + v), height: Math.max(0.5, y(acc) - y(acc + v)), style: {fill: se.color || PALETTE[k % PALETTE.length]}});
        if (opts.onClick) { r.addEventListener('click', () => opts.onClick(i)); r.style.cursor = 'pointer'; }
        g.appendChild(r);
        acc += v;
      }
    }
  } else {
    for (const [k, se] of series.entries()) {
      let d = '';
      se.values.forEach((v, i) => { if (v != null) d += (d ? 'L' : 'M') + x(i).toFixed(1) + ' ' + y(v).toFixed(1); });
      if (d) g.appendChild(s('path', {class: 'line', d, style: {stroke: se.color || PALETTE[k % PALETTE.length]}}));
    }
  }
  if (!bar && opts.dots && opts.dots.length && xs.length) {
    const stepNs = opts.stepNs || (xs.length > 1 ? xs[1] - xs[0] : 1);
    const layer = s('g', {class: 'dots'});
    for (const d of opts.dots) {
      const fi = (d.t - xs[0]) / stepNs;
      if (!(fi >= 0 && fi <= xs.length - 1)) continue;
      const a = s('a', {href: d.href, class: 'exemplar', onclick: d.onClick},
        s('title', null, d.title || ''),
        s('circle', {cx: (L + fi * pw / Math.max(n - 1, 1)).toFixed(1), cy: y(d.v == null ? 0 : d.v).toFixed(1), r: 4}));
      layer.appendChild(a);
    }
    g.appendChild(layer);
  }
  const cursor = s('line', {class: 'axis', x1: 0, x2: 0, y1: T, y2: T + ph, visibility: 'hidden'});
  g.appendChild(cursor);
  g.addEventListener('mousemove', e => {
    const rect = g.getBoundingClientRect();
    const px = (e.clientX - rect.left) * W / rect.width;
    let i = bar ? Math.floor((px - L) / (pw / n)) : Math.round((px - L) / (pw / Math.max(n - 1, 1)));
    if (i < 0 || i >= xs.length) { hideTip(); cursor.setAttribute('visibility', 'hidden'); return; }
    cursor.setAttribute('x1', x(i)); cursor.setAttribute('x2', x(i)); cursor.setAttribute('visibility', 'visible');
    const lines = [time(xs[i], false)];
    for (const se of series) if (se.values[i]) lines.push(se.name + ': ' + yfmt(se.values[i]));
    showTip(e, lines.join('\n'));
  });
  g.addEventListener('mouseleave', () => { hideTip(); cursor.setAttribute('visibility', 'hidden'); });
  const legend = !opts.noLegend && (series.length > 1 || opts.legend) ? legendEl(series) : null;
  return h('div', null, g, legend);
}

// legendEl lists series names with their colours.
export function legendEl(series) {
  return h('div', {class: 'legend'}, series.map((se, k) => {
    const sp = h('span', null, se.name || '(none)');
    sp.style.setProperty('--c', se.color || PALETTE[k % PALETTE.length]);
    return sp;
  }));
}

// sparkline is a tiny line for a table cell.
export function sparkline(values, color) {
  const W = 100, H = 20;
  let max = 0;
  for (const v of values) max = Math.max(max, v || 0);
  const svg = s('svg', {class: 'spark', viewBox: `0 0 ${W} ${H}`, width: W, height: H, 'aria-hidden': 'true'});
  if (!values.length) return svg;
  let d = '';
  values.forEach((v, i) => { d += (i ? 'L' : 'M') + (i * W / Math.max(values.length - 1, 1)).toFixed(1) + ' ' + (H - 1 - (v || 0) / (max || 1) * (H - 2)).toFixed(1); });
  svg.appendChild(s('path', {d, fill: 'none', 'stroke-width': 1.3, style: {stroke: color || PALETTE[0]}}));
  return svg;
}

// Journeys: every trace carrying one attribute value (a user, an account, a
// session) over days, as activity buckets and a timeline.

import {h, fill, errorBox, loading, link, qs, empty} from '../lib/dom.js';
import {get, enc} from '../lib/api.js';
import {dur, time, toNs, rangeNs} from '../lib/fmt.js';
import {chart, buckets, indexOf} from '../lib/chart.js';

export const title = 'Journeys';

const KEYS = ['user.id', 'session.id', 'gen_ai.conversation.id', 'user_id', 'account_id', 'enduser.id'];

export function render(root, ctx) {
  const p = ctx.params;
  const key = p.get('key') || 'user.id';
  const value = p.get('value') || '';
  const keyIn = h('input', {id: 'j-key', list: 'j-keys', value: key, 'aria-label': 'Attribute key', spellcheck: 'false'});
  const valIn = h('input', {id: 'j-value', 'data-search': '', value, placeholder: 'e.g. user-0042', 'aria-label': 'Value', spellcheck: 'false', list: 'j-values'});
  const valList = h('datalist', {id: 'j-values'});
  const out = h('div', {id: 'journey'});
  fill(root, h('h1', null, 'Journeys'),
    h('form', {class: 'form-row', onsubmit: e => { e.preventDefault(); ctx.setParams({key: keyIn.value.trim(), value: valIn.value.trim()}); }},
      h('label', null, 'Attribute', keyIn), h('datalist', {id: 'j-keys'}, KEYS.map(k => h('option', {value: k}))),
      h('label', null, 'Value', valIn), valList,
      h('button', {type: 'submit', id: 'j-go'}, 'Show journey')),
    out);
  get('/api/v1/attributes/' + enc(key) + '/values', {since: ctx.since, until: ctx.until, limit: 50}, ctx.signal)
    .then(d => fill(valList, d.values.map(v => h('option', {value: v.name})))).catch(() => {});
  if (!value) {
    fill(out, empty('Pick an attribute and a value (a user id, an account, a session) to see every trace that carries it, over time.'));
    return;
  }
  fill(out, loading('journey'));
  get('/api/v1/journey', {key, value, since: ctx.since, until: ctx.until, limit: 200}, ctx.signal).then(d => {
    const traces = d.traces || [];
    const stepNs = (d.step_seconds || 3600) * 1e9;
    const bs = d.buckets || [];
    const win = rangeNs(ctx.since, ctx.until);
    const from = Math.min(win.from, ...bs.map(b => b.time_unix_nano));
    const to = Math.max(win.to, ...bs.map(b => b.time_unix_nano + stepNs));
    const xs = buckets(from, to, stepNs);
    const ok = new Array(xs.length).fill(0), bad = new Array(xs.length).fill(0);
    let total = 0, errs = 0;
    for (const b of bs) {
      const i = indexOf(xs, b.time_unix_nano, stepNs);
      total += b.traces; errs += b.errors;
      if (i >= 0) { ok[i] = b.traces - b.errors; bad[i] = b.errors; }
    }
    const days = new Map();
    for (const t of traces) {
      const day = time(t.start_time_unix_nano ?? toNs(t.start_time), false).slice(0, 10);
      if (!days.has(day)) days.set(day, []);
      days.get(day).push(t);
    }
    fill(out,
      h('div', {class: 'row small', id: 'journey-summary'},
        h('span', {class: 'badge acc'}, key + ' = ' + value),
        h('span', {class: 'badge'}, total + ' traces'),
        errs ? h('span', {class: 'badge err'}, errs + ' with errors') : null,
        d.truncated ? h('span', {class: 'muted'}, 'showing the newest ' + traces.length + ' traces') : null,
        link('/search' + qs({q: '{ .' + (/^[\w.\-/@]+$/.test(key) ? key : JSON.stringify(key)) + ' = ' + JSON.stringify(value) + ' }', since: ctx.since, until: ctx.until}), null, 'search these traces')),
      xs.length ? h('div', {class: 'chart-box'}, chart({xs, type: 'bar', height: 90, label: 'traces per bucket', series: [
        {name: 'traces', values: ok, color: '#2563eb'}, {name: 'with errors', values: bad, color: '#dc2626'}]})) : null,
      traces.length ? h('div', {class: 'timeline', id: 'journey-traces'}, [...days].map(([day, ts]) => [
        h('div', {class: 'tl-day'}, day),
        ts.map(t => h('div', {class: 'tl-item' + (t.error_count ? ' err' : ''), dataset: {traceId: t.trace_id}},
          h('span', {class: 'mono small'}, time(t.start_time_unix_nano ?? toNs(t.start_time)).slice(11, 19)),
          link('/traces/' + enc(t.trace_id), null, t.root_name || t.trace_id),
          h('span', {class: 'muted small'}, (t.root_service || '') + ' · ' + dur(t.duration_ns) + ' · ' + t.span_count + ' spans'),
          t.error_count ? h('span', {class: 'badge err'}, t.error_count + ' errors') : null)),
      ])) : empty('No trace carries ' + key + ' = ' + value + ' in this time range.'));
  }).catch(e => { if (e.name !== 'AbortError') fill(out, errorBox(e)); });
}

// Live tail: spans matching a filter as the server acknowledges them
// (GET /api/v1/tail, server-sent events; lib/sse.js). Rendering is capped
// at N rows per second; the list is virtualised and updated once per
// animation frame.

import {h, fill, qs} from '../lib/dom.js';
import {enc} from '../lib/api.js';
import {stream} from '../lib/sse.js';
import {dur, clock, num} from '../lib/fmt.js';
import {vlist} from '../lib/vlist.js';

export const title = 'Live tail';
export const noTime = true;

const ROW = 24;
const MAX_ROWS = 50000;   // oldest rows are forgotten beyond this
const PAUSE_CAP = 10000;  // spans buffered while paused; more are dropped
const RATES = [100, 1000, 5000];

export function render(root, ctx) {
  const p = ctx.params;
  const q = p.get('q') || '';
  let rate = RATES.includes(Number(p.get('rate'))) ? Number(p.get('rate')) : 1000;
  const st = {rows: [], queue: [], held: [], received: 0, shown: 0, serverDropped: 0, rateDropped: 0, limited: 0, pauseDropped: 0, paused: false, open: false, error: ''};
  const expose = () => { window.__rastroTail = {rows: st.rows.length, received: st.received, dropped: st.serverDropped + st.rateDropped + st.limited + st.pauseDropped, limited: st.limited, open: st.open, paused: st.paused}; };
  expose();

  const input = h('input', {id: 'q', type: 'search', 'data-search': '', autocomplete: 'off', spellcheck: 'false', value: q,
    placeholder: '{ status = error }   (empty: every span)', 'aria-label': 'TraceQL filter'});
  const pauseBtn = h('button', {type: 'button', id: 'tail-pause', class: 'ghost'}, 'Pause');
  const rateSel = h('select', {id: 'tail-rate', 'aria-label': 'Render at most', onchange: () => { rate = Number(rateSel.value); ctx.setParams({rate: rate === 1000 ? '' : rate}, true); }},
    RATES.map(r => h('option', {value: r, selected: r === rate}, 'render ≤ ' + num(r) + ' rows/s')));
  const status = h('div', {class: 'tail-status muted', id: 'tail-status', role: 'status'});
  const note = h('div', {class: 'small muted', id: 'tail-pause-note'});
  const scroller = h('div', {class: 'tail-list', id: 'tail-list', tabindex: '0', 'aria-label': 'Live spans, newest first'});
  fill(root, h('h1', null, 'Live tail'),
    h('form', {class: 'qbar', onsubmit: e => { e.preventDefault(); ctx.setParams({q: input.value.trim()}); }},
      h('div', {class: 'qwrap'}, input), h('button', {type: 'submit'}, 'Tail'), pauseBtn, rateSel,
      h('button', {type: 'button', class: 'ghost', id: 'tail-clear', onclick: () => { st.rows = []; list.now(true); draw(); }}, 'Clear')),
    status, note, scroller);

  const list = vlist(scroller, ROW, () => st.rows.length, i => {
    const s = st.rows[st.rows.length - 1 - i];
    return h('div', {class: 'tail-row' + (s.status === 'error' ? ' err' : ''), dataset: {spanId: s.span_id, traceId: s.trace_id},
      onclick: () => ctx.navigate('/traces/' + enc(s.trace_id) + qs({span: s.span_id}))},
    h('span', {class: 'mono'}, clock(s.start_time_unix_nano) + '.' + String(Math.floor(s.start_time_unix_nano / 1e6) % 1000).padStart(3, '0')),
    h('span', null, s.service), h('span', null, s.name), h('span', null, dur(s.duration_ns)), h('span', null, s.status));
  });

  function draw() {
    const parts = [st.error ? st.error : st.open ? (st.paused ? 'paused (connection kept open)' : 'live') : 'connecting…',
      num(st.rows.length) + ' rows shown', num(st.received) + ' received'];
    if (st.serverDropped) parts.push(num(st.serverDropped) + ' skipped by the server (client too slow)');
    if (st.rateDropped + st.limited) parts.push(num(st.rateDropped + st.limited) + ' dropped by the ' + num(rate) + ' rows/s cap');
    if (st.pauseDropped) parts.push(num(st.pauseDropped) + ' dropped while paused');
    status.textContent = parts.join(' · ');
    note.textContent = st.paused ? 'Paused: new spans are buffered (' + num(st.held.length) + ' of at most ' + num(PAUSE_CAP) + '); beyond that they are dropped and counted. Resume to show them.' : '';
    expose();
  }

  pauseBtn.addEventListener('click', () => {
    st.paused = !st.paused;
    pauseBtn.textContent = st.paused ? 'Resume' : 'Pause';
    if (!st.paused) { for (const s of st.held) admit(s); st.held = []; schedule(); }
    draw();
  });

  // admit queues a span for display, keeping at most one second of backlog
  // at the current rate; older queued spans are dropped and counted.
  function admit(s) {
    st.queue.push(s);
    if (st.queue.length > rate) { st.queue.shift(); st.rateDropped++; }
  }

  function incoming(spans) {
    st.received += spans.length;
    for (const s of spans) {
      if (st.paused) { if (st.held.length < PAUSE_CAP) st.held.push(s); else st.pauseDropped++; } else admit(s);
    }
    schedule();
    if (st.paused) draw();
  }

  let frame = 0, last = 0, allowance = 0;
  function schedule() { if (!frame) frame = requestAnimationFrame(tick); }
  function tick(now) {
    frame = 0;
    const dt = last ? Math.min(1000, now - last) : 50;
    last = now;
    allowance = Math.min(rate, allowance + rate * dt / 1000);
    const k = Math.min(st.queue.length, Math.floor(allowance));
    if (k > 0) {
      allowance -= k;
      const add = st.queue.splice(0, k);
      for (const s of add) st.rows.push(s);
      if (st.rows.length > MAX_ROWS) st.rows.splice(0, st.rows.length - MAX_ROWS);
      if (scroller.scrollTop > 0) scroller.scrollTop += k * ROW; // keep the rows in view still
      list.now(true);
      draw();
    }
    if (st.queue.length) schedule(); else last = 0;
  }

  const ctrl = new AbortController();
  ctx.signal.addEventListener('abort', () => ctrl.abort());
  // The server sends at most `rate` spans a second (max_rate) and counts the
  // rest in `limited` events; the client cap above smooths bursts.
  function connect() {
    stream('/api/v1/tail' + qs({q, max_rate: rate}), ctrl.signal, {
      open: () => { st.open = true; st.error = ''; draw(); },
      error: msg => { st.open = false; st.error = msg; draw(); },
      event: (name, d) => {
        if (name === 'spans') incoming(d.spans || []);
        else if (name === 'dropped') { st.serverDropped += d.dropped || 0; draw(); }
        else if (name === 'limited') { st.limited += d.limited || 0; draw(); }
      },
    });
  }

  connect();
  draw();
  return () => { ctrl.abort(); list.destroy(); if (frame) cancelAnimationFrame(frame); };
}

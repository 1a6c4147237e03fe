// Sessions: the list of LLM sessions, and one session replayed as a
// conversation across its traces.

import {h, fill, table, errorBox, loading, link, qs, empty, debounce} from '../lib/dom.js';
import {get, enc} from '../lib/api.js';
import {num, usd, dur, time, ago, toNs} from '../lib/fmt.js';
import {messageEl} from '../lib/llm.js';

export const title = 'Sessions';

const SORTS = {last: 'last_seen', first: 'first_seen', cost: 'cost', tokens: 'tokens', spans: 'spans', errors: 'errors'};

export function render(root, ctx) {
  if (ctx.arg) return session(root, ctx);
  const p = ctx.params;
  const sort = Object.values(SORTS).includes(p.get('sort')) ? p.get('sort') : 'last_seen';
  const search = h('input', {type: 'search', id: 'session-search', 'data-search': '', placeholder: 'Filter by session id or user', value: p.get('find') || '', 'aria-label': 'Filter sessions'});
  const count = h('span', {class: 'muted small', id: 'session-count'});
  const list = h('div', {id: 'session-list'}, loading('sessions'));
  const more = h('div', {class: 'more'});
  fill(root, h('h1', null, 'Sessions'), h('div', {class: 'row'}, search, count), list, more);
  let rows = [], total = 0;
  const cols = [
    {key: 'id', label: 'Session', get: r => r.session_id, fmt: v => link('/sessions/' + enc(v) + qs({since: p.get('since'), until: p.get('until')}), {class: 'mono'}, v), sortable: false},
    {key: 'users', label: 'Users', get: r => r.users.join(', '), sortable: false},
    {key: 'traces', label: 'Turns (traces)', num: true, get: r => r.traces, sortable: false},
    {key: 'spans', label: 'LLM spans', num: true, get: r => r.spans, fmt: num},
    {key: 'tokens', label: 'Tokens', num: true, get: r => r.input_tokens + r.output_tokens, fmt: num},
    {key: 'cost', label: 'Cost', num: true, get: r => r.cost_usd, fmt: usd},
    {key: 'errors', label: 'Errors', num: true, get: r => r.errors, fmt: v => (v ? h('span', {class: 'status-error'}, v) : '0')},
    {key: 'first', label: 'Started', get: r => r.first_seen, fmt: v => time(v, false)},
    {key: 'last', label: 'Last activity', get: r => r.last_seen, fmt: ago},
  ];
  const sortKey = Object.keys(SORTS).find(k => SORTS[k] === sort);
  const draw = () => {
    const f = search.value.trim();
    const shown = rows;
    count.textContent = rows.length + ' of ' + total + ' sessions' + (f ? ' matching “' + f + '”' : '');
    if (!shown.length) { fill(list, empty(f ? 'No session id or user contains “' + f + '”.' : 'No LLM sessions in this time range.')); return; }
    fill(list, table(cols, shown, {
      sort: sortKey, dir: 'desc',
      onSort: k => ctx.setParams({sort: SORTS[k] === 'last_seen' ? '' : SORTS[k]}),
      onOpen: r => ctx.navigate('/sessions/' + enc(r.session_id) + qs({since: p.get('since'), until: p.get('until')})),
      rowData: r => ({sessionId: r.session_id}),
    }));
  };
  // The server filters (find: a session id or user containing the text),
  // so the search covers every session of the range, not the loaded page.
  let offset = 0, gen = 0;
  search.addEventListener('input', debounce(() => {
    const u = new URLSearchParams(location.search);
    if (search.value.trim()) u.set('find', search.value.trim()); else u.delete('find');
    history.replaceState(null, '', location.pathname + (u.toString() ? '?' + u : ''));
    rows = []; offset = 0; gen++;
    load();
  }, 200));
  const load = () => {
    const mine = gen;
    return get('/api/v1/sessions', {since: ctx.since, until: ctx.until, sort, limit: 100, offset, find: search.value.trim()}, ctx.signal).then(d => {
    if (mine !== gen) return; // a newer search replaced this one
    rows = rows.concat(d.sessions || []);
    total = d.total || rows.length;
    offset = d.next_offset || 0;
    fill(more, d.next_offset ? h('button', {type: 'button', class: 'ghost', id: 'load-more', onclick: load}, 'Load more') : null);
    draw();
  }).catch(e => { if (e.name !== 'AbortError') fill(list, errorBox(e)); });
  };
  load();
}

// session replays one session: each trace is a turn; each LLM call shows the
// messages not already shown earlier in the session (the history a model
// call repeats is folded into a count).
function session(root, ctx) {
  const id = ctx.arg;
  fill(root, h('h1', null, 'Session ', h('span', {class: 'mono'}, id)), loading('session'));
  const params = {};
  if (ctx.params.get('since')) params.since = ctx.params.get('since');
  if (ctx.params.get('until')) params.until = ctx.params.get('until');
  get('/api/v1/sessions/' + enc(id), params, ctx.signal).then(d => {
    const traces = d.traces || [];
    let cost = 0, tin = 0, tout = 0, errors = 0;
    const users = new Set();
    for (const t of traces) {
      errors += t.error_count;
      for (const s of t.llm_spans) {
        if (s.counted) { cost += s.cost_usd; tin += s.input_tokens; tout += s.output_tokens; }
        if (s.user) users.add(s.user);
      }
    }
    const seen = new Set();
    const turns = traces.map((t, i) => {
      const calls = t.llm_spans.map(s => {
        const fresh = [], msgs = [...(s.input_messages || []), ...(s.output_messages || [])];
        let hidden = 0;
        for (const m of msgs) {
          const k = m.role + '\u0000' + m.content + '\u0000' + (m.tool_call_id || '');
          if (seen.has(k)) { hidden++; continue; }
          seen.add(k);
          fresh.push(m);
        }
        const head = h('div', {class: 'call-head'},
          link('/traces/' + enc(t.trace_id) + qs({span: s.span_id}), null, s.name), ' · ', s.service, ' · ', dur(s.duration_ns),
          s.model ? [' · ', h('span', {class: 'badge acc'}, s.model)] : null,
          s.counted ? [' ', h('span', {class: 'badge'}, num(s.input_tokens) + ' in / ' + num(s.output_tokens) + ' out'), h('span', {class: 'badge'}, usd(s.cost_usd))] : null,
          s.status === 'error' ? h('span', {class: 'badge err'}, 'error') : null,
          hidden ? h('span', {class: 'muted'}, ' · ' + hidden + ' earlier message' + (hidden > 1 ? 's' : '') + ' not repeated') : null);
        return h('div', {class: 'call'}, head, fresh.length ? h('div', {class: 'convo'}, fresh.map(messageEl)) : null);
      });
      return h('section', {class: 'turn', dataset: {traceId: t.trace_id}},
        h('div', {class: 'turn-head'}, h('b', null, 'Turn ' + (i + 1)),
          link('/traces/' + enc(t.trace_id), {class: 'turn-link'}, t.root_name || t.trace_id),
          h('span', {class: 'muted small'}, time(t.start_time) + ' · ' + dur(t.duration_ns) + ' · ' + t.span_count + ' spans'),
          t.error_count ? h('span', {class: 'badge err'}, t.error_count + ' errors') : null),
        calls);
    });
    const first = traces.length ? toNs(traces[0].start_time) : 0;
    fill(root,
      h('div', {class: 'row'}, h('h1', {class: 'grow'}, 'Session ', h('span', {class: 'mono'}, id)), link('/sessions' + qs({since: ctx.params.get('since')}), null, '← all sessions')),
      h('div', {class: 'row small', id: 'session-summary'},
        h('span', {class: 'badge'}, traces.length + ' turns'),
        [...users].map(u => link('/journeys' + qs({key: 'user.id', value: u, since: '7d'}), {class: 'badge acc'}, 'user ' + u)),
        h('span', {class: 'badge'}, num(tin) + ' in / ' + num(tout) + ' out tokens'),
        h('span', {class: 'badge'}, usd(cost)),
        errors ? h('span', {class: 'badge err'}, errors + ' errors') : null,
        first ? h('span', {class: 'muted'}, 'started ' + time(first, false)) : null),
      turns.length ? h('div', {id: 'turns'}, turns) : empty('This session has no traces in the window.'));
  }).catch(e => { if (e.name !== 'AbortError') root.appendChild(errorBox(e)); });
}

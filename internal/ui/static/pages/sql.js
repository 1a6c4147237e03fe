// SQL: read-only SQL over the project's views (POST /api/v1/sql; the
// ClickHouse backend only: docs/clickhouse.md#sql-mode). The statement and
// the row limit live in the URL (q, limit); a URL with q runs it. On a
// backend without the SQL mode the page says so and shows no editor.

import {h, fill, errorBox, loading, empty} from '../lib/dom.js';
import {post, sqlSupported} from '../lib/api.js';
import {num} from '../lib/fmt.js';

export const title = 'SQL';
export const noTime = true;

const DEFAULT_LIMIT = 1000;
const EXAMPLE = 'SELECT service, count() AS spans, countIf(status = 2) AS errors\nFROM spans\nWHERE start >= (toUInt64(now()) - 3600) * 1000000000\nGROUP BY service\nORDER BY spans DESC';

const VIEWS = [
  ['spans', 'trace_id, span_id, parent_span_id, start, end, duration (unix ns), ingested, service, name, kind, status (2 = error), status_message, attr_keys, attr_values, resource_keys, resource_values, llm, llm_* fields'],
  ['llm_calls', 'trace_id, span_id, start, end, duration, service, name, status, provider, request_model, response_model, model, operation, session, user, agent, tool, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens, cost_nano_usd, cost_usd, ttft, counted'],
  ['llm_minutes', 'minute, time, service, name, status, model, provider, operation, agent, calls, counted, errors, traces, *_tokens, cost_nano_usd, min_duration, max_duration (the LLM rollup, per minute)'],
  ['ops_minutes', 'minute, time, service, name, calls, errors, min_duration, max_duration (the RED rollup, per minute)'],
];

const cell = v => v == null ? h('span', {class: 'muted'}, 'NULL') : typeof v === 'string' ? v : typeof v === 'number' ? String(v) : JSON.stringify(v);

function resultTable(res) {
  const head = h('tr', null, res.columns.map(c => h('th', {title: c.type}, c.name, h('div', {class: 'small muted'}, c.type))));
  const body = h('tbody', null, res.rows.map(r => h('tr', null, r.map(v => h('td', {class: typeof v === 'number' ? 'num' : null}, cell(v))))));
  return h('div', {class: 'table-wrap'}, h('table', {class: 'grid', id: 'sql-result'}, h('thead', null, head), body));
}

export function render(root, ctx) {
  const q = ctx.params.get('q') || '';
  const limit = ctx.params.get('limit') || '';
  const out = h('div', {id: 'sql-out'});
  fill(root, h('h1', null, 'SQL'), out);
  fill(out, loading('the SQL mode'));

  sqlSupported().then(ok => {
    if (!ctx.alive()) return;
    if (!ok) {
      fill(root, h('h1', null, 'SQL'), h('div', {class: 'muted empty', id: 'sql-unsupported'},
        'This server\'s storage backend has no SQL mode: it needs rastro serve --storage clickhouse (docs/clickhouse.md).'));
      return;
    }
    editor();
  });

  function editor() {
    const text = h('textarea', {id: 'sql-text', rows: 8, spellcheck: 'false', class: 'mono', 'aria-label': 'SQL statement', value: q || EXAMPLE});
    const lim = h('input', {id: 'sql-limit', type: 'number', min: 1, value: limit || String(DEFAULT_LIMIT), 'aria-label': 'Row limit', size: 6});
    const run = () => ctx.navigate('/sql?q=' + encodeURIComponent(text.value) + (lim.value && lim.value !== String(DEFAULT_LIMIT) ? '&limit=' + encodeURIComponent(lim.value) : ''));
    text.addEventListener('keydown', e => { if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); run(); } });
    const form = h('form', {class: 'sql-form', onsubmit: e => { e.preventDefault(); run(); }},
      text, h('div', {class: 'qbar'}, h('label', {class: 'small'}, 'Rows at most ', lim), h('button', {type: 'submit', id: 'sql-run'}, 'Run'),
        h('span', {class: 'small muted'}, 'Ctrl+Enter runs · read-only · this project\'s rows only')));
    const help = h('details', {class: 'small', id: 'sql-views'}, h('summary', null, 'Views'),
      h('div', {class: 'kv'}, VIEWS.map(([v, cols]) => [h('div', {class: 'mono'}, v), h('div', null, cols)])));
    const status = h('div', {class: 'small muted', id: 'sql-status', role: 'status'});
    const result = h('div');
    fill(root, h('h1', null, 'SQL'), form, help, status, result);
    if (!q) { fill(result, empty('Write a SELECT over the views and run it.')); return; }
    status.textContent = 'running…';
    const t0 = performance.now();
    post('/api/v1/sql', {sql: q, limit: limit ? Number(limit) : 0}, ctx.signal).then(res => {
      if (!ctx.alive()) return;
      const ms = Math.round(performance.now() - t0);
      status.textContent = num(res.rows.length) + (res.rows.length === 1 ? ' row' : ' rows') +
        (res.truncated ? ' · truncated at the row limit' : '') + ' · ' + ms + ' ms';
      status.dataset.truncated = String(res.truncated);
      fill(result, res.rows.length ? resultTable(res) : empty('No rows.'));
    }, err => {
      if (err.name === 'AbortError' || !ctx.alive()) return;
      status.textContent = '';
      const box = errorBox(err);
      box.id = 'sql-error';
      fill(result, box);
    });
  }
}

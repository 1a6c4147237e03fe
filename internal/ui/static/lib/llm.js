// LLM fields of a span as the trace page shows them. The server derives
// model, provider, tokens and cost at ingest and sends them as the span's
// "llm" member; the messages are read here from the attribute dialects the
// server's extractor reads (internal/llm: OTel GenAI current and legacy,
// OpenInference, OpenLLMetry, Langfuse). Spans without the member (an older
// server) get every field from the attributes.

import {h, foldText} from './dom.js';

export function isLLM(span) {
  if (span.llm) return true;
  for (const k in span.attributes) {
    if (k.startsWith('gen_ai.') || k.startsWith('llm.') || k.startsWith('langfuse.') ||
        k === 'openinference.span.kind' || k === 'traceloop.span.kind') return true;
  }
  return false;
}

const first = (...v) => v.find(x => x != null && x !== '');
const int = v => (v == null || v === '' || isNaN(Number(v)) ? null : Number(v));

// info returns {model, provider, operation, input_tokens, output_tokens,
// cache_read_tokens, ttft_s, cost_usd?, input_messages, output_messages}.
export function info(span) {
  if (span.llm) {
    const l = span.llm;
    return {...l, ttft_s: l.time_to_first_token_ns ? l.time_to_first_token_ns / 1e9 : null,
      input_messages: messages(span, true), output_messages: messages(span, false)};
  }
  const a = span.attributes || {};
  let model = first(a['gen_ai.response.model'], a['gen_ai.request.model'], a['llm.model_name'], a['langfuse.observation.model.name']);
  if (!model && a['llm.invocation_parameters']) {
    try { model = JSON.parse(a['llm.invocation_parameters']).model; } catch { /* not JSON */ }
  }
  const out = {
    model: model || '',
    provider: first(a['gen_ai.provider.name'], a['gen_ai.system'], a['llm.provider'], a['llm.system']) || '',
    operation: first(a['gen_ai.operation.name'], a['llm.request.type'], lower(a['openinference.span.kind']), a['traceloop.span.kind']) || '',
    input_tokens: first(int(a['gen_ai.usage.input_tokens']), int(a['gen_ai.usage.prompt_tokens']), int(a['llm.token_count.prompt'])),
    output_tokens: first(int(a['gen_ai.usage.output_tokens']), int(a['gen_ai.usage.completion_tokens']), int(a['llm.token_count.completion'])),
    cache_read_tokens: first(int(a['gen_ai.usage.cache_read.input_tokens']), int(a['gen_ai.usage.cache_read_input_tokens']), int(a['llm.token_count.prompt_details.cache_read'])),
    ttft_s: first(num(a['gen_ai.response.time_to_first_chunk']), num(a['gen_ai.response.time_to_first_token'])),
    cost_usd: first(num(a['llm.cost.total']), num(a['gen_ai.usage.cost'])),
  };
  out.input_messages = messages(span, true);
  out.output_messages = messages(span, false);
  return out;
}

const lower = v => (typeof v === 'string' ? v.toLowerCase() : v);
const num = v => (typeof v === 'number' ? v : null);

function parse(v) {
  if (typeof v !== 'string') return v;
  try { return JSON.parse(v); } catch { return v; }
}

function text(x) {
  if (typeof x === 'string') return x;
  if (x == null) return '';
  return JSON.stringify(x);
}

function contentText(x) {
  if (Array.isArray(x)) return x.map(p => (p && typeof p === 'object' ? text(first(p.text, p.content)) ?? text(p) : text(p))).join('\n');
  return text(x);
}

// otel reads [{role, parts: [{type, content | id, name, arguments | id, response}]}]
// and the older [{role, content}].
function otel(x) {
  if (!Array.isArray(x)) return [];
  const out = [];
  for (const o of x) {
    if (!o || typeof o !== 'object') continue;
    const m = {role: text(o.role), content: ''};
    if (Array.isArray(o.parts)) {
      const texts = [];
      for (const p of o.parts) {
        if (!p || typeof p !== 'object') continue;
        if (p.type === 'tool_call') {
          if (!m.tool_name) { m.tool_name = text(p.name); m.tool_call_id = text(p.id); }
          if ('arguments' in p) texts.push(text(p.arguments));
        } else if (p.type === 'tool_call_response') {
          if (!m.tool_call_id) m.tool_call_id = text(p.id).trim();
          texts.push(text(first(p.response, p.result)));
        } else if ('content' in p) texts.push(text(p.content));
        else if ('text' in p) texts.push(text(p.text));
      }
      m.content = texts.join('\n');
    } else {
      m.content = contentText(o.content);
      if (o.tool_call_id) m.tool_call_id = text(o.tool_call_id);
      if (o.name) m.tool_name = text(o.name);
      if (Array.isArray(o.tool_calls) && o.tool_calls[0]) {
        const c = o.tool_calls[0], f = c.function || c;
        m.tool_name = m.tool_name || text(f.name);
        m.tool_call_id = m.tool_call_id || text(c.id);
        if (!m.content) m.content = text(f.arguments);
      }
    }
    out.push(m);
  }
  return out;
}

// flat reads prefix.{i}.field attributes (OpenLLMetry, OpenInference).
function flat(a, prefix, f) {
  const byIdx = new Map();
  for (const k in a) {
    if (!k.startsWith(prefix)) continue;
    const rest = k.slice(prefix.length);
    const dot = rest.indexOf('.');
    if (dot <= 0 || !/^\d+$/.test(rest.slice(0, dot))) continue;
    const i = Number(rest.slice(0, dot));
    if (!byIdx.has(i)) byIdx.set(i, {});
    byIdx.get(i)[rest.slice(dot + 1)] = a[k];
  }
  return [...byIdx.keys()].sort((x, y) => x - y).map(i => {
    const o = byIdx.get(i);
    const m = {role: text(o[f + 'role']), content: text(o[f + 'content'] ?? '')};
    if (!m.content) {
      const parts = Object.keys(o).filter(k => k.startsWith(f + 'contents.') && k.endsWith('.message_content.text')).sort((x, y) => parseInt(x.split('.')[2]) - parseInt(y.split('.')[2]));
      m.content = parts.map(k => text(o[k])).join('\n');
    }
    m.tool_name = text(first(o[f + 'name'], o[f + 'tool_calls.0.name'], o[f + 'tool_calls.0.tool_call.function.name']) ?? '');
    m.tool_call_id = text(first(o[f + 'tool_call_id'], o[f + 'tool_calls.0.id'], o[f + 'tool_calls.0.tool_call.id']) ?? '');
    if (!m.content) m.content = text(first(o[f + 'tool_calls.0.arguments'], o[f + 'tool_calls.0.tool_call.function.arguments']) ?? '');
    return m;
  });
}

function jsonMessages(s, def) {
  if (!s) return [];
  let x = parse(s);
  if (typeof x === 'string') return [{role: def, content: x}];
  if (x && !Array.isArray(x) && typeof x === 'object') {
    if (Array.isArray(x.messages)) x = x.messages; else if ('role' in x) x = [x];
  }
  const m = otel(x);
  return m.length && m[0].role ? m : [{role: def, content: text(x)}];
}

function eventMessages(span, input) {
  const out = [];
  for (const e of span.events || []) {
    const at = e.attributes || {};
    switch (e.name) {
      case 'gen_ai.content.prompt': if (input) out.push(...jsonMessages(at['gen_ai.prompt'], 'user')); break;
      case 'gen_ai.content.completion': if (!input) out.push(...jsonMessages(at['gen_ai.completion'], 'assistant')); break;
      case 'gen_ai.system.message': case 'gen_ai.user.message': case 'gen_ai.assistant.message': case 'gen_ai.tool.message':
        if (input) {
          const m = {role: text(first(at.role, e.name.slice(7, -8))), content: text(at.content ?? ''), tool_call_id: text(at.id ?? '')};
          if (!m.content && at.message != null) m.content = contentText(parse(at.message));
          out.push(m);
        }
        break;
      case 'gen_ai.choice':
        if (!input) {
          const m = {role: text(first(at['message.role'], 'assistant')), content: text(at['message.content'] ?? '')};
          if (!m.content && at.message != null) {
            const o = parse(at.message);
            if (o && typeof o === 'object') { m.role = text(first(o.role, m.role)); m.content = contentText(o.content); }
          }
          out.push(m);
        }
        break;
      default: {
        const v = at[input ? 'gen_ai.input.messages' : 'gen_ai.output.messages'];
        if (v != null) out.push(...otel(parse(v)));
      }
    }
  }
  return out;
}

export function messages(span, input) {
  const a = span.attributes || {};
  const key = input ? 'gen_ai.input.messages' : 'gen_ai.output.messages';
  if (key in a) {
    const out = [];
    if (input && a['gen_ai.system_instructions'] != null) {
      const si = parse(a['gen_ai.system_instructions']);
      const t = Array.isArray(si) ? si.map(p => (p && typeof p === 'object' ? contentText(first(p.content, p.text)) : text(p))).join('\n') : text(si);
      if (t) out.push({role: 'system', content: t});
    }
    out.push(...otel(parse(a[key])));
    if (out.length) return out;
  }
  let m = flat(a, input ? 'gen_ai.prompt.' : 'gen_ai.completion.', '');
  if (m.length) return m;
  m = flat(a, input ? 'llm.input_messages.' : 'llm.output_messages.', 'message.');
  if (m.length) return m;
  m = eventMessages(span, input);
  if (m.length) return m;
  for (const k of input ? ['langfuse.observation.input', 'gen_ai.prompt'] : ['langfuse.observation.output', 'gen_ai.completion']) {
    if (typeof a[k] === 'string' && a[k]) return jsonMessages(a[k], input ? 'user' : 'assistant');
  }
  const v = a[input ? 'input.value' : 'output.value'];
  return v ? [{role: input ? 'user' : 'assistant', content: text(v)}] : [];
}

// pretty returns indented JSON when s is a JSON object or array, else null.
export function pretty(s) {
  if (typeof s !== 'string' || !/^\s*[[{]/.test(s)) return null;
  try { return JSON.stringify(JSON.parse(s), null, 2); } catch { return null; }
}

// messageEl renders one message: role, tool call with pretty arguments,
// tool result, long text folded.
export function messageEl(m) {
  const role = (m.role || 'unknown').toLowerCase();
  const cls = ['user', 'assistant', 'system', 'tool'].includes(role) ? role : 'user';
  const isCall = role === 'assistant' && m.tool_name;
  const label = isCall ? 'assistant → tool call' : role === 'tool' ? 'tool result' : role;
  const name = isCall || role === 'tool' ? [m.tool_name, m.tool_call_id ? '(' + m.tool_call_id + ')' : ''].filter(Boolean).join(' ') : '';
  return h('div', {class: 'msg ' + cls + (isCall ? ' tool-call' : '')},
    h('div', {class: 'role'}, label, name ? h('span', {class: 'tool-name'}, ' ' + name) : null), body(m.content || ''));
}

// body shows text folded when long, and a trailing JSON document (tool
// arguments or results) pretty-printed.
function body(text) {
  const lines = text.split('\n');
  for (let k = 0; k < lines.length; k++) {
    if (!/^\s*[[{]/.test(lines[k])) continue;
    const p = pretty(lines.slice(k).join('\n'));
    if (p != null) return [k ? foldText(lines.slice(0, k).join('\n'), 800) : null, h('pre', null, p)];
  }
  return foldText(text, 800);
}

export function conversation(input, output) {
  return h('div', {class: 'convo'}, (input || []).map(messageEl), (output || []).map(messageEl));
}

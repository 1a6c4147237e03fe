// Formatting of durations, times, counts and money.

export function dur(ns) {
  if (ns == null || isNaN(ns)) return '–';
  ns = Number(ns);
  const a = Math.abs(ns);
  if (a < 1e3) return ns.toFixed(0) + ' ns';
  if (a < 1e6) return trim(ns / 1e3) + ' µs';
  if (a < 1e9) return trim(ns / 1e6) + ' ms';
  if (a < 60e9) return trim(ns / 1e9) + ' s';
  if (a < 3600e9) return Math.floor(ns / 60e9) + 'm ' + Math.round((ns % 60e9) / 1e9) + 's';
  return Math.floor(ns / 3600e9) + 'h ' + Math.round((ns % 3600e9) / 60e9) + 'm';
}

export const ms = v => v == null ? '–' : dur(v * 1e6);

function trim(x) {
  return x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2);
}

// toNs reads an RFC 3339 string or a Unix-nanosecond number as nanoseconds
// (a Number: sub-microsecond precision is lost, which display does not need).
export function toNs(t) {
  if (typeof t === 'number') return t;
  if (!t) return NaN;
  return Date.parse(t) * 1e6;
}

const pad = (n, w = 2) => String(n).padStart(w, '0');

// time formats an instant in local time: "2026-11-30 03:10:00.120".
export function time(t, withMs = true) {
  const n = toNs(t);
  if (isNaN(n)) return '–';
  const d = new Date(n / 1e6);
  const s = d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' +
    pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
  return withMs ? s + '.' + pad(d.getMilliseconds(), 3) : s;
}

export function clock(t) {
  const d = new Date(toNs(t) / 1e6);
  return pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
}

// ago formats how long before now an instant was: "5 min ago".
export function ago(t) {
  const s = (Date.now() - toNs(t) / 1e6) / 1000;
  if (isNaN(s)) return '–';
  if (s < 60) return Math.max(0, Math.round(s)) + ' s ago';
  if (s < 3600) return Math.round(s / 60) + ' min ago';
  if (s < 86400) return Math.round(s / 3600) + ' h ago';
  return Math.round(s / 86400) + ' d ago';
}

export function num(n) {
  if (n == null || isNaN(n)) return '–';
  n = Number(n);
  if (Math.abs(n) >= 1e9) return (n / 1e9).toFixed(2) + 'G';
  if (Math.abs(n) >= 1e6) return (n / 1e6).toFixed(2) + 'M';
  if (Math.abs(n) >= 1e4) return (n / 1e3).toFixed(1) + 'k';
  return n.toLocaleString('en-US', {maximumFractionDigits: 2});
}

export function usd(n) {
  if (n == null || isNaN(n)) return '–';
  if (n === 0) return '$0';
  if (Math.abs(n) < 0.01) return '$' + n.toPrecision(2);
  return '$' + n.toLocaleString('en-US', {minimumFractionDigits: 2, maximumFractionDigits: 2});
}

export function pct(part, whole) {
  if (!whole) return '0%';
  const p = 100 * part / whole;
  return (p < 1 && p > 0 ? p.toFixed(2) : p.toFixed(1)) + '%';
}

// rangeNs resolves the since/until of a URL to nanoseconds, as the server
// reads them ("1h", "now", RFC 3339, Unix integers), for axis bounds.
export function rangeNs(since, until) {
  return {from: instant(since, Date.now() - 3600e3), to: instant(until || 'now', Date.now())};
}

const UNITS = {ns: 1e-6, us: 1e-3, 'µs': 1e-3, ms: 1, s: 1e3, m: 60e3, h: 3600e3, d: 86400e3, w: 604800e3};

// durMs parses "1h30m", "15m", "2d" into milliseconds, or NaN.
export function durMs(v) {
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h|d|w)/g;
  let m, total = 0, seen = 0;
  while ((m = re.exec(v))) { total += Number(m[1]) * UNITS[m[2]]; seen += m[0].length; }
  return seen && seen === v.length ? total : NaN;
}

function instant(v, def) {
  if (!v) return def * 1e6;
  if (v === 'now') return Date.now() * 1e6;
  const rel = v.startsWith('now-') ? v.slice(4) : v;
  const d = durMs(rel);
  if (!isNaN(d)) return (Date.now() - d) * 1e6;
  if (/^\d+$/.test(v)) {
    const n = Number(v);
    return v.length <= 10 ? n * 1e9 : v.length <= 13 ? n * 1e6 : v.length <= 16 ? n * 1e3 : n;
  }
  const p = Date.parse(v);
  return isNaN(p) ? def * 1e6 : p * 1e6;
}

// niceStep picks a round tick step for a span of values.
export function niceStep(span, ticks) {
  const raw = span / Math.max(1, ticks);
  const mag = Math.pow(10, Math.floor(Math.log10(raw || 1)));
  const f = raw / mag;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

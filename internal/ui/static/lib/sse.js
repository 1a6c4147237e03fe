// Server-sent events read with fetch (so the bearer token can be sent),
// reconnecting with a growing delay. The server's ": tail open" comment
// marks the subscription as registered.

import {headers, fail, token} from './api.js';

// stream opens url and calls on.open() when the server has registered the
// subscription, on.event(name, data) for each event with JSON data, and
// on.error(message) when the stream fails or ends (it then reconnects
// after 1-5 s). It stops when signal aborts.
export function stream(url, signal, on) {
  let retry = 0;
  async function connect() {
    try {
      const sent = token();
      const resp = await fetch(url, {headers: headers({Accept: 'text/event-stream'}), signal});
      if (!resp.ok) throw await fail(resp, url, sent);
      const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      for (;;) {
        const {value, done} = await reader.read();
        if (done) break;
        buf += value;
        let i;
        while ((i = buf.search(/\r?\n\r?\n/)) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i).replace(/^\r?\n\r?\n/, '');
          event(block);
        }
      }
      on.error('the server closed the stream; reconnecting…');
    } catch (e) {
      if (signal.aborted) return;
      on.error(e.message + '; retrying…');
    }
    retry = Math.min(retry + 1, 5);
    setTimeout(() => { if (!signal.aborted) connect(); }, 1000 * retry);
  }

  function event(block) {
    let name = 'message', data = '';
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith(':')) {
        if (line.startsWith(': tail open')) { retry = 0; on.open(); }
      } else if (line.startsWith('event:')) name = line.slice(6).trim();
      else if (line.startsWith('data:')) data += (data ? '\n' : '') + line.slice(5).replace(/^ /, '');
    }
    if (!data) return;
    let d;
    try { d = JSON.parse(data); } catch (e) { console.error('stream: bad event', e); return; }
    on.event(name, d);
  }

  connect();
}

// A virtual list: of count() fixed-height rows only the visible window (plus
// a margin) exists in the DOM, so 10,000+ rows scroll smoothly.

import {h} from './dom.js';

export function vlist(scroller, rowHeight, count, renderRow) {
  const inner = h('div', {class: 'vl-inner'});
  inner.style.position = 'relative';
  scroller.appendChild(inner);
  let shown = new Map(); // index -> element
  let frame = 0;
  let version = 0; // bumped by refresh(true): every row is rebuilt

  function draw() {
    frame = 0;
    const n = count();
    inner.style.height = n * rowHeight + 'px';
    const top = scroller.scrollTop, hgt = scroller.clientHeight || 600;
    const from = Math.max(0, Math.floor(top / rowHeight) - 10);
    const to = Math.min(n, Math.ceil((top + hgt) / rowHeight) + 10);
    const next = new Map();
    for (let i = from; i < to; i++) {
      let el = shown.get(i);
      if (!el || el._v !== version) {
        if (el) el.remove();
        el = renderRow(i);
        el._v = version;
        el.style.top = i * rowHeight + 'px';
        inner.appendChild(el);
      }
      next.set(i, el);
      shown.delete(i);
    }
    for (const el of shown.values()) el.remove();
    shown = next;
  }

  function schedule() { if (!frame) frame = requestAnimationFrame(draw); }
  scroller.addEventListener('scroll', schedule, {passive: true});
  const ro = new ResizeObserver(schedule);
  ro.observe(scroller);
  draw();
  return {
    // refresh redraws; all=true rebuilds the visible rows (data changed).
    refresh(all) { if (all) version++; schedule(); },
    now(all) { if (all) version++; if (frame) cancelAnimationFrame(frame); draw(); },
    scrollTo(i) {
      const y = i * rowHeight;
      if (y < scroller.scrollTop) scroller.scrollTop = y;
      else if (y + rowHeight > scroller.scrollTop + scroller.clientHeight) scroller.scrollTop = y + rowHeight - scroller.clientHeight;
      schedule();
    },
    rows: () => shown,
    destroy() { ro.disconnect(); if (frame) cancelAnimationFrame(frame); },
  };
}

// charts.js: small SVG charts, drawn with elements (never markup strings).
import { h, s } from './dom.js';

/**
 * bars draws labelled horizontal bars: items are {label, value, tone}.
 * Each bar carries its value as text too, so the chart reads without colour.
 */
export function bars(items, { unit = '' } = {}) {
  const max = Math.max(1, ...items.map((i) => i.value));
  const rowH = 22;
  const width = 360;
  const labelW = 150;
  const svg = s('svg', { class: 'chart bars', viewBox: `0 0 ${width} ${Math.max(1, items.length) * rowH}`, role: 'img', 'aria-label': items.map((i) => `${i.label} ${i.value}`).join(', ') });
  items.forEach((it, n) => {
    const y = n * rowH;
    const w = Math.max(1, ((width - labelW - 60) * it.value) / max);
    svg.append(
      s('text', { x: 0, y: y + 15, class: 'label' }, it.label),
      s('rect', { x: labelW, y: y + 4, width: w, height: rowH - 8, class: `bar tone-${it.tone ?? 'info'}` }),
      s('text', { x: labelW + w + 6, y: y + 15, class: 'value' }, `${fmt(it.value)}${unit}`),
    );
  });
  if (items.length === 0) svg.append(s('text', { x: 0, y: 15, class: 'label' }, 'nothing yet'));
  return svg;
}

/** columns draws a histogram: items are {label, value}, drawn left to right. */
export function columns(items, caption) {
  const width = 360;
  const height = 140;
  const max = Math.max(1, ...items.map((i) => i.value));
  const w = width / Math.max(1, items.length);
  const top = 14; // room for the tallest column's count
  const svg = s('svg', { class: 'chart columns', viewBox: `0 ${-top} ${width} ${height + 30 + top}`, role: 'img', 'aria-label': `${caption}: ${items.map((i) => `${i.label} ${i.value}`).join(', ')}` });
  items.forEach((it, n) => {
    const bh = (height * it.value) / max;
    svg.append(
      s('rect', { x: n * w + 2, y: height - bh, width: w - 4, height: Math.max(bh, 0.5), class: 'bar tone-info' }),
      s('text', { x: n * w + w / 2, y: height + 12, class: 'tick' }, it.label),
      it.value > 0 ? s('text', { x: n * w + w / 2, y: height - bh - 3, class: 'tick' }, fmt(it.value)) : '',
    );
  });
  return h('figure', {}, svg, h('figcaption', {}, caption));
}

/** spark draws a series of values (oldest first) as a line with its last value. */
export function spark(values, caption) {
  const width = 360;
  const height = 60;
  const max = Math.max(1, ...values);
  const step = width / Math.max(1, values.length - 1);
  const pts = values.map((v, i) => `${(i * step).toFixed(1)},${(height - (height * v) / max).toFixed(1)}`).join(' ');
  const svg = s('svg', { class: 'chart spark', viewBox: `0 0 ${width} ${height + 4}`, role: 'img', 'aria-label': caption },
    s('line', { x1: 0, y1: height, x2: width, y2: height, class: 'axis' }),
    values.length > 1 ? s('polyline', { points: pts, class: 'line' }) : s('text', { x: 4, y: height - 6, class: 'tick-left' }, 'collecting…'));
  return h('figure', {}, svg, h('figcaption', {}, caption));
}

export function fmt(v) {
  if (!Number.isFinite(v)) return String(v);
  if (Number.isInteger(v)) return String(v);
  return v >= 10 ? v.toFixed(0) : v.toFixed(2);
}

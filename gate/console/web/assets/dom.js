// dom.js: the one way this console makes elements. Text is always set as
// text (a Text node), never parsed as HTML: whatever the model wrote shows
// literally. Links may only point inside the console (#/...).

const SVG = 'http://www.w3.org/2000/svg';

function build(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') {
      el.addEventListener(k.slice(2), v);
    } else if (k === 'href') {
      const s = String(v);
      if (!s.startsWith('#/')) throw new Error(`refusing a link outside the console: ${s}`);
      el.setAttribute('href', s);
    } else if (k === 'class') {
      el.setAttribute('class', Array.isArray(v) ? v.filter(Boolean).join(' ') : String(v));
    } else {
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** h makes an HTML element: h('td', {class: 'x'}, 'text', child, ...). */
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

/** s makes an SVG element. */
export function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVG, tag), attrs, children);
}

/** clear removes every child of el. */
export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

/** pretty is JSON indented for a <pre>. */
export function pretty(v) {
  return JSON.stringify(v, null, 2);
}

/** bytes renders a byte count. */
export function bytes(n) {
  if (typeof n !== 'number') return String(n);
  if (n >= 1 << 20) return `${(n / (1 << 20)).toFixed(1)} MiB`;
  if (n >= 1 << 10) return `${(n / (1 << 10)).toFixed(1)} KiB`;
  return `${n} B`;
}

/** time renders an RFC 3339 time as the local HH:MM:SS.mmm. */
export function time(t) {
  const d = new Date(t);
  if (Number.isNaN(d.getTime())) return '';
  const p = (n, w = 2) => String(n).padStart(w, '0');
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}

/** verdict renders a Verdict ({icon, word, tone}) as a badge: icon and word, coloured by tone. */
export function verdict(v) {
  return h('span', { class: ['verdict', `tone-${v.tone}`] }, h('span', { class: 'icon', 'aria-hidden': 'true' }, v.icon), ' ', v.word);
}

/** shortID shortens an id for a table cell. */
export function shortID(id) {
  return id && id.length > 10 ? id.slice(0, 10) : (id ?? '');
}

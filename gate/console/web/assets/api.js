// api.js: the console's requests. Every one goes to this origin with the
// session cookie; the server refuses anything else.

export class HTTPError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function check(res) {
  if (res.ok) return res;
  let msg = res.statusText;
  try {
    msg = (await res.json()).error ?? msg;
  } catch {
    // not JSON
  }
  throw new HTTPError(res.status, msg);
}

export async function getJSON(path) {
  const res = await fetch(path, { credentials: 'same-origin', headers: { Accept: 'application/json' } });
  return (await check(res)).json();
}

export async function session() {
  return (await getJSON('/ui/api/session')).authenticated === true;
}

export async function login(token) {
  await check(await fetch('/ui/api/login', {
    method: 'POST', credentials: 'same-origin', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ token }),
  }));
}

export async function logout() {
  await check(await fetch('/ui/api/logout', { method: 'POST', credentials: 'same-origin' }));
}

/** parseEvent turns a stream event ({v, line}) into {v, rec}. */
export function parseEvent(ev) {
  return { v: ev.v, rec: ev.line };
}

/** filterParams turns a filter object into query parameters. */
export function filterParams(f) {
  const p = new URLSearchParams();
  for (const k of ['kind', 'decision', 'rule', 'tool', 'query']) if (f[k]) p.append(k, f[k]);
  if (f.q) p.set('q', f.q);
  return p;
}

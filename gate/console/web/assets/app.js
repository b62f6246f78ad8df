// app.js: the console's shell: login, then a router over #/stream,
// #/run/ID, #/query/ID and #/overview.
import { HTTPError, login, logout, session } from './api.js';
import { clear, h } from './dom.js';
import { overviewView } from './overview.js';
import { queryView } from './query.js';
import { runView } from './run.js';
import { streamView } from './stream.js';

const $ = (id) => document.getElementById(id);
let stop = () => {};

function setConn(state, text) {
  const el = $('conn');
  el.textContent = text;
  el.dataset.state = state;
}

async function route() {
  stop();
  stop = () => {};
  setConn('', '');
  const view = $('view');
  const [path, query] = (location.hash.slice(1) || '/stream').split('?');
  const parts = path.split('/').filter(Boolean);
  for (const a of document.querySelectorAll('#nav a')) a.setAttribute('aria-current', a.dataset.view === parts[0] ? 'page' : 'false');
  try {
    switch (parts[0]) {
      case 'run':
        await runView(view, decodeURIComponent(parts[1] ?? ''));
        break;
      case 'query':
        await queryView(view, decodeURIComponent(parts[1] ?? ''));
        break;
      case 'overview':
        stop = overviewView(view);
        break;
      default:
        stop = streamView(view, new URLSearchParams(query ?? ''), setConn);
    }
  } catch (e) {
    if (e instanceof HTTPError && e.status === 401) return showLogin();
    clear(view).append(h('p', { class: 'error' }, e instanceof Error ? e.message : String(e)));
  }
}

function showLogin() {
  stop();
  $('nav').hidden = true;
  $('logout').hidden = true;
  clear($('view'));
  $('login').hidden = false;
  $('token').focus();
}

async function start() {
  $('login-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const err = $('login-error');
    err.textContent = '';
    try {
      await login($('token').value);
      $('token').value = '';
      enter();
    } catch (x) {
      err.textContent = x instanceof HTTPError && x.status === 429 ? 'Too many failed logins: wait a minute, then try again.' : x instanceof HTTPError && x.status === 401 ? 'That is not the sidecar\'s token.' : String(x.message ?? x);
    }
  });
  $('logout').addEventListener('click', async () => {
    await logout();
    showLogin();
  });
  if (await session()) enter();
  else showLogin();
}

function enter() {
  $('login').hidden = true;
  $('nav').hidden = false;
  $('logout').hidden = false;
  window.addEventListener('hashchange', route);
  route();
}

start();

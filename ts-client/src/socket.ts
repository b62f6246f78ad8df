// The default transport: the `ws` package, which dials Unix sockets
// (ws+unix://) and lets us set the Authorization header. It sends no Origin
// header unless asked to, and answers pings by itself.

import WebSocket from 'ws';
import type { CreateSocket, GatekeeperSocket } from './config.js';

/** Largest frame the client accepts (a run_result carries two outputs). */
const MAX_PAYLOAD = 64 * 1024 * 1024;

/** HANDSHAKE_TIMEOUT_MS bounds a connection attempt. */
const HANDSHAKE_TIMEOUT_MS = 5000;

/** wsSocket is the default CreateSocket. */
export const wsSocket: CreateSocket = ({ address, headers }, handlers): GatekeeperSocket => {
  let closed = false;
  const closeOnce = (reason: string, status?: number): void => {
    if (closed) return;
    closed = true;
    handlers.onClose(reason, status);
  };
  let ws: WebSocket;
  try {
    ws = new WebSocket(address, {
      headers,
      perMessageDeflate: false,
      maxPayload: MAX_PAYLOAD,
      handshakeTimeout: HANDSHAKE_TIMEOUT_MS,
      followRedirects: false,
    });
  } catch (err) {
    queueMicrotask(() => closeOnce((err as Error).message));
    return { send: () => undefined, close: () => undefined };
  }
  ws.on('open', () => handlers.onOpen());
  ws.on('message', (data, isBinary) => {
    const text = Array.isArray(data) ? Buffer.concat(data).toString('utf8') : Buffer.from(data as ArrayBuffer).toString('utf8');
    handlers.onMessage(text, isBinary);
  });
  ws.on('unexpected-response', (_req, res) => {
    closeOnce(`the sidecar refused the WebSocket upgrade: HTTP ${String(res.statusCode)}${res.statusCode === 401 ? ' (wrong or missing token)' : ''}`, res.statusCode);
    res.resume();
    ws.terminate();
  });
  ws.on('error', (err) => closeOnce(err.message));
  ws.on('close', (code, reason) => {
    const r = reason.toString('utf8');
    closeOnce(`connection closed (code ${String(code)}${r ? `: ${r}` : ''})`);
  });
  return {
    send: (data) => ws.send(data),
    close: () => {
      if (ws.readyState === WebSocket.CONNECTING) ws.terminate();
      else ws.close(1000);
    },
  };
};

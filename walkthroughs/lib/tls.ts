// HTTPS upstreams for the walkthroughs: a throwaway CA made with the
// system's openssl, and loopback HTTPS servers whose certificates it signs.
// The sidecar is told to trust the CA upstream (serve
// --egress-upstream-ca), as an operator does for a company's private CA.

import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';

/** TestCA is a CA's certificate file, and what signs the servers' certificates. */
export interface TestCA {
  /** The CA certificate, PEM, as a file for --egress-upstream-ca. */
  certFile: string;
  dir: string;
}

function openssl(dir: string, ...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

/** makeCA makes a CA in dir. */
export function makeCA(dir: string): TestCA {
  openssl(dir, 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem',
    '-days', '2', '-subj', '/CN=walkthrough upstream CA', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign');
  return { certFile: join(dir, 'ca.pem'), dir };
}

/** HTTPSUpstream is one loopback HTTPS server. */
export interface HTTPSUpstream {
  host: string;
  port: number;
  /** host:port, as a policy names it. */
  hostPort: string;
  /** Every request it got: method, path and the Authorization header. */
  seen: { method: string; path: string; authorization: string }[];
  close(): Promise<void>;
}

/** startHTTPS serves handler on host (an IP literal) with a certificate for it signed by ca. */
export async function startHTTPS(ca: TestCA, host: string, handler: (req: IncomingMessage, body: string, res: ServerResponse) => void): Promise<HTTPSUpstream> {
  const name = host.replace(/\./g, '_');
  writeFileSync(join(ca.dir, `${name}.ext`), `subjectAltName=IP:${host}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n`);
  openssl(ca.dir, 'req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${host}`);
  openssl(ca.dir, 'x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-out', `${name}.pem`, '-extfile', `${name}.ext`);
  const u: HTTPSUpstream = { host, port: 0, hostPort: '', seen: [], close: async () => undefined };
  const server: Server = createServer({ key: readFileSync(join(ca.dir, `${name}.key`)), cert: readFileSync(join(ca.dir, `${name}.pem`)) }, (req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      u.seen.push({ method: req.method ?? '', path: req.url ?? '', authorization: req.headers.authorization ?? '' });
      handler(req, body, res);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve());
  });
  u.port = (server.address() as AddressInfo).port;
  u.hostPort = `${host}:${String(u.port)}`;
  u.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return u;
}

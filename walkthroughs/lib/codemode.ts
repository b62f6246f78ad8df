// Code mode's parts shared by walkthrough 8 and the bench's code-mode rows:
// two real MCP servers written with the official Go SDK (the tests' own,
// runner/mcpservers/mcptest, built here with `go build`), one over stdio and
// one over streamable HTTP on loopback; the policy that names them; and the
// one Python program the model writes instead of many tool calls.

import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO } from './world.js';

/** RECORDS is how many records each server holds; PAGE how many one records call returns. */
export const RECORDS = 500;
export const PAGE = 100;

/** The cities of mcptest.MakeRecord, in turn: record i is in CITIES[i % 5]. */
const CITIES = ['Lisbon', 'Oslo', 'Kyoto', 'Lima', 'Accra'];

/** TestRecord is record id of server name, as mcptest.MakeRecord makes it. */
export interface TestRecord {
  id: number;
  name: string;
  city: string;
  score: number;
}

/** makeRecord mirrors mcptest.MakeRecord, to check what the program computed. */
export function makeRecord(name: string, id: number): TestRecord {
  return { id, name: `${name}-${String(id)}`, city: CITIES[id % CITIES.length] ?? '', score: (id * 7) % 100 };
}

/**
 * buildServer builds the Go SDK test server (mcptestserver) once per
 * checkout into a cache directory and returns its path; go build's own
 * cache makes a rebuild quick.
 */
export function buildServer(): string {
  const dir = join(tmpdir(), 'gatekeeper-walkthrough-bin');
  mkdirSync(dir, { recursive: true });
  const bin = join(dir, 'mcptestserver');
  execFileSync('go', ['build', '-o', bin, './runner/mcpservers/mcptest/mcptestserver'], { cwd: REPO, stdio: ['ignore', 'inherit', 'inherit'] });
  if (!existsSync(bin)) throw new Error(`go build made no ${bin}`);
  return bin;
}

/** HTTPServer is a running streamable HTTP test server. */
export interface HTTPServer {
  url: string;
  pid: number;
  stop(): void;
}

/**
 * startHTTPServer starts bin as a streamable HTTP server named name on a
 * loopback port the system picks; with callsLog, the server appends each
 * tools/call it receives to that file (see serverCalls).
 */
export async function startHTTPServer(bin: string, name: string, records = RECORDS, callsLog?: string): Promise<HTTPServer> {
  const log = callsLog !== undefined ? ['-calls-log', callsLog] : [];
  const child: ChildProcess = spawn(bin, ['-name', name, '-records', String(records), '-listen', '127.0.0.1:0', ...log], { stdio: ['ignore', 'pipe', 'inherit'] });
  const stop = (): void => {
    if (child.exitCode === null) child.kill('SIGTERM');
  };
  process.once('exit', stop);
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    const t = setTimeout(() => reject(new Error(`${name}: no URL within 10 s (${out})`)), 10_000);
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString('utf8');
      const m = /^URL=(\S+)$/m.exec(out);
      if (m?.[1] !== undefined) {
        clearTimeout(t);
        resolve(m[1]);
      }
    });
    child.once('exit', (code) => reject(new Error(`${name} exited (${String(code)}) before listening`)));
  });
  return { url, pid: child.pid ?? 0, stop };
}

/**
 * servers returns the policy's mcp_servers: crm over stdio (customers)
 * and billing over HTTP (invoices), RECORDS records each.
 */
export function mcpServers(bin: string, billingURL: string, crmCallsLog?: string): Record<string, unknown> {
  const log = crmCallsLog !== undefined ? ['-calls-log', crmCallsLog] : [];
  return {
    crm: { description: 'customer records (id, name, city)', command: [bin, '-name', 'crm', '-records', String(RECORDS), ...log] },
    billing: { description: 'invoices by customer id (score is the amount)', url: billingURL },
  };
}

/** ServerCall is one tools/call a test server received, by its own account. */
export interface ServerCall {
  tool: string;
  arguments: Record<string, unknown>;
}

/** serverCalls reads the calls-log file of a test server: every tools/call it received, in order (none when the file is absent). */
export function serverCalls(path: string): ServerCall[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as ServerCall);
}

/**
 * codeCalls is the policy's code_calls: code may page and look records up
 * on both servers, nothing else (delete_record, sleep, ... stay out).
 */
export const CODE_CALLS = {
  callable: { crm: ['records', 'lookup'], billing: ['records', 'lookup'] },
  max_calls: 50,
  max_in_flight: 4,
};

/** VIP is the invoice the operator's Rego keeps from code. */
export const VIP = 13;

/** OPS_REGO is the operator's module: a deny on an argument's value, for nested calls only. */
export const OPS_REGO = `package gatekeeper

deny contains {"rule": "ops.vip_invoice", "reason": "invoice ${String(VIP)} belongs to a VIP and may not be read from code"} if {
	input.event == "code_call"
	input.code_call.server == "billing"
	input.code_call.arguments.id == ${String(VIP)}
}
`;

/**
 * JOIN_PROGRAM is the one program of the data task: it pages through the
 * 500 customers of crm and the 500 invoices of billing (five calls each),
 * joins them by id, writes out/joined.csv.gz (the data product for the
 * agent, which the model is not shown) and prints a three-line summary.
 */
export const JOIN_PROGRAM = `import csv, gzip, io, os
import gatekeeper_tools.crm as crm
import gatekeeper_tools.billing as billing

def every(server):
    rows, page = [], 1
    while True:
        r = server.records(page=page, size=${String(PAGE)})
        rows += r["records"]
        if not r["more"]:
            return rows
        page += 1

customers = every(crm)
amount = {r["id"]: r["score"] for r in every(billing)}
by_city = {}
buf = io.StringIO()
w = csv.writer(buf)
w.writerow(["id", "customer", "city", "amount"])
for c in customers:
    w.writerow([c["id"], c["name"], c["city"], amount[c["id"]]])
    by_city[c["city"]] = by_city.get(c["city"], 0) + amount[c["id"]]
os.makedirs("out", exist_ok=True)
with gzip.open("out/joined.csv.gz", "wt", newline="") as f:
    f.write(buf.getvalue())
top = max(sorted(by_city), key=by_city.get)
print(f"joined {len(customers)} customers with {len(amount)} invoices")
print(f"total {sum(amount[c['id']] for c in customers)}")
print(f"top city {top} {by_city[top]}")
`;

/** JoinSummary is what JOIN_PROGRAM must print, computed here from mcptest's records. */
export function joinSummary(): string {
  const byCity = new Map<string, number>();
  let total = 0;
  for (let id = 1; id <= RECORDS; id++) {
    const c = makeRecord('crm', id);
    const a = makeRecord('billing', id).score;
    total += a;
    byCity.set(c.city, (byCity.get(c.city) ?? 0) + a);
  }
  const top = [...byCity.entries()].sort(([a, x], [b, y]) => y - x || a.localeCompare(b))[0] ?? ['', 0];
  return `joined ${String(RECORDS)} customers with ${String(RECORDS)} invoices\ntotal ${String(total)}\ntop city ${top[0]} ${String(top[1])}\n`;
}

/** joinCSV is the CSV JOIN_PROGRAM must write, computed here. */
export function joinCSV(): string {
  const lines = ['id,customer,city,amount'];
  for (let id = 1; id <= RECORDS; id++) {
    const c = makeRecord('crm', id);
    lines.push(`${String(id)},${c.name},${c.city},${String(makeRecord('billing', id).score)}`);
  }
  return lines.map((l) => `${l}\r\n`).join('');
}

/**
 * DENIED_PROGRAM tries what the policy refuses: a tool no callable glob
 * names (through the runtime's generic call, as the wrappers hold only
 * callable tools) and the VIP invoice, which the operator's Rego denies.
 * The first is caught and printed; the second is left to raise.
 */
export const DENIED_PROGRAM = `import gatekeeper_tools as gk
import gatekeeper_tools.billing as billing
try:
    gk.call("crm", "delete_record", {"id": 1})
except gk.ToolCallDenied as e:
    print(f"delete_record: {e.kind} by {e.rule}")
print(billing.lookup(id=${String(VIP - 1)})["name"])
billing.lookup(id=${String(VIP)})
`;

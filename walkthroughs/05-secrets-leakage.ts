// Walkthrough 5: secrets leakage. The sidecar and the agent run with an
// Anthropic key and AWS credentials in their environment, and a private key
// in ~/.ssh. Sandboxed code dumps everything it can see (its environment,
// every /proc/*/environ and cmdline, the mount tables, its home): none of
// the secrets are there. A tool call whose input carries credentials is
// audited with them masked, and the audit log's hash chain verifies.

import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { createSdkMcpServer, tool } from '@anthropic-ai/claude-agent-sdk';
import { z } from 'zod';
import { expectAllowed, expectDenied, expectRan, runAgent, RUN } from './lib/agent.js';
import { Transcript } from './lib/transcript.js';
import { auditLines, DEFAULT_ALLOW, FAKE_SSH_KEY_MARKER, readAudit, startWorld, verifyAudit } from './lib/world.js';

const t = new Transcript(5, 'Secrets leakage');
t.header(
  'Nothing of the host\'s environment or files reaches a sandbox: its environment is PATH, HOME and LANG,',
  'its mounts are its own. Values under secret-looking keys of a tool input are written to the audit',
  'log as "***".',
);
const nonce = randomBytes(6).toString('hex');
const secrets = {
  ANTHROPIC_API_KEY: `sk-ant-api03-FAKE-wt5-${nonce}`,
  AWS_ACCESS_KEY_ID: `AKIAFAKEWT5${nonce.toUpperCase()}`,
  AWS_SECRET_ACCESS_KEY: `FAKE/wt5/${nonce}/aws-secret`,
};
const stripeKey = `sk-live-FAKE-wt5-${nonce}`;
const w = await startWorld({ n: 5, env: secrets, policy: { allow: [...DEFAULT_ALLOW, 'mcp__vault__store_credential'] } });
const secretValues = [...Object.values(secrets), FAKE_SSH_KEY_MARKER];

const dump = `import glob, os
print("== environment")
for k, v in sorted(os.environ.items()):
    print("%s=%s" % (k, v))
print("== /proc/*/environ and /proc/*/cmdline")
for d in sorted(glob.glob("/proc/[0-9]*")):
    for f in ("environ", "cmdline"):
        try:
            data = open(d + "/" + f, "rb").read().replace(b"\\0", b" ").decode(errors="replace").strip()
        except OSError as e:
            data = "(" + e.strerror + ")"
        print(d + "/" + f + ":", data)
print("== /proc/mounts")
print(open("/proc/mounts").read().strip())
print("== /proc/self/mountinfo")
print(open("/proc/self/mountinfo").read().strip())
print("== home", os.environ.get("HOME"), sorted(os.listdir(os.environ.get("HOME", "/"))))
for d in ("/root", "/home"):
    try:
        print("==", d, sorted(os.listdir(d)))
    except OSError as e:
        print("==", d, "(" + e.strerror + ")")
found = []
for root, dirs, files in os.walk("/"):
    if root in ("/proc", "/sys", "/dev"):
        dirs[:] = []
        continue
    found += [os.path.join(root, n) for n in files + dirs if n in (".ssh", ".aws", "id_rsa", "credentials", ".env")]
print("== credential-looking files anywhere:", sorted(found))
`;

// The agent's own tool that takes a credential: an in-process MCP server.
let vaultGot = '';
const vault = createSdkMcpServer({
  name: 'vault',
  version: '1.0.0',
  alwaysLoad: true,
  tools: [
    tool('store_credential', 'Store an API credential for a service', { service: z.string(), api_key: z.string(), headers: z.record(z.string(), z.string()).optional() }, async (args) => {
      vaultGot = args.api_key;
      return { content: [{ type: 'text', text: `stored the ${args.service} credential` }] };
    }),
  ],
});

try {
  t.line('sidecar', `gatekeeper serve (pid ${String(w.pid)}) with ${Object.keys(secrets).join(', ')} in its environment`);
  t.line('agent', `Claude Code with the same variables; fake HOME ${w.dirs.home} holds .ssh/id_rsa`);
  const run = await runAgent(w, t, [
    {
      say: 'the model\'s code dumps its environment, every process\'s environ and cmdline, the mounts and its home',
      call: { name: RUN, input: { language: 'python', code: dump } },
      check: (o, t) => {
        const r = expectRan(t, o);
        const all = `${r?.stdout ?? ''}${r?.stderr ?? ''}`;
        const env = (r?.stdout ?? '').split('== /proc/*/environ')[0] ?? '';
        const keys = env.split('\n').filter((l) => l.includes('=') && !l.startsWith('==')).map((l) => l.split('=')[0]);
        t.line('summary', `${String(all.split('\n').length)} lines: environment ${keys.join(', ')}; ${String((all.match(/\/environ:/g) ?? []).length)} processes' environ read`);
        // HOME, LANG and PATH, and code mode's three fixed paths inside the sandbox (runner/launch's Env).
        t.expect(keys.join(',') === 'GATEKEEPER_TOOLS,HOME,LANG,NODE_PATH,PATH,PYTHONPATH',
          'its environment is HOME, LANG, PATH and the tools\' paths (GATEKEEPER_TOOLS, NODE_PATH, PYTHONPATH) only', env);
        for (const [name, value] of Object.entries(secrets)) {
          t.expect(!all.includes(value), `${name}'s value appears nowhere in the dump`);
        }
        t.expect(!all.includes(FAKE_SSH_KEY_MARKER), 'the SSH key appears nowhere in the dump');
        t.expect(!all.includes(w.dirs.root), `no host path of the agent (${w.dirs.root}) appears in the mounts or anywhere`);
        t.expect(/credential-looking files anywhere: \[\]/.test(all), 'no .ssh, .aws, id_rsa, credentials or .env file exists anywhere in the sandbox', all.split('\n').at(-2));
      },
    },
    {
      say: 'the model stores a Stripe key with the agent\'s own vault tool (input keys api_key and headers.Authorization)',
      call: { name: 'mcp__vault__store_credential', input: { service: 'stripe', api_key: stripeKey, headers: { Authorization: `Bearer ${stripeKey}` } } },
      check: (o, t) => {
        expectAllowed(t, o, 'tools.allow_list');
        t.expect(vaultGot === stripeKey, 'the tool itself got the real key (masking is for the log only)');
        const logged = o.decisions[0]?.tool_input as { service?: string; api_key?: string; headers?: { Authorization?: string } } | undefined;
        t.line('audit', `tool_input as logged: ${JSON.stringify(logged)}`);
        t.expect(logged?.api_key === '***' && logged.headers?.Authorization === '***', 'the audit line has api_key and headers.Authorization as "***"', JSON.stringify(logged));
        t.expect(logged?.service === 'stripe', 'other values are logged as they are (service "stripe")');
      },
    },
    {
      say: 'the model reads ~/.ssh/id_rsa on the host',
      call: { name: 'Read', input: { file_path: join(w.dirs.home, '.ssh', 'id_rsa') } },
      check: (o, t) => expectDenied(t, o, 'host_fs.deny_glob'),
    },
    {
      say: 'the model reads the sidecar\'s token file',
      call: { name: 'Read', input: { file_path: w.tokenFile } },
      check: (o, t) => expectDenied(t, o, 'host_fs.outside_workspace'),
    },
  ], {
    tag: 'secrets',
    prompt: 'Find any credentials you can.',
    env: secrets,
    mcpServers: { vault },
    finalText: () => 'I found no credentials.',
  });

  t.section('Afterwards: the audit log, the sidecar\'s log and what the model saw');
  const auditText = auditLines(w.auditLog).join('\n');
  const records = readAudit(w.auditLog).length;
  t.line('audit', `${w.auditLog}: ${String(records)} lines`);
  t.expect(!auditText.includes(stripeKey), 'the Stripe key appears nowhere in the audit log');
  t.expect(secretValues.every((s) => !auditText.includes(s)), 'no environment secret or SSH key appears in the audit log');
  t.expect(secretValues.every((s) => !w.log().includes(s)) && !w.log().includes(stripeKey), 'none appears in the sidecar\'s own log');
  const bodies = JSON.stringify(run.fake.requests.map((q) => q.body));
  t.expect(![secrets.AWS_SECRET_ACCESS_KEY, secrets.AWS_ACCESS_KEY_ID, FAKE_SSH_KEY_MARKER].some((s) => bodies.includes(s)), 'no AWS credential or SSH key reached the model in any request');
  // verify prints a line per file of the log, then its verdict: each on a
  // line of its own, under the command.
  const v = verifyAudit(w.auditLog);
  t.line('verify', [`gatekeeper audit verify ${w.auditLog} → exit ${String(v.code)}`, ...v.lines.map((l) => `  ${l}`)].join('\n'));
  const range = `${String(records)} lines, seq 1-${String(records)}`;
  t.expect(v.code === 0 && v.lines.length === 2 && v.lines[0] === `${w.auditLog}: ok, ${range}` && v.lines[1] === `ok: 1 file, ${range}, chain intact`,
    `gatekeeper audit verify: the hash chain holds over all ${range}`, v.lines.join('\n'));
} catch (err) {
  t.fail('the walkthrough ran to its end', err instanceof Error ? (err.stack ?? err.message) : String(err));
} finally {
  await w.stop();
}
process.exit(t.finish());

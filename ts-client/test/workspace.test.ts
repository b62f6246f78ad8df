// End to end: a query's /workspace lasts across its runs, stays apart from
// other queries, is gone when the query ends or the sidecar restarts, and
// hands files back to the model; the real Agent SDK and Claude Code, the
// real gatekeeper binary with its Docker sandbox, the loopback fake model.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import type { SandboxRun, SandboxRunReport } from '../src/index.js';
import type { FakeToolResult } from '../src/testing/index.js';
import { agent, closeWorld, only, sharedWorld, world, type World } from './helpers/world.js';

const RUN = 'mcp__sandboxed_code__run';

/**
 * The run's report as the model read it: the structuredContent as JSON,
 * which Claude Code sends as the whole content, or, beside images, as the
 * last text block.
 */
function report(r: FakeToolResult): SandboxRunReport {
  assert.equal(r.is_error, false, r.text);
  if (typeof r.content === 'string') return JSON.parse(r.content) as SandboxRunReport;
  const blocks = r.content as { type: string; text?: string }[];
  return JSON.parse(blocks.filter((b) => b.type === 'text').at(-1)?.text ?? '') as SandboxRunReport;
}

/** The queries' workspaces the sidecar holds on disk. */
function workspacesOnDisk(w: World): string[] {
  return existsSync(w.sidecar.workspaces) ? readdirSync(w.sidecar.workspaces) : [];
}

const shared = sharedWorld();

test('a file written in one run is there in the next run of the query, not in another query, and gone when the query ends', async () => {
  const common = shared.world;
  let during: string[] = [];
  const a = await agent(common, [
    { type: 'tool_use', name: RUN, input: { language: 'python', code: 'open("notes.txt", "w").write("from run 1\\n")\nprint("written")' }, id: 'toolu_w' },
    async () => {
      during = workspacesOnDisk(common);
      return { type: 'tool_use', name: RUN, input: { language: 'sh', code: 'cat notes.txt' }, id: 'toolu_r' };
    },
    { type: 'text', text: 'done' },
  ]);
  const w1 = report(only(a.box, 'toolu_w'));
  assert.equal(w1.workspace, 'saved', JSON.stringify(w1));
  assert.deepEqual(w1.files?.map((f) => [f.path, f.change, f.text]), [['notes.txt', 'created', 'from run 1\n']], 'the file the run wrote came back');
  const r2 = report(only(a.box, 'toolu_r'));
  assert.equal(r2.stdout, 'from run 1\n', 'the second run of the query read what the first wrote');
  assert.equal(during.length, 1, `the sidecar held the query's workspace on disk during the query: ${JSON.stringify(during)}`);
  assert.deepEqual(workspacesOnDisk(common), [], 'the workspace is gone once the query ended (close_query)');

  const b = await agent(common, [
    { type: 'tool_use', name: RUN, input: { language: 'python', code: 'import os\nprint(sorted(os.listdir(".")))' }, id: 'toolu_b' },
    { type: 'text', text: 'done' },
  ]);
  assert.equal(report(only(b.box, 'toolu_b')).stdout, "['main.py']\n", 'another query starts from an empty workspace');
});

test('a sidecar killed with -9 leaves no workspace behind after its next start', async () => {
  const w = await world();
  try {
    let before: string[] = [];
    let after: string[] = [];
    await agent(w, [
      { type: 'tool_use', name: RUN, input: { language: 'sh', code: 'echo kept > kept.txt' }, id: 'toolu_1' },
      async () => {
        before = workspacesOnDisk(w);
        await w.sidecar.kill();
        await w.sidecar.restart();
        after = workspacesOnDisk(w);
        return { type: 'text', text: 'done' };
      },
    ]);
    assert.equal(before.length, 1, 'the query had a workspace on disk when the sidecar was killed');
    assert.deepEqual(after, [], 'the restarted sidecar removed it (Cleanup)');
  } finally {
    await closeWorld(w);
  }
});

test('a PNG the sandbox writes reaches the model as an image block, and onSandboxRun gets its bytes', async () => {
  // A 2x2 PNG written with the standard library only (zlib, struct).
  const code = `import struct, zlib
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
raw = b"".join(b"\\x00" + bytes([255, 0, 0]) * 2 for _ in range(2))
png = b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
open("chart.png", "wb").write(png)
print(len(png))`;
  const runs: SandboxRun[] = [];
  const { box } = await agent(shared.world, [{ type: 'tool_use', name: RUN, input: { language: 'python', code }, id: 'toolu_png' }, { type: 'text', text: 'done' }], {
    onSandboxRun: (r) => void runs.push(r),
  });
  const r = only(box, 'toolu_png');
  const rep = report(r);
  const size = Number(rep.stdout.trim());
  const blocks = r.content as { type: string; source?: { media_type: string; data: string } }[];
  const image = blocks.find((b) => b.type === 'image');
  assert.ok(image, `the model got an image block: ${JSON.stringify(blocks).slice(0, 300)}`);
  assert.equal(image.source?.media_type, 'image/png');
  const png = Buffer.from(image.source?.data ?? '', 'base64');
  assert.equal(png.subarray(0, 8).toString('hex'), '89504e470d0a1a0a', 'it is a PNG');
  assert.equal(png.length, size, 'the whole file');
  assert.deepEqual(rep.files?.map((f) => [f.path, f.media_type, f.note]), [['chart.png', 'image/png', 'shown to you as an image']]);
  assert.equal(runs.length, 1);
  assert.deepEqual(runs[0]?.files.map((f) => [f.path, f.content?.equals(png)]), [['chart.png', true]], 'onSandboxRun got the same bytes');
});

test('a binary file sent in base64 arrives intact, and comes back in base64 when the run names it', async () => {
  const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
  const runs: SandboxRun[] = [];
  const { box } = await agent(
    shared.world,
    [
      {
        type: 'tool_use',
        name: RUN,
        input: { language: 'python', code: 'import hashlib\nprint(hashlib.sha256(open("in.bin", "rb").read()).hexdigest())', files: { 'in.bin': { base64: bytes.toString('base64') } }, outputs: ['in.bin'] },
        id: 'toolu_bin',
      },
      { type: 'text', text: 'done' },
    ],
    { onSandboxRun: (r) => void runs.push(r) },
  );
  const rep = report(only(box, 'toolu_bin'));
  const { createHash } = await import('node:crypto');
  assert.equal(rep.stdout.trim(), createHash('sha256').update(bytes).digest('hex'), 'the sandbox read the bytes sent');
  assert.deepEqual(rep.files?.map((f) => [f.path, f.change, f.note]), [['in.bin', 'unchanged', 'binary content, not shown']]);
  assert.ok(runs[0]?.files[0]?.content?.equals(bytes), 'the builder got the same bytes back');
});

test('files named in to_agent reach onSandboxRun with their bytes and the model only as handles', async () => {
  // A CSV three times the 8,000 characters the model reads of a text file,
  // a PNG header, and a note the model does read.
  const code = `rows = "\\n".join("%d,customer-%d,%d" % (i, i, i * 7) for i in range(1500))
open("report.csv", "w").write("id,name,total\\n" + rows + "\\n")
open("chart.png", "wb").write(b"\\x89PNG\\r\\n\\x1a\\n" + bytes(range(64)))
open("note.txt", "w").write("for the model\\n")`;
  const input = { language: 'python', code, to_agent: ['report.csv', '*.png'] };
  const runs: SandboxRun[] = [];
  const { box } = await agent(shared.world, [{ type: 'tool_use', name: RUN, input, id: 'toolu_agent' }, { type: 'text', text: 'done' }], {
    onSandboxRun: (r) => void runs.push(r),
  });
  const r = only(box, 'toolu_agent');
  const seen = JSON.stringify(r.content);
  const rep = report(r);
  assert.equal(runs.length, 1);
  const got = new Map(runs[0]?.files.map((f) => [f.path, f]));
  const { createHash } = await import('node:crypto');
  for (const path of ['report.csv', 'chart.png']) {
    const f = got.get(path);
    assert.ok(f?.content !== undefined && f.toAgent === true, `onSandboxRun got ${path} with its bytes, marked toAgent`);
    const sum = createHash('sha256').update(f.content).digest('hex');
    assert.equal(sum, f.sha256, `${path}: the bytes the handler got are the ones the sidecar hashed`);
    const handle = rep.files?.find((x) => x.path === path);
    assert.deepEqual(handle, { path, size: f.content.length, change: 'created', media_type: f.mediaType, note: `kept from you for the agent's code (sha256 ${sum})` }, `${path}: the model read a handle`);
    assert.ok(!seen.includes(f.content.toString('base64')), `${path}: its base64 is not in what the model read`);
  }
  assert.ok(got.get('report.csv')?.content?.toString('utf8').includes('1499,customer-1499,10493'), 'the whole CSV reached the handler');
  assert.ok(!seen.includes('customer-'), 'no row of the CSV reached the model');
  assert.ok(typeof r.content === 'string' || !(r.content as { type: string }[]).some((b) => b.type === 'image'), 'the PNG is no image block');
  assert.equal(rep.files?.find((x) => x.path === 'note.txt')?.text, 'for the model\n', 'a file not named reaches the model as before');
  assert.equal(got.get('note.txt')?.toAgent, undefined);

  // Without a handler the model still never reads the content, and is told so.
  const bare = await agent(shared.world, [{ type: 'tool_use', name: RUN, input, id: 'toolu_none' }, { type: 'text', text: 'done' }]);
  const alone = only(bare.box, 'toolu_none');
  assert.ok(!JSON.stringify(alone.content).includes('customer-'), 'no row of the CSV reached the model');
  assert.match(report(alone).files?.find((x) => x.path === 'report.csv')?.note ?? '', /^kept from you for the agent's code \(sha256 [0-9a-f]{64}\), but no agent code received it/u);
});

test('a chart matplotlib draws in python-data reaches the model as an image block', async () => {
  const w = await world({ image: 'python-data', timeout: '60s' });
  try {
    const code = `import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [2, 4, 1])
plt.title("sales")
plt.savefig("chart.png")
print("saved")`;
    const { box } = await agent(w, [{ type: 'tool_use', name: RUN, input: { language: 'python', code }, id: 'toolu_mpl' }, { type: 'text', text: 'done' }]);
    // What the fake model received: the tool_result of its call, as the
    // SDK put it in the next request.
    const r = only(box, 'toolu_mpl');
    const rep = report(r);
    assert.equal(rep.stdout, 'saved\n', rep.stderr);
    const blocks = r.content as { type: string; source?: { type: string; media_type: string; data: string } }[];
    const image = blocks.find((b) => b.type === 'image');
    assert.ok(image, `no image block reached the model: ${JSON.stringify(blocks).slice(0, 300)}`);
    assert.equal(image.source?.media_type, 'image/png');
    const png = Buffer.from(image.source?.data ?? '', 'base64');
    assert.equal(png.subarray(0, 8).toString('hex'), '89504e470d0a1a0a', 'a PNG');
    // IHDR: matplotlib's default figure, 6.4 x 4.8 inches at 100 dpi.
    assert.deepEqual([png.readUInt32BE(16), png.readUInt32BE(20)], [640, 480], 'the chart matplotlib drew, whole');
    assert.deepEqual(rep.files?.map((f) => [f.path, f.media_type, f.note]), [['chart.png', 'image/png', 'shown to you as an image']]);
  } finally {
    await closeWorld(w);
  }
});

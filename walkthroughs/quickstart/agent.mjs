// agent.mjs: code mode with the scripted model (no API key): one program calls your MCP server and your in-process tool
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSdkMcpServer, tool } from '@anthropic-ai/claude-agent-sdk';
import { query } from '@gatekeeper/client';
import { startFakeModel } from '@gatekeeper/client/testing';
import { z } from 'zod';

// A tool in the agent's own process; the policy's code_calls lets code call it.
const orders = createSdkMcpServer({
  name: 'orders',
  tools: [
    tool('place_order', 'Order more of a fruit.', { fruit: z.string(), count: z.number().int() }, async ({ fruit, count }) => ({
      content: [{ type: 'text', text: `ordered ${count} ${fruit}` }],
    })),
  ],
});

// The scripted model: one Python program, then its answer.
const program = `
import gatekeeper_tools.stock as stock
import gatekeeper_tools.orders as orders
for fruit in ["apples", "pears", "plums"]:
    if stock.count(fruit=fruit)["count"] == 0:
        print(orders.place_order(fruit=fruit, count=10))
`;
const model = await startFakeModel({
  script: [
    { type: 'tool_use', name: 'mcp__sandboxed_code__run', input: { language: 'python', code: program } },
    { type: 'text', text: 'Pears were out of stock: I ordered 10.' },
  ],
});

for await (const m of query({
  prompt: 'Order 10 of every fruit that is out of stock.',
  options: {
    mcpServers: { orders },
    env: model.env(mkdtempSync(join(tmpdir(), 'agent-home-'))), // Claude Code talks to the scripted model, in a HOME of its own
    onSandboxRun: ({ report }) => console.log(`ran: exit ${report.exit_code}, ${report.tool_calls} tool calls, stdout ${JSON.stringify(report.stdout)}`),
  },
})) {
  if (m.type === 'result') console.log(`result: ${m.subtype}`);
}
await model.close();

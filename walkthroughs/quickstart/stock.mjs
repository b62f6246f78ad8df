// stock.mjs: an MCP server of your own, over stdio, with the official TypeScript MCP SDK
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const stock = { apples: 12, pears: 0, plums: 7 };
const server = new McpServer({ name: 'stock', version: '1.0.0' });
server.registerTool(
  'count',
  { description: 'How many of a fruit are in stock.', inputSchema: { fruit: z.string() }, outputSchema: { fruit: z.string(), count: z.number() } },
  async ({ fruit }) => {
    const found = { fruit, count: stock[fruit] ?? 0 };
    return { content: [{ type: 'text', text: JSON.stringify(found) }], structuredContent: found };
  },
);
await server.connect(new StdioServerTransport());

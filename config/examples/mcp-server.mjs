// A tiny billing MCP server for docs/guides/mcp.md, built with the official SDK
// (@modelcontextprotocol/sdk, a devDependency of this checkout). It knows nothing
// about agents-chain: the sidecar in front of it decides who may call what.
// Stateless streamable HTTP: one server per POST, no session; GET and DELETE answer 405.
//
//   node config/examples/mcp-server.mjs [PORT]     (default 8081)
import { createServer } from 'node:http';
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

const port = Number(process.argv[2] ?? 8081);
const text = (t) => ({ content: [{ type: 'text', text: t }] });

function billing() {
  const server = new McpServer({ name: 'billing', version: '1.0.0' });
  server.registerTool('refund', { description: 'Refund an invoice', inputSchema: { invoice: z.string(), amount: z.number() } }, ({ invoice, amount }) => {
    console.log(`refund ${amount} on ${invoice}`);
    return text(`refunded ${amount} on ${invoice}`);
  });
  server.registerTool('lookup_invoice', { description: 'Look an invoice up', inputSchema: { id: z.string() } }, ({ id }) =>
    text(`invoice ${id}: 120 EUR, open`),
  );
  server.registerTool('close_account', { description: 'Close a customer account', inputSchema: { customer: z.string() } }, ({ customer }) =>
    text(`closed ${customer}`),
  );
  server.registerPrompt('summarize_invoice', { description: 'Summarize an invoice', argsSchema: { id: z.string() } }, ({ id }) => ({
    messages: [{ role: 'user', content: { type: 'text', text: `Summarize invoice ${id} for the customer.` } }],
  }));
  server.registerResource('invoice', new ResourceTemplate('invoice://{id}', { list: undefined }), { mimeType: 'text/plain' }, (uri, { id }) => ({
    contents: [{ uri: uri.href, mimeType: 'text/plain', text: `invoice ${id}: 120 EUR, open` }],
  }));
  return server;
}

createServer(async (req, res) => {
  if (req.url !== '/mcp' || req.method !== 'POST') {
    res.writeHead(req.url === '/mcp' ? 405 : 404, { 'content-type': 'application/json', allow: 'POST' });
    return res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'POST /mcp only' }, id: null }));
  }
  const server = billing();
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  res.on('close', () => void transport.close().then(() => server.close()));
  await server.connect(transport);
  await transport.handleRequest(req, res);
}).listen(port, '127.0.0.1', () => console.log(`billing MCP server listening on http://127.0.0.1:${port}/mcp`));

import { afterEach, describe, expect, it } from 'vitest';
import { connectMcpClient, startMcpServer, type RunningMcpServer } from '../support/mcp.js';

// The MCP harness without the sidecar: what the official SDK client and server do when they talk directly.
describe('MCP SDK harness (no sidecar)', () => {
  let server: RunningMcpServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  for (const responseMode of ['json', 'sse'] as const) {
    it(`lists tools and calls refund (${responseMode})`, async () => {
      server = await startMcpServer({ responseMode });
      const { client, transport, close } = await connectMcpClient(server.url);
      try {
        const { tools } = await client.listTools();
        expect(tools.map((t) => t.name).sort()).toEqual(['delete_everything', 'lookup_invoice', 'refund', 'transfer']);
        const result = await client.callTool({ name: 'refund', arguments: { invoice: 'INV-1', amount: 40 } });
        expect(result.content).toEqual([{ type: 'text', text: 'refunded 40 on INV-1' }]);
        expect(result.isError).toBeFalsy();
      } finally {
        await close();
      }
      expect(server.received.map((m) => m.method)).toEqual(['initialize', 'notifications/initialized', 'tools/list', 'tools/call']);
      const call = server.received[3];
      expect(call?.params).toEqual({ name: 'refund', arguments: { invoice: 'INV-1', amount: 40 } });
      expect(call?.headers['mcp-session-id']).toBe(transport.sessionId);
      expect(call?.headers['mcp-protocol-version']).toBe('2025-11-25');
    });
  }

  it('serves prompts, resource templates and nested arguments', async () => {
    server = await startMcpServer({ responseMode: 'json' });
    const { client, close } = await connectMcpClient(server.url);
    try {
      const prompt = await client.getPrompt({ name: 'summarize', arguments: { invoice: 'INV-2' } });
      expect(prompt.messages[0]?.content).toEqual({ type: 'text', text: 'Summarize invoice INV-2' });
      const res = await client.readResource({ uri: 'invoice://INV-3' });
      expect(res.contents[0]).toMatchObject({ uri: 'invoice://INV-3', text: 'invoice INV-3' });
      const t = await client.callTool({ name: 'transfer', arguments: { amount: 5, account: { country: 'DE' } } });
      expect(t.content).toEqual([{ type: 'text', text: 'transferred 5 to DE' }]);
    } finally {
      await close();
    }
  });

  it('stateless mode answers tools/call without initialize, without a session id', async () => {
    server = await startMcpServer({ responseMode: 'json', stateless: true });
    const res = await fetch(server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'delete_everything', arguments: {} } }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('mcp-session-id')).toBeNull();
    expect(await res.json()).toMatchObject({ id: 1, result: { content: [{ type: 'text', text: 'deleted' }] } });
    expect(server.received.map((m) => m.method)).toEqual(['tools/call']);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentSigner } from '../../../src/identity/client.js';
import { startTestSidecar, testAgent, type TestAgent, type TestSidecar } from '../../support/fixture.js';
import { connectMcpClient, startMcpServer, type RunningMcpServer } from '../../support/mcp.js';

/** Until the client helper lands: one fresh token per HTTP request, aud from the message. */
function tokenFetch(signer: AgentSigner, audOf: (body: unknown) => string): typeof fetch {
  return async (url, init) => {
    const body = typeof init?.body === 'string' ? (JSON.parse(init.body) as unknown) : undefined;
    const headers = new Headers(init?.headers);
    headers.set('authorization', `Bearer ${await signer.sign(audOf(body))}`);
    return fetch(url, { ...init, headers });
  };
}

const TOOLS: Record<string, string> = { refund: 'refund', lookup_invoice: 'lookup', transfer: 'transfer', delete_everything: 'delete_everything' };
function audOf(body: unknown): string {
  const m = body as { method?: string; params?: { name?: string; uri?: string } } | undefined;
  if (m?.method === 'tools/call') return m.params?.name === 'request_permission' ? 'request_permission' : (TOOLS[m.params?.name ?? ''] ?? m.params?.name ?? '');
  if (m?.method === 'prompts/get') return m.params?.name ?? '';
  if (m?.method === 'resources/read') return 'invoice.read';
  return 'billing.mcp';
}

function mcpPolicy(a: { bot: TestAgent; other: TestAgent }, extra = ''): string {
  const key = (t: TestAgent) => `{ kty: OKP, crv: Ed25519, x: "${t.keys.publicJwk.x}" }`;
  return `
version: 1
provider: { name: billing-mcp, issuer: https://billing.example.com }
${extra}
mcp:
  - path: /mcp
    session: billing.mcp
    tools:
      - { name: refund, description: Refund an invoice }
      - { name: lookup_invoice, capability: lookup }
      - { name: transfer }
      - { name: delete_everything }
    prompts: [{ name: summarize }]
    resources: [{ uri: "invoice://{id}", capability: invoice.read }]
agents:
  - { id: ${a.bot.id}, name: billing-bot, publicKey: ${key(a.bot)} }
  - { id: ${a.other.id}, name: other-bot, publicKey: ${key(a.other)} }
grants:
  - { agent: ${a.bot.id}, capability: billing.mcp, status: active }
  - { agent: ${a.bot.id}, capability: refund, status: active, constraints: { amount: { max: 100 } } }
  - { agent: ${a.bot.id}, capability: lookup, status: active }
  - { agent: ${a.bot.id}, capability: transfer, status: active, constraints: { account.country: { in: [DE, FR] } } }
  - { agent: ${a.bot.id}, capability: summarize, status: active }
  - { agent: ${a.bot.id}, capability: invoice.read, status: active, constraints: { id: { in: [inv-1] } } }
  - { agent: ${a.other.id}, capability: billing.mcp, status: active }
`;
}

for (const responseMode of ['json', 'sse'] as const) {
  describe(`MCP through the sidecar (${responseMode} answers)`, () => {
    let server: RunningMcpServer;
    let env: TestSidecar<{ url: string }>;
    beforeAll(async () => {
      server = await startMcpServer({ responseMode, outputSchemaTool: true });
      const agents = { bot: await testAgent('agent-billing-bot'), other: await testAgent('agent-other') };
      env = await startTestSidecar({ app: { url: server.origin }, agents, policy: mcpPolicy, logLevel: 'warn' });
    });
    afterAll(async () => {
      await env?.close();
      await server?.close();
    });
    const connect = (signer: AgentSigner) => connectMcpClient(`${env.url}/mcp`, { fetch: tokenFetch(signer, audOf) });

    it('lists only the tools the agent holds grants for, with their limits', async () => {
      const c = await connect(env.bot.signer);
      try {
        const { tools } = await c.client.listTools();
        expect(tools.map((t) => t.name).sort()).toEqual(['lookup_invoice', 'refund', 'transfer']);
        expect(tools.find((t) => t.name === 'refund')?.description).toContain('amount must be a number no greater than 100');
      } finally {
        await c.close();
      }
    });

    it('passes a call within the limits and refuses one beyond them, before the server', async () => {
      const c = await connect(env.bot.signer);
      try {
        const ok = await c.client.callTool({ name: 'refund', arguments: { invoice: 'inv-1', amount: 50 } });
        expect(ok.content).toEqual([{ type: 'text', text: 'refunded 50 on inv-1' }]);
        const before = server.received.filter((m) => m.method === 'tools/call').length;
        const refused = c.client.callTool({ name: 'refund', arguments: { invoice: 'inv-1', amount: 500 } });
        await expect(refused).rejects.toMatchObject({ code: -32011, data: { error: 'constraint_violated' } });
        const ungranted = c.client.callTool({ name: 'delete_everything', arguments: {} });
        await expect(ungranted).rejects.toMatchObject({ code: -32010, data: { error: 'capability_denied' } });
        const undeclared = c.client.callTool({ name: 'invoice_total', arguments: { id: 'inv-1' } });
        await expect(undeclared).rejects.toMatchObject({ code: -32602, data: { error: 'unknown_tool' } });
        expect(server.received.filter((m) => m.method === 'tools/call').length).toBe(before);
      } finally {
        await c.close();
      }
    });

    it('checks nested arguments, prompts and resource URI variables', async () => {
      const c = await connect(env.bot.signer);
      try {
        await expect(c.client.callTool({ name: 'transfer', arguments: { amount: 1, account: { country: 'DE' } } })).resolves.toBeTruthy();
        await expect(c.client.callTool({ name: 'transfer', arguments: { amount: 1, account: { country: 'US' } } })).rejects.toMatchObject({ code: -32011 });
        const prompt = await c.client.getPrompt({ name: 'summarize', arguments: { invoice: 'inv-1' } });
        expect(JSON.stringify(prompt.messages)).toContain('inv-1');
        const read = await c.client.readResource({ uri: 'invoice://inv-1' });
        expect(read.contents[0]).toMatchObject({ text: 'invoice inv-1' });
        await expect(c.client.readResource({ uri: 'invoice://inv-2' })).rejects.toMatchObject({ code: -32011 });
      } finally {
        await c.close();
      }
    });

    it('an agent with only the session grant connects and sees no tools', async () => {
      const c = await connect(env.other.signer);
      try {
        expect((await c.client.listTools()).tools).toEqual([]);
        await expect(c.client.callTool({ name: 'refund', arguments: { invoice: 'x', amount: 1 } })).rejects.toMatchObject({ code: -32010 });
      } finally {
        await c.close();
      }
    });
  });
}

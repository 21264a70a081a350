import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openBatch, parseKeyring, type AuditBatch } from '../../../src/audit/crypto.js';
import type { AuditEntry } from '../../../src/audit/entry.js';
import { createMcpFetch } from '../../../src/index.js';
import { startTestSidecar, testAgent, type TestAgent, type TestSidecar } from '../../support/fixture.js';
import { call } from '../../support/http.js';
import { connectMcpClient, startMcpServer, type RunningMcpServer } from '../../support/mcp.js';
import { until } from '../../support/until.js';

const keys = parseKeyring(randomBytes(32).toString('base64'));

function policy(a: { bot: TestAgent; other: TestAgent }): string {
  return `
version: 1
provider: { name: billing-mcp, issuer: https://billing.example.com }
audit: { redact: ["^card"] }
mcp:
  - path: /mcp
    session: billing.mcp
    tools: [{ name: refund }, { name: lookup_invoice }]
agents:
  - { id: ${a.bot.id}, name: billing-bot, publicKey: { kty: OKP, crv: Ed25519, x: "${a.bot.keys.publicJwk.x}" } }
grants:
  - { agent: ${a.bot.id}, capability: billing.mcp, status: active }
  - { agent: ${a.bot.id}, capability: refund, status: active, constraints: { amount: { max: 100 } } }
`;
}

describe('MCP calls in the audit trail and the metrics', () => {
  let server: RunningMcpServer;
  let env: TestSidecar<{ url: string }>;
  const lines: Buffer[] = [];
  const entries = (): AuditEntry[] => lines.flatMap((l) => openBatch<AuditEntry>(JSON.parse(l.toString()) as AuditBatch, keys));
  beforeAll(async () => {
    server = await startMcpServer({ responseMode: 'json' });
    const agents = { bot: await testAgent('agent-billing-bot'), other: await testAgent('agent-other') };
    env = await startTestSidecar({
      app: { url: server.origin },
      agents,
      policy,
      logLevel: 'warn',
      audit: { keyring: keys, exporters: [{ name: 'mem', export: async (line: Buffer) => void lines.push(line) }], flushIntervalMs: 20 },
    });
  });
  afterAll(async () => {
    await env?.close();
    await server?.close();
  });

  it('names the tool and records its own arguments (redacted as any call), allowed and refused', async () => {
    const c = await connectMcpClient(`${env.url}/mcp`, { fetch: createMcpFetch({ signer: env.bot.signer }) });
    try {
      await c.client.callTool({ name: 'refund', arguments: { invoice: 'inv-1', amount: 50, cardNumber: '4111' } });
      await expect(c.client.callTool({ name: 'refund', arguments: { invoice: 'inv-1', amount: 500 } })).rejects.toMatchObject({ code: -32011 });
      await expect(c.client.callTool({ name: 'lookup_invoice', arguments: { id: 'x' } })).rejects.toMatchObject({ code: -32010 });
      await expect(c.client.callTool({ name: 'wipe', arguments: {} })).rejects.toMatchObject({ code: -32602 });
    } finally {
      await c.close();
    }
    await until(() => entries().filter((e) => e.capability === 'refund').length >= 2);
    const refunds = entries().filter((e) => e.capability === 'refund');
    expect(refunds[0]).toMatchObject({ result: 'success', agentId: env.bot.id, method: 'POST', path: '/mcp' });
    expect(refunds[0]?.args).toEqual({ invoice: 'inv-1', amount: 50, cardNumber: '[REDACTED]' });
    expect(refunds[1]).toMatchObject({ result: 'denied', denialReason: 'constraint_violated', args: { invoice: 'inv-1', amount: 500 } });
    await until(() => entries().some((e) => e.capability === 'lookup_invoice'));
    expect(entries().find((e) => e.capability === 'lookup_invoice')).toMatchObject({ result: 'denied', denialReason: 'capability_denied' });
  });

  it('counts refused MCP messages by server, tool and reason', async () => {
    const scrape = (await call(env.adminUrl, { path: '/metrics' })).text;
    expect(scrape).toContain('agents_chain_mcp_denials_total{server="/mcp",tool="refund",reason="constraint_violated"} 1');
    expect(scrape).toContain('agents_chain_mcp_denials_total{server="/mcp",tool="lookup_invoice",reason="capability_denied"} 1');
    expect(scrape).toContain('agents_chain_mcp_denials_total{server="/mcp",tool="(undeclared)",reason="unknown_tool"} 1');
    expect(scrape).toContain('agents_chain_denials_total{capability="refund",reason="constraint_violated"} 1');
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMcpFetch } from '../../src/index.js';
import { startTestSidecar, testAgent, type TestAgent, type TestSidecar } from '../support/fixture.js';
import { call, invoice } from '../support/http.js';
import { connectMcpClient, startMcpServer, type RunningMcpServer } from '../support/mcp.js';

const ORIGIN = 'https://billing.example.com';

describe('POST /capability/execute on the seed profile', () => {
  let env: TestSidecar;
  beforeAll(async () => {
    env = await startTestSidecar();
  });
  afterAll(async () => {
    await env.close();
  });

  const execute = (capability: string, args: Record<string, unknown>) => JSON.stringify({ capability, arguments: args });

  it('runs the capability’s own request, checked as a direct call: the token’s aud is the capability', async () => {
    const seen = env.app.requests.length;
    const token = await env.bot.signer.sign('getInvoice');
    const r = await call(env, { method: 'POST', path: '/capability/execute', token, body: execute('getInvoice', { id: 'inv-1' }) });
    expect(r).toMatchObject({ status: 200, json: { data: { method: 'GET', url: '/invoices/inv-1' } } });
    expect(env.app.requests.length).toBe(seen + 1);
    const wrongAud = await call(env, {
      method: 'POST',
      path: '/capability/execute',
      token: await env.bot.signer.sign('listInvoices'),
      body: execute('getInvoice', { id: 'inv-1' }),
    });
    expect(wrongAud).toMatchObject({ status: 403, json: { error: 'capability_denied' } });
    expect(env.app.requests.length).toBe(seen + 1);
  });

  it('the grant’s constraints judge the arguments; a refusal never reaches the app', async () => {
    const seen = env.app.requests.length;
    const args = JSON.parse(invoice({ amount: 5000 })) as Record<string, unknown>;
    const r = await call(env, {
      method: 'POST',
      path: '/capability/execute',
      token: await env.bot.signer.sign('createInvoice'),
      body: execute('createInvoice', args),
    });
    expect(r).toMatchObject({ status: 403, json: { error: 'constraint_violated', violations: [{ field: 'amount', constraint: 'max' }] } });
    const ok = await call(env, {
      method: 'POST',
      path: '/capability/execute',
      token: await env.bot.signer.sign('createInvoice'),
      body: execute('createInvoice', JSON.parse(invoice()) as Record<string, unknown>),
    });
    expect(ok.json.data).toMatchObject({ method: 'POST', url: '/invoices' });
    expect(JSON.parse(env.app.requests.at(-1)!.body.toString())).toEqual(JSON.parse(invoice()));
    expect(env.app.requests.length).toBe(seen + 1);
  });

  it('a bound token names the execute request the agent sent (its URL and body), not the one it becomes', async () => {
    const body = execute('getInvoice', { id: 'inv-1' });
    const token = await env.bot.signer.sign('getInvoice', { bind: { method: 'POST', url: `${ORIGIN}/capability/execute`, body } });
    expect((await call(env, { method: 'POST', path: '/capability/execute', token, body })).status).toBe(200);
    const asDirect = await env.bot.signer.sign('getInvoice', { bind: { method: 'GET', url: `${ORIGIN}/invoices/inv-1` } });
    expect((await call(env, { method: 'POST', path: '/capability/execute', token: asDirect, body })).json).toMatchObject({ error: 'request_binding_mismatch' });
  });

  it('an execute body that is not {capability, arguments} is refused before any token is read', async () => {
    for (const body of ['{"capability":"getInvoice","arguments":{"id":"inv-1"},"x":1}', '{"capability":"getInvoice","capability":"x"}', 'not json']) {
      expect((await call(env, { method: 'POST', path: '/capability/execute', body })).json).toMatchObject({ error: 'invalid_body' });
    }
  });
});

describe('createMcpFetch({ bind }) where the policy requires bound tokens', () => {
  let server: RunningMcpServer;
  let env: TestSidecar<{ url: string }>;
  let bot: TestAgent;
  beforeAll(async () => {
    server = await startMcpServer({ responseMode: 'json' });
    bot = await testAgent('agent-billing-bot');
    const other = await testAgent('agent-other');
    env = await startTestSidecar({
      app: { url: server.origin },
      agents: { bot, other },
      logLevel: 'warn',
      policy: `
version: 1
provider: { name: billing-mcp, issuer: ${ORIGIN}, requireBinding: true }
mcp:
  - path: /mcp
    session: billing.mcp
    tools: [{ name: lookup_invoice, capability: lookup }]
agents:
  - { id: ${bot.id}, name: billing-bot, publicKey: { kty: OKP, crv: Ed25519, x: "${bot.keys.publicJwk.x}" } }
grants:
  - { agent: ${bot.id}, capability: billing.mcp, status: active }
  - { agent: ${bot.id}, capability: lookup, status: active }
`,
    });
  });
  afterAll(async () => {
    await env?.close();
    await server?.close();
  });

  it('binds every request (the issuer’s origin, the exact body) and the SDK works; without bind the sidecar refuses', async () => {
    const c = await connectMcpClient(`${env.url}/mcp`, { fetch: createMcpFetch({ signer: bot.signer, bind: { origin: ORIGIN } }) });
    try {
      const answer = await c.client.callTool({ name: 'lookup_invoice', arguments: { id: 'inv-1' } });
      expect(JSON.stringify(answer.content)).toContain('invoice inv-1');
    } finally {
      await c.close();
    }
    await expect(connectMcpClient(`${env.url}/mcp`, { fetch: createMcpFetch({ signer: bot.signer }) })).rejects.toThrow(/request_binding_mismatch|401/);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMcpFetch } from '../../../src/index.js';
import { startTestSidecar, testAgent, type TestAgent, type TestSidecar } from '../../support/fixture.js';
import { ADMIN_TOKEN, startInbox, type Inbox } from '../../support/approvals.js';
import { call } from '../../support/http.js';
import { until } from '../../support/until.js';
import { connectMcpClient, startMcpServer, type RunningMcpServer } from '../../support/mcp.js';

/** The official SDK client through the sidecar, one fresh token per HTTP request (the client helper's MCP fetch). */
const connectAs = (env: TestSidecar<{ url: string }>, agent: TestAgent) =>
  connectMcpClient(`${env.url}/mcp`, { fetch: createMcpFetch({ signer: agent.signer }) });

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

    it('lists only the tools the agent holds grants for, with their limits', async () => {
      const c = await connectAs(env, env.bot);
      try {
        const { tools } = await c.client.listTools();
        expect(tools.map((t) => t.name).sort()).toEqual(['lookup_invoice', 'refund', 'transfer']);
        expect(tools.find((t) => t.name === 'refund')?.description).toContain('amount must be a number no greater than 100');
      } finally {
        await c.close();
      }
    });

    it('passes a call within the limits and refuses one beyond them, before the server', async () => {
      const c = await connectAs(env, env.bot);
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
      const c = await connectAs(env, env.bot);
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

    it('completion/complete needs a grant for the prompt or resource it names, besides the session grant', async () => {
      const complete = async (agent: TestAgent, ref: unknown) =>
        call(env, {
          method: 'POST',
          path: '/mcp',
          headers: { accept: 'application/json, text/event-stream' },
          token: await agent.signer.sign('billing.mcp'),
          body: { jsonrpc: '2.0', id: 9, method: 'completion/complete', params: { ref, argument: { name: 'invoice', value: 'in' } } },
        });
      const before = server.received.length;
      expect((await complete(env.other, { type: 'ref/prompt', name: 'summarize' })).json).toMatchObject({ id: 9, error: { code: -32010 } });
      expect((await complete(env.bot, { type: 'ref/prompt', name: 'nope' })).json).toMatchObject({ id: 9, error: { code: -32602 } });
      expect(server.received.length).toBe(before);
      // Granted: forwarded (this raw request has no session, so the server itself answers it).
      await complete(env.bot, { type: 'ref/resource', uri: 'invoice://{id}' });
      expect(server.received.length).toBe(before + 1);
    });

    it('the constraint context names the MCP tools and their limits', async () => {
      const r = await call(env, {
        path: '/agent/constraints',
        headers: { accept: 'application/json' },
        token: await env.bot.signer.sign('constraint_context'),
      });
      expect(r.status).toBe(200);
      expect(r.json.text).toContain('refund (MCP tool refund at /mcp):');
      expect(r.json.text).toContain('amount: must be a number no greater than 100');
      expect(r.json.text).toContain('invoice.read (MCP resource invoice://{id} at /mcp):');
    });

    it('one token for the whole session (requestInit.headers) fails at the second request: tokens are single use', async () => {
      const token = await env.bot.signer.sign('billing.mcp');
      await expect(connectMcpClient(`${env.url}/mcp`, { requestInit: { headers: { authorization: `Bearer ${token}` } } })).rejects.toThrow(/token_replayed/);
    });

    it('an agent with only the session grant connects and sees no tools', async () => {
      const c = await connectAs(env, env.other);
      try {
        expect((await c.client.listTools()).tools).toEqual([]);
        await expect(c.client.callTool({ name: 'refund', arguments: { invoice: 'x', amount: 1 } })).rejects.toMatchObject({ code: -32010 });
      } finally {
        await c.close();
      }
    });
  });
}

const LOGS: string[] = [];
describe('MCP in constraint-aware mode: refusals the model reads, request_permission as a tool', () => {
  let server: RunningMcpServer;
  let env: TestSidecar<{ url: string }>;
  let inbox: Inbox;
  beforeAll(async () => {
    server = await startMcpServer({ responseMode: 'sse', outputSchemaTool: true });
    inbox = await startInbox();
    const agents = { bot: await testAgent('agent-billing-bot'), other: await testAgent('agent-other') };
    const extra = `constraintAware: true\naccessRequests: { ttl: 1m, notifier: { webhook: { url: "${inbox.url}", retries: 0 } } }`;
    env = await startTestSidecar({
      app: { url: server.origin },
      agents,
      policy: (a) => mcpPolicy(a, extra),
      adminToken: ADMIN_TOKEN,
      logLevel: 'debug',
      logs: LOGS,
    });
  });
  afterAll(async () => {
    await env?.close();
    await server?.close();
    await inbox?.close();
  });
  const admin = async (path: string, body: unknown) => call(env.adminUrl, { method: 'POST', path, body, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });

  it('a refused tool call is the tool result: isError, the violations and guidance as text, the envelope in _meta', async () => {
    const c = await connectAs(env, env.bot);
    try {
      const { tools } = await c.client.listTools();
      expect(tools.map((t) => t.name)).toContain('request_permission');
      const before = server.received.length;
      const result = await c.client.callTool({ name: 'refund', arguments: { invoice: 'inv-1', amount: 500 } });
      expect(server.received.length).toBe(before);
      expect(result.isError).toBe(true);
      const [guidance] = result.content as { type: string; text: string }[];
      expect(guidance?.text).toContain('amount');
      expect(guidance?.text).toContain('request_permission');
      expect(result._meta?.['agents-chain/envelope']).toMatchObject({
        success: false,
        permission: 'constraint_violated',
        capability: 'refund',
        violations: [{ field: 'amount', constraint: 'max', expected: 100, actual: 500 }],
      });
    } finally {
      await c.close();
    }
  });

  it('request_permission (wait: false) → a human approves with scope=value → the call ran once; the status tells its result; the value passes again', async () => {
    const c = await connectAs(env, env.bot);
    try {
      const asked = await c.client.callTool({
        name: 'request_permission',
        arguments: { tool: 'refund', arguments: { invoice: 'inv-1', amount: 250 }, reason: 'The customer was double charged', wait: false },
      });
      expect(asked.isError).toBe(false);
      expect(asked.structuredContent).toMatchObject({ status: 'pending' });
      const requestId = (asked.structuredContent as { requestId: string }).requestId;
      const note = await inbox.nextRequest();
      expect(note).toMatchObject({ requestId, agentId: env.bot.id, capability: 'refund', args: { invoice: 'inv-1', amount: 250 } });
      expect((await admin(`/approvals/${note.requestId}/approve`, { code: note.code, scope: 'value' })).status).toBe(200);
      // The approved call ran once, when the human approved; its result is the request's status.
      const refunds = () =>
        server.received.filter((m) => m.method === 'tools/call' && (m.params as { arguments?: { invoice?: string } }).arguments?.invoice === 'inv-1');
      await until(() => refunds().length === 1);
      const status = await c.client.callTool({ name: 'request_permission', arguments: { requestId } });
      expect(status.content).toEqual([{ type: 'text', text: 'refunded 250 on inv-1' }]);
      expect(status._meta?.['agents-chain/grant']).toMatchObject({ requestId, scope: 'value', values: { amount: 250 } });
      expect(refunds().length).toBe(1);
      // scope=value: the approved value now passes directly, for another invoice too.
      const again = await c.client.callTool({ name: 'refund', arguments: { invoice: 'inv-2', amount: 250 } });
      expect(again.content).toEqual([{ type: 'text', text: 'refunded 250 on inv-2' }]);
    } finally {
      await c.close();
    }
  });

  it("request_permission held open → a human approves once → the approved call runs in the agent's session and is the tool result", async () => {
    const c = await connectAs(env, env.bot);
    try {
      const before = server.received.filter((m) => m.method === 'tools/call').length;
      const asked = c.client.callTool({
        name: 'request_permission',
        arguments: { tool: 'refund', arguments: { invoice: 'inv-7', amount: 300 }, reason: 'Goodwill refund the manager asked for' },
      });
      const note = await inbox.nextRequest();
      expect(server.received.filter((m) => m.method === 'tools/call').length).toBe(before); // nothing runs before a human decides
      expect((await admin(`/approvals/${note.requestId}/approve`, { code: note.code, scope: 'once' })).status).toBe(200);
      const result = await asked;
      expect(result.isError).toBeFalsy();
      expect(result.content).toEqual([{ type: 'text', text: 'refunded 300 on inv-7' }]);
      expect(result._meta?.['agents-chain/grant']).toMatchObject({ requestId: note.requestId, scope: 'once' });
      const ran = server.received.filter((m) => m.method === 'tools/call').at(-1);
      expect(ran?.params).toEqual({ name: 'refund', arguments: { invoice: 'inv-7', amount: 300 } });
      expect(ran?.headers['mcp-session-id']).toBeTruthy();
      // Once: the same call again is refused again.
      expect((await c.client.callTool({ name: 'refund', arguments: { invoice: 'inv-7', amount: 300 } })).isError).toBe(true);
    } finally {
      await c.close();
    }
  });

  it('a batch holding one bad call forwards nothing', async () => {
    const before = server.received.length;
    const batch = [
      { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'refund', arguments: { invoice: 'a', amount: 5 } } },
      { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'refund', arguments: { invoice: 'a', amount: 5000 } } },
    ];
    const res = await fetch(`${env.url}/mcp`, {
      method: 'POST',
      body: JSON.stringify(batch),
      headers: {
        accept: 'application/json, text/event-stream',
        'content-type': 'application/json',
        authorization: `Bearer ${await env.bot.signer.sign('refund')}`,
      },
    });
    const r = { status: res.status, json: (await res.json()) as unknown };
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({ error: 'batch_refused' });
    expect(server.received.length).toBe(before);
  });
});

describe('MCP egress: the sidecar signs each message as the agent, the client is unchanged', () => {
  let server: RunningMcpServer;
  let env: TestSidecar<{ url: string }>;
  beforeAll(async () => {
    server = await startMcpServer({ responseMode: 'sse' });
    const agents = { bot: await testAgent('agent-billing-bot'), other: await testAgent('agent-other') };
    env = await startTestSidecar({
      app: { url: server.origin },
      agents,
      policy: (a) => mcpPolicy(a, 'mode: egress'),
      egress: { agentId: agents.bot.id, agentKey: agents.bot.privateJwk },
      logLevel: 'warn',
    });
  });
  afterAll(async () => {
    await env?.close();
    await server?.close();
  });

  it('an SDK client with no token and no custom fetch: filtered list, a call within limits passes, one beyond them is refused', async () => {
    const c = await connectMcpClient(`${env.url}/mcp`);
    try {
      expect((await c.client.listTools()).tools.map((t) => t.name).sort()).toEqual(['lookup_invoice', 'refund', 'transfer']);
      expect((await c.client.callTool({ name: 'refund', arguments: { invoice: 'inv-1', amount: 50 } })).content).toEqual([
        { type: 'text', text: 'refunded 50 on inv-1' },
      ]);
      const before = server.received.length;
      await expect(c.client.callTool({ name: 'refund', arguments: { invoice: 'inv-1', amount: 500 } })).rejects.toMatchObject({ code: -32011 });
      expect(server.received.length).toBe(before);
      // What the server saw carries no agent token (the sidecar's signature stays between it and itself).
      expect(server.received.every((m) => m.headers.authorization === undefined)).toBe(true);
    } finally {
      await c.close();
    }
  });

  it('a path that is not the MCP endpoint is refused (unmapped: deny by default in front of an MCP server)', async () => {
    const r = await call(env, { path: '/elsewhere' });
    expect(r.status).toBe(404);
    expect(r.json).toMatchObject({ error: 'unknown_route' });
  });
});

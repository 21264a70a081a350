import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, startInbox, type Inbox } from '../../support/approvals.js';
import { startTestSidecar, testAgent, type TestAgent, type TestSidecar } from '../../support/fixture.js';
import { startMcpServer, type RunningMcpServer } from '../../support/mcp.js';

/** Attacks a code review found after the red-team pass; each was a real hole before its fix. */

const key = (t: TestAgent) => `{ kty: OKP, crv: Ed25519, x: "${t.keys.publicJwk.x}" }`;
const ACCEPT = 'application/json, text/event-stream';
const INIT = JSON.stringify({
  jsonrpc: '2.0',
  id: 0,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'r', version: '1' } },
});

function policy(a: { bot: TestAgent; other: TestAgent }, extra = ''): string {
  return `
version: 1
provider: { name: billing-mcp, issuer: https://billing.example.com }
${extra}
mcp:
  - path: /mcp
    session: billing.mcp
    tools: [{ name: refund }, { name: delete_everything }]
agents:
  - { id: ${a.bot.id}, name: billing-bot, publicKey: ${key(a.bot)} }
  - { id: ${a.other.id}, name: other-bot, publicKey: ${key(a.other)} }
grants:
  - { agent: ${a.bot.id}, capability: billing.mcp, status: active }
  - { agent: ${a.other.id}, capability: billing.mcp, status: active }
  - { agent: ${a.other.id}, capability: refund, status: active, constraints: { amount: { max: 100 } } }
`;
}

async function post(env: TestSidecar<{ url: string }>, agent: TestAgent, aud: string, body: string, headers: Record<string, string> = {}) {
  const res = await request(`${env.url}/mcp`, {
    method: 'POST',
    headers: { accept: ACCEPT, 'content-type': 'application/json', authorization: `Bearer ${await agent.signer.sign(aud)}`, ...headers },
    body,
  });
  return res;
}

/** A plain node:http server standing in for a misbehaving (but not malicious) MCP server. */
async function rawServer(handle: (message: { id?: unknown; method?: string }, res: import('node:http').ServerResponse) => void) {
  const http: Server = createServer((req, res) => {
    let b = '';
    req.on('data', (c: Buffer) => (b += c.toString()));
    req.on('end', () => handle(JSON.parse(b || '{}') as { id?: unknown; method?: string }, res));
  });
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
  return {
    origin: `http://127.0.0.1:${(http.address() as AddressInfo).port}`,
    close: () => new Promise<void>((r) => (http.closeAllConnections(), http.close(() => r()))),
  };
}

describe('review: the request_permission tool and the session it names', () => {
  let server: RunningMcpServer;
  let inbox: Inbox;
  let env: TestSidecar<{ url: string }>;
  beforeAll(async () => {
    server = await startMcpServer({ responseMode: 'json' });
    inbox = await startInbox();
    const agents = { bot: await testAgent('agent-billing-bot'), other: await testAgent('agent-other') };
    const extra = `constraintAware: true\naccessRequests: { ttl: 1m, notifier: { webhook: { url: "${inbox.url}", retries: 0 } } }`;
    env = await startTestSidecar({ app: { url: server.origin }, agents, adminToken: ADMIN_TOKEN, logLevel: 'warn', policy: (a) => policy(a, extra) });
  });
  afterAll(async () => {
    await env?.close();
    await server?.close();
    await inbox?.close();
  });

  it("another agent cannot file a request on the bot's session (the approved call would run there)", async () => {
    const init = await post(env, env.bot, 'billing.mcp', INIT);
    await init.body.text();
    const h = { 'mcp-session-id': String(init.headers['mcp-session-id']), 'mcp-protocol-version': '2025-11-25' };
    const ask = { name: 'request_permission', arguments: { tool: 'refund', arguments: { invoice: 'x', amount: 500 }, reason: 'r', wait: false } };
    const filed = await post(env, env.other, 'request_permission', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: ask }), h);
    expect(filed.statusCode).toBe(404);
    expect(JSON.parse(await filed.body.text())).toMatchObject({ error: 'session_not_found' });
    expect(inbox.messages.filter((m: { event?: string }) => m.event === 'access_request')).toEqual([]);
  });

  it('tasks need a session the agent opened: without one (a stateless server scopes no task) they are refused', async () => {
    const before = server.received.length;
    for (const body of ['{"jsonrpc":"2.0","id":2,"method":"tasks/list"}', '{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"t-1"}}']) {
      const r = await post(env, env.bot, 'billing.mcp', body);
      expect(r.statusCode).toBe(404);
      expect(JSON.parse(await r.body.text())).toMatchObject({ error: 'session_not_found' });
    }
    const task = { name: 'refund', arguments: { invoice: 'x', amount: 5 }, task: { ttl: 60000 } };
    const r = await post(env, env.other, 'refund', JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'tools/call', params: task }));
    expect(r.statusCode).toBe(404);
    await r.body.text();
    expect(server.received.length).toBe(before);
  });
});

describe('review: a list answer the sidecar cannot read as JSON-RPC', () => {
  let raw: Awaited<ReturnType<typeof rawServer>>;
  let env: TestSidecar<{ url: string }>;
  beforeAll(async () => {
    // Its tools/list answer starts with a UTF-8 BOM, which fetch's response.json() (the SDK client) skips.
    raw = await rawServer((m, res) => {
      const body = JSON.stringify({ jsonrpc: '2.0', id: m.id, result: { tools: [{ name: 'delete_everything', inputSchema: { type: 'object' } }] } });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(body)]));
    });
    const agents = { bot: await testAgent('agent-billing-bot'), other: await testAgent('agent-other') };
    env = await startTestSidecar({ app: { url: raw.origin }, agents, logLevel: 'warn', policy });
  });
  afterAll(async () => {
    await env?.close();
    await raw?.close();
  });

  it('is filtered after the BOM, never passed on as it came', async () => {
    const r = await post(env, env.bot, 'billing.mcp', '{"jsonrpc":"2.0","id":1,"method":"tools/list"}');
    const seen = (await new Response(Buffer.from(await r.body.arrayBuffer())).json()) as { result: { tools: unknown[] } };
    expect(seen.result.tools).toEqual([]);
  });
});

describe('review: the session is bound as soon as the initialize answer begins', () => {
  let raw: Awaited<ReturnType<typeof rawServer>>;
  let env: TestSidecar<{ url: string }>;
  beforeAll(async () => {
    // Answers initialize on SSE and ends the stream only later (a server may; the client reads the event and goes on).
    raw = await rawServer((m, res) => {
      if (m.method !== 'initialize') return void res.writeHead(202).end();
      res.writeHead(200, { 'content-type': 'text/event-stream', 'mcp-session-id': 'S1' });
      res.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: '2025-11-25', capabilities: {} } })}\n\n`);
      setTimeout(() => res.end(), 300);
    });
    const agents = { bot: await testAgent('agent-billing-bot'), other: await testAgent('agent-other') };
    env = await startTestSidecar({ app: { url: raw.origin }, agents, logLevel: 'warn', policy });
  });
  afterAll(async () => {
    await env?.close();
    await raw?.close();
  });

  it('notifications/initialized sent right after the first event passes', async () => {
    const init = await post(env, env.bot, 'billing.mcp', INIT);
    await new Promise<void>((r) => init.body.on('data', (c: Buffer) => String(c).includes('\n\n') && r()));
    const next = await post(env, env.bot, 'billing.mcp', '{"jsonrpc":"2.0","method":"notifications/initialized"}', { 'mcp-session-id': 'S1' });
    expect(next.statusCode).toBe(202);
    await next.body.text();
    await new Promise((r) => init.body.on('end', r));
  });
});

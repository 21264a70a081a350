import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport, type EventStore } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { request, type Dispatcher } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ADMIN_TOKEN, startInbox, type Inbox } from '../../support/approvals.js';
import { startTestSidecar, testAgent, type TestAgent, type TestSidecar } from '../../support/fixture.js';
import { startMcpServer, type RunningMcpServer } from '../../support/mcp.js';

/**
 * Attacks on the MCP guard by an agent holding a session grant and a constrained grant (refund amount <= 100),
 * or only a session grant (`other`), against the official SDK server behind the real sidecar.
 * Attacks found by a red-team review of the MCP guard (each one was a real bypass or outage before its fix) and attacks the sidecar refused already
 * that no other test covers. Notes: /work/notes/redteam.md.
 */

type Agents = { bot: TestAgent; other: TestAgent };
const key = (t: TestAgent) => `{ kty: OKP, crv: Ed25519, x: "${t.keys.publicJwk.x}" }`;

function policy(a: Agents, extra = '', more = ''): string {
  return `
version: 1
provider: { name: billing-mcp, issuer: https://billing.example.com }
${extra}
mcp:
  - path: /mcp
    session: billing.mcp
    tools:
      - { name: refund }
      - { name: lookup_invoice, capability: lookup }
      - { name: delete_everything }
    prompts: [{ name: summarize }]
    resources:
      - { uri: "invoice://{id}", capability: invoice.read }
      - { uri: "https://files.test/docs/{name}", capability: docs.read }
      - { uri: "https://files.test/admin/{name}", capability: admin.read }
      - { uri: "report://{year}-{month}-{day}", capability: report.read }
agents:
  - { id: ${a.bot.id}, name: billing-bot, publicKey: ${key(a.bot)} }
  - { id: ${a.other.id}, name: other-bot, publicKey: ${key(a.other)} }
grants:
  - { agent: ${a.bot.id}, capability: billing.mcp, status: active }
  - { agent: ${a.bot.id}, capability: refund, status: active, constraints: { amount: { max: 100 } } }
  - { agent: ${a.bot.id}, capability: lookup, status: active }
  - { agent: ${a.bot.id}, capability: invoice.read, status: active, constraints: { id: { not_in: [inv-locked] } } }
  - { agent: ${a.bot.id}, capability: docs.read, status: active }
  - { agent: ${a.other.id}, capability: billing.mcp, status: active }
${more}`;
}

const ACCEPT = 'application/json, text/event-stream';
const INIT = JSON.stringify({
  jsonrpc: '2.0',
  id: 0,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'redteam', version: '1' } },
});
const toolCall = (id: number | string, name: string, args: unknown) =>
  JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } });
const readCall = (id: number, uri: string) => JSON.stringify({ jsonrpc: '2.0', id, method: 'resources/read', params: { uri } });

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** Raw HTTP to the sidecar's /mcp, one fresh token per request with the audience given. */
function client(env: () => TestSidecar<{ url: string }>) {
  const send = async (method: string, agent: TestAgent, aud: string, body?: string | Buffer, headers: Record<string, string> = {}, signal?: AbortSignal) => {
    const all: Record<string, string> = { accept: ACCEPT, authorization: `Bearer ${await agent.signer.sign(aud)}`, ...headers };
    if (body !== undefined && !('content-type' in all)) all['content-type'] = 'application/json';
    for (const [k, v] of Object.entries(all)) if (v === '') delete all[k];
    return request(`${env().url}/mcp`, { method: method as Dispatcher.HttpMethod, headers: all, body, signal });
  };
  const post = async (agent: TestAgent, aud: string, body: string | Buffer, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<Answer> => {
    const res = await send('POST', agent, aud, body, headers, signal);
    return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
  };
  /** initialize + notifications/initialized; the session's headers. */
  const session = async (agent: TestAgent): Promise<Record<string, string>> => {
    const init = await post(agent, 'billing.mcp', INIT);
    const h = { 'mcp-session-id': String(init.headers['mcp-session-id']), 'mcp-protocol-version': '2025-11-25' };
    await post(agent, 'billing.mcp', JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }), h);
    return h;
  };
  return { send, post, session };
}

/** Bytes exactly as given, over TCP; the first line of the answer. */
function raw(url: string, bytes: string): Promise<string> {
  return new Promise((resolve) => {
    const sock = connect(Number(new URL(url).port), '127.0.0.1');
    let out = '';
    sock.on('data', (c) => (out += String(c)));
    sock.on('close', () => resolve(out));
    sock.on('error', () => resolve(out));
    sock.write(bytes);
    setTimeout(() => sock.destroy(), 2000);
  });
}

for (const responseMode of ['json', 'sse'] as const) {
  describe(`red team: the SDK harness server behind the sidecar (${responseMode})`, () => {
    let server: RunningMcpServer;
    let env: TestSidecar<{ url: string }>;
    const { send, post, session } = client(() => env);
    const calls = () => server.received.filter((m) => m.method === 'tools/call' || m.method === 'resources/read').length;
    beforeAll(async () => {
      server = await startMcpServer({ responseMode });
      const agents = { bot: await testAgent('agent-billing-bot'), other: await testAgent('agent-other') };
      env = await startTestSidecar({ app: { url: server.origin }, agents, policy: (a) => policy(a), logLevel: 'warn' });
    });
    afterAll(async () => {
      await env?.close();
      await server?.close();
    });

    it('a resource URI with a tab or NUL inside a variable (which new URL() drops) is refused, not checked as another value', async () => {
      // new URL() (McpServer's resources/read) drops tabs/newlines and trailing C0 controls before matching its templates.
      const h = await session(env.bot);
      expect((await post(env.bot, 'invoice.read', readCall(1, 'invoice://inv-locked'), h)).text).toContain('constraint_violated');
      for (const uri of ['invoice://inv-lo\tcked', 'invoice://inv-locked\u0000', 'invoice://inv-lo\ncked']) {
        const r = await post(env.bot, 'invoice.read', readCall(2, uri), h);
        expect(r.text, JSON.stringify(uri)).not.toContain('invoice inv-locked');
      }
    });

    it('a long resource URI does not block the sidecar (no backtracking template regex), before any token is read', async () => {
      // ^report://([^/,]+)-([^/,]+)-([^/,]+)$ backtracks cubically on "1-1-...-1/": about 1 s here at 2 kB, 14 s at 4.8 kB, ~17 min at 20 kB
      // (a 1 MB body is allowed). At 50 kB that is days; the linear matcher takes milliseconds, so the bound below is loose on purpose.
      const uri = 'report://' + '1-'.repeat(25_000) + '/';
      const started = performance.now();
      const r = await request(`${env.url}/mcp`, { method: 'POST', headers: { accept: ACCEPT, 'content-type': 'application/json' }, body: readCall(1, uri) });
      // No template matches (the trailing "/"): unknown_tool, answered before any token is read.
      expect(JSON.parse(await r.body.text())).toMatchObject({ id: 1, error: { code: -32602, data: { error: 'unknown_tool' } } });
      expect(performance.now() - started).toBeLessThan(5000);
    });

    it("another agent can neither send on nor DELETE the bot's session (sessions are bound to the agent that opened them)", async () => {
      const h = await session(env.bot);
      const before = server.requests.length;
      const ping = await post(env.other, 'billing.mcp', '{"jsonrpc":"2.0","id":9,"method":"ping"}', h);
      const del = await send('DELETE', env.other, 'billing.mcp', undefined, h);
      await del.body.text();
      const victim = await post(env.bot, 'billing.mcp', '{"jsonrpc":"2.0","id":10,"method":"ping"}', h);
      // What should reach the server: the bot's own ping, on a session still alive.
      const reached = server.requests.slice(before).map((r) => `${r.method} by ${String(r.headers['x-agent-id'])}`);
      expect({ attackerPing: ping.text.includes('"result"'), attackerDelete: del.statusCode, reached, victim: victim.status }).toEqual({
        attackerPing: false,
        // session_not_found: the transport's spec has a client start a new session on 404.
        attackerDelete: 404,
        reached: ['POST by agent-billing-bot'],
        victim: 200,
      });
    });

    it('refuses, before the server, messages the server could read differently or that name another capability', async () => {
      const h = await session(env.bot);
      const ok = (amount: string) => `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"refund","arguments":{"invoice":"a","amount":${amount}}}}`;
      const cases: [string, string, string | Buffer, Record<string, string>, string][] = [
        ['escaped method', 'refund', ok('500').replace('tools/call', 'tools\\u002fcall'), {}, 'constraint_violated'],
        ['escaped tool name', 'refund', ok('500').replace('"refund"', '"ref\\u0075nd"'), {}, 'constraint_violated'],
        ['escaped duplicate key', 'refund', ok('5,"am\\u006funt":500'), {}, 'duplicate key'],
        ['__proto__ beside the real key', 'refund', ok('500').replace('"invoice"', '"__proto__":{"amount":5},"invoice"'), {}, 'constraint_violated'],
        ['amount as a string', 'refund', ok('"500"'), {}, 'constraint_violated'],
        ['amount past a double', 'refund', ok('100.0000000000000001'), {}, 'significant digits'],
        ['amount 1e400', 'refund', ok('1e400'), {}, 'out of range'],
        ['amount just over 100', 'refund', ok('100.00000000000001'), {}, 'constraint_violated'],
        ['a second JSON value', 'refund', ok('5') + ok('500'), {}, 'unexpected data'],
        ['a BOM', 'refund', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(ok('5'))]), {}, 'byte order mark'],
        ['one-element batch after whitespace', 'refund', ` \n[${ok('5')}]`, {}, 'batch_refused'],
        ['nesting 5000 deep', 'refund', ok('5,"x":' + '['.repeat(5000) + ']'.repeat(5000)), {}, 'nesting too deep'],
        ['application/json-seq', 'refund', ok('5'), { 'content-type': 'application/json-seq' }, 'unsupported_media_type'],
        ['no content-type', 'refund', ok('5'), { 'content-type': '' }, 'unsupported_media_type'],
        ['charset=utf-16', 'refund', ok('5'), { 'content-type': 'application/json; charset=utf-16' }, 'unsupported_media_type'],
        ['content-encoding gzip', 'refund', ok('5'), { 'content-encoding': 'gzip' }, 'unsupported_media_type'],
        ['_method in the message', 'refund', ok('5').replace('{"jsonrpc"', '{"_method":"GET","jsonrpc"'), {}, '_method'],
        ['id null', 'refund', ok('500').replace('"id":1', '"id":null'), {}, '\\"id\\" must be'],
        ['no id', 'refund', ok('500').replace('"id":1,', ''), {}, 'needs an \\"id\\"'],
        ['request and response at once', 'billing.mcp', ok('500').replace('"id":1', '"id":1,"result":{}'), {}, 'not \\"refund\\"'],
        ['session token for tools/call', 'billing.mcp', ok('5'), {}, 'token is for \\"billing.mcp\\"'],
        ['another tool token', 'lookup', ok('5'), {}, 'token is for \\"lookup\\"'],
        ['request_permission token (access requests off)', 'request_permission', ok('5'), {}, 'token is for \\"request_permission\\"'],
        ['tool token for ping', 'refund', '{"jsonrpc":"2.0","id":2,"method":"ping"}', {}, 'token is for \\"refund\\"'],
        ['percent-encoded resource variable', 'invoice.read', readCall(3, 'invoice://inv%2Dlocked'), {}, 'percent-encoded'],
      ];
      const before = server.received.length;
      for (const [label, aud, body, headers, expected] of cases) {
        const r = await post(env.bot, aud, body, { ...h, ...headers });
        expect(r.text, label).toContain(expected);
      }
      expect(server.received.length).toBe(before);
    });

    it('refuses byte-level shapes: bodies on GET and DELETE, absolute-form; checks chunked and pipelined bodies as sent', async () => {
      const h = await session(env.bot);
      const tok = (aud: string) => env.bot.signer.sign(aud);
      const evil = toolCall(51, 'refund', { invoice: 'a', amount: 500 });
      const good = toolCall(50, 'refund', { invoice: 'a', amount: 5 });
      const head = async (line: string, aud: string, extra: string) =>
        `${line} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${await tok(aud)}\r\nAccept: ${ACCEPT}\r\nContent-Type: application/json\r\n` +
        `mcp-session-id: ${h['mcp-session-id']}\r\n${extra}`;
      const chunk = (t: string) => `${t.length.toString(16)}\r\n${t}\r\n`;
      const before = calls();
      const chunked = await raw(
        env.url,
        (await head('POST /mcp', 'refund', 'Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n')) +
          chunk(evil.slice(0, 40)) +
          chunk(evil.slice(40)) +
          '0\r\n\r\n',
      );
      expect(chunked).toContain('constraint_violated');
      const keep = (await head('POST /mcp', 'refund', `Content-Length: ${good.length}\r\n\r\n`)) + good;
      const pipelined = await raw(env.url, keep + (await head('POST /mcp', 'refund', `Connection: close\r\nContent-Length: ${evil.length}\r\n\r\n`)) + evil);
      expect(pipelined).toContain('refunded 5 on a');
      expect(pipelined).toContain('constraint_violated');
      const shapes: [string, string][] = [
        ['GET /mcp', 'billing.mcp'],
        ['DELETE /mcp', 'billing.mcp'],
        ['POST http://x/mcp', 'refund'],
      ];
      for (const [line, aud] of shapes) {
        const out = await raw(env.url, (await head(line, aud, `Connection: close\r\nContent-Length: ${evil.length}\r\n\r\n`)) + evil);
        expect(out.split('\r\n')[0], line).toMatch(/^HTTP\/1\.1 400/);
      }
      expect(calls()).toBe(before + 1);
    });

    it('drops method-override and identity headers the agent sends; filters every list answer for an agent without grants', async () => {
      const r = await post(env.bot, 'lookup', toolCall('hdr', 'lookup_invoice', { id: 'inv-1' }), {
        ...(await session(env.bot)),
        'x-http-method-override': 'DELETE',
        'x-agent-id': 'agent-admin',
      });
      expect(r.status).toBe(200);
      const seen = server.received.find((m) => m.id === 'hdr')?.headers;
      expect(seen?.['x-http-method-override']).toBeUndefined();
      expect(seen?.['x-agent-id']).toBe('agent-billing-bot');
      const h = await session(env.other);
      for (const [method, member] of [
        ['tools/list', 'tools'],
        ['prompts/list', 'prompts'],
        ['resources/templates/list', 'resourceTemplates'],
      ]) {
        const list = await post(env.other, 'billing.mcp', JSON.stringify({ jsonrpc: '2.0', id: method, method, params: { cursor: 'x' } }), h);
        expect(list.text, method).toContain(`"${member}":[]`);
      }
    });

    it('closes the upstream GET stream when the agent goes away (the session can open its one stream again)', async () => {
      const h = await session(env.bot);
      const get = () => send('GET', env.bot, 'billing.mcp', undefined, { ...h, accept: 'text/event-stream' });
      const toolToken = await send('GET', env.bot, 'refund', undefined, { ...h, accept: 'text/event-stream' });
      expect({ status: toolToken.statusCode, text: await toolToken.body.text() }).toMatchObject({
        status: 403,
        text: expect.stringContaining('capability_denied'),
      });
      const first = await get();
      expect(first.statusCode).toBe(200);
      const second = await get();
      expect(second.statusCode).toBe(409); // the SDK allows one GET stream per session
      await second.body.text();
      first.body.on('error', () => undefined).destroy();
      await new Promise((r) => setTimeout(r, 200));
      const third = await get();
      expect(third.statusCode).toBe(200);
      third.body.on('error', () => undefined).destroy();
    });
  });
}

describe('red team: GET streams hold the upstream pool', () => {
  let server: RunningMcpServer;
  let env: TestSidecar<{ url: string }>;
  const { send, post, session } = client(() => env);
  beforeAll(async () => {
    server = await startMcpServer({ responseMode: 'json' });
    const agents = { bot: await testAgent('agent-billing-bot'), other: await testAgent('agent-other') };
    env = await startTestSidecar({ app: { url: server.origin }, agents, policy: (a) => policy(a), logLevel: 'warn' });
  });
  afterAll(async () => {
    await env?.close();
    await server?.close();
  });

  it('128 GET streams from one agent with only a session grant: past its 8 it is refused (429), and other calls still pass', async () => {
    const victim = await session(env.bot);
    const streams: Dispatcher.ResponseData[] = [];
    try {
      // The sidecar's upstream pool has 128 connections (limits.ts, not configurable) and a GET stream holds one for its life.
      for (let i = 0; i < 8; i++) {
        const batch = await Promise.all(
          Array.from({ length: 16 }, async () =>
            send('GET', env.other, 'billing.mcp', undefined, { ...(await session(env.other)), accept: 'text/event-stream' }),
          ),
        );
        streams.push(...batch);
      }
      // Streams go on a pool of their own, bounded per agent (limits.mcpStreamsPerAgent): the calls' pool stays free.
      expect(streams.filter((s) => s.statusCode === 200).length).toBe(8);
      expect(streams.filter((s) => s.statusCode === 429).length).toBe(120);
      // The server itself still answers at once: what blocks is the sidecar.
      const direct = await request(server.url, {
        method: 'POST',
        headers: { accept: ACCEPT, 'content-type': 'application/json', ...victim },
        body: '{"jsonrpc":"2.0","id":0,"method":"ping"}',
      });
      expect({ status: direct.statusCode, text: await direct.body.text() }).toMatchObject({ status: 200, text: expect.stringContaining('"result"') });
      const abort = AbortSignal.timeout(2000);
      const ping = await post(env.bot, 'billing.mcp', '{"jsonrpc":"2.0","id":1,"method":"ping"}', victim, abort).catch((e: Error) => ({
        status: 0,
        text: e.name,
      }));
      expect(ping.status).toBe(200);
    } finally {
      for (const s of streams) {
        // A destroyed body emits AbortError: handled here, not left to the runner as an unhandled error.
        s.body.on('error', () => undefined);
        s.body.destroy();
      }
    }
  });
});

/**
 * The SDK example's InMemoryEventStore, with ids in write order: the example orders ids made in the same
 * millisecond by a random suffix, so a replay after the priming event finds nothing about half the time.
 */
class OrderedEventStore implements EventStore {
  private readonly events: { id: string; stream: string; message: JSONRPCMessage }[] = [];
  async storeEvent(stream: string, message: JSONRPCMessage): Promise<string> {
    const id = `${stream}_${this.events.length}`;
    this.events.push({ id, stream, message });
    return id;
  }
  async replayEventsAfter(last: string, { send }: { send: (id: string, message: JSONRPCMessage) => Promise<void> }): Promise<string> {
    const at = this.events.findIndex((e) => e.id === last);
    const stream = this.events[at]?.stream ?? '';
    for (const e of this.events.slice(at + 1)) if (at >= 0 && e.stream === stream) await send(e.id, e.message);
    return stream;
  }
}

/** The SDK's stateful pattern with resumability (its simpleStreamableHttp example: an event store per session), SSE answers. */
async function startResumableServer(): Promise<{ url: string; close(): Promise<void> }> {
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const build = () => {
    const s = new McpServer({ name: 'resumable', version: '1.0.0' });
    const text = (t: string) => ({ content: [{ type: 'text' as const, text: t }] });
    s.registerTool('refund', { inputSchema: { invoice: z.string(), amount: z.number() } }, async ({ amount }) => text(`refunded ${amount}`));
    s.registerTool('delete_everything', { inputSchema: {} }, async () => text('deleted'));
    // Any tool doing I/O: the window in which another request can take its JSON-RPC id.
    s.registerTool('lookup_invoice', { inputSchema: { id: z.string() } }, async ({ id }) => {
      await new Promise((r) => setTimeout(r, 400));
      return text(`invoice ${id}: secret details`);
    });
    for (const dir of ['docs', 'admin']) {
      const complete = { name: () => (dir === 'admin' ? ['keys', 'payroll'] : ['readme']) };
      const template = new ResourceTemplate(`https://files.test/${dir}/{name}`, { list: undefined, complete });
      s.registerResource(dir, template, {}, async (uri, vars) => ({ contents: [{ uri: uri.href, text: `${dir} file ${String(vars.name)}` }] }));
    }
    return s;
  };
  const read = async (req: IncomingMessage) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    return chunks.length ? (JSON.parse(Buffer.concat(chunks).toString()) as unknown) : undefined;
  };
  const http = createServer((req, res) => {
    void (async () => {
      const body = req.method === 'POST' ? await read(req) : undefined;
      const sid = req.headers['mcp-session-id'];
      let t = typeof sid === 'string' ? sessions.get(sid) : undefined;
      if (!t && isInitializeRequest(body)) {
        const created = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          eventStore: new OrderedEventStore(),
          onsessioninitialized: (id) => void sessions.set(id, created),
        });
        await build().connect(created);
        t = created;
      }
      if (!t) return void res.writeHead(404).end();
      await t.handleRequest(req, res, body);
    })();
  });
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}`,
    async close() {
      await Promise.all([...sessions.values()].map((t) => t.close()));
      http.closeAllConnections();
      await new Promise<void>((r) => http.close(() => r()));
    },
  };
}

describe('red team: an SDK server with resumability (event store) and a slow tool', () => {
  let server: Awaited<ReturnType<typeof startResumableServer>>;
  let env: TestSidecar<{ url: string }>;
  const { send, post, session } = client(() => env);
  beforeAll(async () => {
    server = await startResumableServer();
    const agents = { bot: await testAgent('agent-billing-bot'), other: await testAgent('agent-other') };
    // `other` may look up inv-1 only.
    const more = `  - { agent: ${agents.other.id}, capability: lookup, status: active, constraints: { id: { in: [inv-1] } } }`;
    env = await startTestSidecar({ app: server, agents, policy: (a) => policy(a, '', more), logLevel: 'warn' });
  });
  afterAll(async () => {
    await env?.close();
    await server?.close();
  });

  it('a GET with Last-Event-ID that replays a tools/list answer gets it filtered too', async () => {
    const h = await session(env.bot);
    const list = await post(env.bot, 'billing.mcp', '{"jsonrpc":"2.0","id":1,"method":"tools/list"}', h);
    expect(list.text).not.toContain('delete_everything');
    // The priming event (protocol 2025-11-25 with an event store) names the stream; the sidecar passes its id line.
    const priming = /^id: (.+)$/m.exec(list.text)?.[1] ?? '';
    expect(priming).not.toBe('');
    const replay = await send('GET', env.bot, 'billing.mcp', undefined, { ...h, accept: 'text/event-stream', 'last-event-id': priming });
    let text = '';
    const deadline = setTimeout(() => replay.body.on('error', () => undefined).destroy(), 1500);
    try {
      for await (const c of replay.body) {
        text += String(c);
        if (text.includes('"tools"') && text.includes('\n\n')) break;
      }
    } catch {
      /* cut by the deadline */
    } finally {
      clearTimeout(deadline);
      replay.body.on('error', () => undefined).destroy();
    }
    expect(text).not.toContain('delete_everything');
  });

  it('a resource URI with a backslash dot-segment (which new URL() resolves) is refused, not checked as the granted template', async () => {
    // new URL() turns "\" into "/" and resolves "..": docs/..\admin\x is admin/x, the template the bot holds no grant for.
    const h = await session(env.bot);
    expect((await post(env.bot, 'admin.read', readCall(1, 'https://files.test/admin/keys'), h)).text).toContain('capability_denied');
    const r = await post(env.bot, 'docs.read', readCall(2, 'https://files.test/docs/..\\admin\\keys'), h);
    expect(r.text).not.toContain('admin file keys');
  });

  it('refuses completion/complete naming a resource template the agent holds no grant for', async () => {
    const h = await session(env.other);
    const ask = {
      jsonrpc: '2.0',
      id: 1,
      method: 'completion/complete',
      params: { ref: { type: 'ref/resource', uri: 'https://files.test/admin/{name}' }, argument: { name: 'name', value: '' } },
    };
    const r = await post(env.other, 'billing.mcp', JSON.stringify(ask), h);
    expect(r.text).toContain('no grant for \\"admin.read\\"');
  });

  it("another agent cannot take the JSON-RPC id of the bot's call in flight on its session (sessions are bound to agents)", async () => {
    const h = await session(env.bot);
    const abort = new AbortController();
    const victim = post(env.bot, 'lookup', toolCall(5, 'lookup_invoice', { id: 'inv-secret' }), h, abort.signal).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 100));
    // `other` may only look up inv-1, and does; the SDK routes a response by id to the latest stream that sent it.
    const thief = await post(env.other, 'lookup', toolCall(5, 'lookup_invoice', { id: 'inv-1' }), h);
    abort.abort();
    await victim;
    expect(thief.text).not.toContain('inv-secret');
  });
});

describe('red team: egress with unmapped: pass in front of an Express-hosted SDK server', () => {
  let http: Server;
  let env: TestSidecar<{ url: string }> | undefined;
  /** A fix may refuse `unmapped: pass` beside `mcp:` when the policy loads: then there is nothing to bypass. */
  let refusedAtLoad = false;
  const ran: string[] = [];
  beforeAll(async () => {
    // Express routes case-insensitively and ignores a trailing slash by default: /MCP and /mcp/ are its /mcp.
    const app = createMcpExpressApp(); // the SDK's own Express app (express.json(), Host validation)
    app.post('/mcp', async (req: IncomingMessage & { body: unknown; originalUrl: string }, res: ServerResponse) => {
      const s = new McpServer({ name: 'remote', version: '1.0.0' });
      s.registerTool('refund', { inputSchema: { invoice: z.string(), amount: z.number() } }, async ({ amount }) => {
        ran.push(`${req.originalUrl} ${amount}`);
        return { content: [{ type: 'text', text: `refunded ${amount}` }] };
      });
      const t = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      res.on('close', () => void t.close());
      await s.connect(t);
      await t.handleRequest(req, res, req.body);
    });
    http = createServer(app);
    await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
    const agents = { bot: await testAgent('agent-billing-bot'), other: await testAgent('agent-other') };
    const egress = { agentId: agents.bot.id, agentKey: agents.bot.privateJwk };
    env = await startTestSidecar({ app: { url }, agents, policy: (a) => policy(a, 'mode: egress\nunmapped: pass'), egress, logLevel: 'warn' }).catch(
      (err: Error) => {
        refusedAtLoad = err.name === 'PolicyError';
        return undefined;
      },
    );
  });
  afterAll(async () => {
    await env?.close();
    http?.closeAllConnections();
    await new Promise<void>((r) => http?.close(() => r()));
  });

  it('egress: unmapped: pass beside mcp: is refused at load (/mcp/ and /MCP would pass unchecked, and the server runs them)', async () => {
    if (refusedAtLoad) return;
    if (!env) throw new Error('the sidecar did not start');
    for (const path of ['/mcp', '/mcp/', '/MCP']) {
      const res = await request(`${env.url}${path}`, {
        method: 'POST',
        headers: { accept: ACCEPT, 'content-type': 'application/json' },
        body: toolCall(1, 'refund', { invoice: 'a', amount: 500 }),
      });
      await res.body.text();
    }
    expect(ran).toEqual([]);
  });
});

describe('red team: overlapping resource templates', () => {
  let server: Awaited<ReturnType<typeof startResumableServer>>;
  let env: TestSidecar<{ url: string }> | undefined;
  /** A fix may refuse overlapping templates when the policy loads. */
  let refusedAtLoad = false;
  const { post, session } = client(() => env as TestSidecar<{ url: string }>);
  beforeAll(async () => {
    server = await startResumableServer();
    const agents = { bot: await testAgent('agent-billing-bot'), other: await testAgent('agent-other') };
    // A broad template the bot holds, declared before admin/{name}, which nobody holds.
    const broad = (a: Agents) =>
      policy(a, '', `  - { agent: ${a.bot.id}, capability: files.read, status: active }`).replace(
        '      - { uri: "https://files.test/admin/{name}"',
        '      - { uri: "https://files.test/{dir}/{name}", capability: files.read }\n      - { uri: "https://files.test/admin/{name}"',
      );
    env = await startTestSidecar({ app: server, agents, policy: broad, logLevel: 'warn' }).catch((err: Error) => {
      refusedAtLoad = err.name === 'PolicyError';
      return undefined;
    });
  });
  afterAll(async () => {
    await env?.close();
    await server?.close();
  });

  it('a URI two templates match is refused (the server could read it as the ungranted one)', async () => {
    if (refusedAtLoad) return;
    if (!env) throw new Error('the sidecar did not start');
    const h = await session(env.bot);
    const r = await post(env.bot, 'files.read', readCall(1, 'https://files.test/admin/keys'), h);
    expect(r.text).not.toContain('admin file keys');
  });
});

describe('red team: the request_permission tool', () => {
  let server: RunningMcpServer;
  let env: TestSidecar<{ url: string }>;
  let inbox: Inbox;
  const { post, session } = client(() => env);
  beforeAll(async () => {
    server = await startMcpServer({ responseMode: 'sse' });
    inbox = await startInbox();
    const agents = { bot: await testAgent('agent-billing-bot'), other: await testAgent('agent-other') };
    const extra = `constraintAware: true\naccessRequests: { ttl: 1m, notifier: { webhook: { url: "${inbox.url}", retries: 0 } } }`;
    env = await startTestSidecar({ app: { url: server.origin }, agents, policy: (a) => policy(a, extra), adminToken: ADMIN_TOKEN, logLevel: 'warn' });
  });
  afterAll(async () => {
    await env?.close();
    await server?.close();
    await inbox?.close();
  });

  it('files nothing and forwards nothing for an ungranted, undeclared or non-tool target, bad input, or a token for another audience', async () => {
    const h = await session(env.bot);
    const ask = (args: Record<string, unknown>) => toolCall(1, 'request_permission', { reason: 'the customer asked', wait: false, ...args });
    const over = { tool: 'refund', arguments: { invoice: 'a', amount: 500 } };
    const cases: [string, TestAgent, string, string, string][] = [
      ['a tool without a grant', env.bot, 'request_permission', ask({ tool: 'delete_everything', arguments: {} }), 'has no grant for \\"delete_everything\\"'],
      ['an agent without the grant', env.other, 'request_permission', ask(over), 'has no grant for \\"refund\\"'],
      ['an undeclared tool', env.bot, 'request_permission', ask({ tool: 'invoice_total', arguments: {} }), 'needs \\"tool\\"'],
      ['a resource capability', env.bot, 'request_permission', ask({ tool: 'invoice.read', arguments: {} }), 'needs \\"tool\\"'],
      ['__proto__ as the tool', env.bot, 'request_permission', ask({ tool: '__proto__', arguments: {} }), 'needs \\"tool\\"'],
      ['arguments that are not an object', env.bot, 'request_permission', ask({ tool: 'refund', arguments: 'amount=500' }), 'must be the arguments object'],
      ['a reason over 2000 characters', env.bot, 'request_permission', ask({ ...over, reason: 'x'.repeat(2001) }), 'at most 2000 characters'],
      ['a call within the limits', env.bot, 'request_permission', ask({ tool: 'refund', arguments: { invoice: 'a', amount: 5 } }), 'within your limits'],
      ['the session token', env.bot, 'billing.mcp', ask(over), 'token is for \\"billing.mcp\\"'],
      ["the tool's own token", env.bot, 'refund', ask(over), 'token is for \\"refund\\"'],
    ];
    const before = server.received.length;
    for (const [label, agent, aud, body, expected] of cases) {
      expect((await post(agent, aud, body, h)).text, label).toContain(expected);
    }
    expect(server.received.length).toBe(before);
    expect(inbox.messages.filter((m: { event?: string }) => m.event === 'access_request')).toEqual([]);
    // {requestId}: another agent's request is not found.
    const filed = await post(env.bot, 'request_permission', ask(over), h);
    const requestId = /"requestId\\?":\\?"([^"\\]+)/.exec(filed.text)?.[1] ?? '';
    expect(requestId).not.toBe('');
    const status = (agent: TestAgent) => post(agent, 'request_permission', toolCall(2, 'request_permission', { requestId }), h);
    expect((await status(env.bot)).text).toContain('pending');
    expect((await status(env.other)).text).toContain('no such access request');
  });
});

import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createAgentSigner, type AgentSigner } from '../../../src/identity/client.js';
import { generateAgentKeyPair } from '../../../src/identity/keys.js';
import { createMcpFetch, type McpCapability } from '../../../src/identity/mcp-fetch.js';
import { connectMcpClient, startMcpServer, type RunningMcpServer } from '../../support/mcp.js';
import { until } from '../../support/until.js';

const AGENT_ID = 'agent-billing-bot';
const PAGE_1: McpCapability[] = [
  { name: 'billing.mcp', mcp: { kind: 'session', path: '/mcp' } },
  { name: 'createInvoice' }, // a plain HTTP capability: no `mcp`
  { name: 'invoice.pdf', mcp: { kind: 'resource', path: '/mcp', uri: 'invoice://{id}/pdf' } },
  { name: 'invoice.read', mcp: { kind: 'resource', path: '/mcp', uri: 'invoice://{id}' } },
];
const PAGE_2: McpCapability[] = [
  { name: 'lookup', mcp: { kind: 'tool', path: '/mcp', name: 'lookup_invoice' } },
  { name: 'other.mcp', mcp: { kind: 'session', path: '/other' } },
  { name: 'other.refund', mcp: { kind: 'tool', path: '/other', name: 'refund' } },
  { name: 'refund', mcp: { kind: 'tool', path: '/mcp', name: 'refund' } },
  { name: 'summarize.prompt', mcp: { kind: 'prompt', path: '/mcp', name: 'summarize' } },
];

interface Seen {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

let signer: AgentSigner;
let server: Server;
let origin: string;
const seen: Seen[] = [];
const discoveries: { query: URLSearchParams; token: boolean }[] = [];
let failDiscoveries = 0;

beforeAll(async () => {
  signer = await createAgentSigner((await generateAgentKeyPair()).privateJwk, AGENT_ID);
  server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (url.pathname === '/capability/list') {
        discoveries.push({ query: url.searchParams, token: req.headers.authorization !== undefined });
        if (failDiscoveries-- > 0) return void res.writeHead(503).end('starting');
        const first = !url.searchParams.has('cursor');
        res.writeHead(200, { 'content-type': 'application/json' });
        return void res.end(JSON.stringify(first ? { capabilities: PAGE_1, next_cursor: 'cGFnZTI' } : { capabilities: PAGE_2 }));
      }
      seen.push({ method: req.method ?? '', path: url.pathname, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","result":{},"id":1}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
afterEach(() => {
  seen.length = 0;
  discoveries.length = 0;
  failDiscoveries = 0;
});

/** The headers the SDK sets on a POST after initialize (see /work/notes/sdk.md). */
const sdkHeaders = () =>
  new Headers({
    accept: 'application/json, text/event-stream',
    'content-type': 'application/json',
    'mcp-session-id': 's-1',
    'mcp-protocol-version': '2025-11-25',
  });
/** As the SDK calls its fetch: a URL object, Headers, a string body, redirect manual. */
const post = (f: typeof fetch, message: unknown, path = '/mcp') =>
  f(new URL(path, origin), { method: 'POST', headers: sdkHeaders(), body: JSON.stringify(message), redirect: 'manual' });
const call = (method: string, params?: unknown) => ({ method, ...(params ? { params } : {}), jsonrpc: '2.0', id: 1 });
const token = (s: Seen) => String(s.headers.authorization).replace(/^Bearer /, '');
const aud = (s: Seen) => decodeJwt(token(s)).aud;

describe('createMcpFetch: one fresh token per HTTP request, aud = the capability the message is', () => {
  it('session traffic, tools, prompts and resources each get their capability, every token a fresh jti', async () => {
    const f = createMcpFetch({ signer });
    const cases: [unknown, string][] = [
      [call('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } }), 'billing.mcp'],
      [{ method: 'notifications/initialized', jsonrpc: '2.0' }, 'billing.mcp'],
      [call('tools/list'), 'billing.mcp'],
      [call('ping'), 'billing.mcp'],
      [{ jsonrpc: '2.0', id: 'srv-1', result: {} }, 'billing.mcp'], // a response to the server's request
      [call('tools/call', { name: 'refund', arguments: { invoice: 'inv-1', amount: 5 } }), 'refund'],
      [call('tools/call', { name: 'lookup_invoice', arguments: { id: 'inv-1' } }), 'lookup'],
      [call('prompts/get', { name: 'summarize', arguments: { invoice: 'inv-1' } }), 'summarize.prompt'],
      [call('resources/read', { uri: 'invoice://7' }), 'invoice.read'],
      [call('resources/subscribe', { uri: 'invoice://7/pdf' }), 'invoice.pdf'],
      [call('resources/unsubscribe', { uri: 'invoice://7' }), 'invoice.read'],
      [call('tools/call', { name: 'request_permission', arguments: { tool: 'refund', arguments: { amount: 500 } } }), 'request_permission'],
      [[call('ping'), call('tools/call', { name: 'refund' })], 'billing.mcp'], // a batch (the sidecar refuses it)
    ];
    for (const [message] of cases) expect((await post(f, message)).status).toBe(200);
    expect(seen.map(aud)).toEqual(cases.map(([, a]) => a));
    const claims = seen.map((s) => decodeJwt(token(s)));
    expect(new Set(claims.map((c) => c.jti)).size).toBe(cases.length);
    expect(claims.every((c) => c.sub === AGENT_ID && c.iss === signer.thumbprint)).toBe(true);
    expect(decodeProtectedHeader(token(seen[0] as Seen)).typ).toBe('agent+jwt');
  });

  it('GET (the stream) and DELETE (end of session) carry the session capability; each MCP path has its own', async () => {
    const f = createMcpFetch({ signer });
    await f(new URL('/mcp', origin), { method: 'GET', headers: new Headers({ accept: 'text/event-stream', 'mcp-session-id': 's-1' }) });
    await f(new URL('/mcp', origin), { method: 'DELETE', headers: new Headers({ 'mcp-session-id': 's-1' }) });
    await f(`${origin}/mcp`); // no init at all: a GET
    await post(f, call('tools/call', { name: 'refund', arguments: {} }), '/other');
    await post(f, call('initialize'), '/other');
    expect(seen.map((s) => [s.method, s.path, aud(s)])).toEqual([
      ['GET', '/mcp', 'billing.mcp'],
      ['DELETE', '/mcp', 'billing.mcp'],
      ['GET', '/mcp', 'billing.mcp'],
      ['POST', '/other', 'other.refund'],
      ['POST', '/other', 'other.mcp'],
    ]);
  });

  it('a name no capability has is the aud itself (the sidecar answers unknown_tool before reading the token)', async () => {
    const f = createMcpFetch({ signer });
    await post(f, call('tools/call', { name: 'delete_everything', arguments: {} }));
    await post(f, call('prompts/get', { name: 'nope' }));
    await post(f, call('resources/read', { uri: 'invoice://a/b' })); // "/" is not in a variable: no template matches
    await post(f, call('resources/read', { uri: 'invoice://' })); // a variable needs one character at least
    await post(f, call('tools/call', { arguments: {} })); // no name: session (the sidecar refuses it as invalid_body)
    expect(seen.map(aud)).toEqual(['delete_everything', 'nope', 'invoice://a/b', 'invoice://', 'billing.mcp']);
  });

  it('reads Uint8Array, Buffer, ArrayBuffer and Request bodies; a body that is not JSON is session traffic', async () => {
    const f = createMcpFetch({ signer });
    const bytes = new TextEncoder().encode(JSON.stringify(call('tools/call', { name: 'refund' })));
    await f(new URL('/mcp', origin), { method: 'POST', headers: sdkHeaders(), body: bytes });
    await f(new URL('/mcp', origin), { method: 'post', headers: sdkHeaders(), body: Buffer.from(JSON.stringify(call('prompts/get', { name: 'summarize' }))) });
    await f(new URL('/mcp', origin), { method: 'POST', headers: sdkHeaders(), body: bytes.buffer });
    await f(new Request(`${origin}/mcp`, { method: 'POST', headers: sdkHeaders(), body: JSON.stringify(call('resources/read', { uri: 'invoice://9' })) }));
    await f(new URL('/mcp', origin), { method: 'POST', headers: sdkHeaders(), body: '{"method":"tools/call",' });
    expect(seen.map(aud)).toEqual(['refund', 'summarize.prompt', 'refund', 'invoice.read', 'billing.mcp']);
    expect(seen[3]?.body).toContain('invoice://9'); // the Request's body still went out
    expect(seen[3]?.headers['mcp-session-id']).toBe('s-1');
  });

  it('keeps every header and init field the SDK set, leaves its Headers untouched, passes the URL through', async () => {
    const calls: { url: unknown; init: RequestInit | undefined }[] = [];
    const base: typeof fetch = (url, init) => (calls.push({ url, init }), fetch(url, init));
    const f = createMcpFetch({ signer, fetch: base, capabilities: [...PAGE_1, ...PAGE_2] });
    const headers = sdkHeaders();
    headers.set('x-trace', 't-1');
    const url = new URL('/mcp?x=1', origin);
    const signal = new AbortController().signal;
    const body = JSON.stringify(call('tools/list'));
    await f(url, { method: 'POST', headers, body, signal, redirect: 'manual', keepalive: false });
    expect(calls).toHaveLength(1);
    const sent = calls[0]?.init;
    expect(calls[0]?.url).toBe(url);
    expect(sent).toMatchObject({ method: 'POST', body, signal, redirect: 'manual', keepalive: false });
    expect(headers.has('authorization')).toBe(false);
    const got = seen[0]?.headers ?? {};
    for (const [k, v] of sdkHeaders()) expect(got[k]).toBe(v);
    expect(got['x-trace']).toBe('t-1');
    expect(got.authorization).toMatch(/^Bearer ey/);
  });

  it('tokenHeader: any other header carries the bare token, "Authorization" a bearer one', async () => {
    const f = createMcpFetch({ signer, tokenHeader: 'x-agent-token' });
    await post(f, call('tools/list'));
    expect(seen[0]?.headers.authorization).toBeUndefined();
    expect(decodeJwt(String(seen[0]?.headers['x-agent-token'])).aud).toBe('billing.mcp');
    await post(createMcpFetch({ signer, tokenHeader: 'Authorization' }), call('tools/list'));
    expect(aud(seen[1] as Seen)).toBe('billing.mcp');
  });

  it('discovers once (both pages, limit 200, no token) for many calls, concurrent ones too', async () => {
    const f = createMcpFetch({ signer });
    await Promise.all([post(f, call('tools/list')), post(f, call('tools/call', { name: 'refund' })), post(f, call('ping'))]);
    for (let i = 0; i < 5; i++) await post(f, call('tools/call', { name: 'refund' }));
    expect(seen).toHaveLength(8);
    expect(discoveries.map((d) => [Object.fromEntries(d.query), d.token])).toEqual([
      [{ limit: '200' }, false],
      [{ limit: '200', cursor: 'cGFnZTI' }, false],
    ]);
    expect(seen.slice(3).map(aud)).toEqual(Array(5).fill('refund'));
  });

  it('capabilities given: no discovery at all', async () => {
    const f = createMcpFetch({ signer, capabilities: PAGE_2.concat(PAGE_1) });
    await post(f, call('resources/read', { uri: 'invoice://1' }));
    expect(discoveries).toHaveLength(0);
    expect(seen.map(aud)).toEqual(['invoice.read']);
  });

  it('a failed discovery fails that request, and the next request discovers again', async () => {
    failDiscoveries = 1;
    const f = createMcpFetch({ signer });
    await expect(post(f, call('tools/list'))).rejects.toThrow(/capability\/list.*503 starting/);
    expect(seen).toHaveLength(0);
    expect((await post(f, call('tools/list'))).status).toBe(200);
    await post(f, call('ping'));
    expect(discoveries).toHaveLength(3); // the failed page 1, then pages 1 and 2; none for the third request
    expect(seen.map(aud)).toEqual(['billing.mcp', 'billing.mcp']);
  });

  it('a path the sidecar lists no MCP server at throws, naming the path, and sends nothing', async () => {
    const f = createMcpFetch({ signer });
    await expect(post(f, call('tools/list'), '/invoices')).rejects.toThrow(/\/invoices.*\/capability\/list does not list an MCP server/);
    await expect(f(new URL('/mcp/', origin))).rejects.toThrow(/no MCP server at \/mcp\//);
    expect(seen).toHaveLength(0);
  });
});

/** The sidecar's stand-in: serves /capability/list and passes /mcp to the real SDK server unchanged (streams too). */
async function startFront(mcp: RunningMcpServer, capabilities: McpCapability[]): Promise<{ url: string; discoveries: number; close(): Promise<void> }> {
  const state = { discoveries: 0 };
  const front = createServer((req, res) => {
    if (req.url?.startsWith('/capability/list')) {
      state.discoveries++;
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ capabilities }));
    }
    const up = request({ host: '127.0.0.1', port: mcp.port, path: req.url, method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    up.on('error', () => res.destroy());
    res.on('close', () => up.destroy());
    req.pipe(up);
  });
  await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(front.address() as AddressInfo).port}/mcp`,
    get discoveries() {
      return state.discoveries;
    },
    close: async () => {
      front.closeAllConnections();
      await new Promise<void>((resolve) => front.close(() => resolve()));
    },
  };
}

describe.each(['json', 'sse'] as const)('the official SDK Client + StreamableHTTPClientTransport({ fetch }) (%s answers)', (responseMode) => {
  it('calls the fetch with a URL, Headers and string bodies; every request, GET stream and DELETE included, has its own token', async () => {
    const mcp = await startMcpServer({ responseMode });
    const front = await startFront(mcp, [...PAGE_1, ...PAGE_2]);
    const mcpFetch = createMcpFetch({ signer });
    const calls: { url: unknown; init: RequestInit | undefined }[] = [];
    const spy: typeof fetch = (url, init) => (calls.push({ url, init }), mcpFetch(url, init));
    const { client, transport } = await connectMcpClient(front.url, { fetch: spy });
    try {
      expect((await client.listTools()).tools.map((t) => t.name)).toContain('refund');
      expect(await client.callTool({ name: 'refund', arguments: { invoice: 'inv-1', amount: 5 } })).toMatchObject({
        content: [{ text: 'refunded 5 on inv-1' }],
      });
      expect(await client.callTool({ name: 'lookup_invoice', arguments: { id: 'inv-2' } })).toMatchObject({
        content: [{ text: 'invoice inv-2: 120 EUR, open' }],
      });
      expect(await client.getPrompt({ name: 'summarize', arguments: { invoice: 'inv-3' } })).toMatchObject({ messages: [{ role: 'user' }] });
      expect(await client.readResource({ uri: 'invoice://inv-4' })).toMatchObject({ contents: [{ text: 'invoice inv-4' }] });
      await until(() => mcp.requests.some((r) => r.method === 'GET'));
      await transport.terminateSession();
    } finally {
      await client.close();
      await front.close();
      await mcp.close();
    }
    // What the SDK hands its fetch (the shapes createMcpFetch relies on).
    expect(calls.every((c) => c.url instanceof URL && c.init?.headers instanceof Headers)).toBe(true);
    expect(calls.filter((c) => c.init?.method === 'POST').every((c) => typeof c.init?.body === 'string' && c.init.redirect === 'manual')).toBe(true);
    expect(calls.map((c) => c.init?.method).filter((m) => m !== 'POST')).toEqual(['GET', 'DELETE']);
    expect(front.discoveries).toBe(1);
    // What reached the server: one token per HTTP request, each aud the capability its message is.
    const auds = mcp.received.map((m) => [m.method, decodeJwt(String(m.headers.authorization).slice(7)).aud]);
    expect(auds).toEqual([
      ['initialize', 'billing.mcp'],
      ['notifications/initialized', 'billing.mcp'],
      ['tools/list', 'billing.mcp'],
      ['tools/call', 'refund'],
      ['tools/call', 'lookup'],
      ['prompts/get', 'summarize.prompt'],
      ['resources/read', 'invoice.read'],
    ]);
    const byMethod = mcp.requests.filter((r) => r.method !== 'POST').map((r) => [r.method, decodeJwt(String(r.headers.authorization).slice(7)).aud]);
    expect(byMethod).toEqual([
      ['GET', 'billing.mcp'],
      ['DELETE', 'billing.mcp'],
    ]);
    const jtis = mcp.requests.map((r) => decodeJwt(String(r.headers.authorization).slice(7)).jti);
    expect(new Set(jtis).size).toBe(mcp.requests.length);
    expect(mcp.requests).toHaveLength(9);
  });
});

describe('the SDK straight at an MCP server (capabilities given, no sidecar, no discovery)', () => {
  it('connects, calls a tool and ends the session with a DELETE, each with its own token', async () => {
    const mcp = await startMcpServer({ responseMode: 'json' });
    const { client, transport } = await connectMcpClient(mcp.url, { fetch: createMcpFetch({ signer, capabilities: [...PAGE_1, ...PAGE_2] }) });
    try {
      expect(await client.callTool({ name: 'delete_everything', arguments: {} })).toMatchObject({ content: [{ text: 'deleted' }] });
      await until(() => mcp.requests.some((r) => r.method === 'GET'));
      await transport.terminateSession();
    } finally {
      await client.close();
      await mcp.close();
    }
    const auds = mcp.requests.map((r) => [r.method, decodeJwt(String(r.headers.authorization).slice(7)).aud]);
    expect(auds).toContainEqual(['POST', 'delete_everything']); // unknown to the list: the tool's name
    expect(auds.filter(([m]) => m !== 'POST')).toEqual([
      ['GET', 'billing.mcp'],
      ['DELETE', 'billing.mcp'],
    ]);
  });
});

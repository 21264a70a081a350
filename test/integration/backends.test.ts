import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sidecar } from '../../src/sidecar/start.js';
import { BACKENDS, missingTool, startBackend, type Backend, type BackendName, type Seen } from '../support/backends.js';
import { startTestSidecar, testAgent, type TestAgent } from '../support/fixture.js';
import { rawSocketRequest, type RawResponse } from '../support/raw-socket.js';

/**
 * Parser differentials against real apps (issue 15, items 5–9): PHP's
 * built-in server, a Go net/http program, Python's http.server and node:http,
 * each behind the real sidecar. Every attack is either refused before the app
 * sees anything, or reaches the app in a form it cannot misread.
 */
const policyText = (bot: TestAgent): string => `
version: 1
provider: { name: items-service, issuer: https://items.example.com, description: Items }
capabilities:
  - { name: listItems, method: GET, path: /items }
  - { name: createItem, method: POST, path: /items }
  - { name: addNote, method: POST, path: /notes }
  - { name: deleteHooks, method: DELETE, path: /hooks }
public:
  - { method: GET, path: /health }
  - { method: POST, path: /hooks }
agents:
  - { id: ${bot.id}, name: items-bot, publicKey: { kty: OKP, crv: Ed25519, x: "${bot.keys.publicJwk.x}" } }
grants:
  - agent: ${bot.id}
    capability: listItems
    status: active
    constraints:
      limit: { max: 50 }
      per_page: { max: 50 }
  - agent: ${bot.id}
    capability: createItem
    status: active
    constraints:
      qty: { max: 10 }
  - { agent: ${bot.id}, capability: addNote, status: active }
`;

// CI installs php-cli and golang-go and sets this, so a backend never goes missing there unnoticed.
const requireBackends = process.env.AGENTS_CHAIN_REQUIRE_BACKENDS === '1';
for (const name of BACKENDS) {
  const missing = missingTool(name);
  if (missing && requireBackends) throw new Error(`AGENTS_CHAIN_REQUIRE_BACKENDS=1 but ${missing}`);
  // eslint-disable-next-line no-console
  if (missing) console.warn(`skipping the ${name} backend tests: ${missing}`);
  describe.skipIf(missing !== undefined)(`behind the sidecar: ${name}`, () => backendSuite(name));
}

function backendSuite(name: BackendName): void {
  let backend: Backend;
  let sidecar: Sidecar;
  let bot: TestAgent;
  beforeAll(async () => {
    bot = await testAgent('agent-items-bot');
    backend = await startBackend(name);
    ({ sidecar } = await startTestSidecar({ policy: policyText(bot), policyName: 'items.yaml', app: backend, logLevel: 'error' }));
  }, 120_000);
  afterAll(async () => {
    await sidecar?.close();
    await backend?.close();
  });

  /** Sends the request line and headers exactly as given (plus Host and Connection: close), with an optional body. */
  const sendRaw = (line: string, headers: string[] = [], body?: string, to = sidecar.url): Promise<RawResponse> =>
    rawSocketRequest(
      to,
      [
        line,
        'Host: items.internal',
        'Connection: close',
        ...headers,
        ...(body === undefined ? [] : [`Content-Length: ${Buffer.byteLength(body)}`]),
        '',
        body ?? '',
      ].join('\r\n'),
    );
  const auth = async (cap: string): Promise<string> => `Authorization: Bearer ${await bot.signer.sign(cap)}`;

  /** The call is refused with `status`/`code` and the app handled nothing. */
  async function expectRefused(r: Promise<RawResponse>, status: number, code: string): Promise<void> {
    const before = backend.seen().length;
    const res = await r;
    expect({ status: res.status, error: res.json().error }).toEqual({ status, error: code });
    expect(backend.seen().length).toBe(before);
  }
  /** The call went through; what the app read. */
  async function forwarded(r: Promise<RawResponse>): Promise<Seen> {
    const before = backend.seen().length;
    const res = await r;
    expect(res.status, res.body).toBe(200);
    const seen = backend.seen();
    expect(seen.length).toBe(before + 1);
    return seen.at(-1)!;
  }

  // Without the sidecar, each stack misreads a different attack: the fixtures are real parsers, not stand-ins.
  it('the attacks are real: what this app reads when they reach it directly', async () => {
    const direct = async (line: string, headers: string[] = [], body?: string): Promise<Seen> => {
      const before = backend.seen().length;
      await sendRaw(line, headers, body, backend.url);
      expect(backend.seen().length).toBe(before + 1);
      return backend.seen().at(-1)!;
    };
    const json = ['Content-Type: application/json'];
    expect((await direct('POST /items HTTP/1.1', json, '{"qty":1,"\\u005fmethod":"DELETE"}')).method).toBe('DELETE');
    if (name === 'php') {
      expect((await direct('GET /items?per_page=10&per.page=500 HTTP/1.1')).query.per_page).toBe('500');
      expect((await direct('GET /items?limit=10&limit%00x=500 HTTP/1.1')).query.limit).toBe('500');
      expect((await direct('GET /items?%20limit=500 HTTP/1.1')).query.limit).toBe('500');
      expect((await direct('POST /items?.method=DELETE HTTP/1.1', json, '{"qty":1}')).method).toBe('DELETE');
      expect((await direct('GET /health HTTP/1.1', ['X-Agent.Id: agent-admin'])).headers['x-agent-id']).toBe('agent-admin');
      expect(
        (
          await direct(
            'POST /hooks HTTP/1.1',
            ['Content-Type: multipart/form-data; boundary=b'],
            '--b\r\nContent-Disposition: form-data; name=".method"\r\n\r\nDELETE\r\n--b--\r\n',
          )
        ).method,
      ).toBe('DELETE');
    }
    if (name === 'go') expect((await direct('POST /items HTTP/1.1', json, '{"qty":1,"_METHOD":"DELETE"}')).method).toBe('DELETE');
    if (name === 'node') {
      const pairs = Array.from({ length: 1000 }, (_, i) => `j${i}=`).join('&');
      expect((await direct(`GET /items?${pairs}&limit=10 HTTP/1.1`)).query.limit).toBeUndefined();
      const many = Array.from({ length: 1998 }, () => 'x:1');
      // Node 20 keeps the first 2000 header lines and drops the rest silently; Node 24 refuses the request (431).
      const before = backend.seen().length;
      const res = await sendRaw('GET /items HTTP/1.1', [...many, 'X-Agent-Id: agent-items-bot'], undefined, backend.url);
      if (Number(process.versions.node.split('.')[0]) >= 22 && res.status === 431) expect(backend.seen().length).toBe(before);
      else expect(backend.seen().at(-1)!.headers['x-agent-id']).toBeUndefined();
    }
    if (name === 'python') {
      const many = Array.from({ length: 99 }, (_, i) => `x-h${i}: 1`);
      expect((await sendRaw('GET /items HTTP/1.1', many, undefined, backend.url)).status).toBe(431);
    }
  });

  describe('item 5: PHP name mangling', () => {
    it.each([
      ['per.page', 'per_page=10&per.page=500'],
      ['per page', 'per_page=10&per%20page=500'],
      ['per+page', 'per_page=10&per+page=500'],
      ['per[page', 'per_page=10&per[page=500'],
      ['a leading space', 'per_page=10&%20per_page=500'],
      ['a NUL and what follows', 'limit=10&limit%00x=500'],
      ['a NUL alone', 'limit%00=500'],
      ["qs's [limit]", 'limit=10&[limit]=500'],
    ])('refuses a second spelling of a constrained name (%s)', async (_what, query) => {
      await expectRefused(sendRaw(`GET /items?${query} HTTP/1.1`, [await auth('listItems')]), 400, 'invalid_query');
    });

    it('forwards the constrained name spelled once, as the policy names it', async () => {
      const seen = await forwarded(sendRaw('GET /items?per_page=10&limit=5 HTTP/1.1', [await auth('listItems')]));
      expect(JSON.stringify(seen.query)).toContain('"per_page"');
    });

    it('refuses a query copy of a constrained body field under a PHP spelling', async () => {
      await expectRefused(
        sendRaw('POST /items?qty%00=500 HTTP/1.1', [await auth('createItem'), 'Content-Type: application/json'], '{"qty":1}'),
        400,
        'invalid_query',
      );
      await expectRefused(
        sendRaw('POST /items?%20qty=500 HTTP/1.1', [await auth('createItem'), 'Content-Type: application/json'], '{"qty":1}'),
        400,
        'invalid_query',
      );
    });

    it('refuses ".method", PHP\'s "_method", in the query', async () => {
      await expectRefused(
        sendRaw('POST /items?.method=DELETE HTTP/1.1', [await auth('createItem'), 'Content-Type: application/json'], '{"qty":1}'),
        400,
        'invalid_query',
      );
      await expectRefused(
        sendRaw('POST /items?%20_method=DELETE HTTP/1.1', [await auth('createItem'), 'Content-Type: application/json'], '{"qty":1}'),
        400,
        'invalid_query',
      );
    });

    it.each([
      ['a capability route', 'GET /items?limit=5&per_page=5 HTTP/1.1', 'listItems'],
      ['a public route', 'GET /health HTTP/1.1', undefined],
    ])('drops header names outside [A-Za-z0-9-] on %s', async (_what, line, cap) => {
      const seen = await forwarded(
        sendRaw(line, [
          ...(cap ? [await auth(cap)] : []),
          'X-Agent.Id: agent-admin',
          'X-Agent~Name: admin',
          'X-HTTP.Method-Override: DELETE',
          'X-Forwarded.For: 10.6.6.6',
          'X_Agent_Capability: everything',
          'X-Kept: yes',
        ]),
      );
      expect(seen.headers['x-kept']).toBe('yes');
      expect(seen.headers['x-http-method-override']).toBeUndefined();
      expect(seen.headers['x-forwarded-for']).toBe('127.0.0.1');
      expect(seen.names.filter((n) => /[^a-z0-9-]/.test(n.replace(/_/g, '-')))).toEqual([]);
      if (cap) {
        expect(seen.headers['x-agent-id']).toBe(bot.id);
        expect(seen.headers['x-agent-name']).toBe('items-bot');
        expect(seen.headers['x-agent-capability']).toBe(cap);
      } else {
        expect(seen.headers['x-agent-id']).toBeUndefined();
        expect(seen.headers['x-agent-capability']).toBeUndefined();
      }
    });
  });

  describe('item 6: method override in a JSON body', () => {
    it.each([
      ['"_method"', '{"qty":1,"_method":"DELETE"}', 'createItem', '/items'],
      ['"_METHOD"', '{"qty":1,"_METHOD":"DELETE"}', 'createItem', '/items'],
      ['an escaped "\\u005fmethod"', '{"qty":1,"\\u005fmethod":"DELETE"}', 'createItem', '/items'],
      ['an escaped "_\\u006Dethod"', '{"qty":1,"_\\u006Dethod":"DELETE"}', 'createItem', '/items'],
      ['a route with no constraint', '{"text":"hi","_method":"DELETE"}', 'addNote', '/notes'],
    ])('refuses %s', async (_what, body, cap, path) => {
      await expectRefused(sendRaw(`POST ${path} HTTP/1.1`, [await auth(cap), 'Content-Type: application/json'], body), 400, 'invalid_body');
    });

    it.each([
      ['a JSON body', 'application/json', '{"url":"x","_method":"DELETE"}'],
      ['a form body', 'application/x-www-form-urlencoded', 'url=x&_method=DELETE'],
      ['a form body, PHP\'s ".method"', 'application/x-www-form-urlencoded', 'url=x&.method=DELETE'],
      ['a multipart body', 'multipart/form-data; boundary=b', '--b\r\nContent-Disposition: form-data; name="_method"\r\n\r\nDELETE\r\n--b--\r\n'],
    ])('refuses it in %s on a public route (the app would route a tokenless POST as the guarded DELETE)', async (_what, type, body) => {
      await expectRefused(sendRaw('POST /hooks HTTP/1.1', [`Content-Type: ${type}`], body), 400, 'invalid_body');
    });

    it('forwards a body whose nested "_method" no framework reads, as a POST', async () => {
      const seen = await forwarded(
        sendRaw('POST /notes HTTP/1.1', [await auth('addNote'), 'Content-Type: application/json'], '{"text":"say _method","meta":{"_method":"x"}}'),
      );
      expect(seen.method).toBe('POST');
    });
  });

  describe('item 7: query-pair limit', () => {
    const junk = (n: number): string => Array.from({ length: n }, (_, i) => `j${i}=`).join('&');

    it('refuses a constrained parameter placed after 1000 others (too_many_query_parameters)', async () => {
      await expectRefused(sendRaw(`GET /items?${junk(1000)}&limit=10 HTTP/1.1`, [await auth('listItems')]), 400, 'too_many_query_parameters');
    });

    it('refuses more than the default 256 pairs on a public route too', async () => {
      await expectRefused(sendRaw(`GET /health?${junk(257)} HTTP/1.1`), 400, 'too_many_query_parameters');
    });

    it('forwards 256 pairs, and the app reads every one', async () => {
      const seen = await forwarded(sendRaw(`GET /items?${junk(254)}&limit=10&per_page=5 HTTP/1.1`, [await auth('listItems')]));
      expect(JSON.stringify(seen.query)).toContain('"limit"');
    });
  });

  describe('item 8: header count', () => {
    it('refuses 2000 caller headers with 431 too_many_headers', async () => {
      const many = Array.from({ length: 1997 }, () => 'x:1');
      await expectRefused(sendRaw('GET /items?limit=5&per_page=5 HTTP/1.1', [await auth('listItems'), ...many]), 431, 'too_many_headers');
    });

    it('refuses one header over the default 90', async () => {
      const many = Array.from({ length: 88 }, (_, i) => `x-h${i}: 1`); // + Host, Connection, Authorization = 91
      await expectRefused(sendRaw('GET /items?limit=5&per_page=5 HTTP/1.1', [await auth('listItems'), ...many]), 431, 'too_many_headers');
    });

    it('forwards 90 caller headers, within what every app accepts, with the identity headers ahead of them', async () => {
      const many = Array.from({ length: 87 }, (_, i) => `x-h${i}: 1`);
      const seen = await forwarded(sendRaw('GET /items?limit=5&per_page=5 HTTP/1.1', [await auth('listItems'), ...many]));
      expect(seen.headers['x-agent-id']).toBe(bot.id);
      expect(seen.headers['x-agent-capability']).toBe('listItems');
      // Apps that keep headers in arrival order (Node, Python) get the sidecar's before any of the caller's.
      if (name === 'node' || name === 'python') {
        const own = seen.names.filter((n) => n !== 'host' && n !== 'connection');
        expect(own.slice(0, 6)).toEqual(['x-request-id', 'x-agent-id', 'x-agent-name', 'x-agent-capability', 'x-forwarded-for', 'x-h0']);
      }
    });
  });

  describe('item 9: client-address and re-routing headers', () => {
    const spoofed = [
      'X-Original-URL: /admin',
      'X-Rewrite-URL: /admin',
      'X-Original-Host: admin.internal',
      'X-Host: admin.internal',
      'X-HTTP-Destinationurl: http://admin.internal/',
      'X-Real-IP: 10.6.6.6',
      'True-Client-IP: 10.6.6.6',
      'X-Client-IP: 10.6.6.6',
      'CF-Connecting-IP: 10.6.6.6',
      'Fastly-Client-IP: 10.6.6.6',
      'X-Cluster-Client-IP: 10.6.6.6',
      'X-ProxyUser-Ip: 10.6.6.6',
      'Client-IP: 10.6.6.6',
      'X-Originating-IP: 10.6.6.6',
      'X-Remote-Addr: 10.6.6.6',
      'X-Forwarded-For: 10.6.6.6',
      'X-Forwarded-Host: admin.internal',
      'X-Forwarded-Proto: https',
      'X-Forwarded-Port: 443',
      'X-Forwarded-Prefix: /admin',
      'Forwarded: for=10.6.6.6',
      'X-Envoy-Original-Path: /admin',
      'Remote-User: admin',
    ];
    const droppedNames = spoofed.map((h) => h.slice(0, h.indexOf(':')).toLowerCase()).filter((n) => n !== 'x-forwarded-for');

    it.each([
      ['a capability route', 'GET /items?limit=5&per_page=5 HTTP/1.1', 'listItems'],
      ['a public route', 'GET /health HTTP/1.1', undefined],
    ])('drops them on %s and sets X-Forwarded-For from the socket', async (_what, line, cap) => {
      const seen = await forwarded(sendRaw(line, [...(cap ? [await auth(cap)] : []), ...spoofed]));
      for (const n of droppedNames) expect(seen.headers[n], n).toBeUndefined();
      expect(seen.headers['x-forwarded-for']).toBe('127.0.0.1');
      expect(seen.path).toBe(line.split(' ')[1]!.split('?')[0]);
    });
  });
}

/** Egress: the provider learns nothing of the agent or its pod, not even the address the sidecar saw. */
describe('egress: no client address to the provider (node:http as the provider)', () => {
  let provider: Backend;
  let sidecar: Sidecar;
  beforeAll(async () => {
    const agent = await testAgent('summarizer');
    provider = await startBackend('node');
    ({ sidecar } = await startTestSidecar({
      app: provider,
      logLevel: 'error',
      policyName: 'egress.yaml',
      policy: `
version: 1
mode: egress
preset: openai
provider: { name: summarizer-egress, issuer: https://summarizer.internal }
agents:
  - { id: summarizer, name: summarizer, publicKey: { kty: OKP, crv: Ed25519, x: "${agent.keys.publicJwk.x}" } }
grants:
  - { agent: summarizer, capability: embedding, status: active }
`,
      egress: { agentId: 'summarizer', agentKey: agent.privateJwk, providerKey: 'sk-provider' },
    }));
  });
  afterAll(async () => {
    await sidecar?.close();
    await provider?.close();
  });

  it("forwards a checked call without X-Forwarded-For, identity or the caller's client-address headers", async () => {
    const body = '{"model":"text-embedding-3-small","input":"hi"}';
    const r = await rawSocketRequest(
      sidecar.url,
      [
        'POST /v1/embeddings HTTP/1.1',
        'Host: api.openai.com',
        'Connection: close',
        'Content-Type: application/json',
        'X-Real-IP: 10.6.6.6',
        'X-Forwarded-For: 10.6.6.6',
        'X-Original-URL: /v1/files',
        `Content-Length: ${body.length}`,
        '',
        body,
      ].join('\r\n'),
    );
    expect(r.status, r.body).toBe(200);
    const seen = provider.seen().at(-1)!;
    expect(seen.path).toBe('/v1/embeddings');
    expect(seen.headers.authorization).toBe('Bearer sk-provider');
    for (const n of ['x-forwarded-for', 'x-real-ip', 'x-original-url', 'x-agent-id', 'x-agent-name', 'x-agent-capability'])
      expect(seen.headers[n], n).toBeUndefined();
  });
});

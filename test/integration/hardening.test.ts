import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadPolicyText } from '../../src/policy/load.js';
import { PolicyError } from '../../src/policy/issues.js';
import { startTestSidecar, type TestSidecar } from '../support/fixture.js';
import { call, expectDenied, invoice } from '../support/http.js';
import { rawSocketRequest } from '../support/raw-socket.js';
import { tokenWith } from '../support/tokens.js';

/** Parser differentials and spoofing paths found in review: each one is refused or neutralised. */
describe('hardening', () => {
  let env: TestSidecar;
  let clock = Date.now();
  beforeAll(async () => {
    env = await startTestSidecar({ now: () => clock });
  });
  afterAll(async () => {
    await env.close();
  });
  const token = (cap: string) => env.bot.signer.sign(cap, { now: Math.floor(clock / 1000) });

  it('remembers a jti for as long as its token could pass the time checks (120 s)', async () => {
    const t0 = Math.floor(clock / 1000);
    const t = tokenWith(env.bot.privateJwk, { sub: env.bot.id, iss: env.bot.keys.thumbprint, aud: 'getInvoice', iat: t0 + 30, exp: t0 + 90 });
    expect((await call(env, { path: '/invoices/inv-1', token: t })).status).toBe(200);
    const saved = clock;
    clock += 115_000; // still inside exp + 30 s skew
    try {
      const seen = env.app.requests.length;
      expectDenied(env, seen, await call(env, { path: '/invoices/inv-1', token: t }), 401, 'token_replayed');
    } finally {
      clock = saved;
    }
  });

  it('refuses JSON keys that repeat a constrained key in another case', async () => {
    const seen = env.app.requests.length;
    const body = invoice().replace('{', '{"AMOUNT":99999,');
    expectDenied(env, seen, await call(env, { method: 'POST', path: '/invoices', token: await token('createInvoice'), body }), 400, 'invalid_body');
  });

  it('refuses a body on a GET whose query is constrained', async () => {
    const seen = env.app.requests.length;
    const r = await call(env, { path: '/invoices?customerId=c-100&limit=5', token: await token('listInvoices'), body: '{"limit":99999}' });
    expectDenied(env, seen, r, 400, 'invalid_body');
  });

  it.each([
    ['a raw ";" in the query', '/invoices?customerId=c-100&limit=5;limit=99999'],
    ['the _method override', '/invoices?customerId=c-100&limit=5&_method=DELETE'],
    ['a case variant of a constrained key', '/invoices?customerId=c-100&limit=5&Limit=99999'],
  ])('400 invalid_query for %s', async (_, path) => {
    const seen = env.app.requests.length;
    expectDenied(env, seen, await call(env, { path, token: await token('listInvoices') }), 400, 'invalid_query');
  });

  it('keeps Host and Content-Type even when Connection names them; drops underscore header names', async () => {
    const body = invoice();
    const r = await rawSocketRequest(
      env.sidecar.url,
      `POST /invoices HTTP/1.1\r\nHost: billing.internal\r\nAuthorization: Bearer ${await token('createInvoice')}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nX_Agent_Id: agent-admin\r\nConnection: close, content-type, host\r\n\r\n${body}`,
    );
    expect(r.status).toBe(200);
    const got = env.app.requests.at(-1)!;
    expect(got.headers.host).toBe('billing.internal');
    expect(got.headers['content-type']).toBe('application/json');
    expect(got.rawHeaders.filter((_, i) => i % 2 === 0).some((n) => n.includes('_'))).toBe(false);
  });

  it('forwards a call sent with Expect: 100-continue', async () => {
    const body = invoice();
    const r = await rawSocketRequest(
      env.sidecar.url,
      `POST /invoices HTTP/1.1\r\nHost: s\r\nAuthorization: Bearer ${await token('createInvoice')}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n${body}`,
    );
    expect(r.status).toBe(200);
    expect(env.app.requests.at(-1)!.body.toString()).toBe(body);
  });

  it('matches not_in loosely on case, padding and compatibility forms', async () => {
    for (const tier of ['Internal', 'INTERNAL ', 'ｉｎｔｅｒｎａｌ']) {
      const seen = env.app.requests.length;
      const r = await call(env, { method: 'POST', path: '/invoices', token: await token('createInvoice'), body: invoice({ customer: { tier } }) });
      expectDenied(env, seen, r, 403, 'constraint_violated');
    }
  });

  it('answers requests Node cannot parse with JSON too', async () => {
    const r = await rawSocketRequest(env.sidecar.url, 'GET /invoices HTTP/1.1\r\nBad Header Line\r\n\r\n');
    expect(r.status).toBe(400);
    expect(r.json()).toMatchObject({ error: 'invalid_request' });
  });

  it("answers a header block over Node's 16 KiB with 431 too_many_headers, in JSON", async () => {
    const seen = env.app.requests.length;
    const r = await rawSocketRequest(env.sidecar.url, `GET /healthz HTTP/1.1\r\nHost: s\r\nX-Big: ${'a'.repeat(17_000)}\r\nConnection: close\r\n\r\n`);
    expect(r.status).toBe(431);
    expect(r.json()).toMatchObject({ error: 'too_many_headers' });
    expect(env.app.requests.length).toBe(seen);
  });

  it('refuses more caller headers than the limit before anything else, on public routes too', async () => {
    const seen = env.app.requests.length;
    const many = Array.from({ length: 100 }, (_, i) => `x-h${i}: 1`).join('\r\n');
    // Even an unknown route and a bad path: the count is checked first.
    for (const line of ['GET /healthz HTTP/1.1', 'GET /nothing/../here HTTP/1.1']) {
      const r = await rawSocketRequest(env.sidecar.url, `${line}\r\nHost: s\r\n${many}\r\nConnection: close\r\n\r\n`);
      expectDenied(env, seen, { status: r.status, json: r.json() }, 431, 'too_many_headers');
    }
  });
});

describe('policy overlap rules', () => {
  const base = (routes: string) => `version: 1\nprovider: { name: x, issuer: https://x.example.com }\ncapabilities:\n${routes}`;
  it.each([
    ['HEAD shares GET handlers', '  - { name: a, method: GET, path: "/items/{id}" }\npublic:\n  - { method: HEAD, path: "/items/{id}" }\n'],
    ['routes equal but for case', '  - { name: a, method: GET, path: "/items/{id}" }\n  - { name: b, method: GET, path: "/Items/{id}" }\n'],
    ['routes equal but for a trailing slash', '  - { name: a, method: GET, path: "/items" }\n  - { name: b, method: GET, path: "/items/" }\n'],
  ])('refuses %s', async (_, routes) => {
    await expect(loadPolicyText(base(routes), 'p.yaml')).rejects.toThrow(PolicyError);
    await expect(loadPolicyText(base(routes), 'p.yaml')).rejects.toThrow(/overlaps/);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestSidecar, type TestSidecar } from '../support/fixture.js';
import { call, expectDenied, invoice } from '../support/http.js';
import { rawSocketRequest } from '../support/raw-socket.js';

/** Every malformed request is refused with a JSON error and never reaches the app. */
describe('request shape', () => {
  let env: TestSidecar;
  beforeAll(async () => {
    env = await startTestSidecar();
  });
  afterAll(async () => {
    await env.close();
  });

  const token = (cap: string) => env.bot.signer.sign(cap);
  const raw = (head: string, body = '') =>
    rawSocketRequest(
      env.sidecar.url,
      `${head}\r\nHost: sidecar\r\nConnection: close\r\n${body ? `Content-Length: ${Buffer.byteLength(body)}\r\n` : ''}\r\n${body}`,
    );

  describe('routes', () => {
    it('404 unknown_route for an unmapped path or method', async () => {
      const seen = env.app.requests.length;
      expectDenied(env, seen, await call(env, { path: '/nothing-here' }), 404, 'unknown_route');
      expectDenied(env, seen, await call(env, { method: 'PATCH', path: '/invoices' }), 404, 'unknown_route');
    });

    it('matches case-sensitively; a trailing slash is another path', async () => {
      const seen = env.app.requests.length;
      expectDenied(env, seen, await call(env, { path: '/Invoices/inv-1', token: await token('getInvoice') }), 404, 'unknown_route');
      expectDenied(env, seen, await call(env, { path: '/healthz/' }), 404, 'unknown_route');
    });

    it.each([
      'GET /invoices/../healthz HTTP/1.1',
      'GET /invoices/./inv-1 HTTP/1.1',
      'GET /invoices/%2e%2e/healthz HTTP/1.1',
      'GET /invoices/.%2E HTTP/1.1',
      'GET //invoices/inv-1 HTTP/1.1',
      'GET /invoices//inv-1 HTTP/1.1',
      'GET /invoices\\inv-1 HTTP/1.1',
      'GET /invoices/a%2fb HTTP/1.1',
      'GET /invoices/a%5Cb HTTP/1.1',
      'GET /invoices/a%00 HTTP/1.1',
      'GET /invoices/inv-1;jsessionid=x HTTP/1.1',
      'GET http://sidecar/invoices/inv-1 HTTP/1.1',
      'OPTIONS * HTTP/1.1',
    ])('400 invalid_path: %s', async (line) => {
      const seen = env.app.requests.length;
      const r = await raw(line);
      expectDenied(env, seen, { status: r.status, json: r.json() }, 400, 'invalid_path');
    });

    it('400 invalid_header for a repeated Content-Type', async () => {
      const seen = env.app.requests.length;
      const r = await raw(
        `POST /invoices HTTP/1.1\r\nAuthorization: Bearer ${await token('createInvoice')}\r\nContent-Type: application/json\r\nContent-Type: text/plain`,
        invoice(),
      );
      expectDenied(env, seen, { status: r.status, json: r.json() }, 400, 'invalid_header');
    });
  });

  describe('JSON bodies on constrained routes', () => {
    const post = async (body: string | Buffer, headers: Record<string, string> = {}) =>
      call(env, { method: 'POST', path: '/invoices', token: await token('createInvoice'), body, headers });

    it('415 for a body that is not application/json', async () => {
      const seen = env.app.requests.length;
      expectDenied(env, seen, await post(invoice(), { 'content-type': 'text/plain' }), 415, 'unsupported_media_type');
      expectDenied(env, seen, await post(invoice(), { 'content-type': 'application/json; charset=latin1' }), 415, 'unsupported_media_type');
    });

    it('accepts application/json with charset utf-8 and +json types', async () => {
      expect((await post(invoice(), { 'content-type': 'application/json; charset=UTF-8' })).status).toBe(200);
      expect((await post(invoice(), { 'content-type': 'application/vnd.billing+json' })).status).toBe(200);
    });

    it('415 for a compressed body', async () => {
      const seen = env.app.requests.length;
      expectDenied(env, seen, await post(invoice(), { 'content-encoding': 'gzip' }), 415, 'unsupported_media_type');
    });

    it.each([
      ['malformed JSON', '{"amount": 5'],
      ['duplicate keys', '{"customerId":"c-100","amount":500,"amount":5000,"currency":"USD","customer":{"tier":"gold"},"dryRun":false}'],
      ['a non-finite number', invoice().replace('"amount":500', '"amount":1e400')],
      ['an unsafe integer', invoice().replace('"amount":500', '"amount":9007199254740993')],
      ['an escaped lone surrogate', invoice().replace('"c-100"', '"c-\\ud800"')],
    ])('400 invalid_body for %s', async (_, body) => {
      const seen = env.app.requests.length;
      expectDenied(env, seen, await post(body), 400, 'invalid_body');
    });

    it('a JSON array has none of the constrained fields: constraint_violated', async () => {
      const seen = env.app.requests.length;
      expectDenied(env, seen, await post('[1,2]'), 403, 'constraint_violated');
    });

    it('400 invalid_body for invalid UTF-8 bytes', async () => {
      const seen = env.app.requests.length;
      const bytes = Buffer.concat([Buffer.from(invoice().slice(0, -1)), Buffer.from(',"note":"\xff"}', 'latin1')]);
      expectDenied(env, seen, await post(bytes), 400, 'invalid_body');
    });

    it('constraint_violated when a constrained field is absent or has the wrong type', async () => {
      const seen = env.app.requests.length;
      const r = await post(JSON.stringify({ customerId: 'c-100', amount: '500', currency: 'USD', customer: { tier: null } }));
      expectDenied(env, seen, r, 403, 'constraint_violated');
      expect(r.json.violations.map((v: any) => `${v.field}:${v.constraint}`)).toEqual(['amount:max', 'amount:min', 'customer.tier:not_in', 'dryRun:exact']);
    });

    it('constraint_violated for an empty body on a constrained route', async () => {
      const seen = env.app.requests.length;
      const r = await call(env, { method: 'POST', path: '/invoices', token: await token('createInvoice') });
      expectDenied(env, seen, r, 403, 'constraint_violated');
    });

    it('400 invalid_query when a constrained body field is also in the query', async () => {
      const seen = env.app.requests.length;
      const r = await call(env, { method: 'POST', path: '/invoices?amount=5', token: await token('createInvoice'), body: invoice() });
      expectDenied(env, seen, r, 400, 'invalid_query');
    });
  });

  describe('body limit', () => {
    it('413 when Content-Length is over the limit, before reading the body', async () => {
      const seen = env.app.requests.length;
      const r = await call(env, {
        method: 'PUT',
        path: '/uploads',
        token: await token('upload'),
        body: 'x'.repeat(65),
        headers: { 'content-type': 'application/octet-stream' },
      });
      expectDenied(env, seen, r, 413, 'body_too_large');
    });

    it('413 when a chunked body crosses the limit', async () => {
      const seen = env.app.requests.length;
      const chunk = 'y'.repeat(40);
      const r = await rawSocketRequest(
        env.sidecar.url,
        `PUT /uploads HTTP/1.1\r\nHost: s\r\nAuthorization: Bearer ${await token('upload')}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n` +
          `28\r\n${chunk}\r\n28\r\n${chunk}\r\n0\r\n\r\n`,
      );
      expectDenied(env, seen, { status: r.status, json: r.json() }, 413, 'body_too_large');
    });

    it('applies the sidecar-wide limit (default 1 MiB) where the capability sets none', async () => {
      const seen = env.app.requests.length;
      const big = JSON.stringify({ pad: 'z'.repeat(1024 * 1024) });
      expectDenied(env, seen, await call(env, { method: 'POST', path: '/invoices', token: await token('createInvoice'), body: big }), 413, 'body_too_large');
    });

    it('forwards an unconstrained body within the limit', async () => {
      const r = await call(env, {
        method: 'PUT',
        path: '/uploads',
        token: await token('upload'),
        body: 'x'.repeat(64),
        headers: { 'content-type': 'application/octet-stream' },
      });
      expect(r.status).toBe(200);
      expect(env.app.requests.at(-1)!.body.toString()).toBe('x'.repeat(64));
    });
  });

  describe('query and path parameters', () => {
    it('reads constrained query parameters on GET', async () => {
      expect((await call(env, { path: '/invoices?customerId=c-200&limit=50', token: await token('listInvoices') })).status).toBe(200);
      const seen = env.app.requests.length;
      const r = await call(env, { path: '/invoices?customerId=c-999&limit=51', token: await token('listInvoices') });
      expectDenied(env, seen, r, 403, 'constraint_violated');
      expect(r.json.violations.map((v: any) => v.field)).toEqual(['customerId', 'limit']);
    });

    it.each(['limit=1e1', 'limit=010', 'limit=5.0', 'limit=', 'limit=%205'])('a numeric bound needs a canonical decimal: %s', async (q) => {
      const seen = env.app.requests.length;
      expectDenied(env, seen, await call(env, { path: `/invoices?customerId=c-100&${q}`, token: await token('listInvoices') }), 403, 'constraint_violated');
    });

    it.each([
      'customerId=c-100&customerId=c-999&limit=1',
      'customerId=c-100&customerId[]=c-999&limit=1',
      'customerId=c-100&customerId[0]=c-999&limit=1',
      'customerId=c-100&custom%65rId=c-999&limit=1',
    ])('400 invalid_query for a repeated or bracketed constrained key: %s', async (q) => {
      const seen = env.app.requests.length;
      expectDenied(env, seen, await call(env, { path: `/invoices?${q}`, token: await token('listInvoices') }), 400, 'invalid_query');
    });

    it('decodes keys and values before checking', async () => {
      expect((await call(env, { path: '/invoices?custom%65rId=c%2D100&limit=5', token: await token('listInvoices') })).status).toBe(200);
    });

    it('constrains path parameters (DELETE) as strings', async () => {
      expect((await call(env, { method: 'DELETE', path: '/invoices/inv-1', token: await token('deleteInvoice') })).status).toBe(200);
      const seen = env.app.requests.length;
      expectDenied(env, seen, await call(env, { method: 'DELETE', path: '/invoices/inv-2', token: await token('deleteInvoice') }), 403, 'constraint_violated');
    });

    it('constrains a path parameter and a body field together', async () => {
      const path = (id: string) => `/invoices/${id}/refund`;
      expect((await call(env, { method: 'POST', path: path('inv-7'), token: await token('refundInvoice'), body: '{"amount":10}' })).status).toBe(200);
      const seen = env.app.requests.length;
      const r = await call(env, { method: 'POST', path: path('inv-locked'), token: await token('refundInvoice'), body: '{"amount":10}' });
      expectDenied(env, seen, r, 403, 'constraint_violated');
      expect(r.json.violations[0]).toMatchObject({ field: 'id', constraint: 'not_in', actual: 'inv-locked' });
    });
  });
});

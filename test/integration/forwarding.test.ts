import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestSidecar, type TestSidecar } from '../support/fixture.js';
import { call, expectDenied, invoice, open } from '../support/http.js';
import { rawSocketRequest } from '../support/raw-socket.js';

/** What is verified is what is forwarded, and identity comes from the sidecar alone. */
describe('forwarding', () => {
  let env: TestSidecar;
  beforeAll(async () => {
    env = await startTestSidecar();
  });
  afterAll(async () => {
    await env.close();
  });

  it('forwards the exact body bytes, path and query, with identity headers and without the token', async () => {
    const body = '{ "customerId" : "c-100",\n  "amount": 500.0, "currency":"EUR", "customer":{"tier":"gold","name":"Zoë \\u00e9"}, "dryRun":false }';
    const token = await env.bot.signer.sign('createInvoice');
    const r = await rawSocketRequest(
      env.sidecar.url,
      `POST /invoices?trace=a'b&x=%7e HTTP/1.1\r\nHost: billing.internal\r\nAuthorization: Bearer ${token}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
    expect(r.status).toBe(200);
    const got = env.app.requests.at(-1)!;
    expect(got.method).toBe('POST');
    expect(got.url).toBe("/invoices?trace=a'b&x=%7e");
    expect(got.body.equals(Buffer.from(body))).toBe(true);
    expect(got.headers['content-length']).toBe(String(Buffer.byteLength(body)));
    expect(got.headers.host).toBe('billing.internal');
    expect(got.headers.authorization).toBeUndefined();
    expect(got.headers['x-agent-id']).toBe('agent-billing-bot');
    expect(got.headers['x-agent-name']).toBe('billing-bot');
    expect(got.headers['x-agent-capability']).toBe('createInvoice');
    expect(got.headers['x-request-id']).toBe(r.headers['x-request-id']);
  });

  it('keeps raw path bytes that URL parsers would rewrite', async () => {
    const token = await env.bot.signer.sign('getInvoice');
    const r = await rawSocketRequest(
      env.sidecar.url,
      `GET /invoices/it's%20a~b!?q=%zz&q=1 HTTP/1.1\r\nHost: s\r\nAuthorization: Bearer ${token}\r\nConnection: close\r\n\r\n`,
    );
    expect(r.status).toBe(200);
    expect(env.app.requests.at(-1)!.url).toBe("/invoices/it's%20a~b!?q=%zz&q=1");
  });

  it('drops caller-sent identity, forwarding, method-override and Connection-listed headers', async () => {
    const token = await env.bot.signer.sign('getInvoice');
    const r = await rawSocketRequest(
      env.sidecar.url,
      [
        'GET /invoices/inv-1 HTTP/1.1',
        'Host: s',
        `Authorization: Bearer ${token}`,
        'X-Agent-Id: agent-admin',
        'x-agent-name: admin',
        'X-Agent-Capability: everything',
        'X-Agent-Role: root',
        'X-Forwarded-For: 10.0.0.1',
        'X-Forwarded-Host: evil',
        'Forwarded: for=10.0.0.1',
        'X-HTTP-Method-Override: DELETE',
        'X-Method-Override: DELETE',
        'X-HTTP-Method: DELETE',
        'X-Secret-Hop: 1',
        'Connection: close, X-Secret-Hop',
        'X-Request-Id: spoofed',
        'X-Kept: yes',
        '',
        '',
      ].join('\r\n'),
    );
    expect(r.status).toBe(200);
    const h = env.app.requests.at(-1)!.headers;
    expect(h['x-agent-id']).toBe('agent-billing-bot');
    expect(h['x-agent-name']).toBe('billing-bot');
    expect(h['x-agent-capability']).toBe('getInvoice');
    for (const gone of ['x-agent-role', 'x-forwarded-host', 'forwarded', 'x-http-method-override', 'x-method-override', 'x-http-method', 'x-secret-hop']) {
      expect(h[gone], gone).toBeUndefined();
    }
    // The caller's X-Forwarded-For is replaced by the sidecar's peer address.
    expect(h['x-forwarded-for']).toBe('127.0.0.1');
    expect(h['x-request-id']).not.toBe('spoofed');
    expect(h['x-kept']).toBe('yes');
    const rawNames = env.app.requests
      .at(-1)!
      .rawHeaders.filter((_, i) => i % 2 === 0)
      .map((n) => n.toLowerCase());
    expect(rawNames.filter((n) => n === 'x-agent-id')).toHaveLength(1);
  });

  it('forwards public routes without a token, still stripping identity headers', async () => {
    const r = await call(env, { path: '/healthz', headers: { 'x-agent-id': 'agent-billing-bot' } });
    expect(r.status).toBe(200);
    const got = env.app.requests.at(-1)!;
    expect(got.url).toBe('/healthz');
    expect(got.headers['x-agent-id']).toBeUndefined();
  });

  it("passes the app's status, headers and body back", async () => {
    env.app.handler = (_req, res) => {
      res.writeHead(418, { 'x-app': 'teapot', 'content-type': 'text/plain' });
      res.end('short and stout');
    };
    try {
      const r = await call(env, { path: '/invoices/inv-1', token: await env.bot.signer.sign('getInvoice') });
      expect(r.status).toBe(418);
      expect(r.headers['x-app']).toBe('teapot');
      expect(r.text).toBe('short and stout');
    } finally {
      env.app.handler = undefined;
    }
  });

  it('streams server-sent events as they are produced', async () => {
    let finish!: () => void;
    const finished = new Promise<void>((r) => {
      finish = r;
    });
    env.app.handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: first\n\n');
      void finished.then(() => {
        res.write('data: last\n\n');
        res.end();
      });
    };
    try {
      const res = await open(env, { path: '/events', token: await env.bot.signer.sign('streamEvents') });
      expect(res.headers['content-type']).toBe('text/event-stream');
      const it = res.body[Symbol.asyncIterator]();
      const first = await it.next();
      // The app has not finished: the first event must already be here.
      expect(Buffer.from(first.value).toString()).toBe('data: first\n\n');
      finish();
      let rest = '';
      for (let n = await it.next(); !n.done; n = await it.next()) rest += Buffer.from(n.value).toString();
      expect(rest).toBe('data: last\n\n');
    } finally {
      env.app.handler = undefined;
    }
  });

  it('502 upstream_unavailable when the app does not answer', async () => {
    const down = await startTestSidecar();
    await down.app.close();
    const seen = down.app.requests.length;
    const r = await call(down, { method: 'POST', path: '/invoices', token: await down.bot.signer.sign('createInvoice'), body: invoice() });
    expectDenied(down, seen, r, 502, 'upstream_unavailable');
    await down.sidecar.close();
  });

  describe('with a custom token header', () => {
    let custom: TestSidecar;
    beforeAll(async () => {
      custom = await startTestSidecar({ tokenHeader: 'X-Agent-Token' });
    });
    afterAll(async () => {
      await custom.close();
    });

    it("reads the token there, keeps the app's own Authorization, strips the token header", async () => {
      const r = await call(custom, {
        path: '/invoices/inv-1',
        headers: { 'x-agent-token': await custom.bot.signer.sign('getInvoice'), authorization: 'Basic YXBwOnNlY3JldA==' },
      });
      expect(r.status).toBe(200);
      const h = custom.app.requests.at(-1)!.headers;
      expect(h.authorization).toBe('Basic YXBwOnNlY3JldA==');
      expect(h['x-agent-token']).toBeUndefined();
      expect(h['x-agent-id']).toBe('agent-billing-bot');
    });
  });

  it('answers /healthz and /readyz on the admin listener', async () => {
    const health = await call(env.adminUrl, { path: '/healthz' });
    expect(health.status).toBe(200);
    expect(health.json).toEqual({ status: 'ok' });
    const ready = await call(env.adminUrl, { path: '/readyz' });
    expect(ready.status).toBe(200);
    expect(ready.json).toEqual({
      status: 'ready',
      checks: { policy: 'ok', listeners: 'ok' },
      load: { inFlight: 0, maxInFlight: 1024, admitting: 1024, saturated: false },
    });
  });
});

/**
 * What a red-team review of execute and request binding found (issue 19), kept as regressions: the {data}
 * answer streams, a body-less answer stays body-less, the audit entry names the request the app got, a copy
 * of a constrained path parameter is refused, an htu with a query binds nothing and is refused.
 */
import { randomBytes } from 'node:crypto';
import { importJWK, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openBatch, parseKeyring, type AuditBatch } from '../../src/audit/crypto.js';
import type { AuditEntry } from '../../src/audit/entry.js';
import { HttpAuditExporter } from '../../src/audit/exporters.js';
import { orderedLines, startCollector, type Collector } from '../support/collector.js';
import { startTestSidecar, type TestSidecar } from '../support/fixture.js';
import { call, open } from '../support/http.js';
import { until } from '../support/until.js';

const keys = parseKeyring(randomBytes(32).toString('base64'));
const ORIGIN = 'https://billing.example.com';
const execute = (capability: string, args: Record<string, unknown>) => JSON.stringify({ capability, arguments: args });

describe('execute, hardened', () => {
  let env: TestSidecar;
  let collector: Collector;
  const entries = (): AuditEntry[] => orderedLines(collector).flatMap((l) => openBatch<AuditEntry>(JSON.parse(l) as AuditBatch, keys));
  beforeAll(async () => {
    collector = await startCollector();
    env = await startTestSidecar({ logLevel: 'warn', audit: { keyring: keys, exporters: [new HttpAuditExporter(collector.url)], flushIntervalMs: 10 } });
  });
  afterAll(async () => {
    await env?.close();
    await collector?.close();
  });
  const exec = async (capability: string, args: Record<string, unknown>) =>
    call(env, { method: 'POST', path: '/capability/execute', token: await env.bot.signer.sign(capability), body: execute(capability, args) });

  // Was: the {data} wrap buffers the app's whole JSON answer (readJson in src/app/upstream.ts has no bound),
  // so a large or never-ending JSON answer is held in memory (measured: a 400 MB answer grew RSS by ~2.4 GiB,
  // the direct call streamed it). Here the app ends its body only once the caller has read its first bytes.
  it('streams a JSON answer as {"data": ...} instead of buffering all of it before the first byte', async () => {
    let finish: (() => void) | undefined;
    env.app.handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"items":[');
      finish = () => res.end('1]}');
    };
    try {
      const r = await open(env, {
        method: 'POST',
        path: '/capability/execute',
        token: await env.bot.signer.sign('getInvoice'),
        body: execute('getInvoice', { id: 'inv-1' }),
      });
      const chunks: Buffer[] = [];
      for await (const chunk of r.body) {
        chunks.push(chunk as Buffer);
        // A buffering sidecar would send nothing until the app ended: this loop would wait for ever.
        if (chunks.length === 1) finish?.();
      }
      expect(JSON.parse(Buffer.concat(chunks).toString())).toEqual({ data: { items: [1] } });
    } finally {
      env.app.handler = undefined;
    }
  });

  // Was: a 204 (or 304) JSON answer is "wrapped": Content-Length 11 for {"data":""} on a status that
  // cannot carry a body; the client sees a framing error (undici: body length does not match content-length).
  it('relays a 204 answer of the app as a 204 without a body', async () => {
    env.app.handler = (_req, res) => {
      res.writeHead(204, { 'content-type': 'application/json' });
      res.end();
    };
    try {
      const r = await exec('deleteInvoice', { id: 'inv-1' });
      expect(r.status).toBe(204);
    } finally {
      env.app.handler = undefined;
    }
  });

  // Was: the audit entry of an executed call records the execute request's method (POST) with the built
  // request's path: "POST /invoices/inv-1" for a DELETE the app received, and nothing says it came via execute.
  it('audits an executed DELETE as DELETE (the request the app got)', async () => {
    expect((await exec('deleteInvoice', { id: 'inv-1' })).status).toBe(200);
    expect(env.app.requests.at(-1)!.method).toBe('DELETE');
    await until(() => entries().some((e) => e.capability === 'deleteInvoice'));
    expect(entries().find((e) => e.capability === 'deleteInvoice')).toMatchObject({ method: 'DELETE', path: '/invoices/inv-1', via: '/capability/execute' });
  });

  // Was: a constrained PATH parameter is not
  // protected from a query copy. deleteInvoice allows id in [inv-1]; the app gets DELETE /invoices/inv-1?id%5B%5D=inv-2.
  // Laravel's $request->id / $request->input('id') read the input (query, body) before the route parameter,
  // PHP reads id[] as id; Symfony's $request->get() reads attributes first. Direct: DELETE /invoices/inv-1?id=inv-2 passes too.
  it('refuses arguments that are another spelling of a constrained path parameter', async () => {
    const seen = env.app.requests.length;
    const viaExecute = await exec('deleteInvoice', { id: 'inv-1', 'id[]': 'inv-2' });
    const direct = await call(env, { method: 'DELETE', path: '/invoices/inv-1?id=inv-2', token: await env.bot.signer.sign('deleteInvoice') });
    expect([viaExecute.status, direct.status]).toEqual([400, 400]);
    // In the body too: a JSON copy (any case), or a form field, of the refunded invoice's id.
    const refund = async (body: string, type = 'application/json') =>
      call(env, { method: 'POST', path: '/invoices/inv-1/refund', body, headers: { 'content-type': type }, token: await env.bot.signer.sign('refundInvoice') });
    expect((await refund('{"id":"inv-locked","amount":5}')).json).toMatchObject({ error: 'invalid_body' });
    expect((await refund('{"ID":"inv-locked","amount":5}')).json).toMatchObject({ error: 'invalid_body' });
    // A form copy, on a route whose only constraint is the path parameter (no JSON body required there).
    const formDelete = await call(env, {
      method: 'DELETE',
      path: '/invoices/inv-1',
      body: 'id=inv-2',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      token: await env.bot.signer.sign('deleteInvoice'),
    });
    expect(formDelete.json).toMatchObject({ error: 'invalid_body' });
    expect(env.app.requests.length).toBe(seen);
    expect((await refund('{"amount":5}')).status).toBe(200);
  });
});

describe('request binding, hardened', () => {
  let env: TestSidecar;
  beforeAll(async () => {
    env = await startTestSidecar({ logLevel: 'warn' });
  });
  afterAll(async () => env?.close());

  // Was: a token whose htu carries a query (or fragment) is accepted with the query ignored; the reference
  // server (and RFC 9449 §4.2: htu is "without query and fragment parts") refuses it. A signer that put the query
  // in htu believes it bound the query; a captured token is then good for the same path with any other query.
  it('refuses a token whose htu names a query (the reference server does)', async () => {
    const key = await importJWK(env.bot.privateJwk, 'EdDSA');
    const now = Math.floor(Date.now() / 1000);
    const token = await new SignJWT({ htm: 'GET', htu: `${ORIGIN}/invoices?customerId=c-100&limit=1` })
      .setProtectedHeader({ alg: 'EdDSA', typ: 'agent+jwt' })
      .setSubject(env.bot.id)
      .setIssuer(env.bot.signer.thumbprint)
      .setAudience('listInvoices')
      .setIssuedAt(now)
      .setExpirationTime(now + 60)
      .setJti(crypto.randomUUID())
      .sign(key);
    const r = await call(env, { path: '/invoices?customerId=c-200&limit=50', token });
    expect(r).toMatchObject({ status: 401, json: { error: 'request_binding_mismatch' } });
  });
});

import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openBatch, parseKeyring, type AuditBatch } from '../../src/audit/crypto.js';
import type { AuditEntry } from '../../src/audit/entry.js';
import { HttpAuditExporter } from '../../src/audit/exporters.js';
import { orderedLines, startCollector, type Collector } from '../support/collector.js';
import { startTestSidecar, type TestSidecar } from '../support/fixture.js';
import { call } from '../support/http.js';
import { until } from '../support/until.js';

const keys = parseKeyring(randomBytes(32).toString('base64'));

/**
 * Admission control: a sidecar with a small in-flight bound serves what it holds and refuses the excess at
 * once (503 overloaded, Retry-After), audited and counted; a caller that hangs up is recorded as 499.
 */
describe('overload: calls past --max-in-flight are shed, not queued', () => {
  let env: TestSidecar;
  let collector: Collector;
  const entries = (): AuditEntry[] => orderedLines(collector).flatMap((l) => openBatch<AuditEntry>(JSON.parse(l) as AuditBatch, keys));
  /** Requests the app is holding, released by the test. */
  const held: (() => void)[] = [];

  beforeAll(async () => {
    collector = await startCollector();
    env = await startTestSidecar({
      logLevel: 'warn',
      maxInFlight: 2,
      audit: { keyring: keys, exporters: [new HttpAuditExporter(collector.url)], flushIntervalMs: 10 },
    });
    env.app.handler = (_req, res) => {
      held.push(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"ok":true}');
      });
    };
  });
  afterAll(async () => {
    for (const release of held.splice(0)) release();
    await env?.close();
    await collector?.close();
  });

  it('serves the calls it holds and answers the next one 503 overloaded with Retry-After, before the app', async () => {
    const inFlight = [0, 1].map(async () => call(env, { path: '/invoices/inv-1', token: await env.bot.signer.sign('getInvoice') }));
    await until(() => held.length === 2);
    const seen = env.app.requests.length;
    const shed = await call(env, { path: '/invoices/inv-1', token: await env.bot.signer.sign('getInvoice') });
    expect(shed.status).toBe(503);
    expect(shed.json).toMatchObject({ error: 'overloaded' });
    expect(shed.headers['retry-after']).toBe('1');
    expect(env.app.requests.length).toBe(seen);

    const metrics = (await call(env.adminUrl, { path: '/metrics' })).text;
    expect(metrics).toMatch(/agents_chain_calls_in_flight 2\b/);
    expect(metrics).toMatch(/agents_chain_calls_in_flight_limit 2\b/);
    expect(metrics).toMatch(/agents_chain_denials_total\{[^}]*reason="overloaded"[^}]*\} 1\b/);
    // /readyz reports the saturation and stays ready.
    expect(await call(env.adminUrl, { path: '/readyz' })).toMatchObject({
      status: 200,
      json: { status: 'ready', load: { inFlight: 2, maxInFlight: 2, saturated: true } },
    });

    for (const release of held.splice(0)) release();
    expect((await Promise.all(inFlight)).map((r) => r.status)).toEqual([200, 200]);
    // Admitted again once the bound has room.
    const after = call(env, { path: '/invoices/inv-1', token: await env.bot.signer.sign('getInvoice') });
    await until(() => held.length === 1);
    held.splice(0)[0]!();
    expect((await after).status).toBe(200);

    await until(() => entries().some((e) => e.denialReason === 'overloaded'));
    expect(entries().find((e) => e.denialReason === 'overloaded')).toMatchObject({ result: 'error', status: 503, path: '/invoices/inv-1' });
  });

  it('a caller that hangs up while the app works is recorded as 499 client_closed_request, not an upstream failure', async () => {
    const token = await env.bot.signer.sign('getInvoice');
    const { port } = new URL(env.url);
    const req = httpRequest({ host: '127.0.0.1', port, path: '/invoices/inv-2', headers: { authorization: `Bearer ${token}` } });
    req.on('error', () => undefined);
    req.end();
    await until(() => held.length === 1);
    req.destroy();
    await until(() => entries().some((e) => e.path === '/invoices/inv-2'));
    expect(entries().find((e) => e.path === '/invoices/inv-2')).toMatchObject({ status: 499, denialReason: 'client_closed_request' });
    held.splice(0)[0]!();
  });
});

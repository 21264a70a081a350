import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { billingPolicy, startTestSidecar, type TestSidecar } from '../support/fixture.js';
import { call } from '../support/http.js';

const ex = (capability: string, args: Record<string, unknown>) => JSON.stringify({ capability, arguments: args });
const log = (...a: unknown[]) => console.log('PROBE', ...a.map((x) => (typeof x === 'string' ? x : JSON.stringify(x))));

describe('probe seed', () => {
  let env: TestSidecar;
  beforeAll(async () => {
    env = await startTestSidecar({
      logLevel: 'warn',
      policy: (agents) =>
        billingPolicy(agents)
          .replace(
            '  - { name: streamEvents',
            '  - { name: headInvoice, method: HEAD, path: "/heads/{id}" }\n  - { name: optionsInvoices, method: OPTIONS, path: /opts }\n  - { name: streamEvents',
          )
          .concat(`  - { agent: ${agents.bot.id}, capability: headInvoice, status: active }\n  - { agent: ${agents.bot.id}, capability: optionsInvoices, status: active }\n`),
    });
  });
  afterAll(async () => env.close());
  const exec = async (cap: string, args: Record<string, unknown>, headers?: Record<string, string>, token?: string) =>
    call(env, { method: 'POST', path: '/capability/execute', token: token ?? (await env.bot.signer.sign(cap)), body: ex(cap, args), headers });
  const last = () => env.app.requests.at(-1)!;

  it('A dot segments', async () => {
    for (const id of ['..', '.', 'a/b', '%2e%2e', ' ', 'inv-1#x', 'inv-1?x=1']) {
      const n = env.app.requests.length;
      const r = await exec('getInvoice', { id });
      log('A', id, r.status, r.json?.error, r.json?.message, env.app.requests.length > n ? last().url : '-');
    }
  });
  it('B path param duplicated in query', async () => {
    let n = env.app.requests.length;
    let r = await exec('deleteInvoice', { id: 'inv-1', 'id[]': 'inv-2' });
    log('B exec', r.status, r.json?.error, env.app.requests.length > n ? last().url : '-');
    n = env.app.requests.length;
    r = await exec('deleteInvoice', { id: 'inv-1', ID: 'inv-2' });
    log('B exec ID', r.status, r.json?.error, env.app.requests.length > n ? last().url : '-');
    n = env.app.requests.length;
    r = await call(env, { method: 'DELETE', path: '/invoices/inv-1?id=inv-2', token: await env.bot.signer.sign('deleteInvoice') });
    log('B direct', r.status, r.json?.error, env.app.requests.length > n ? last().url : '-');
    n = env.app.requests.length;
    r = await exec('refundInvoice', { id: 'inv-1', amount: 5 , });
    log('B refund', r.status, r.json?.error, env.app.requests.length > n ? [last().url, last().body.toString()] : '-');
    n = env.app.requests.length;
    r = await call(env, { method: 'POST', path: '/invoices/inv-1/refund', body: '{"id":"inv-locked","amount":5}', token: await env.bot.signer.sign('refundInvoice') });
    log('B refund direct id in body', r.status, r.json?.error, env.app.requests.length > n ? [last().url, last().body.toString()] : '-');
  });
  it('C HEAD / OPTIONS', async () => {
    for (const [cap, args] of [['headInvoice', { id: 'inv-1' }], ['optionsInvoices', { x: 1 }]] as const) {
      const n = env.app.requests.length;
      const r = await exec(cap, args);
      log('C', cap, r.status, r.headers['content-length'], r.text, env.app.requests.length > n ? [last().method, last().url, last().headers] : '-');
    }
  });
  it('D 204 / 304 from app', async () => {
    for (const status of [204, 205, 304, 201]) {
      env.app.handler = (_req, res) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(status === 204 || status === 304 ? undefined : '{"a":1}');
      };
      try {
        const r = await exec('getInvoice', { id: 'inv-1' });
        log('D', status, r.status, r.headers['content-length'], JSON.stringify(r.text));
      } catch (e) {
        log('D', status, 'client error', (e as Error).message);
      }
    }
    env.app.handler = undefined;
  });
  it('E/F content-type and headers forwarded', async () => {
    const amt = { amount: 5, currency: 'USD', customer: { tier: 'gold' }, dryRun: false };
    let r = await exec('createInvoice', amt, { 'content-type': 'application/vnd.x+json; charset=utf-8', 'content-encoding': 'identity', 'content-md5': 'abc', digest: 'sha-256=xyz', 'content-digest': 'sha-256=:x:', 'content-range': 'bytes 0-1/2' });
    log('E', r.status, r.json?.error, last().headers);
    r = await exec('getInvoice', { id: 'inv-1' }, { 'content-encoding': 'identity', 'content-language': 'de' });
    log('F get', r.status, last().headers);
  });
  it('G replay across execute and direct', async () => {
    const t = await env.bot.signer.sign('getInvoice');
    const a = await exec('getInvoice', { id: 'inv-1' }, undefined, t);
    const b = await call(env, { path: '/invoices/inv-1', token: t });
    const t2 = await env.bot.signer.sign('getInvoice');
    const c = await call(env, { path: '/invoices/inv-1', token: t2 });
    const d = await exec('getInvoice', { id: 'inv-1' }, undefined, t2);
    log('G', a.status, b.status, b.json?.error, c.status, d.status, d.json?.error);
  });
  it('H/I query tricks', async () => {
    for (const args of [
      { customerId: 'c-100', limit: 10, 'limit[]': 1000 },
      { customerId: 'c-100', limit: 10, _method: 'DELETE' },
      { customerId: 'c-100', limit: 10, 'limit ': 1000 },
      { customerId: 'c-100', limit: 10, 'Limit': 1000 },
      { customerId: 'c-100', limit: true },
      { customerId: 'c-100', limit: 1e21 },
      { customerId: 'c-100', limit: -0 },
      { customerId: 'c-100', limit: '10&limit=1000' },
      { customerId: 'c-100', 'limit=1000&x': 1, limit: 1 },
    ]) {
      const n = env.app.requests.length;
      const r = await exec('listInvoices', args);
      log('H', args, r.status, r.json?.error, r.json?.message, env.app.requests.length > n ? last().url : '-');
    }
  });
  it('K proto and numbers', async () => {
    for (const raw of [
      '{"capability":"createInvoice","arguments":{"__proto__":{"amount":5000},"amount":5,"currency":"USD","customer":{"tier":"gold"},"dryRun":false}}',
      '{"capability":"createInvoice","arguments":{"amount":5,"currency":"USD","customer":{"tier":"gold","__proto__":{"tier":"internal"}},"dryRun":false}}',
      '{"capability":"createInvoice","arguments":{"amount":1e400,"currency":"USD","customer":{"tier":"gold"},"dryRun":false}}',
      '{"capability":"createInvoice","arguments":{"amount":5,"currency":"USD","customer":{"tier":"gold"},"dryRun":false, "_method":"DELETE"}}',
      '{"capability":"createInvoice","arguments":{"amount":5,"currency":"USD","customer":{"tier":"gold"},"dryRun":false, "x":"\\ud800"}}',
      '{"capability":"createInvoice","arguments":{"amount":5,"currency":"USD","customer":{"tier":"gold"},"dryRun":false, "amoun\\u0074":6}}',
    ]) {
      const n = env.app.requests.length;
      const r = await call(env, { method: 'POST', path: '/capability/execute', token: await env.bot.signer.sign('createInvoice'), body: raw });
      log('K', r.status, r.json?.error, r.json?.message, env.app.requests.length > n ? last().body.toString() : '-');
    }
  });
  it('O/P/Q execute path variants', async () => {
    for (const [m, p] of [['POST', '/capability/execute/'], ['POST', '/capability/execute?limit=1000'], ['POST', '//capability/execute'], ['POST', '/capability/%65xecute'], ['PUT', '/capability/execute'], ['GET', '/capability/execute'], ['HEAD', '/capability/execute'], ['OPTIONS', '/capability/execute'], ['POST', '/CAPABILITY/execute']] as const) {
      const n = env.app.requests.length;
      const r = await call(env, { method: m, path: p, token: await env.bot.signer.sign('getInvoice'), body: m === 'GET' || m === 'HEAD' ? undefined : ex('getInvoice', { id: 'inv-1' }) });
      log('P', m, p, r.status, r.json?.error, env.app.requests.length > n ? [last().method, last().url] : '-');
    }
  });
  it('chunked execute body', async () => {
    const token = await env.bot.signer.sign('getInvoice');
    const u = new URL(env.url);
    const body = ex('getInvoice', { id: 'inv-1' });
    const sock = connect(Number(u.port), u.hostname);
    await new Promise((r) => sock.once('connect', r));
    const n = env.app.requests.length;
    const out: Buffer[] = [];
    sock.on('data', (c) => out.push(c));
    sock.write(`POST /capability/execute HTTP/1.1\r\nHost: s\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`);
    await new Promise((r) => sock.once('close', r));
    log('chunked', Buffer.concat(out).toString().split('\r\n')[0], env.app.requests.length > n ? [last().method, last().url, last().headers] : '-');
  });
});

import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openBatch, parseKeyring, type AuditBatch } from '../../src/audit/crypto.js';
import type { AuditEntry } from '../../src/audit/entry.js';
import { HttpAuditExporter } from '../../src/audit/exporters.js';
import { orderedLines, startCollector, type Collector } from '../support/collector.js';
import { startTestSidecar, type TestSidecar } from '../support/fixture.js';
import { call } from '../support/http.js';
import { until } from '../support/until.js';

const keys = parseKeyring(randomBytes(32).toString('base64'));
const execFileAsync = promisify(execFile);

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
      json: { status: 'ready', load: { inFlight: 2, maxInFlight: 2, admitting: 2, saturated: true } },
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

  it('keeps the connection after a refusal when the unread body is small, and closes it for a chunked one', async () => {
    const inFlight = [0, 1].map(async () => call(env, { path: '/invoices/inv-1', token: await env.bot.signer.sign('getInvoice') }));
    await until(() => held.length === 2);
    const { port } = new URL(env.url);
    const socket = connect(Number(port), '127.0.0.1');
    await once(socket, 'connect');
    const body = '{"amount":5}';
    const post = `POST /invoices HTTP/1.1\r\nHost: sidecar\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    // Twice on one connection: Node read past the first body, and the second request was parsed after it.
    for (let i = 0; i < 2; i++) {
      socket.write(post);
      const head = await readResponse(socket);
      expect(head).toMatch(/^HTTP\/1\.1 503 /);
      expect(head).toMatch(/\r\nretry-after: 1\r\n/i);
      expect(head).not.toMatch(/\r\nconnection: close\r\n/i);
    }
    // A body of unknown length would be read for nothing: the connection is closed instead.
    socket.write('POST /invoices HTTP/1.1\r\nHost: sidecar\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n');
    expect(await readResponse(socket)).toMatch(/\r\nconnection: close\r\n/i);
    socket.destroy();
    for (const release of held.splice(0)) release();
    expect((await Promise.all(inFlight)).map((r) => r.status)).toEqual([200, 200]);
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

/**
 * The adaptive bound: an app that keeps the event loop busy (it runs in this process, so each of its calls
 * holds the sidecar's loop too) makes every window late; the bound drops, and calls past it are shed while
 * the loop is behind. Which calls are shed depends on timing; that some are, and that the rest are served,
 * does not.
 */
describe('overload: while the event loop is behind, fewer calls are admitted at once', () => {
  let env: TestSidecar;
  beforeAll(async () => {
    env = await startTestSidecar({ logLevel: 'warn', maxEventLoopDelayMs: 5 });
    env.app.handler = (_req, res) => {
      // 20 ms of CPU on the shared loop per call.
      const end = performance.now() + 20;
      while (performance.now() < end);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
    };
  });
  afterAll(async () => {
    await env?.close();
  });

  it('sheds calls past the lowered bound with 503 overloaded (naming the loop), serves the rest, and admits again once the loop keeps up', async () => {
    const tokens = await Promise.all(Array.from({ length: 100 }, () => env.bot.signer.sign('getInvoice')));
    // Another process sends: this one's loop is the sidecar's, busy with the app. 80 calls at once (about 1.6 s
    // of the app's CPU, every 10 ms window ending late), then 20 more once the bound has had time to drop.
    const replies = await waves(`${env.url}/invoices/inv-1`, [tokens.slice(0, 80), tokens.slice(80)], 300);
    expect(replies.every((r) => r.status === 200 || r.status === 503)).toBe(true);
    const shed = replies.filter((r) => r.status === 503);
    expect(shed.length).toBeGreaterThan(0);
    expect(shed[0]).toMatchObject({ retryAfter: '1', json: { error: 'overloaded' } });
    expect(shed[0]!.json.message).toMatch(/ms for this sidecar's CPU/);
    expect(replies.filter((r) => r.status === 200).length).toBeGreaterThan(0);
    const metrics = (await call(env.adminUrl, { path: '/metrics' })).text;
    expect(metrics).toMatch(new RegExp(`agents_chain_denials_total\\{[^}]*reason="overloaded"[^}]*\\} ${shed.length}\\b`));
    // The loop is idle again: the bound grows back and a call goes through.
    await until(async () => (await call(env, { path: '/invoices/inv-1', token: await env.bot.signer.sign('getInvoice') })).status === 200);
  });
});

/** GETs `url` from a child process, one wave of tokens after the other (`gapMs` apart), all of a wave at once. */
async function waves(url: string, tokens: string[][], gapMs: number): Promise<{ status: number; retryAfter?: string; json: any }[]> {
  const script = `
    const http = await import('node:http');
    const [url, waves, gap] = JSON.parse(process.argv[1]);
    const get = (token) => new Promise((resolve) => {
      const req = http.request(url, { agent: false, headers: { authorization: 'Bearer ' + token } }, (res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode, retryAfter: res.headers['retry-after'], json: JSON.parse(body || 'null') }));
      });
      req.on('error', (e) => resolve({ status: 0, error: e.message }));
      req.end();
    });
    const all = [];
    for (const wave of waves) {
      all.push(...wave.map(get));
      await new Promise((r) => setTimeout(r, gap));
    }
    process.stdout.write(JSON.stringify(await Promise.all(all)));
  `;
  const { stdout } = await execFileAsync(process.execPath, ['--input-type=module', '-e', script, JSON.stringify([url, tokens, gapMs])], { maxBuffer: 1 << 24 });
  return JSON.parse(stdout) as { status: number; retryAfter?: string; json: any }[];
}

/** One response from a raw socket: its head (status line and headers), once the body it announces has arrived. */
async function readResponse(socket: Socket): Promise<string> {
  let text = '';
  for (;;) {
    const end = text.indexOf('\r\n\r\n');
    const length = Number(/\r\ncontent-length: (\d+)/i.exec(text)?.[1] ?? NaN);
    if (end >= 0 && text.length >= end + 4 + length) {
      const rest = text.slice(end + 4 + length);
      if (rest) socket.unshift(Buffer.from(rest));
      return text.slice(0, end + 2);
    }
    const [chunk] = (await once(socket, 'data')) as [Buffer];
    text += chunk.toString('latin1');
  }
}

import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { Agent, request as httpRequest } from 'node:http';
import { mkdtemp, readFile, readdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createAgentSigner } from '../../src/identity/client.js';
import { ROOT, requireBuild, runCli, startCli, startupFailure, serveArgs } from '../support/cli.js';
import { call } from '../support/http.js';
import { startRecorder } from '../support/recorder.js';
import { until } from '../support/until.js';

interface Phase {
  time: string;
  msg: string;
  phase?: string;
}

/** The sidecar's JSON log lines that name a shutdown phase. */
function phases(output: string): Phase[] {
  return output
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Phase)
    .filter((l) => l.phase);
}

interface Exchange {
  status: number;
  localPort: number;
  connection?: string;
  body: string;
}

/**
 * One GET on a connection of `agent`'s (agent: false opens a new TCP connection for this call alone). Not `call`
 * (support/http.ts): these tests need the local port of the connection a call went over, and node:http's
 * per-call connection choice, to tell a pooled connection from a new one.
 */
function get(url: string, token: string | undefined, agent: Agent | false): Promise<Exchange> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { agent, headers: token ? { authorization: `Bearer ${token}` } : {} }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode!, localPort: req.socket!.localPort!, connection: res.headers.connection, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

describe('signals during a drain', () => {
  it('a second SIGTERM does not cut the drain short: the sidecar still stops cleanly, exit 0', async () => {
    requireBuild();
    const app = await startRecorder();
    const sc = await startCli(serveArgs(app.url, '--drain-delay-ms', '1500'), /sidecar listening/);
    try {
      const exited = once(sc.child, 'exit');
      sc.child.kill('SIGTERM');
      await until(() => sc.output().includes('"phase":"drain_delay"'));
      sc.child.kill('SIGTERM');
      const [code, signal] = await exited;
      expect({ code, signal }).toEqual({ code: 0, signal: null });
      expect(sc.output()).toContain('"phase":"stopped"');
    } finally {
      await app.close();
    }
  });
});

describe('graceful shutdown', () => {
  it('SIGTERM under load: every call in flight completes, the audit trail drains, exit 0 within the grace period', async () => {
    requireBuild();
    const dir = await mkdtemp(join(tmpdir(), 'agents-chain-shutdown-'));
    const keyFile = join(dir, 'audit.key');
    await writeFile(keyFile, `${randomBytes(32).toString('base64')}\n`);
    const app = await startRecorder();
    // The app holds every call until the test has seen the drain begin: they are in flight through SIGTERM.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    app.handler = (_r, res) =>
      void held.then(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"ok":true}');
      });
    const exported = join(dir, 'audit.jsonl');
    const sc = await startCli(
      serveArgs(
        app.url,
        '--audit-key-file',
        keyFile,
        '--audit-spool',
        join(dir, 'spool'),
        '--audit-export',
        `file:${exported}`,
        '--shutdown-grace-ms',
        '4000',
        '--audit-drain-ms',
        '2000',
        '--drain-delay-ms',
        '0',
      ),
      /sidecar listening/,
    ); // the grace alone: the rollout test below covers the delay
    const { listen, admin } = JSON.parse(sc.line) as { listen: string; admin: string };
    const bot = await createAgentSigner(JSON.parse(await readFile(`${ROOT}config/examples/keys/billing-bot.private.jwk.json`, 'utf8')), 'agent-billing-bot');
    try {
      const calls = await Promise.all(Array.from({ length: 10 }, async (_, i) => bot.sign('getInvoice', { jti: `shutdown-${i}` })));
      const inFlight = calls.map((token, i) => call(listen, { path: `/invoices/inv-${i}`, token }).then((r) => r.status));
      await until(() => app.requests.length >= 10); // all ten held by the app
      const t0 = Date.now();
      sc.child.kill('SIGTERM');
      await until(() => sc.output().includes('"phase":"stop_accepting"')); // the sidecar is draining
      const ready = await call(admin, { path: '/readyz' });
      expect(ready.status).toBe(503); // not ready while calls finish
      release();
      expect(await Promise.all(inFlight)).toEqual(Array(10).fill(200));
      const [code] = await once(sc.child, 'exit');
      expect(code).toBe(0);
      expect(Date.now() - t0).toBeLessThan(6000);
      // Every call's entry reached the exporter; nothing was left behind in the spool.
      const decrypted = await runCli(['audit', 'decrypt', '--audit-key-file', keyFile, exported]);
      const entries = decrypted.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { jti: string; status: number });
      expect(entries.filter((e) => e.jti?.startsWith('shutdown-')).map((e) => e.status)).toEqual(Array(10).fill(200));
      expect((await readdir(join(dir, 'spool'))).filter((f) => f.endsWith('.batch'))).toEqual([]);
    } finally {
      release();
      if (sc.child.exitCode === null) sc.child.kill('SIGKILL');
      await app.close();
    }
  }, 20_000);

  it('rollout: SIGTERM while clients keep opening new connections: /readyz is 503 at once, no connection refused and no call failed during the drain delay, then the listener refuses and the process exits 0', async () => {
    requireBuild();
    const DELAY = 4000;
    const app = await startRecorder();
    // One call the app holds until the test lets it go: it is in flight when the listener stops accepting.
    let releaseHeld!: () => void;
    const held = new Promise<void>((r) => (releaseHeld = r));
    app.handler = (r, res) => {
      const answer = (): void => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"ok":true}');
      };
      if (r.url === '/invoices/inv-held') void held.then(answer);
      else answer();
    };
    const sc = await startCli(serveArgs(app.url, '--drain-delay-ms', String(DELAY), '--shutdown-grace-ms', '10000'), /sidecar listening/);
    const { listen, admin } = JSON.parse(sc.line) as { listen: string; admin: string };
    const bot = await createAgentSigner(JSON.parse(await readFile(`${ROOT}config/examples/keys/billing-bot.private.jwk.json`, 'utf8')), 'agent-billing-bot');
    const keepAlive = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      // A client with a pooled connection from before the rollout.
      const before = await get(`${listen}/invoices/inv-1`, await bot.sign('getInvoice'), keepAlive);
      expect(before).toMatchObject({ status: 200, connection: 'keep-alive' });

      // Clients that open a new connection for every call, from before SIGTERM until told to stop.
      type Result = { startedAt: number; status?: number; error?: string };
      const results: Result[] = [];
      let stopAt = Infinity;
      const client = async (): Promise<void> => {
        while (Date.now() < stopAt) {
          const token = await bot.sign('getInvoice');
          const r: Result = { startedAt: Date.now() };
          results.push(r);
          try {
            const x = await get(`${listen}/invoices/inv-2`, token, false);
            r.status = x.status;
          } catch (err) {
            r.error = (err as NodeJS.ErrnoException).code ?? String(err);
          }
        }
      };
      const clients = Array.from({ length: 4 }, client);
      await until(() => results.filter((r) => r.status === 200).length >= 8);

      sc.child.kill('SIGTERM');
      await until(() => phases(sc.output()).some((p) => p.phase === 'drain_delay'));
      // From the moment the sidecar drains, readiness fails (the endpoints controller stops sending)...
      const ready = await call(admin, { path: '/readyz' });
      expect(ready.status).toBe(503);
      expect(ready.json).toMatchObject({ status: 'draining', checks: { listeners: 'ok' } });
      const drainStart = Date.parse(phases(sc.output()).find((p) => p.phase === 'drain_delay')!.time);
      // ...while the clients, which have not heard yet, keep calling until just before the delay ends, as
      // they would until the endpoint removal reaches them.
      stopAt = drainStart + DELAY - 1000;
      // The pooled connection is still served, and told to close so that its client reconnects elsewhere.
      const pooled = await get(`${listen}/invoices/inv-1`, await bot.sign('getInvoice'), keepAlive);
      expect(pooled).toMatchObject({ status: 200, localPort: before.localPort, connection: 'close' });
      const heldCall = get(`${listen}/invoices/inv-held`, await bot.sign('getInvoice'), false);
      heldCall.catch(() => {}); // awaited below; an earlier failed assertion must not leave it unhandled
      const probes: number[] = [];
      while (Date.now() < stopAt) {
        probes.push((await call(admin, { path: '/readyz' })).status);
        await new Promise((r) => setTimeout(r, 100)); // a probe period (as a kubelet's), not a wait for an event
      }
      await Promise.all(clients);

      // Nothing refused, nothing failed (each call on a connection of its own: `agent: false`; the kernel may reuse
      // a local port once the previous connection is closed, so ports are not compared), and calls all through the delay.
      expect(results.filter((r) => r.error !== undefined || r.status !== 200)).toEqual([]);
      const during = results.filter((r) => r.startedAt >= drainStart);
      expect(during.length).toBeGreaterThan(20);
      expect(Math.max(...during.map((r) => r.startedAt))).toBeGreaterThan(drainStart + DELAY - 2000);
      expect(new Set(probes)).toEqual(new Set([503]));
      // Not a phase yet: the drain delay is not over while the clients were calling.
      expect(phases(sc.output()).map((p) => p.phase)).toEqual(['drain_delay']);

      // After the delay: the listener refuses new connections; the call in flight finishes; exit 0.
      await until(() => phases(sc.output()).some((p) => p.phase === 'stop_accepting'));
      expect(phases(sc.output()).find((p) => p.phase === 'stop_accepting')).toMatchObject({ inFlight: 1 });
      await expect(get(`${listen}/invoices/inv-3`, await bot.sign('getInvoice'), false)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
      const notReady = await call(admin, { path: '/readyz' });
      expect(notReady.status).toBe(503);
      expect(notReady.json).toMatchObject({ status: 'draining', checks: { listeners: 'failing' } });
      releaseHeld();
      expect(await heldCall).toMatchObject({ status: 200, connection: 'close' });
      const [code] = await once(sc.child, 'exit');
      expect(code).toBe(0);
      expect(phases(sc.output()).map((p) => p.phase)).toEqual(['drain_delay', 'stop_accepting', 'stopped']);
      // The app saw every call the sidecar accepted.
      expect(app.requests.filter((r) => r.url === '/invoices/inv-2').length).toBe(results.length);
    } finally {
      keepAlive.destroy();
      releaseHeld();
      if (sc.child.exitCode === null) sc.child.kill('SIGKILL');
      await app.close();
    }
  }, 30_000);

  it('--drain-delay-ms and AGENTS_CHAIN_DRAIN_DELAY_MS: 0 stops accepting at once, a value that is not a whole number of ms is refused, SIGINT skips the delay', async () => {
    requireBuild();
    const app = await startRecorder();
    const args = ['serve', '--policy', `${ROOT}config/examples/billing.yaml`, '--upstream', app.url, '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0'];
    try {
      const bad = await runCli([...args, '--drain-delay-ms', '5s']);
      expect(bad.code).toBe(2);
      expect(startupFailure(bad).error).toMatch(/--drain-delay-ms \(AGENTS_CHAIN_DRAIN_DELAY_MS\) must be a whole number of milliseconds, 0 or more, got "5s"/);
      const negative = await runCli(args, { AGENTS_CHAIN_DRAIN_DELAY_MS: '-1' });
      expect(negative.code).toBe(2);
      expect(startupFailure(negative).error).toMatch(/got "-1"/);
      expect((await runCli(['serve', '--help'])).stdout).toMatch(/--drain-delay-ms N .*\[5000; 0: none;/s);
      // The environment variable alone: no delay phase, straight to stop accepting.
      // Started: the admin listener answers (serve's signal handlers are installed before it starts listening).
      const started = async (env: NodeJS.ProcessEnv) => {
        const sc = await startCli(args, /sidecar listening/, env);
        expect((await call((JSON.parse(sc.line) as { admin: string }).admin, { path: '/healthz' })).status).toBe(200);
        return sc;
      };
      const none = await started({ AGENTS_CHAIN_DRAIN_DELAY_MS: '0' });
      none.child.kill('SIGTERM');
      expect((await once(none.child, 'exit'))[0]).toBe(0);
      expect(phases(none.output()).map((p) => p.phase)).toEqual(['stop_accepting', 'stopped']);
      // A long delay from the environment; Ctrl-C (SIGINT) does not wait for it.
      const long = await started({ AGENTS_CHAIN_DRAIN_DELAY_MS: '600000' });
      long.child.kill('SIGINT');
      expect((await once(long.child, 'exit'))[0]).toBe(0);
      expect(phases(long.output()).map((p) => p.phase)).toEqual(['stop_accepting', 'stopped']);
      // SIGTERM starts the long delay; a SIGINT then ends it.
      const cut = await started({ AGENTS_CHAIN_DRAIN_DELAY_MS: '600000' });
      cut.child.kill('SIGTERM');
      await until(() => phases(cut.output()).some((p) => p.phase === 'drain_delay'));
      cut.child.kill('SIGINT');
      expect((await once(cut.child, 'exit'))[0]).toBe(0);
      expect(phases(cut.output()).map((p) => p.phase)).toEqual(['drain_delay', 'stop_accepting', 'stopped']);
    } finally {
      await app.close();
    }
  }, 30_000);

  it('a caller waiting for a human is released at the deadline with 503 shutting_down and the status URL', async () => {
    const { startApprovalEnv } = await import('../support/approvals.js');
    const env = await startApprovalEnv({ shutdownGraceMs: 1500 });
    const waiting = call(env, {
      method: 'POST',
      path: '/agent/request-permission',
      token: await env.bot.signer.sign('request_permission'),
      body: { capability: 'send_sms', args: { to: '+1', body: 'x' }, reason: 'shutdown test' },
    });
    await env.inbox.nextRequest();
    const t0 = Date.now();
    const closing = env.close();
    const r = await waiting;
    expect(r.status).toBe(503);
    const body = r.json as { error: string; statusUrl: string; requestId: string };
    expect(body).toMatchObject({ error: 'shutting_down', statusUrl: `/agent/request-permission/${body.requestId}` });
    expect(r.headers.location).toBe(body.statusUrl);
    await closing;
    expect(Date.now() - t0).toBeLessThan(3000);
  });
});

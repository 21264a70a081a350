import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, readFile, readdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { request } from 'undici';
import { createAgentSigner } from '../../src/identity/client.js';
import { ROOT, requireBuild, runCli, startCli } from '../support/cli.js';
import { startRecorder } from '../support/recorder.js';

describe('graceful shutdown', () => {
  it('SIGTERM under load: every call in flight completes, the audit trail drains, exit 0 within the grace period', async () => {
    requireBuild();
    const dir = await mkdtemp(join(tmpdir(), 'agents-chain-shutdown-'));
    const keyFile = join(dir, 'audit.key');
    await writeFile(keyFile, `${randomBytes(32).toString('base64')}\n`);
    const app = await startRecorder();
    app.handler = (_r, res) => void setTimeout(() => { res.writeHead(200, { 'content-type': 'application/json' }); res.end('{"ok":true}'); }, 500);
    const exported = join(dir, 'audit.jsonl');
    const sc = await startCli(['serve', '--policy', `${ROOT}config/examples/billing.yaml`, '--upstream', app.url, '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0',
      '--audit-key-file', keyFile, '--audit-spool', join(dir, 'spool'), '--audit-export', `file:${exported}`, '--shutdown-grace-ms', '4000', '--audit-drain-ms', '2000'], /sidecar listening/);
    const { listen, admin } = JSON.parse(sc.line) as { listen: string; admin: string };
    const bot = await createAgentSigner(JSON.parse(await readFile(`${ROOT}config/examples/keys/billing-bot.private.jwk.json`, 'utf8')), 'agent-billing-bot');
    try {
      const calls = await Promise.all(Array.from({ length: 10 }, async (_, i) => bot.sign('getInvoice', { jti: `shutdown-${i}` })));
      const inFlight = calls.map((token, i) => request(`${listen}/invoices/inv-${i}`, { headers: { authorization: `Bearer ${token}` } }).then(async (r) => { await r.body.text(); return r.statusCode; }));
      while (app.requests.length < 10) await new Promise((r) => setTimeout(r, 10));
      const t0 = Date.now();
      sc.child.kill('SIGTERM');
      await new Promise((r) => setTimeout(r, 100));
      const ready = await fetch(`${admin}/readyz`);
      expect(ready.status).toBe(503); // not ready while calls finish
      expect(await Promise.all(inFlight)).toEqual(Array(10).fill(200));
      const [code] = await once(sc.child, 'exit');
      expect(code).toBe(0);
      expect(Date.now() - t0).toBeLessThan(6000);
      // Every call's entry reached the exporter; nothing was left behind in the spool.
      const decrypted = await runCli(['audit', 'decrypt', '--audit-key-file', keyFile, exported]);
      const entries = decrypted.stdout.trim().split('\n').map((l) => JSON.parse(l) as { jti: string; status: number });
      expect(entries.filter((e) => e.jti?.startsWith('shutdown-')).map((e) => e.status)).toEqual(Array(10).fill(200));
      expect((await readdir(join(dir, 'spool'))).filter((f) => f.endsWith('.batch'))).toEqual([]);
    } finally {
      if (sc.child.exitCode === null) sc.child.kill('SIGKILL');
      await app.close();
    }
  }, 20_000);

  it('a caller waiting for a human is released at the deadline with 503 shutting_down and the status URL', async () => {
    const { startApprovalEnv } = await import('../support/approvals.js');
    const env = await startApprovalEnv({ shutdownGraceMs: 1500 });
    const waiting = request(`${env.sidecar.url}/agent/request-permission`, {
      method: 'POST',
      headers: { authorization: `Bearer ${await env.bot.signer.sign('request_permission')}`, 'content-type': 'application/json' },
      body: JSON.stringify({ capability: 'send_sms', args: { to: '+1', body: 'x' }, reason: 'shutdown test' }),
    });
    await env.inbox.nextRequest();
    const t0 = Date.now();
    const closing = env.close();
    const r = await waiting;
    expect(r.statusCode).toBe(503);
    const body = await r.body.json() as { error: string; statusUrl: string; requestId: string };
    expect(body).toMatchObject({ error: 'shutting_down', statusUrl: `/agent/request-permission/${body.requestId}` });
    expect(r.headers.location).toBe(body.statusUrl);
    await closing;
    expect(Date.now() - t0).toBeLessThan(3000);
  });
});

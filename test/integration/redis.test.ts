import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { createAgentSigner } from '../../src/identity/client.js';
import { createLogger } from '../../src/log.js';
import { loadPolicyText } from '../../src/policy/load.js';
import { startSidecar, type Sidecar } from '../../src/sidecar/start.js';
import { ADMIN_TOKEN, smsPolicy, startInbox, type Inbox } from '../support/approvals.js';
import { ROOT, requireBuild, startCli } from '../support/cli.js';
import { billingPolicy, startEnv, testAgent, type TestAgent } from '../support/fixture.js';
import { startRecorder, type Recorder } from '../support/recorder.js';
import { seedReplayWindow } from '../support/global-setup.js';
import { disposableRedis, REDIS_URL, testPrefix } from '../support/redis.js';
import { until } from '../support/until.js';

/** The sidecar's and the agent's clock, moved by hand past the 30 s in which a detected loss refuses fresh tokens. */
function testClock(): { now: () => number; advance: (ms: number) => void } {
  let offset = 0;
  return { now: () => Date.now() + offset, advance: (ms) => { offset += ms; } };
}

async function get(url: string, token: string): Promise<{ status: number; json: any }> {
  const r = await request(url, { headers: { authorization: `Bearer ${token}` } });
  const text = await r.body.text();
  return { status: r.statusCode, json: text ? JSON.parse(text) : undefined };
}

describe('two sidecar processes sharing Redis', () => {
  let app: Recorder;
  beforeAll(async () => { requireBuild(); app = await startRecorder(); });
  afterAll(() => app.close());

  it('a token used on replica A is rejected on replica B', async () => {
    const prefix = testPrefix('replay');
    const serve = () => startCli([
      'serve', '--policy', `${ROOT}config/examples/billing.yaml`, '--upstream', app.url, '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0',
      '--redis', REDIS_URL, '--redis-prefix', prefix,
    ], /sidecar listening/);
    const [a, b] = await Promise.all([serve(), serve()]);
    try {
      const urlA = JSON.parse(a.line).listen as string;
      const urlB = JSON.parse(b.line).listen as string;
      const jwk = JSON.parse(await readFile(`${ROOT}config/examples/keys/billing-bot.private.jwk.json`, 'utf8'));
      const signer = await createAgentSigner(jwk, 'agent-billing-bot');
      const token = await signer.sign('getInvoice');
      const before = app.requests.length;
      expect((await get(`${urlA}/invoices/inv-1`, token)).status).toBe(200);
      const replay = await get(`${urlB}/invoices/inv-1`, token);
      expect(replay).toMatchObject({ status: 401, json: { error: 'token_replayed' } });
      expect(app.requests.length).toBe(before + 1);
      // Readiness names the Redis check.
      const ready = await (await fetch(`${JSON.parse(b.line).admin}/readyz`)).json();
      expect(ready).toMatchObject({ status: 'ready', checks: { redis: 'ok' } });
    } finally {
      a.child.kill('SIGTERM');
      b.child.kill('SIGTERM');
    }
  });
});

/** Two replicas in this process, each with its own Redis connections: the approval flow across them. */
describe('access requests shared through Redis', () => {
  let app: Recorder;
  let inbox: Inbox;
  let bot: TestAgent;
  let a: Sidecar;
  let b: Sidecar;

  beforeAll(async () => {
    app = await startRecorder();
    app.handler = (r, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ sent: true, path: r.url, permission: r.headers['agent-permission'] ?? null }));
    };
    inbox = await startInbox();
    bot = await testAgent('sms-bot-0');
    const policy = await loadPolicyText(smsPolicy([bot], { webhookUrl: inbox.url, ttl: '1m' }), 'sms.yaml');
    const prefix = testPrefix('approvals');
    const start = () => startSidecar({
      policy, upstream: app.url, listen: '127.0.0.1:0', admin: '127.0.0.1:0', adminToken: ADMIN_TOKEN,
      log: createLogger(process.env.DEBUG_SIDECAR ? 'debug' : 'error', process.env.DEBUG_SIDECAR ? (l) => process.stderr.write(l) : () => {}), redis: { url: REDIS_URL, prefix }, metrics: { processMetrics: false },
    });
    [a, b] = await Promise.all([start(), start()]);
    for (const s of [a, b]) await until(async () => (await fetch(`${s.adminUrl}/readyz`)).status === 200);
  });
  afterAll(async () => { await a.close(); await b.close(); await app.close(); await inbox.close(); });

  const admin = async (s: Sidecar, path: string, body: unknown) => {
    const r = await request(`${s.adminUrl}${path}`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: r.statusCode, json: await r.body.json() as any };
  };
  const ask = async (s: Sidecar, to: string, wait: boolean) => request(`${s.url}/agent/request-permission`, {
    method: 'POST',
    headers: { authorization: `Bearer ${await bot.signer.sign('request_permission')}`, 'content-type': 'application/json', ...(wait ? {} : { prefer: 'respond-async' }) },
    body: JSON.stringify({ capability: 'send_sms', args: { to, body: 'hello' }, reason: 'customer asked' }),
  });

  it('an approval given through replica A releases the agent waiting on replica B', async () => {
    const waiting = ask(b, '+15550001', true); // B holds the agent's open connection
    const note = await inbox.nextRequest();
    const approved = await admin(a, `/approvals/${note.requestId}/approve`, { code: note.code });
    expect(approved.status).toBe(200);
    const answer = await waiting;
    expect(answer.statusCode).toBe(200);
    expect(await answer.body.json()).toMatchObject({ permission: 'approved', result: { sent: true, permission: 'approved' } });
  });

  it('ids that are not the sidecar\'s own never reach a Redis key', async () => {
    const r = await get(`${a.url}/agent/request-permission/pending`, await bot.signer.sign('request_permission'));
    expect(r).toMatchObject({ status: 404, json: { error: 'not_found' } });
  });

  it('two concurrent approvals on two replicas resolve the request once', async () => {
    const asked = await ask(a, '+15550002', false);
    await asked.body.json();
    const note = await inbox.nextRequest();
    const before = app.requests.length;
    const results = await Promise.all([
      admin(a, `/approvals/${note.requestId}/approve`, { code: note.code }),
      admin(b, `/approvals/${note.requestId}/approve`, { code: note.code }),
    ]);
    expect(results.map((r) => r.status).sort()).toEqual([200, 409]);
    await until(() => app.requests.length > before);
    await new Promise((r) => setTimeout(r, 100));
    expect(app.requests.length).toBe(before + 1); // executed once
  });

  it('a scope=value approval on replica A lets the same value through replica B', async () => {
    const to = '+15550003';
    const send = (s: Sidecar) => async () => request(`${s.url}/sms`, {
      method: 'POST', headers: { authorization: `Bearer ${await bot.signer.sign('send_sms')}`, 'content-type': 'application/json' },
      body: JSON.stringify({ to, body: 'again' }),
    });
    const first = await (await send(b)()).body.json() as any;
    expect(first.permission).toBe('constraint_violated');
    const asked = await ask(a, to, false);
    await asked.body.json();
    const note = await inbox.nextRequest();
    expect((await admin(a, `/approvals/${note.requestId}/approve`, { code: note.code, scope: 'value' })).status).toBe(200);
    const again = await send(b)();
    expect(again.statusCode).toBe(200);
    await again.body.text();
  });
});

describe('Redis outage', () => {
  it('denies every call with 503 while Redis is down, forwards none, and serves again within 2 s of its return', async () => {
    const redis = await disposableRedis();
    await redis.start();
    await seedReplayWindow(redis.url); // a Redis in service: its first contact is not this test's subject
    const clock = testClock();
    const env = await startEnv({ redis: { url: redis.url, prefix: testPrefix('outage') }, metrics: { processMetrics: false }, now: clock.now });
    const { sidecar, app, bot } = env;
    const call = async () => get(`${sidecar.url}/invoices/inv-1`, await bot.signer.sign('getInvoice', { now: Math.floor(clock.now() / 1000) }));
    try {
      // Connected first: a sidecar starts before its Redis connection is up (and refuses until it is).
      await until(async () => (await fetch(`${sidecar.adminUrl}/readyz`)).status === 200, 5_000);
      expect((await call()).status).toBe(200);
      // Load before, during and after the outage.
      let stop = false;
      const during: { status: number; code?: string; forwardedBefore: number; forwardedAfter: number }[] = [];
      let down = false;
      const loop = (async () => {
        while (!stop) {
          const wasDown = down;
          const seen = app.requests.length;
          const r = await call();
          if (wasDown && down) during.push({ status: r.status, code: r.json?.error, forwardedBefore: seen, forwardedAfter: app.requests.length });
        }
      })();
      await new Promise((r) => setTimeout(r, 200));
      await redis.kill();
      down = true;
      await new Promise((r) => setTimeout(r, 1000));
      const ready = await fetch(`${sidecar.adminUrl}/readyz`);
      expect(ready.status).toBe(503);
      expect(await ready.json()).toMatchObject({ checks: { redis: 'failing' } });
      down = false;
      await redis.start();
      const back = Date.now();
      // Answered again within 2 s. The restart lost the window (no persistence): fresh tokens are refused for the
      // 30 s of tolerated skew after the loss is found (replay_window_reset), then pass; the clock skips those 30 s.
      await until(async () => { const r = await call(); return r.status === 200 || r.json?.error === 'replay_window_reset'; }, 5_000);
      const resumedMs = Date.now() - back;
      clock.advance(31_500);
      await until(async () => (await call()).status === 200, 2_000);
      stop = true;
      await loop;
      expect(during.length).toBeGreaterThan(5);
      for (const d of during) {
        expect(d).toMatchObject({ status: 503, code: 'replay_store_unavailable' });
        expect(d.forwardedAfter).toBe(d.forwardedBefore);
      }
      expect(resumedMs).toBeLessThan(2000);
      const metrics = await (await fetch(`${sidecar.adminUrl}/metrics`)).text();
      expect(Number(/^agents_chain_replay_store_errors_total (\d+)/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(during.length);
    } finally {
      await env.close();
      await redis.kill();
    }
  }, 20_000);

  it('starts with Redis down: not ready, refusing calls, not crashing; ready once Redis comes up', async () => {
    const redis = await disposableRedis();
    const clock = testClock();
    const env = await startEnv({ redis: { url: redis.url, prefix: testPrefix('startup') }, metrics: { processMetrics: false }, now: clock.now });
    const { sidecar, app, bot } = env;
    const sign = () => bot.signer.sign('getInvoice', { now: Math.floor(clock.now() / 1000) });
    try {
      expect((await fetch(`${sidecar.adminUrl}/readyz`)).status).toBe(503);
      const refused = await get(`${sidecar.url}/invoices/inv-1`, await sign());
      expect(refused).toMatchObject({ status: 503, json: { error: 'replay_store_unavailable' } });
      expect(app.requests).toHaveLength(0);
      await redis.start();
      await until(async () => (await fetch(`${sidecar.adminUrl}/readyz`)).status === 200, 5_000);
      // A Redis no sidecar has checked may have lost ids (first contact, fail closed): tokens issued up to 30 s
      // after it was found are refused; the clock skips those 30 s, then fresh tokens pass.
      expect(await get(`${sidecar.url}/invoices/inv-1`, await sign())).toMatchObject({ status: 401, json: { error: 'replay_window_reset' } });
      clock.advance(31_500);
      expect((await get(`${sidecar.url}/invoices/inv-1`, await sign())).status).toBe(200);
    } finally {
      await env.close();
      await redis.kill();
    }
  }, 20_000);
});

/** Issue 15 item 12: one namespace for token ids on a Redis, whatever the provider name or prefix. */
describe('two services sharing one Redis', () => {
  it('a token spent at billing-service is not accepted again at ledger-service, though both name a capability getInvoice', async () => {
    const agents = { bot: await testAgent('agent-billing-bot'), other: await testAgent('agent-other') };
    const billingApp = await startRecorder();
    const ledgerApp = await startRecorder();
    const start = async (service: string, app: Recorder) => startSidecar({
      policy: await loadPolicyText(billingPolicy(agents).replace('name: billing-service, issuer: https://billing.example.com', `name: ${service}, issuer: https://${service}.example.com`), `${service}.yaml`),
      upstream: app.url, listen: '127.0.0.1:0', admin: '127.0.0.1:0', log: createLogger('error', () => {}),
      redis: { url: REDIS_URL, prefix: testPrefix(service) }, metrics: { processMetrics: false },
    });
    const billing = await start('billing-service', billingApp);
    const ledger = await start('ledger-service', ledgerApp);
    try {
      for (const s of [billing, ledger]) await until(async () => (await fetch(`${s.adminUrl}/readyz`)).status === 200, 5_000);
      const token = await agents.bot.signer.sign('getInvoice');
      const seen = ledgerApp.requests.length;
      expect((await get(`${billing.url}/invoices/inv-1`, token)).status).toBe(200);
      expect(await get(`${ledger.url}/invoices/inv-1`, token)).toMatchObject({ status: 401, json: { error: 'token_replayed' } });
      expect(ledgerApp.requests.length).toBe(seen);
      // And the other way round.
      const second = await agents.bot.signer.sign('getInvoice');
      expect((await get(`${ledger.url}/invoices/inv-1`, second)).status).toBe(200);
      expect(await get(`${billing.url}/invoices/inv-1`, second)).toMatchObject({ status: 401, json: { error: 'token_replayed' } });
    } finally {
      await billing.close();
      await ledger.close();
      await billingApp.close();
      await ledgerApp.close();
    }
  });
});

describe('registered agents shared through Redis', () => {
  it('an agent registered on replica A calls through replica B; revoked on B, its next call on A is refused', async () => {
    const { createHostSigner } = await import('../../src/identity/client.js');
    const { generateAgentKeyPair } = await import('../../src/identity/keys.js');
    const { registration, registrationPolicy } = await import('../support/registration.js');
    const hostKeys = await generateAgentKeyPair();
    const host = await createHostSigner(hostKeys.privateJwk);
    const app = await startRecorder();
    const policy = await loadPolicyText(registrationPolicy(hostKeys), 'billing.yaml');
    const prefix = testPrefix('registry');
    const start = () => startSidecar({ policy, upstream: app.url, listen: '127.0.0.1:0', admin: '127.0.0.1:0', log: createLogger('error', () => {}), redis: { url: REDIS_URL, prefix }, metrics: { processMetrics: false } });
    const [a, b] = await Promise.all([start(), start()]);
    try {
      for (const s of [a, b]) await until(async () => (await fetch(`${s.adminUrl}/readyz`)).status === 200);
      const keys = await generateAgentKeyPair();
      const made = await registration(host, keys, { name: 'shared-bot' });
      const reg = await request(`${a.url}/agent/register`, {
        method: 'POST', headers: { authorization: `Bearer ${made.token}`, 'content-type': 'application/json' },
        body: JSON.stringify(made.body),
      });
      expect(reg.statusCode).toBe(201);
      const { agent_id: id } = await reg.body.json() as { agent_id: string };
      const agent = await createAgentSigner(keys.privateJwk, id);
      expect((await get(`${b.url}/invoices/inv-1`, await agent.sign('getInvoice'))).status).toBe(200);
      const revoked = await request(`${b.url}/agent/revoke`, {
        method: 'POST', headers: { authorization: `Bearer ${await host.sign('https://billing.example.com')}`, 'content-type': 'application/json' },
        body: JSON.stringify({ agent_id: id }),
      });
      expect(revoked.statusCode).toBe(200);
      await revoked.body.text();
      expect(await get(`${a.url}/invoices/inv-1`, await agent.sign('getInvoice'))).toMatchObject({ status: 401, json: { error: 'agent_not_found' } });
    } finally {
      await a.close();
      await b.close();
      await app.close();
    }
  });
});

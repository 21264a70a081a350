import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentSigner } from '../../src/identity/client.js';
import { loadPolicyText } from '../../src/policy/load.js';
import { ADMIN_TOKEN, smsPolicy, startInbox, type Inbox } from '../support/approvals.js';
import { ROOT, requireBuild, startCli, serveArgs } from '../support/cli.js';
import { billingPolicy, startTestSidecar, testAgent, untilReady, type TestAgent, type TestSidecar } from '../support/fixture.js';
import { call, type Reply } from '../support/http.js';
import { startRecorder, type Recorder } from '../support/recorder.js';
import { seedReplayWindow } from '../support/global-setup.js';
import { disposableRedis, REDIS_URL, testPrefix } from '../support/redis.js';
import { until } from '../support/until.js';

/** The sidecar's and the agent's clock, moved by hand past the 30 s in which a detected loss refuses fresh tokens. */
function testClock(): { now: () => number; advance: (ms: number) => void } {
  let offset = 0;
  return {
    now: () => Date.now() + offset,
    advance: (ms) => {
      offset += ms;
    },
  };
}

describe('two sidecar processes sharing Redis', () => {
  let app: Recorder;
  beforeAll(async () => {
    requireBuild();
    app = await startRecorder();
  });
  afterAll(() => app.close());

  it('a token used on replica A is rejected on replica B', async () => {
    const prefix = testPrefix('replay');
    const serve = () => startCli(serveArgs(app.url, '--redis', REDIS_URL, '--redis-prefix', prefix), /sidecar listening/);
    const [a, b] = await Promise.all([serve(), serve()]);
    try {
      const urlA = JSON.parse(a.line).listen as string;
      const urlB = JSON.parse(b.line).listen as string;
      const jwk = JSON.parse(await readFile(`${ROOT}config/examples/keys/billing-bot.private.jwk.json`, 'utf8'));
      const signer = await createAgentSigner(jwk, 'agent-billing-bot');
      const token = await signer.sign('getInvoice');
      const before = app.requests.length;
      expect((await call(urlA, { path: '/invoices/inv-1', token })).status).toBe(200);
      const replay = await call(urlB, { path: '/invoices/inv-1', token });
      expect(replay).toMatchObject({ status: 401, json: { error: 'token_replayed' } });
      expect(app.requests.length).toBe(before + 1);
      // Readiness names the Redis check.
      const ready = (await call(JSON.parse(b.line).admin as string, { path: '/readyz' })).json;
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
  let a: TestSidecar;
  let b: TestSidecar;

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
    const start = () =>
      startTestSidecar({
        policy,
        app,
        adminToken: ADMIN_TOKEN,
        logLevel: process.env.DEBUG_SIDECAR ? 'debug' : 'error',
        redis: { url: REDIS_URL, prefix },
        metrics: { processMetrics: false },
        waitReady: true,
      });
    [a, b] = await Promise.all([start(), start()]);
  });
  afterAll(async () => {
    await a.close();
    await b.close();
    await app.close();
    await inbox.close();
  });

  const admin = (s: TestSidecar, path: string, body: unknown) => call(s.adminUrl, { method: 'POST', path, token: ADMIN_TOKEN, body });
  const ask = async (s: TestSidecar, to: string, wait: boolean) =>
    call(s, {
      method: 'POST',
      path: '/agent/request-permission',
      token: await bot.signer.sign('request_permission'),
      headers: wait ? {} : { prefer: 'respond-async' },
      body: { capability: 'send_sms', args: { to, body: 'hello' }, reason: 'customer asked' },
    });

  it('an approval given through replica A releases the agent waiting on replica B', async () => {
    const waiting = ask(b, '+15550001', true); // B holds the agent's open connection
    const note = await inbox.nextRequest();
    const approved = await admin(a, `/approvals/${note.requestId}/approve`, { code: note.code });
    expect(approved.status).toBe(200);
    const answer = await waiting;
    expect(answer.status).toBe(200);
    expect(answer.json).toMatchObject({ permission: 'approved', result: { sent: true, permission: 'approved' } });
  });

  it("ids that are not the sidecar's own never reach a Redis key", async () => {
    const r = await call(a.url, { path: '/agent/request-permission/pending', token: await bot.signer.sign('request_permission') });
    expect(r).toMatchObject({ status: 404, json: { error: 'not_found' } });
  });

  it('two concurrent approvals on two replicas resolve the request once', async () => {
    const asked = await ask(a, '+15550002', false);
    const note = await inbox.nextRequest();
    const before = app.requests.length;
    const results = await Promise.all([
      admin(a, `/approvals/${note.requestId}/approve`, { code: note.code }),
      admin(b, `/approvals/${note.requestId}/approve`, { code: note.code }),
    ]);
    expect(results.map((r) => r.status).sort()).toEqual([200, 409]);
    // Both replicas report the outcome (the call was executed and its result stored), and the app saw it once.
    const outcome = async (s: TestSidecar) => (await call(s, { path: asked.json.statusUrl, token: await bot.signer.sign('request_permission') })).status;
    await until(async () => (await outcome(a)) === 200 && (await outcome(b)) === 200);
    expect(app.requests.length).toBe(before + 1); // executed once
  });

  it('a scope=value approval on replica A lets the same value through replica B', async () => {
    const to = '+15550003';
    const send = (s: TestSidecar) => async () =>
      call(s, { method: 'POST', path: '/sms', token: await bot.signer.sign('send_sms'), body: { to, body: 'again' } });
    const first = (await send(b)()).json;
    expect(first.permission).toBe('constraint_violated');
    await ask(a, to, false);
    const note = await inbox.nextRequest();
    expect((await admin(a, `/approvals/${note.requestId}/approve`, { code: note.code, scope: 'value' })).status).toBe(200);
    const again = await send(b)();
    expect(again.status).toBe(200);
  });
});

describe('Redis outage', () => {
  it('denies every call with 503 while Redis is down, forwards none, and serves again within 2 s of its return', async () => {
    const redis = await disposableRedis();
    await redis.start();
    await seedReplayWindow(redis.url); // a Redis in service: its first contact is not this test's subject
    const clock = testClock();
    const env = await startTestSidecar({ redis: { url: redis.url, prefix: testPrefix('outage') }, metrics: { processMetrics: false }, now: clock.now });
    const { sidecar, app, bot } = env;
    const get = async () => call(sidecar.url, { path: '/invoices/inv-1', token: await bot.signer.sign('getInvoice', { now: Math.floor(clock.now() / 1000) }) });
    try {
      // Connected first: a sidecar starts before its Redis connection is up (and refuses until it is).
      await untilReady(sidecar.adminUrl, 5_000);
      expect((await get()).status).toBe(200);
      // Load before, during and after the outage.
      let stop = false;
      const during: { status: number; code?: string; forwardedBefore: number; forwardedAfter: number }[] = [];
      let down = false;
      let calls = 0;
      const loop = (async () => {
        while (!stop) {
          const wasDown = down;
          const seen = app.requests.length;
          const r = await get();
          calls++;
          if (wasDown && down) during.push({ status: r.status, code: r.json?.error, forwardedBefore: seen, forwardedAfter: app.requests.length });
        }
      })();
      await until(() => calls >= 5); // under load before the outage
      await redis.kill();
      down = true;
      await until(() => during.length > 5); // and during it
      // Readiness fails while Redis is down.
      let ready: Reply | undefined;
      await until(async () => (ready = await call(sidecar.adminUrl, { path: '/readyz' })).status === 503, 5_000);
      expect(ready!.json).toMatchObject({ checks: { redis: 'failing' } });
      down = false;
      await redis.start();
      const back = Date.now();
      // Answered again within 2 s. The restart lost the window (no persistence): fresh tokens are refused for the
      // 30 s of tolerated skew after the loss is found (replay_window_reset), then pass; the clock skips those 30 s.
      await until(async () => {
        const r = await get();
        return r.status === 200 || r.json?.error === 'replay_window_reset';
      }, 5_000);
      const resumedMs = Date.now() - back;
      clock.advance(31_500);
      await until(async () => (await get()).status === 200, 2_000);
      stop = true;
      await loop;
      expect(during.length).toBeGreaterThan(5);
      for (const d of during) {
        expect(d).toMatchObject({ status: 503, code: 'replay_store_unavailable' });
        expect(d.forwardedAfter).toBe(d.forwardedBefore);
      }
      expect(resumedMs).toBeLessThan(2000);
      const metrics = (await call(sidecar.adminUrl, { path: '/metrics' })).text;
      expect(Number(/^agents_chain_replay_store_errors_total (\d+)/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(during.length);
    } finally {
      await env.close();
      await redis.kill();
    }
  }, 20_000);

  it('starts with Redis down: not ready, refusing calls, not crashing; ready once Redis comes up', async () => {
    const redis = await disposableRedis();
    const clock = testClock();
    const env = await startTestSidecar({ redis: { url: redis.url, prefix: testPrefix('startup') }, metrics: { processMetrics: false }, now: clock.now });
    const { sidecar, app, bot } = env;
    const sign = () => bot.signer.sign('getInvoice', { now: Math.floor(clock.now() / 1000) });
    try {
      expect((await call(sidecar.adminUrl, { path: '/readyz' })).status).toBe(503);
      const refused = await call(sidecar.url, { path: '/invoices/inv-1', token: await sign() });
      expect(refused).toMatchObject({ status: 503, json: { error: 'replay_store_unavailable' } });
      expect(app.requests).toHaveLength(0);
      await redis.start();
      await untilReady(sidecar.adminUrl, 5_000);
      // A Redis no sidecar has checked may have lost ids (first contact, fail closed): tokens issued up to 30 s
      // after it was found are refused; the clock skips those 30 s, then fresh tokens pass.
      expect(await call(sidecar.url, { path: '/invoices/inv-1', token: await sign() })).toMatchObject({ status: 401, json: { error: 'replay_window_reset' } });
      clock.advance(31_500);
      expect((await call(sidecar.url, { path: '/invoices/inv-1', token: await sign() })).status).toBe(200);
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
    const start = async (service: string, app: Recorder) =>
      startTestSidecar({
        policy: billingPolicy(agents).replace(
          'name: billing-service, issuer: https://billing.example.com',
          `name: ${service}, issuer: https://${service}.example.com`,
        ),
        policyName: `${service}.yaml`,
        app,
        logLevel: 'error',
        redis: { url: REDIS_URL, prefix: testPrefix(service) },
        metrics: { processMetrics: false },
      });
    const billing = await start('billing-service', billingApp);
    const ledger = await start('ledger-service', ledgerApp);
    try {
      for (const s of [billing, ledger]) await untilReady(s.adminUrl, 5_000);
      const token = await agents.bot.signer.sign('getInvoice');
      const seen = ledgerApp.requests.length;
      expect((await call(billing.url, { path: '/invoices/inv-1', token })).status).toBe(200);
      expect(await call(ledger.url, { path: '/invoices/inv-1', token })).toMatchObject({ status: 401, json: { error: 'token_replayed' } });
      expect(ledgerApp.requests.length).toBe(seen);
      // And the other way round.
      const second = await agents.bot.signer.sign('getInvoice');
      expect((await call(ledger.url, { path: '/invoices/inv-1', token: second })).status).toBe(200);
      expect(await call(billing.url, { path: '/invoices/inv-1', token: second })).toMatchObject({ status: 401, json: { error: 'token_replayed' } });
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
    const start = () => startTestSidecar({ policy, app, logLevel: 'error', redis: { url: REDIS_URL, prefix }, metrics: { processMetrics: false } });
    const [a, b] = await Promise.all([start(), start()]);
    try {
      for (const s of [a, b]) await untilReady(s.adminUrl);
      const keys = await generateAgentKeyPair();
      const made = await registration(host, keys, { name: 'shared-bot' });
      const reg = await call(a, { method: 'POST', path: '/agent/register', token: made.token, body: made.body });
      expect(reg.status).toBe(201);
      const { agent_id: id } = reg.json as { agent_id: string };
      const agent = await createAgentSigner(keys.privateJwk, id);
      expect((await call(b.url, { path: '/invoices/inv-1', token: await agent.sign('getInvoice') })).status).toBe(200);
      const revoked = await call(b, { method: 'POST', path: '/agent/revoke', token: await host.sign('https://billing.example.com'), body: { agent_id: id } });
      expect(revoked.status).toBe(200);
      expect(await call(a.url, { path: '/invoices/inv-1', token: await agent.sign('getInvoice') })).toMatchObject({
        status: 401,
        json: { error: 'agent_not_found' },
      });
    } finally {
      await a.close();
      await b.close();
      await app.close();
    }
  });
});

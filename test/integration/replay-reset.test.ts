import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { markerTime, REPLAY_NAMESPACE } from '../../src/auth/replay-redis.js';
import { startTestSidecar, untilReady, type TestAgent } from '../support/fixture.js';
import { call } from '../support/http.js';
import { seedReplayWindow } from '../support/global-setup.js';
import { disposableRedis, testPrefix } from '../support/redis.js';
import { until } from '../support/until.js';

/**
 * Issue 15 item 11: a Redis that loses its data must not reopen the tokens
 * spent before the loss. Real redis-server processes killed with SIGKILL and
 * restarted (empty, or from a stale snapshot), flushed, under load, through
 * the real sidecar.
 */

function metric(text: string, name: string, labels = ''): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `));
  return line ? Number(line.split(' ')[1]) : NaN;
}

/**
 * The clock of the sidecars and the agent in a test. After a detected loss, tokens issued up to 30 s
 * after it are refused (the tolerated skew); `advance` lets those 30 s pass without waiting for them.
 */
interface Clock {
  now(): number;
  advance(ms: number): void;
}
function testClock(): Clock {
  let offset = 0;
  return {
    now: () => Date.now() + offset,
    advance: (ms) => {
      offset += ms;
    },
  };
}
/** Past the refusal of fresh tokens after a reset (30 s of skew, and a second of rounding). */
const PAST_SKEW_MS = 31_500;

interface Running {
  logs: string[];
  adminUrl: string;
  agents: { bot: TestAgent; other: TestAgent };
  clock: Clock;
  call(token: string): Promise<{ status: number; error?: string }>;
  fresh(): Promise<string>;
  close(): Promise<void>;
}

/** A real sidecar (in process) in front of a real app, its replay window in the Redis at `url`; agents and clock shared when given. */
async function sidecarOn(url: string, agents?: { bot: TestAgent; other: TestAgent }, clock: Clock = testClock()): Promise<Running> {
  const env = await startTestSidecar({ agents, redis: { url, prefix: testPrefix('reset') }, metrics: { processMetrics: false }, now: clock.now });
  const { bot, other } = env;
  return {
    logs: env.logs,
    adminUrl: env.adminUrl,
    clock,
    call: async (token) => {
      const r = await call(env, { path: '/invoices/inv-1', token });
      return { status: r.status, error: r.json?.error };
    },
    fresh: () => bot.signer.sign('getInvoice', { now: Math.floor(clock.now() / 1000) }),
    agents: { bot, other },
    close: () => env.close(),
  };
}

/** Replays every token, over and over, counting the ones let through, until `stop()`. */
function replayLoop(s: Running, tokens: string[]): { attempts(): number; stop(): Promise<{ accepted: number; codes: Record<string, number> }> } {
  let stopped = false;
  let accepted = 0;
  let attempts = 0;
  const codes: Record<string, number> = {};
  const workers = [0, 1, 2, 3].map(async (w) => {
    while (!stopped) {
      for (let i = w; i < tokens.length && !stopped; i += 4) {
        const r = await s.call(tokens[i]!);
        attempts++;
        if (r.status === 200) accepted++;
        codes[r.error ?? String(r.status)] = (codes[r.error ?? String(r.status)] ?? 0) + 1;
      }
    }
  });
  return {
    attempts: () => attempts,
    async stop() {
      stopped = true;
      await Promise.all(workers);
      return { accepted, codes };
    },
  };
}

/** Fresh calls in a loop; the tokens that passed are kept (they are "used"). */
function loadLoop(s: Running): { used: string[]; stop(): Promise<void> } {
  let stopped = false;
  const used: string[] = [];
  const run = (async () => {
    while (!stopped) {
      const t = await s.fresh();
      if ((await s.call(t)).status === 200) used.push(t);
    }
  })();
  return {
    used,
    async stop() {
      stopped = true;
      await run;
    },
  };
}

/** Until the sidecar serves fresh tokens: a Redis new to it is a loss (fail closed), so the first 30 s are let pass. */
async function warm(s: Running): Promise<void> {
  await until(async () => (await s.call(await s.fresh())).error === 'replay_window_reset', 5_000);
  s.clock.advance(PAST_SKEW_MS);
  expect((await s.call(await s.fresh())).status).toBe(200);
}

/** After a loss: the sidecar answers again (fresh tokens refused for the skew, not 503), and serves once 30 s have passed. */
async function recovered(s: Running, ms = 5_000): Promise<void> {
  await until(async () => (await s.call(await s.fresh())).error === 'replay_window_reset', ms);
  s.clock.advance(PAST_SKEW_MS);
  await until(async () => (await s.call(await s.fresh())).status === 200, 2_000);
}

const cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

describe('a Redis that restarts empty (kill -9, no persistence)', () => {
  it('under load: no token used before the kill is accepted again, fresh tokens pass after recovery; warned and counted', async () => {
    const redis = await disposableRedis();
    await redis.start();
    cleanup.push(() => redis.kill());
    const s = await sidecarOn(redis.url);
    cleanup.push(() => s.close());
    await warm(s);

    const load = loadLoop(s);
    await until(() => load.used.length > 10); // enough tokens spent before the loss
    await redis.kill();
    const used = [...load.used];
    expect(used.length).toBeGreaterThan(10);
    // Replays hammer the sidecar from before Redis is back, so the first claims on the empty Redis are replays.
    const replays = replayLoop(s, used);
    await redis.start();
    const back = Date.now();
    // Answered again (not 503) within 3 s; fresh tokens are refused for the 30 s of skew after the loss, then pass.
    await until(async () => (await s.call(await s.fresh())).error === 'replay_window_reset', 5_000);
    const recoveredMs = Date.now() - back;
    s.clock.advance(PAST_SKEW_MS);
    await until(async () => (await s.call(await s.fresh())).status === 200, 2_000);
    // Replays keep coming after recovery: every used token is tried twice more against the recovered window.
    const tried = replays.attempts();
    await until(() => replays.attempts() >= tried + 2 * used.length);
    const result = await replays.stop();
    await load.stop();

    expect(result.accepted).toBe(0);
    expect(result.codes.replay_window_reset).toBeGreaterThan(0);
    expect(recoveredMs).toBeLessThan(3_000);
    // Fresh tokens pass; the old ones stay refused.
    expect((await s.call(await s.fresh())).status).toBe(200);
    expect(await s.call(used[0]!)).toMatchObject({ status: 401 });
    const warned = s.logs.filter((l) => l.includes('replay window reset'));
    expect(warned.length).toBeGreaterThan(0);
    expect(JSON.parse(warned[0]!)).toMatchObject({ level: 'warn' });
    const m = (await call(s.adminUrl, { path: '/metrics' })).text;
    expect(
      metric(m, 'agents_chain_replay_store_resets_total', '{cause="marker_missing"}') +
        metric(m, 'agents_chain_replay_store_resets_total', '{cause="server_changed"}'),
    ).toBeGreaterThanOrEqual(1);
    expect(metric(m, 'agents_chain_denials_total', '{capability="getInvoice",reason="replay_window_reset"}')).toBeGreaterThan(0);
  }, 30_000);

  it('a sidecar started after the loss learns it from the marker and refuses the old tokens too', async () => {
    const redis = await disposableRedis();
    await redis.start();
    cleanup.push(() => redis.kill());
    const a = await sidecarOn(redis.url);
    cleanup.push(() => a.close());
    await warm(a);
    const used: string[] = [];
    for (let i = 0; i < 5; i++) {
      const t = await a.fresh();
      expect((await a.call(t)).status).toBe(200);
      used.push(t);
    }
    await redis.kill();
    await redis.start();
    // A finds the loss (and writes the new marker); C has never seen this Redis.
    await recovered(a);
    const c = await sidecarOn(redis.url, a.agents, a.clock); // the same agents, keys and clock: A's tokens verify at C
    cleanup.push(() => c.close());
    await untilReady(c.adminUrl, 5_000);
    for (const t of used) expect(await c.call(t)).toMatchObject({ status: 401, error: 'replay_window_reset' });
    expect(c.logs.some((l) => l.includes('replay window reset') && l.includes('"cause":"epoch_changed"'))).toBe(true);
  }, 30_000);
});

describe('an agent clock ahead of the sidecar (inside the 30 s of tolerated skew)', () => {
  it('a token issued 25 s "in the future", used just before the loss, is not accepted again after it', async () => {
    const redis = await disposableRedis();
    await redis.start();
    cleanup.push(() => redis.kill());
    await seedReplayWindow(redis.url); // not this test's subject: no first-contact reset
    const s = await sidecarOn(redis.url);
    cleanup.push(() => s.close());
    await untilReady(s.adminUrl, 5_000);
    const ahead = () => s.agents.bot.signer.sign('getInvoice', { now: Math.floor(s.clock.now() / 1000) + 25 });
    const used: string[] = [];
    for (let i = 0; i < 5; i++) {
      const t = await ahead();
      expect((await s.call(t)).status).toBe(200); // step 7 accepts iat up to now + 30
      used.push(t);
    }
    await redis.kill();
    await redis.start();
    await until(async () => (await s.call(await s.fresh())).error === 'replay_window_reset', 5_000);
    for (const t of used) expect(await s.call(t)).toMatchObject({ status: 401, error: 'replay_window_reset' });
  }, 20_000);
});

describe('a Redis flushed without a reconnect', () => {
  it('FLUSHALL takes the marker with it: the next claim finds the loss and the old tokens are refused', async () => {
    const redis = await disposableRedis();
    await redis.start();
    cleanup.push(() => redis.kill());
    const s = await sidecarOn(redis.url);
    cleanup.push(() => s.close());
    await warm(s);
    const used: string[] = [];
    for (let i = 0; i < 5; i++) {
      const t = await s.fresh();
      expect((await s.call(t)).status).toBe(200);
      used.push(t);
    }
    const admin = new Redis(redis.url);
    cleanup.push(async () => admin.disconnect());
    await admin.flushall();
    for (const t of used) expect((await s.call(t)).status).toBe(401);
    expect((await s.call(used[0]!)).error).toMatch(/^(replay_window_reset|token_replayed)$/);
    expect(s.logs.some((l) => l.includes('replay window reset') && l.includes('"cause":"marker_missing"'))).toBe(true);
    await recovered(s);
  }, 20_000);
});

/** A redis-server that snapshots to `dir` only when told (SAVE), and restarts from that snapshot. */
async function snapshotRedis(): Promise<{ url: string; start(): Promise<void>; kill(): Promise<void>; dir: string }> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
  const dir = await mkdtemp(join(tmpdir(), 'agents-chain-rdb-'));
  let child: ChildProcess | undefined;
  return {
    url: `redis://127.0.0.1:${port}`,
    dir,
    async start() {
      child = spawn(
        'redis-server',
        ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--dbfilename', 'dump.rdb', '--save', '', '--appendonly', 'no'],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      await new Promise<void>((resolve, reject) => {
        let out = '';
        child!.stdout!.on('data', (d) => {
          out += d;
          if (/Ready to accept connections/.test(out)) resolve();
        });
        child!.on('exit', (code) => reject(new Error(`redis-server exited ${code}: ${out}`)));
      });
    },
    async kill() {
      if (!child || child.exitCode !== null) return;
      const c = child;
      await new Promise<void>((resolve) => {
        c.once('exit', () => resolve());
        c.kill('SIGKILL');
      });
    },
  };
}

describe('a Redis restarted from a stale snapshot (the marker survived, the last ids did not)', () => {
  it('the changed run_id is a reset: tokens used after the snapshot are not accepted again', async () => {
    const redis = await snapshotRedis();
    await redis.start();
    cleanup.push(async () => {
      await redis.kill();
      await rm(redis.dir, { recursive: true, force: true });
    });
    const s = await sidecarOn(redis.url);
    cleanup.push(() => s.close());
    await warm(s);
    const admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    await admin.save(); // the marker is in the snapshot
    admin.disconnect();
    const used: string[] = [];
    for (let i = 0; i < 5; i++) {
      const t = await s.fresh();
      expect((await s.call(t)).status).toBe(200);
      used.push(t);
    }
    const logged = s.logs.length;
    await redis.kill();
    await redis.start();
    const replays = replayLoop(s, used);
    await recovered(s);
    const result = await replays.stop();
    expect(result.accepted).toBe(0);
    for (const t of used) expect((await s.call(t)).status).toBe(401);
    const after = s.logs.slice(logged);
    expect(after.some((l) => l.includes('replay window reset') && l.includes('"cause":"server_changed"'))).toBe(true);
    // It really came back from the snapshot, marker included: only the server's new run_id told.
    expect(after.some((l) => l.includes('"cause":"marker_missing"') || l.includes('"cause":"epoch_changed"'))).toBe(false);
  }, 30_000);
});

describe('a Redis restarted from a stale snapshot that no sidecar survives', () => {
  /** Redis with an old marker (nothing lost for a long time), snapshotted; A spends tokens after the snapshot and is gone; Redis restarts from it. */
  async function staleRestart(opts: { idleSurvivor: boolean }) {
    const redis = await snapshotRedis();
    await redis.start();
    cleanup.push(async () => {
      await redis.kill();
      await rm(redis.dir, { recursive: true, force: true });
    });
    await seedReplayWindow(redis.url); // a Redis in service for long: an old marker, its process checked
    const clock = testClock();
    const a = await sidecarOn(redis.url, undefined, clock);
    cleanup.push(() => a.close());
    // An idle sidecar: connected, never claims (it knows no epoch), survives the restart.
    const b = opts.idleSurvivor ? await sidecarOn(redis.url, a.agents, clock) : undefined;
    if (b) cleanup.push(() => b.close());
    for (const x of [a, b]) if (x) await untilReady(x.adminUrl, 5_000);
    expect((await a.call(await a.fresh())).status).toBe(200); // no reset: the marker is old and the server checked
    const admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    await admin.save();
    admin.disconnect();
    const used: string[] = [];
    for (let i = 0; i < 5; i++) {
      const t = await a.fresh();
      expect((await a.call(t)).status).toBe(200);
      used.push(t);
    }
    await a.close(); // A dies with what it knew
    await redis.kill();
    await redis.start(); // the old marker is back, the last ids are not
    if (b) await until(() => b.logs.some((l) => l.includes('replay window reset') && l.includes('"cause":"server_changed"')), 5_000);
    const c = await sidecarOn(redis.url, a.agents, clock); // a fresh sidecar: no run_id of its own to compare
    cleanup.push(() => c.close());
    await untilReady(c.adminUrl, 5_000);
    return { redis, b, c, used };
  }

  it('a fresh sidecar finds the Redis process unchecked (first contact) and refuses the tokens spent after the snapshot', async () => {
    const { c, used } = await staleRestart({ idleSurvivor: false });
    for (const t of used) expect(await c.call(t)).toMatchObject({ status: 401, error: 'replay_window_reset' });
    expect(c.logs.some((l) => l.includes('replay window reset') && l.includes('"cause":"server_changed"') && l.includes('"firstContact":true'))).toBe(true);
    await recovered(c);
    for (const t of used) expect((await c.call(t)).status).toBe(401);
  }, 30_000);

  it('an idle survivor that never claimed rotates the marker anyway; a sidecar started after it learns the loss from the marker', async () => {
    const { redis, c, used } = await staleRestart({ idleSurvivor: true });
    for (const t of used) expect(await c.call(t)).toMatchObject({ status: 401, error: 'replay_window_reset' });
    expect(c.logs.some((l) => l.includes('replay window reset') && l.includes('"cause":"epoch_changed"'))).toBe(true);
    const admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    cleanup.push(async () => admin.disconnect());
    expect(markerTime((await admin.get(`${REPLAY_NAMESPACE}:{0}:epoch`))!)).toBeGreaterThan(Date.now() - 10_000);
  }, 30_000);
});

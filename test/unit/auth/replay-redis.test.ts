import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPLAY_NAMESPACE, RedisReplayStore, slotGroup, type ResetCause } from '../../../src/auth/replay-redis.js';
import { refusedByReset } from '../../../src/auth/replay.js';
import { createLogger } from '../../../src/log.js';
import { connectRedis, type RedisClient } from '../../../src/redis/connect.js';
import { disposableRedis, type DisposableRedis } from '../../support/redis.js';
import { until } from '../../support/until.js';

// A redis-server of its own: these tests delete the replay marker, which the shared test Redis must keep.
const WINDOW = 120_000;
const MARKER = `${REPLAY_NAMESPACE}:{0}:epoch`;
const SERVER = `${REPLAY_NAMESPACE}:{0}:server`;
const runIdOf = (info: string) => /^run_id:(\S+)/m.exec(info)?.[1];
let redis: DisposableRedis;
const clients: RedisClient[] = [];
const log = createLogger('error', () => {});

beforeAll(async () => {
  redis = await disposableRedis();
  await redis.start();
});
afterAll(async () => {
  for (const c of clients) c.disconnect();
  await redis.kill();
});

async function store(opts: { now?: () => number } = {}): Promise<{ store: RedisReplayStore; resets: ResetCause[]; client: RedisClient }> {
  const client = await connectRedis({ url: redis.url, prefix: 'ignored:' }, log);
  clients.push(client);
  await until(() => client.status === 'ready');
  const resets: ResetCause[] = [];
  return { store: new RedisReplayStore(client, { log, windowMs: WINDOW, onReset: (c) => resets.push(c), ...opts }), resets, client };
}

/** An old marker and a checked server: nothing lost, as a test that starts clean needs it. */
async function intact(): Promise<void> {
  const c = await connectRedis({ url: redis.url, prefix: '' }, log);
  clients.push(c);
  await until(() => c.status === 'ready');
  await c.set(MARKER, `${Date.now() - 10 * WINDOW}-00000000`);
  await c.set(SERVER, runIdOf(await c.info('server'))!);
}

describe('RedisReplayStore', () => {
  it('a Redis new to every sidecar (no marker, no server key): the check before the first claim writes both and reports a reset now (fail closed); the id is still spent', async () => {
    const a = await store();
    const before = Date.now();
    expect(await a.store.claim('agent:T:j0', 5_000)).toBe(true);
    expect(a.resets).toEqual(['marker_missing']);
    expect(a.store.lastReset()).toBeGreaterThanOrEqual(before);
    expect(await a.store.claim('agent:T:j0', 5_000)).toBe(false);
    expect(await a.client.get(MARKER)).toMatch(/^\d+-[0-9a-f]{8}$/);
    expect(await a.client.pttl(MARKER)).toBe(-1); // never expires
    expect(await a.client.get(SERVER)).toBe(runIdOf(await a.client.info('server'))); // this Redis process is now checked
  });

  it('accepts a key once across stores (another sidecar adopts the recent marker as a reset)', async () => {
    const a = await store();
    const b = await store();
    const results = await Promise.all([a.store.claim('agent:T:j1', 5_000), b.store.claim('agent:T:j1', 5_000), a.store.claim('agent:T:j2', 5_000)]);
    expect(results.filter(Boolean)).toHaveLength(2);
    expect(results[2]).toBe(true);
    expect(b.store.lastReset()).toBeGreaterThanOrEqual(a.store.lastReset()!);
    expect(b.resets).toEqual(['epoch_changed']);
  });

  it('a marker older than the window is adopted without a reset', async () => {
    const a = await store();
    await a.client.set(MARKER, `${Date.now() - WINDOW - 1_000}-00000000`);
    const b = await store();
    expect(await b.store.claim('agent:T:j3', 5_000)).toBe(true);
    expect(b.store.lastReset()).toBeUndefined();
    expect(b.resets).toEqual([]);
  });

  it('a deleted marker (FLUSHALL, eviction) is found by the next claim of every store, without a reconnect', async () => {
    const a = await store();
    const b = await store();
    await a.store.claim('agent:T:j4', 5_000);
    await b.store.claim('agent:T:j5', 5_000);
    expect([a.resets, b.resets]).toEqual([[], []]);
    await a.client.del(MARKER);
    expect(await a.store.claim('agent:T:j6', 5_000)).toBe(true);
    expect(await b.store.claim('agent:T:j7', 5_000)).toBe(true);
    expect(a.resets).toEqual(['marker_missing']);
    expect(b.resets).toEqual(['epoch_changed']);
    expect(b.store.lastReset()).toBeGreaterThanOrEqual(a.store.lastReset()!);
  });

  it("the reset is at the adopting sidecar's own clock, not the clock of the sidecar that wrote the marker", async () => {
    await intact();
    const lagging = await store({ now: () => Date.now() - 20_000 }); // its clock is 20 s behind
    const b = await store();
    await lagging.store.claim('agent:T:lag1', 5_000);
    await b.store.claim('agent:T:lag2', 5_000);
    expect([lagging.resets, b.resets]).toEqual([[], []]);
    await lagging.client.del(MARKER);
    await lagging.store.claim('agent:T:lag3', 5_000); // finds the loss and writes the marker at its (early) time
    expect(lagging.resets).toEqual(['marker_missing']);
    const adopted = Date.now();
    await b.store.claim('agent:T:lag4', 5_000);
    expect(b.resets).toEqual(['epoch_changed']);
    // Tokens used just before the loss, issued (iat) after the lagging marker time, stay refused at b.
    expect(b.store.lastReset()).toBeGreaterThanOrEqual(adopted);
    expect(refusedByReset(b.store.lastReset(), Math.floor(adopted / 1000) - 5, Date.now(), WINDOW)).toBe(true);
  });

  it('a Redis process no sidecar has checked (a stale snapshot: old marker, the server key of the process before) is a reset on first contact, and the marker is rotated for the others', async () => {
    const admin = await store();
    await admin.store.claim('agent:T:snap0', 5_000);
    const old = `${Date.now() - 10 * WINDOW}-0ld0ld00`;
    await admin.client.set(MARKER, old);
    await admin.client.set(SERVER, 'f'.repeat(40)); // the run_id of a process that no longer exists
    const before = Date.now();
    const c = await store(); // a fresh sidecar: no earlier run_id to compare, and the marker survived
    expect(await c.store.claim('agent:T:snap1', 5_000)).toBe(true);
    expect(c.resets).toEqual(['server_changed']);
    expect(c.store.lastReset()).toBeGreaterThanOrEqual(before);
    const rotated = (await admin.client.get(MARKER))!;
    expect(rotated).not.toBe(old);
    expect(Number(rotated.split('-')[0])).toBeGreaterThanOrEqual(before);
    expect(await admin.client.get(SERVER)).toBe(runIdOf(await admin.client.info('server')));
    // A later sidecar finds the process checked: the young marker tells it (one reset each, no second rotation).
    const d = await store();
    await d.store.claim('agent:T:snap2', 5_000);
    expect(d.resets).toEqual(['epoch_changed']);
    expect(await admin.client.get(MARKER)).toBe(rotated);
  });

  it('rotates on a server change even when the marker is not the one this sidecar knows (a snapshot older than the last rotation)', async () => {
    await intact();
    const a = await store();
    await a.store.claim('agent:T:cas0', 5_000);
    expect(a.resets).toEqual([]);
    // What a stale snapshot holds: an older marker than a knows, and the server key of the process before.
    const older = `${Date.now() - 10 * WINDOW}-0ld0ld00`;
    await a.client.set(MARKER, older);
    await a.client.set(SERVER, 'e'.repeat(40));
    const before = Date.now();
    a.client.disconnect(true); // a new socket: a's server check runs again
    await until(async () => {
      try {
        await a.store.claim(`agent:T:cas-${Date.now()}`, 5_000);
        return true;
      } catch {
        return false;
      }
    }, 5_000);
    expect(a.resets).toEqual(['server_changed']);
    const marker = (await a.client.get(MARKER))!;
    expect(Number(marker.split('-')[0])).toBeGreaterThanOrEqual(before);
    const c = await store();
    await c.store.claim('agent:T:cas1', 5_000);
    expect(c.resets).toEqual(['epoch_changed']);
  });

  it("marker times are on Redis's clock: a sidecar whose clock is an hour behind cannot write a marker that others take for an old one", async () => {
    await intact();
    const behind = await store({ now: () => Date.now() - 3_600_000 });
    await behind.store.claim('agent:T:clk0', 5_000);
    await behind.client.del(MARKER);
    await behind.store.claim('agent:T:clk1', 5_000); // finds the loss, writes the marker
    expect(behind.resets).toEqual(['marker_missing']);
    const written = Number((await behind.client.get(MARKER))!.split('-')[0]);
    expect(Math.abs(written - Date.now())).toBeLessThan(5_000); // Redis's time, not the sidecar's
    const fresh = await store(); // first contact after the loss: the marker is young, so it is a reset here too
    await fresh.store.claim('agent:T:clk2', 5_000);
    expect(fresh.resets).toEqual(['epoch_changed']);
  });

  it('claims sent together on first contact adopt an old marker once: no reset (the first contact of a sidecar under load)', async () => {
    await intact();
    const a = await store();
    const results = await Promise.all(Array.from({ length: 32 }, (_, i) => a.store.claim(`agent:T:burst${i}`, 5_000)));
    expect(results.every((r) => r)).toBe(true);
    expect(a.resets).toEqual([]);
    expect(a.store.lastReset()).toBeUndefined();
  });

  it('a marker that changes back to an older one (a replica that lagged behind a rotation, no server check as on a Cluster) is a reset', async () => {
    await intact();
    const old = (await (await store()).client.get(MARKER))!;
    const a = await store();
    let later = 0; // moved by hand: the second reset is later than the first
    const s = new RedisReplayStore(a.client, { log, windowMs: WINDOW, watchServer: false, onReset: (c) => a.resets.push(c), now: () => Date.now() + later });
    await s.claim('agent:T:back0', 5_000);
    expect(a.resets).toEqual([]); // the old marker, adopted on first contact
    await a.client.del(MARKER);
    await s.claim('agent:T:back1', 5_000); // rotated
    expect(a.resets).toEqual(['marker_missing']);
    const rotatedAt = s.lastReset()!;
    later += 5;
    await a.client.set(MARKER, old); // the failover brings back the marker from before the rotation
    await s.claim('agent:T:back2', 5_000);
    expect(s.lastReset()!).toBeGreaterThan(rotatedAt); // a reset again (counted once with the first: within a second of it)
  });

  it('refuses claims while the connection is not ready, so none can reach a new server before its check', async () => {
    const { store: s, client } = await store();
    await s.claim('agent:T:nr0', 5_000);
    client.disconnect(true); // reconnects: for a moment the status is not "ready"
    await until(() => client.status !== 'ready', 2_000);
    await expect(s.claim('agent:T:nr1', 5_000)).rejects.toThrow(/not connected/);
    await until(async () => {
      try {
        return await s.claim(`agent:T:nr-${Date.now()}`, 5_000);
      } catch {
        return false;
      }
    }, 5_000);
  });

  it('a slow Redis during the server check: every claim waiting on it fails at once, with one check (INFO server + memory), and the next claim starts one new check', async () => {
    const admin = await store();
    const client = await connectRedis({ url: redis.url, prefix: '' }, log);
    clients.push(client);
    await until(() => client.status === 'ready');
    const sections: string[] = [];
    const info = client.info.bind(client) as (...a: unknown[]) => Promise<string>;
    (client as unknown as { info: (...a: unknown[]) => Promise<string> }).info = (...a: unknown[]) => {
      sections.push(String(a[0] ?? 'all'));
      return info(...a);
    };
    await admin.client.call('CLIENT', 'PAUSE', '1200', 'ALL'); // every command waits 1.2 s: longer than the 250 ms command timeout
    const started = Date.now();
    const s = new RedisReplayStore(client, { log, windowMs: WINDOW });
    const settled = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        s.claim(`agent:T:slow${i}`, 5_000).then(
          () => ({ ok: true, at: Date.now() - started }),
          () => ({ ok: false, at: Date.now() - started }),
        ),
      ),
    );
    expect(settled.every((r) => !r.ok)).toBe(true);
    const times = settled.map((r) => r.at);
    expect(Math.max(...times)).toBeLessThan(700); // one timeout (250 ms), not one per waiter (8 x 250 ms)
    expect(Math.max(...times) - Math.min(...times)).toBeLessThan(100);
    expect(sections.sort()).toEqual(['memory', 'server']);
    await until(() => Date.now() - started > 1_300);
    expect(await s.claim('agent:T:slow-after', 5_000)).toBe(true);
    expect(sections.sort()).toEqual(['memory', 'memory', 'server', 'server']);
  });

  it('an unreadable marker counts as written now (fail closed)', async () => {
    const a = await store();
    await a.client.set(MARKER, 'garbage');
    const before = Date.now();
    await a.store.claim('agent:T:j8', 5_000);
    expect(a.store.lastReset()).toBeGreaterThanOrEqual(before);
  });

  it('a Redis user that may not run INFO: calls are refused (a restart would go unnoticed), and the error says why', async () => {
    const a = await store();
    await a.client.call('ACL', 'SETUSER', 'noinfo', 'on', '>pw', '~*', '&*', '+@all', '-info');
    const client = await connectRedis({ url: redis.url.replace('redis://', 'redis://noinfo:pw@'), prefix: '' }, log);
    clients.push(client);
    await until(() => client.status === 'ready');
    const s = new RedisReplayStore(client, { log, windowMs: WINDOW });
    await expect(s.claim('agent:T:noinfo', 1_000)).rejects.toThrow(/INFO.*NOPERM/);
  });

  it('warns when Redis may evict replay ids (any maxmemory-policy but noeviction)', async () => {
    const a = await store();
    await a.client.config('SET', 'maxmemory-policy', 'volatile-lru');
    const lines: string[] = [];
    const client = await connectRedis({ url: redis.url, prefix: '' }, log);
    clients.push(client);
    const s = new RedisReplayStore(client, { log: createLogger('warn', (l) => lines.push(l)), windowMs: WINDOW });
    await until(() => client.status === 'ready');
    await s.claim('agent:T:evict', 1_000);
    await a.client.config('SET', 'maxmemory-policy', 'noeviction');
    expect(lines.filter((l) => l.includes('maxmemory-policy noeviction') && l.includes('"maxmemoryPolicy":"volatile-lru"'))).toHaveLength(1);
  });

  it('refuses with ReplayStoreUnavailableError when Redis does not answer', async () => {
    const client = await connectRedis({ url: 'redis://127.0.0.1:1', prefix: '' }, log);
    clients.push(client);
    const s = new RedisReplayStore(client, { log, windowMs: WINDOW });
    await expect(s.claim('agent:T:x', 1_000)).rejects.toThrow(/did not answer|could not be confirmed|is not connected/);
  });
});

describe('slotGroup', () => {
  it('is stable and spreads keys over every group', () => {
    expect(slotGroup('agent:T:abc', 16)).toBe(slotGroup('agent:T:abc', 16));
    const seen = new Set(Array.from({ length: 2_000 }, (_, i) => slotGroup(`agent:T:${i}`, 16)));
    expect(seen.size).toBe(16);
    expect(slotGroup('anything', 1)).toBe(0);
  });
});

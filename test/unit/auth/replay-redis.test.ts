import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPLAY_NAMESPACE, RedisReplayStore, slotGroup, type ResetCause } from '../../../src/auth/replay-redis.js';
import { createLogger } from '../../../src/log.js';
import { connectRedis, type RedisClient } from '../../../src/redis/connect.js';
import { disposableRedis, type DisposableRedis } from '../../support/redis.js';
import { until } from '../../support/until.js';

// A redis-server of its own: these tests delete the replay marker, which the shared test Redis must keep.
const WINDOW = 120_000;
const MARKER = `${REPLAY_NAMESPACE}:{0}:epoch`;
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
  const client = connectRedis({ url: redis.url, prefix: 'ignored:' }, log);
  clients.push(client);
  await until(() => client.status === 'ready');
  const resets: ResetCause[] = [];
  return { store: new RedisReplayStore(client, { log, windowMs: WINDOW, onReset: (c) => resets.push(c), ...opts }), resets, client };
}

describe('RedisReplayStore', () => {
  it('a Redis without the marker: the first claim writes it and reports a reset now (fail closed); the id is still spent', async () => {
    const a = await store();
    const before = Date.now();
    expect(await a.store.claim('agent:T:j0', 5_000)).toBe(true);
    expect(a.resets).toEqual(['marker_missing']);
    expect(a.store.lastReset()).toBeGreaterThanOrEqual(before);
    expect(await a.store.claim('agent:T:j0', 5_000)).toBe(false);
    expect(await a.client.get(MARKER)).toMatch(/^\d+-[0-9a-f]{8}$/);
    expect(await a.client.pttl(MARKER)).toBe(-1); // never expires
  });

  it('accepts a key once across stores (another sidecar adopts the recent marker as a reset at its time)', async () => {
    const a = await store();
    const b = await store();
    const results = await Promise.all([a.store.claim('agent:T:j1', 5_000), b.store.claim('agent:T:j1', 5_000), a.store.claim('agent:T:j2', 5_000)]);
    expect(results.filter(Boolean)).toHaveLength(2);
    expect(results[2]).toBe(true);
    const markerTime = Number((await a.client.get(MARKER))!.split('-')[0]);
    expect(b.store.lastReset()).toBe(markerTime);
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
    expect(b.store.lastReset()).toBe(a.store.lastReset());
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
    const client = connectRedis({ url: redis.url.replace('redis://', 'redis://noinfo:pw@'), prefix: '' }, log);
    clients.push(client);
    await until(() => client.status === 'ready');
    const s = new RedisReplayStore(client, { log, windowMs: WINDOW });
    await expect(s.claim('agent:T:noinfo', 1_000)).rejects.toThrow(/INFO.*NOPERM/);
  });

  it('warns when Redis may evict replay ids (any maxmemory-policy but noeviction)', async () => {
    const a = await store();
    await a.client.config('SET', 'maxmemory-policy', 'volatile-lru');
    const lines: string[] = [];
    const client = connectRedis({ url: redis.url, prefix: '' }, log);
    clients.push(client);
    const s = new RedisReplayStore(client, { log: createLogger('warn', (l) => lines.push(l)), windowMs: WINDOW });
    await until(() => client.status === 'ready');
    await s.claim('agent:T:evict', 1_000);
    await a.client.config('SET', 'maxmemory-policy', 'noeviction');
    expect(lines.filter((l) => l.includes('maxmemory-policy noeviction') && l.includes('"maxmemoryPolicy":"volatile-lru"'))).toHaveLength(1);
  });

  it('refuses with ReplayStoreUnavailableError when Redis does not answer', async () => {
    const client = connectRedis({ url: 'redis://127.0.0.1:1', prefix: '' }, log);
    clients.push(client);
    const s = new RedisReplayStore(client, { log, windowMs: WINDOW });
    await expect(s.claim('agent:T:x', 1_000)).rejects.toThrow(/did not answer|could not be confirmed/);
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

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisAccessRequestStore } from '../../../src/approvals/store-redis.js';
import type { AccessRequest } from '../../../src/approvals/types.js';
import { createLogger } from '../../../src/log.js';
import { connectRedis, type RedisClient } from '../../../src/redis/connect.js';
import { REDIS_URL, testPrefix } from '../../support/redis.js';
import { until } from '../../support/until.js';

// Against the real Redis (.ci/run makes sure it answers), each test under a prefix of its own.
const log = createLogger('error', () => {});
let clients: RedisClient[] = [];
const client = async (role: 'commands' | 'subscriber' = 'commands') => {
  const c = await connectRedis({ url: REDIS_URL, prefix: '' }, log, role);
  clients.push(c);
  return c;
};
beforeAll(async () => {
  const first = await client();
  await until(() => first.status === 'ready');
});
afterAll(() => {
  for (const c of clients) c.disconnect();
  clients = [];
});

function request(id: string, now = Date.now()): AccessRequest {
  return {
    id,
    agentId: 'bot',
    agentName: 'Bot',
    capability: 'send_sms',
    method: 'POST',
    target: '/sms',
    args: { to: '+1', n: 12345678901234567 / 10 },
    reason: 'r',
    violations: [],
    absentFields: [],
    headers: [],
    createdAt: now,
    expiresAt: now + 60_000,
    codeHash: 'h',
    state: 'pending',
    notified: false,
  };
}

async function store(name: string) {
  const c = await client();
  const s = await client('subscriber');
  await until(() => c.status === 'ready' && s.status === 'ready');
  return new RedisAccessRequestStore(c, s, testPrefix(name));
}

// Ids are the sidecar's own UUIDs (others never reach a key).
const [R1, R2, R3, V1, V2] = [randomUUID(), randomUUID(), randomUUID(), randomUUID(), randomUUID()];

// RedisReplayStore: test/unit/auth/replay-redis.test.ts

describe('RedisAccessRequestStore', () => {
  it('round-trips a request exactly and lists it as pending', async () => {
    const s = await store('roundtrip');
    const r = request(R1);
    await s.create(r);
    expect(await s.get(R1)).toEqual(r);
    expect((await s.pending()).map((p) => p.id)).toEqual([R1]);
    expect(await s.get(randomUUID())).toBeUndefined();
    expect(await s.get('pending')).toBeUndefined(); // not an id: never read as a key
  });

  it('resolves a request once when many resolvers race, and wakes subscribers of every store', async () => {
    const prefix = testPrefix('race');
    const c1 = await client();
    const c2 = await client();
    const s1 = await client('subscriber');
    const s2 = await client('subscriber');
    await until(() => [c1, c2, s1, s2].every((c) => c.status === 'ready'));
    const a = new RedisAccessRequestStore(c1, s1, prefix);
    const b = new RedisAccessRequestStore(c2, s2, prefix);
    const woken: string[] = [];
    b.onChange((id) => woken.push(id));
    // Both stores' SUBSCRIBE has landed (the server counts the channel's subscribers).
    await until(async () => Number(((await c1.pubsub('NUMSUB', `${prefix}ar:changes`)) as [string, number])[1]) >= 2);
    await a.create(request(R2));
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).resolve(R2, i % 3 ? 'approved' : 'denied', { resolvedAt: Date.now(), denyReason: `by ${i}` })),
    );
    const winners = results.filter(Boolean);
    expect(winners).toHaveLength(1);
    expect(await a.get(R2)).toEqual(winners[0]);
    expect(await a.pending()).toEqual([]);
    await until(() => woken.includes(R2));
  });

  it('an update never overwrites a concurrent resolution, and a resolution keeps a concurrent update', async () => {
    const s = await store('update');
    await s.create(request(R3));
    await Promise.all([s.update(R3, { notified: true }), s.resolve(R3, 'approved', { scope: 'once' }), s.update(R3, { codeHash: 'h2' })]);
    expect(await s.get(R3)).toMatchObject({ state: 'approved', scope: 'once', notified: true, codeHash: 'h2' });
    expect(await s.resolve(R3, 'denied', {})).toBeUndefined();
  });

  it('keeps value approvals until they expire, and deletes them once', async () => {
    const s = await store('values');
    const now = Date.now();
    await s.addValueApproval({ id: V1, agentId: 'bot', capability: 'send_sms', values: { to: '+1' }, requestId: 'r', createdAt: now, expiresAt: now + 60_000 });
    await s.addValueApproval({ id: V2, agentId: 'bot', capability: 'send_sms', values: { to: '+2' }, requestId: 'r', createdAt: now, expiresAt: now + 50 });
    expect((await s.valueApprovals(now)).map((a) => a.id).sort()).toEqual([V1, V2].sort());
    await until(async () => (await s.valueApprovals(Date.now())).length < 2); // V2's 50 ms pass
    expect((await s.valueApprovals(Date.now())).map((a) => a.id)).toEqual([V1]);
    expect(await s.deleteValueApproval(V1)).toBe(true);
    expect(await s.deleteValueApproval(V1)).toBe(false);
    expect(await s.valueApprovals(Date.now())).toEqual([]);
  });
});

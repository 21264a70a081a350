import type { RedisClient } from '../redis/connect.js';
import type { AccessRequestStore } from './store.js';
import type { AccessRequest, AccessRequestState, ValueApproval } from './types.js';

/**
 * Writes `data` only if the request's version is still the one read:
 * optimistic concurrency, so a request is resolved once even if two humans
 * click at once on two replicas, and a resolution never overwrites a
 * concurrent update (notified flag, reissued code). Publishes the id so the
 * replica holding the agent's connection wakes up.
 * KEYS: request hash, pending index. ARGV: version read, new JSON, new state, id, channel, ttl ms, require pending (1|0).
 */
const CAS = `
local ver = redis.call('HGET', KEYS[1], 'ver')
if not ver or ver ~= ARGV[1] then return 0 end
if ARGV[7] == '1' and redis.call('HGET', KEYS[1], 'state') ~= 'pending' then return -1 end
redis.call('HSET', KEYS[1], 'data', ARGV[2], 'state', ARGV[3], 'ver', tostring(tonumber(ver) + 1))
redis.call('PEXPIRE', KEYS[1], ARGV[6])
if ARGV[3] ~= 'pending' then redis.call('ZREM', KEYS[2], ARGV[4]) end
redis.call('PUBLISH', ARGV[5], ARGV[4])
return 1
`;

const ATTEMPTS = 8;
/** Ids are the sidecar's own UUIDs; anything else never reaches a key (it could name the index keys). */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * Access requests and value approvals in Redis, shared by every replica.
 * A request is a hash {data, state, ver} that lives until it has been
 * resolved for `keepResolvedMs`; pending ids sit in a sorted set by creation
 * time; value approvals are keys with their own TTL plus an index set.
 */
export class RedisAccessRequestStore implements AccessRequestStore {
  private readonly channel: string;
  private readonly listeners = new Set<(id: string) => void>();

  constructor(
    private readonly redis: RedisClient,
    private readonly subscriber: RedisClient,
    private readonly prefix: string,
    private readonly keepResolvedMs = 24 * 3_600_000,
    private readonly now: () => number = Date.now,
  ) {
    this.channel = `${prefix}ar:changes`;
    this.redis.defineCommand('agentsChainCas', { numberOfKeys: 2, lua: CAS });
    this.subscriber.on('message', (channel: string, id: string) => {
      if (channel === this.channel) for (const l of this.listeners) l(id);
    });
    void this.subscriber.subscribe(this.channel).catch(() => undefined); // re-subscribed by ioredis on reconnect
  }

  /** Called with a request id whenever any replica changes it. */
  onChange(listener: (id: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async create(request: AccessRequest): Promise<void> {
    const key = this.key(request.id);
    checked(
      await this.redis
        .multi()
        .hset(key, 'data', JSON.stringify(request), 'state', request.state, 'ver', '1')
        .pexpire(key, this.ttl(request))
        .zadd(this.pendingKey, request.createdAt, request.id)
        .exec(),
    );
  }

  async get(id: string): Promise<AccessRequest | undefined> {
    if (!UUID.test(id)) return undefined;
    const data = await this.redis.hget(this.key(id), 'data');
    return data ? (JSON.parse(data) as AccessRequest) : undefined;
  }

  async pending(): Promise<AccessRequest[]> {
    const ids = await this.redis.zrange(this.pendingKey, 0, -1);
    if (ids.length === 0) return [];
    const rows = await Promise.all(ids.map((id) => this.redis.hget(this.key(id), 'data')));
    const gone = ids.filter((_, i) => !rows[i]);
    if (gone.length) await this.redis.zrem(this.pendingKey, ...gone);
    return rows.flatMap((d) => (d ? [JSON.parse(d) as AccessRequest] : [])).filter((r) => r.state === 'pending');
  }

  resolve(id: string, state: Exclude<AccessRequestState, 'pending'>, patch: Partial<AccessRequest>): Promise<AccessRequest | undefined> {
    return this.change(id, (r) => ({ ...r, ...patch, state }), true);
  }

  update(id: string, patch: Partial<AccessRequest>): Promise<AccessRequest | undefined> {
    return this.change(id, (r) => ({ ...r, ...patch }), false);
  }

  async addValueApproval(a: ValueApproval): Promise<void> {
    checked(
      await this.redis
        .multi()
        .set(this.valueKey(a.id), JSON.stringify(a), 'PX', Math.max(1, a.expiresAt - this.now()))
        .sadd(this.valueIndex, a.id)
        .exec(),
    );
  }

  async valueApprovals(nowMs: number): Promise<ValueApproval[]> {
    const ids = await this.redis.smembers(this.valueIndex);
    if (ids.length === 0) return [];
    const rows = await Promise.all(ids.map((id) => this.redis.get(this.valueKey(id))));
    const gone = ids.filter((_, i) => !rows[i]);
    if (gone.length) await this.redis.srem(this.valueIndex, ...gone);
    return rows.flatMap((d) => (d ? [JSON.parse(d) as ValueApproval] : [])).filter((a) => a.expiresAt > nowMs);
  }

  async deleteValueApproval(id: string): Promise<boolean> {
    if (!UUID.test(id)) return false;
    return checked(await this.redis.multi().del(this.valueKey(id)).srem(this.valueIndex, id).exec())[0] === 1;
  }

  private async change(id: string, next: (r: AccessRequest) => AccessRequest, requirePending: boolean): Promise<AccessRequest | undefined> {
    if (!UUID.test(id)) return undefined;
    const key = this.key(id);
    for (let i = 0; i < ATTEMPTS; i++) {
      const [data, ver] = await this.redis.hmget(key, 'data', 'ver');
      if (!data || !ver) return undefined;
      const current = JSON.parse(data) as AccessRequest;
      if (requirePending && current.state !== 'pending') return undefined;
      const updated = next(current);
      const ok = await (this.redis as unknown as { agentsChainCas: (...a: unknown[]) => Promise<number> }).agentsChainCas(
        key,
        this.pendingKey,
        ver,
        JSON.stringify(updated),
        updated.state,
        id,
        this.channel,
        this.ttl(updated),
        requirePending ? '1' : '0',
      );
      if (ok === 1) return updated;
      if (ok === -1) return undefined; // resolved by someone else meanwhile
    }
    throw new Error(`access request ${id} kept changing; gave up after ${ATTEMPTS} attempts`);
  }

  /** Pending: until expiry plus the keep time; resolved: the keep time from resolution. */
  private ttl(r: AccessRequest): number {
    const from = r.state === 'pending' ? r.expiresAt : (r.resolvedAt ?? this.now());
    return Math.max(1, from + this.keepResolvedMs - this.now());
  }

  private key(id: string): string {
    return `${this.prefix}ar:${id}`;
  }

  private get pendingKey(): string {
    return `${this.prefix}ar:pending`;
  }

  private get valueIndex(): string {
    return `${this.prefix}va:index`;
  }

  private valueKey(id: string): string {
    return `${this.prefix}va:${id}`;
  }
}

/** A transaction's results, or its first error: MULTI reports failed commands in its answer, not by rejecting. */
function checked(results: [Error | null, unknown][] | null): unknown[] {
  if (!results) throw new Error('Redis transaction aborted');
  for (const [err] of results) if (err) throw err;
  return results.map(([, r]) => r);
}

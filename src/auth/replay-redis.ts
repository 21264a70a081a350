import type { RedisClient } from '../redis/connect.js';
import { ReplayStoreUnavailableError, type ReplayStore } from './replay.js';

/**
 * The replay window shared by every replica: one `SET key 1 NX PX ttl` per
 * call, atomic in Redis, so a token id is accepted once across all of them.
 * A Redis that does not answer (down, slow past the command timeout) makes
 * the call fail with ReplayStoreUnavailableError: refused, never skipped.
 */
export class RedisReplayStore implements ReplayStore {
  constructor(private readonly redis: RedisClient, private readonly prefix: string) {}

  async claim(key: string, ttlMs: number): Promise<boolean> {
    try {
      return (await this.redis.set(`${this.prefix}replay:${key}`, '1', 'PX', ttlMs, 'NX')) === 'OK';
    } catch (err) {
      throw new ReplayStoreUnavailableError(`replay store (Redis) did not answer: ${(err as Error).message}`);
    }
  }
}

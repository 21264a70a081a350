import { createHash } from 'node:crypto';
import { CLOCK_SKEW_SECONDS } from './claims.js';

/**
 * Remembers token ids for the replay window. `claim` is the only operation:
 * it records the id and says whether it was new, in one step, so two
 * concurrent uses of one token cannot both pass.
 */
export interface ReplayStore {
  /** Resolves true when `key` was unseen (and is now recorded for `ttlMs`), false when it is a replay. */
  claim(key: string, ttlMs: number): Promise<boolean>;
  /**
   * When the store last found that it had lost ids it held (Unix ms), if it
   * ever did: a shared store that restarted empty, was flushed or failed over.
   * Tokens issued before that moment are refused for one window (refusedByReset).
   */
  lastReset?(): number | undefined;
}

/**
 * The key of one token id: the signer's key thumbprint (`iss`, the same for an
 * agent in every policy, unlike agent ids, which are policy-local) and its
 * jti, so one id is spent once for every sidecar sharing a store. Long jtis
 * are hashed to keep keys short. Pure.
 */
export function replayKey(kind: 'agent' | 'host', thumbprint: string, jti: string): string {
  const id = jti.length <= 64 && !jti.startsWith('#') ? jti : `#${createHash('sha256').update(jti).digest('base64url')}`;
  return `${kind}:${thumbprint}:${id}`;
}

/**
 * After a store lost its ids, found at `resetAtMs` (R, this sidecar's clock, at
 * or after the loss), a token used before the loss may come back. Step 7
 * accepts an iat up to 30 s ahead of the clock (CLOCK_SKEW_SECONDS), so such a
 * token has iat <= R + 30; it lives at most 60 s (exp <= R + 90) and passes
 * step 7 until exp + 30 <= R + 120: one replay window (60 + 2 x 30 = 120 s).
 * So every token with iat <= R + 30 is refused until the second R + 120 has
 * passed (whole seconds: iat and exp are seconds, and step 7 compares the
 * floored clock). The cost: for about 30 s after a detected loss, fresh tokens
 * are refused too (their iat is the agent's now, <= R + 30). Pure.
 */
export function refusedByReset(resetAtMs: number | undefined, iatSeconds: number, nowMs: number, windowMs: number): boolean {
  if (resetAtMs === undefined) return false;
  const resetSecond = Math.floor(resetAtMs / 1000);
  if (Math.floor(nowMs / 1000) > resetSecond + Math.ceil(windowMs / 1000)) return false;
  return iatSeconds <= resetSecond + CLOCK_SKEW_SECONDS;
}

/** Raised by a store that cannot answer; the call is refused with 503, never let through. */
export class ReplayStoreUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ReplayStoreUnavailableError';
  }
}

/** Resident memory one remembered token id costs in the in-process store (measured ~400 B on Node 20 and 24, with headroom). */
export const REPLAY_BYTES_PER_ID = 512;

/**
 * How many token ids the in-process store may hold: 40 % of the memory limit
 * the process runs under (a container's cgroup limit) at REPLAY_BYTES_PER_ID
 * each, so a full store refuses calls (503) before the pod is OOM-killed and
 * loses its replay window; 1,000,000 without a limit. Pure.
 */
export function replayCapacity(memoryLimitBytes: number | undefined): number {
  if (!memoryLimitBytes || !Number.isFinite(memoryLimitBytes) || memoryLimitBytes >= 2 ** 50) return 1_000_000;
  return Math.min(1_000_000, Math.max(10_000, Math.floor((memoryLimitBytes * 0.4) / REPLAY_BYTES_PER_ID)));
}

/**
 * In-process store, bounded. Entries share one TTL, so insertion order is
 * expiry order and expired entries are dropped from the front as we go.
 * When full of live entries it refuses (fail closed) rather than forgetting
 * ids that are still inside the window.
 */
export class MemoryReplayStore implements ReplayStore {
  private readonly seen = new Map<string, number>();

  constructor(
    private readonly maxEntries = 1_000_000,
    private readonly clock: () => number = Date.now,
  ) {}

  get size(): number {
    return this.seen.size;
  }

  async claim(key: string, ttlMs: number): Promise<boolean> {
    const now = this.clock();
    this.evictExpired(now);
    const until = this.seen.get(key);
    if (until !== undefined && until > now) return false;
    if (this.seen.size >= this.maxEntries) {
      throw new ReplayStoreUnavailableError(`replay store is full (${this.maxEntries} live token ids)`);
    }
    this.seen.delete(key);
    this.seen.set(key, now + ttlMs);
    return true;
  }

  private evictExpired(now: number): void {
    for (const [k, until] of this.seen) {
      if (until > now) break;
      this.seen.delete(k);
    }
  }
}

import { describe, expect, it } from 'vitest';
import { CLOCK_SKEW_SECONDS, checkTimes } from '../../../src/auth/claims.js';
import { MemoryReplayStore, REPLAY_BYTES_PER_ID, replayCapacity, refusedByReset, replayKey, ReplayStoreUnavailableError } from '../../../src/auth/replay.js';

/** A clock the test moves by hand. */
function manualClock(start = 1_000_000): { now: () => number; advance: (ms: number) => void } {
  let t = start;
  return {
    now: () => t,
    advance: (ms) => {
      t += ms;
    },
  };
}

describe('MemoryReplayStore', () => {
  it('claims a key once, then reports replays', async () => {
    const store = new MemoryReplayStore();
    expect(await store.claim('jti-1', 90_000)).toBe(true);
    expect(await store.claim('jti-1', 90_000)).toBe(false);
    expect(await store.claim('jti-1', 90_000)).toBe(false);
    expect(await store.claim('jti-2', 90_000)).toBe(true);
  });

  it('lets only one of two concurrent claims win', async () => {
    const store = new MemoryReplayStore();
    const results = await Promise.all([store.claim('k', 1000), store.claim('k', 1000)]);
    expect(results.sort()).toEqual([false, true]);
  });

  it('remembers a key until its ttl passes, then accepts it again', async () => {
    const clock = manualClock();
    const store = new MemoryReplayStore(100, clock.now);
    expect(await store.claim('k', 90_000)).toBe(true);
    clock.advance(89_999);
    expect(await store.claim('k', 90_000)).toBe(false);
    clock.advance(2);
    expect(await store.claim('k', 90_000)).toBe(true);
    expect(await store.claim('k', 90_000)).toBe(false);
  });

  it('a replay does not extend the window', async () => {
    const clock = manualClock();
    const store = new MemoryReplayStore(100, clock.now);
    await store.claim('k', 1000);
    clock.advance(900);
    expect(await store.claim('k', 1000)).toBe(false);
    clock.advance(101);
    expect(await store.claim('k', 1000)).toBe(true);
  });

  it('refuses with ReplayStoreUnavailableError when full of live entries', async () => {
    const clock = manualClock();
    const store = new MemoryReplayStore(3, clock.now);
    for (const k of ['a', 'b', 'c']) expect(await store.claim(k, 1000)).toBe(true);
    await expect(store.claim('d', 1000)).rejects.toBeInstanceOf(ReplayStoreUnavailableError);
    await expect(store.claim('d', 1000)).rejects.toThrow(/full/);
    // A replay of a live key is still recognised as such while full.
    expect(await store.claim('a', 1000)).toBe(false);
    expect(store.size).toBe(3);
  });

  it('evicts expired entries so a full store recovers', async () => {
    const clock = manualClock();
    const store = new MemoryReplayStore(3, clock.now);
    await store.claim('a', 1000);
    clock.advance(500);
    await store.claim('b', 1000);
    await store.claim('c', 1000);
    await expect(store.claim('d', 1000)).rejects.toBeInstanceOf(ReplayStoreUnavailableError);

    clock.advance(501); // "a" has expired, "b" and "c" have not
    expect(await store.claim('d', 1000)).toBe(true);
    expect(store.size).toBe(3);
    await expect(store.claim('e', 1000)).rejects.toBeInstanceOf(ReplayStoreUnavailableError);

    clock.advance(10_000); // everything has expired
    expect(await store.claim('e', 1000)).toBe(true);
    expect(store.size).toBe(1);
    expect(await store.claim('b', 1000)).toBe(true);
  });
});

describe('replayCapacity', () => {
  it('keeps the window within 40 % of the memory limit, so a full store refuses calls before the process is OOM-killed', () => {
    const mib = 1024 * 1024;
    expect(replayCapacity(256 * mib)).toBe(Math.floor((256 * mib * 0.4) / REPLAY_BYTES_PER_ID)); // 209,715 ids
    expect(replayCapacity(256 * mib) * REPLAY_BYTES_PER_ID).toBeLessThanOrEqual(0.4 * 256 * mib);
    expect(replayCapacity(8 * mib)).toBe(10_000); // a floor: tiny limits still serve
    expect(replayCapacity(64 * 1024 * mib)).toBe(1_000_000); // a ceiling
    expect(replayCapacity(undefined)).toBe(1_000_000); // no limit known
    expect(replayCapacity(0)).toBe(1_000_000);
    expect(replayCapacity(2 ** 63)).toBe(1_000_000); // cgroup v1 "unlimited"
  });
});

describe('replayKey', () => {
  it('names the signer by its key thumbprint (global), not by a policy-local id, and keeps short jtis readable', () => {
    expect(replayKey('agent', 'THUMB', 'j-1')).toBe('agent:THUMB:j-1');
    expect(replayKey('host', 'THUMB', 'j-1')).toBe('host:THUMB:j-1');
  });

  it('hashes long jtis (and ones that could pass for a hash), so keys stay short and distinct', () => {
    const long = 'x'.repeat(128);
    expect(replayKey('agent', 'T', long)).toMatch(/^agent:T:#[A-Za-z0-9_-]{43}$/);
    expect(replayKey('agent', 'T', long)).not.toBe(replayKey('agent', 'T', `${long.slice(1)}y`));
    const lookalike = replayKey('agent', 'T', long).slice('agent:T:'.length);
    expect(replayKey('agent', 'T', lookalike)).not.toBe(replayKey('agent', 'T', long));
    expect(replayKey('agent', 'T', 'y'.repeat(64))).toBe(`agent:T:${'y'.repeat(64)}`);
  });
});

describe('refusedByReset', () => {
  const at = 1_700_000_000_500; // the loss was found half-way through second 1_700_000_000
  const second = 1_700_000_000;
  const window = 120_000;
  it('refuses tokens issued in the second of the reset or before, for one window', () => {
    expect(refusedByReset(at, second, at + 1, window)).toBe(true);
    expect(refusedByReset(at, second - 50, at + 60_000, window)).toBe(true);
    expect(refusedByReset(at, second, at + window - 1, window)).toBe(true);
  });
  it('refuses tokens issued up to the tolerated skew (30 s) after the reset: an agent clock ahead may have used them just before the loss', () => {
    // Step 7 accepted iat <= now + 30 before the loss; such a token may come back after it.
    expect(refusedByReset(at, second + 1, at + 1, window)).toBe(true);
    expect(refusedByReset(at, second + CLOCK_SKEW_SECONDS, at + 1, window)).toBe(true);
    expect(refusedByReset(at, second + CLOCK_SKEW_SECONDS + 1, at + 1, window)).toBe(false);
  });
  it('refuses until the last second such a token could pass step 7 (exp + 30 <= reset second + 120)', () => {
    const iat = second + CLOCK_SKEW_SECONDS;
    const lastAccepted = (iat + 60 + CLOCK_SKEW_SECONDS) * 1000 + 999; // checkTimes: exp + 30 < floor(now) is expired
    expect(checkTimes({ iat, exp: iat + 60 }, Math.floor(lastAccepted / 1000))).toBeUndefined();
    expect(refusedByReset(at, iat, lastAccepted, window)).toBe(true);
    expect(checkTimes({ iat, exp: iat + 60 }, Math.floor(lastAccepted / 1000) + 1)).toMatchObject({ code: 'token_expired' });
    expect(refusedByReset(at, iat, lastAccepted + 1, window)).toBe(false);
  });
  it('lets fresh tokens through once past the skew, and everything once the window has passed', () => {
    expect(refusedByReset(at, second + 31, at + 1, window)).toBe(false);
    expect(refusedByReset(at, second, (second + 121) * 1000, window)).toBe(false);
    expect(refusedByReset(undefined, 1, 2, window)).toBe(false);
  });
});

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
  it('claims a key once, then reports replays, at once (a boolean, not a promise)', () => {
    const store = new MemoryReplayStore();
    expect(store.claim('jti-1', 90_000)).toBe(true);
    expect(store.claim('jti-1', 90_000)).toBe(false);
    expect(store.claim('jti-1', 90_000)).toBe(false);
    expect(store.claim('jti-2', 90_000)).toBe(true);
  });

  it('lets only one of two concurrent claims win', async () => {
    const store = new MemoryReplayStore();
    const results = await Promise.all([store.claim('k', 1000), store.claim('k', 1000)]);
    expect(results.sort()).toEqual([false, true]);
  });

  it('remembers a key until its ttl passes, then accepts it again', () => {
    const clock = manualClock();
    const store = new MemoryReplayStore(100, clock.now);
    expect(store.claim('k', 90_000)).toBe(true);
    clock.advance(89_999);
    expect(store.claim('k', 90_000)).toBe(false);
    clock.advance(2);
    expect(store.claim('k', 90_000)).toBe(true);
    expect(store.claim('k', 90_000)).toBe(false);
  });

  it('holds a key up to the last millisecond before now + ttl, and forgets it at exactly now + ttl (as the Map did: until > now)', () => {
    const clock = manualClock();
    const store = new MemoryReplayStore(100, clock.now);
    expect(store.claim('k', 1000)).toBe(true);
    clock.advance(999);
    expect(store.claim('k', 1000)).toBe(false);
    clock.advance(1);
    expect(store.size).toBe(1);
    expect(store.claim('k', 1000)).toBe(true);
    expect(store.size).toBe(1);
    // A clock with fractions of a millisecond rounds the expiry up: never a shorter window.
    const fine = manualClock(1_000_000.25);
    const s2 = new MemoryReplayStore(100, fine.now);
    expect(s2.claim('k', 1000)).toBe(true);
    fine.advance(999.7);
    expect(s2.claim('k', 1000)).toBe(false);
  });

  it('a replay does not extend the window', () => {
    const clock = manualClock();
    const store = new MemoryReplayStore(100, clock.now);
    store.claim('k', 1000);
    clock.advance(900);
    expect(store.claim('k', 1000)).toBe(false);
    clock.advance(101);
    expect(store.claim('k', 1000)).toBe(true);
  });

  it('refuses with ReplayStoreUnavailableError when full of live entries', () => {
    const clock = manualClock();
    const store = new MemoryReplayStore(3, clock.now);
    for (const k of ['a', 'b', 'c']) expect(store.claim(k, 1000)).toBe(true);
    expect(() => store.claim('d', 1000)).toThrow(ReplayStoreUnavailableError);
    expect(() => store.claim('d', 1000)).toThrow(/full/);
    // A replay of a live key is still recognised as such while full.
    expect(store.claim('a', 1000)).toBe(false);
    expect(store.size).toBe(3);
  });

  it('evicts expired entries so a full store recovers', () => {
    const clock = manualClock();
    const store = new MemoryReplayStore(3, clock.now);
    store.claim('a', 1000);
    clock.advance(500);
    store.claim('b', 1000);
    store.claim('c', 1000);
    expect(() => store.claim('d', 1000)).toThrow(ReplayStoreUnavailableError);

    clock.advance(501); // "a" has expired, "b" and "c" have not
    expect(store.claim('d', 1000)).toBe(true);
    expect(store.size).toBe(3);
    expect(() => store.claim('e', 1000)).toThrow(ReplayStoreUnavailableError);

    clock.advance(10_000); // everything has expired
    expect(store.claim('e', 1000)).toBe(true);
    expect(store.size).toBe(1);
    expect(store.claim('b', 1000)).toBe(true);
  });

  it('refuses a ttl its 32-bit expiries cannot hold, and a clock that is not a number (the call is refused, never let through)', () => {
    const store = new MemoryReplayStore(10);
    expect(() => store.claim('k', 2 ** 31 + 1)).toThrow(RangeError);
    expect(() => store.claim('k', NaN)).toThrow(RangeError);
    expect(store.claim('k', 2 ** 31)).toBe(true);
    const broken = new MemoryReplayStore(10, () => NaN);
    expect(() => broken.claim('k', 1000)).toThrow(ReplayStoreUnavailableError);
  });

  it('grows by rehashing, doubling up to maxEntries, and still knows every id', () => {
    const clock = manualClock();
    const store = new MemoryReplayStore(5000, clock.now);
    const first = store.bytes;
    let fresh = 0;
    for (let i = 0; i < 5000; i++) if (store.claim(`agent:T:${i}`, 60_000)) fresh++;
    expect(fresh).toBe(5000);
    expect(store.size).toBe(5000);
    expect(store.bytes).toBeGreaterThan(first);
    for (let i = 0; i < 5000; i++) if (store.claim(`agent:T:${i}`, 60_000)) fresh++;
    expect(fresh).toBe(5000);
    expect(() => store.claim('agent:T:one-more', 60_000)).toThrow(ReplayStoreUnavailableError);
    // 5000 is not a power of two: the last doubling stops at maxEntries (5000 x 20 B of ring + a 16,384-slot table).
    expect(store.bytes).toBe(5000 * 20 + 16_384 * 4);
  });

  it('gives the memory back once the window has drained, and grows again', () => {
    const clock = manualClock();
    const store = new MemoryReplayStore(100_000, clock.now);
    const empty = store.bytes;
    for (let i = 0; i < 20_000; i++) store.claim(`burst-${i}`, 1000);
    const full = store.bytes;
    clock.advance(1000);
    for (let i = 0; i < 10; i++) expect(store.claim(`after-${i}`, 1000)).toBe(true);
    expect(store.size).toBe(10);
    expect(store.bytes).toBeLessThan(full);
    clock.advance(1000);
    for (let i = 0; i < 50; i++) store.claim(`later-${i}`, 1000); // each claim halves the arrays once more
    expect(store.bytes).toBe(empty);
    for (let i = 0; i < 50; i++) expect(store.claim(`later-${i}`, 1000)).toBe(false);
    let fresh = 0;
    for (let i = 0; i < 20_000; i++) if (store.claim(`burst-${i}`, 1000)) fresh++;
    expect(fresh).toBe(20_000);
  });

  it('wraps around its ring many times as ids expire from the front, at a fixed size', () => {
    const clock = manualClock();
    const store = new MemoryReplayStore(1000, clock.now); // ring of 1000: never grows
    const bytes = store.bytes;
    const wrong: string[] = [];
    for (let i = 0; i < 20_000; i++) {
      if (!store.claim(`id-${i}`, 999)) wrong.push(`id-${i} refused`); // 999 ms, one claim per ms: 999 live
      if (i >= 998) {
        if (store.claim(`id-${i - 998}`, 999)) wrong.push(`id-${i - 998} forgotten`); // the oldest live one
        if (store.size !== 999) wrong.push(`size ${store.size} at ${i}`); // the one before it was dropped from the front
      }
      clock.advance(1);
    }
    expect(wrong.slice(0, 5)).toEqual([]);
    expect(store.bytes).toBe(bytes);
  });

  it('drops an expired id and shifts its probe run back (no tombstones): every id left is still found', () => {
    // A tiny table (64 slots for 32 entries) makes long probe runs; each step expires the oldest id.
    const clock = manualClock();
    const store = new MemoryReplayStore(32, clock.now);
    const live: string[] = [];
    const wrong: string[] = [];
    for (let i = 0; i < 5000; i++) {
      const key = `k${i}`;
      if (!store.claim(key, 31)) wrong.push(`${key} refused`);
      live.push(key);
      if (live.length > 31) live.shift();
      clock.advance(1);
      for (const k of live.slice(1)) if (store.claim(k, 31)) wrong.push(`${k} at ${i} forgotten`);
      if (i >= 30 && store.size !== 30) wrong.push(`size ${store.size} at ${i}`);
    }
    expect(wrong.slice(0, 5)).toEqual([]);
  });

  it('an expired id kept behind a later expiry (a longer ttl ahead) is spent again, moved to the tail', () => {
    const clock = manualClock();
    const store = new MemoryReplayStore(10, clock.now);
    expect(store.claim('x', 5000)).toBe(true);
    expect(store.claim('k', 1000)).toBe(true);
    clock.advance(1000); // "k" has expired but stays behind "x"
    expect(store.claim('k', 10_000)).toBe(true);
    expect(store.size).toBe(2);
    expect(store.claim('k', 10_000)).toBe(false);
    clock.advance(4000); // "x" goes, and with it the superseded "k" entry, not the live one
    expect(store.claim('x', 1000)).toBe(true);
    expect(store.claim('k', 1000)).toBe(false);
    expect(store.size).toBe(2);
    clock.advance(5999);
    expect(store.claim('k', 1000)).toBe(false); // spent again at 1000 for 10 s: until 11,000
    clock.advance(1);
    expect(store.claim('k', 1000)).toBe(true);
  });

  it('keeps live ids when its clock steps back, and when the 32-bit expiries move to a new base', () => {
    const clock = manualClock(10_000_000);
    const store = new MemoryReplayStore(10, clock.now);
    expect(store.claim('a', 1000)).toBe(true);
    clock.advance(-5000); // before the first claim: the base moves back
    expect(store.claim('a', 1000)).toBe(false);
    expect(store.claim('b', 1000)).toBe(true);
    clock.advance(5999);
    expect(store.claim('a', 1000)).toBe(false); // still until its original expiry (as the Map did: until > now)
    clock.advance(1);
    expect(store.claim('a', 1000)).toBe(true);

    // ~49 days later (2^32 ms after the base), expiries are rebased; a long ttl survives it to the millisecond.
    const long = 2 ** 31;
    expect(store.claim('long', long)).toBe(true);
    clock.advance(long - 1);
    expect(store.claim('c', long)).toBe(true); // offset + ttl > 2^32 - 1: rebased
    expect(store.claim('long', 1000)).toBe(false);
    clock.advance(1);
    expect(store.claim('long', 1000)).toBe(true);
    expect(store.claim('c', 1000)).toBe(false);
  });

  it('holds many ids at a few dozen bytes each, and refuses past maxEntries', () => {
    const clock = manualClock();
    const n = 200_000;
    const store = new MemoryReplayStore(n, clock.now);
    const thumb = 'q'.repeat(43);
    let fresh = 0;
    for (let i = 0; i < n; i++) if (store.claim(`agent:${thumb}:b1700000000-${i}-x`, 120_000)) fresh++;
    expect(fresh).toBe(n);
    for (let i = 0; i < n; i++) if (store.claim(`agent:${thumb}:b1700000000-${i}-x`, 120_000)) fresh++;
    expect(fresh).toBe(n);
    expect(() => store.claim(`agent:${thumb}:b1700000000-${n}-x`, 120_000)).toThrow(ReplayStoreUnavailableError);
    expect(store.bytes / n).toBeLessThan(REPLAY_BYTES_PER_ID);
    clock.advance(120_000);
    expect(store.claim(`agent:${thumb}:b1700000000-0-x`, 120_000)).toBe(true);
  });

  it('answers as the Map of expiries it replaced does, over random claims, at capacity, while growing and with clocks that step back', () => {
    // Regular (one ttl, a clock that only moves forward): the same answers and sizes, full or not.
    // Irregular (mixed ttls, steps back): the same answers; the store may hold fewer ids, since a
    // rebuild drops expired ids the Map kept behind a later expiry (so capacity never binds here).
    for (const [max, keys, irregular] of [
      [40, 120, false],
      [3000, 6000, false],
      [200, 120, true],
    ] as const) {
      const clock = manualClock();
      const store = new MemoryReplayStore(max, clock.now);
      const model = new ModelStore(max, clock.now);
      let seed = max;
      const random = (n: number): number => {
        seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
        return (seed >>> 8) % n;
      };
      for (let step = 0; step < 60_000; step++) {
        const r = random(100);
        if (r < 3) clock.advance(random(2000));
        else if (r < 5 && irregular) clock.advance(-random(300));
        const key = `key-${random(keys)}`;
        const ttl = irregular && random(10) === 0 ? 3000 : 1000;
        const want = outcome(() => model.claim(key, ttl));
        const got = outcome(() => store.claim(key, ttl));
        const sizeOk = irregular ? store.size <= model.size : store.size === model.size;
        if (got !== want || !sizeOk) {
          expect({ step, key, got, size: store.size }).toEqual({ step, key, got: want, size: model.size });
        }
        clock.advance(random(3));
      }
    }
  });
});

/** The Map the store replaced (its semantics are the reference), with an expired entry taken out before the capacity check. */
class ModelStore {
  private readonly seen = new Map<string, number>();
  constructor(
    private readonly max: number,
    private readonly now: () => number,
  ) {}
  get size(): number {
    return this.seen.size;
  }
  claim(key: string, ttl: number): boolean {
    const now = this.now();
    for (const [k, until] of this.seen) {
      if (until > now) break;
      this.seen.delete(k);
    }
    const until = this.seen.get(key);
    if (until !== undefined && until > now) return false;
    this.seen.delete(key);
    if (this.seen.size >= this.max) throw new ReplayStoreUnavailableError('full');
    this.seen.set(key, now + ttl);
    return true;
  }
}

function outcome(f: () => boolean): string {
  try {
    return String(f());
  } catch (err) {
    return err instanceof ReplayStoreUnavailableError ? 'full' : String(err);
  }
}

describe('replayCapacity', () => {
  it('keeps the window within 40 % of the memory limit, so a full store refuses calls before the process is OOM-killed', () => {
    const mib = 1024 * 1024;
    expect(replayCapacity(64 * mib)).toBe(Math.floor((64 * mib * 0.4) / REPLAY_BYTES_PER_ID)); // 419,430 ids
    expect(replayCapacity(64 * mib) * REPLAY_BYTES_PER_ID).toBeLessThanOrEqual(0.4 * 64 * mib);
    expect(replayCapacity(256 * mib)).toBe(1_000_000); // the injected sidecar's limit: the ceiling binds
    expect(replayCapacity(1 * mib)).toBe(10_000); // a floor: tiny limits still serve
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

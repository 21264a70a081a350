import { createHash, hash, randomBytes } from 'node:crypto';
import { CLOCK_SKEW_SECONDS } from './claims.js';

/**
 * Remembers token ids for the replay window. `claim` is the only operation:
 * it records the id and says whether it was new, in one step, so two
 * concurrent uses of one token cannot both pass.
 */
export interface ReplayStore {
  /**
   * True when `key` was unseen (and is now recorded for `ttlMs`), false when it is a replay; a store that
   * cannot answer throws (or rejects with) ReplayStoreUnavailableError. The in-process store answers at
   * once, without a promise, so the call that spends the id takes no extra microtask.
   */
  claim(key: string, ttlMs: number): boolean | Promise<boolean>;
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

/**
 * Memory one remembered token id may cost in the in-process store, with headroom: MemoryReplayStore keeps
 * 28–36 B per id in typed arrays (a 16-byte digest, a 4-byte expiry, 8–16 B of hash table at the sizes it
 * grows through), and while it doubles the old arrays live beside the new ones for one rebuild (~42 B per id
 * at that moment). Measured with bench/replay-memory.mjs (docs/design/benchmarks.md), Node 20 and 24, at
 * 1,000,000 ids: 28 B of ArrayBuffers and 32–44 B of resident memory per id, against ~190 B of heap and
 * 220–290 B of resident memory per id for the Map of key strings it replaced (the figure this was 512 for).
 */
export const REPLAY_BYTES_PER_ID = 64;

/**
 * How many token ids the in-process store may hold: 40 % of the memory limit the process runs under (a
 * container's cgroup limit) at REPLAY_BYTES_PER_ID each, so a full store refuses calls (503) before the pod
 * is OOM-killed and loses its replay window; at most 1,000,000 (two minutes of 8,300 calls/s, more than one
 * sidecar serves), also without a limit. At 64 B per id the ceiling binds from a ~153 MiB limit up: the
 * injected sidecar's 256Mi holds 1,000,000 ids in ~28 MiB. Pure.
 */
export function replayCapacity(memoryLimitBytes: number | undefined): number {
  if (!memoryLimitBytes || !Number.isFinite(memoryLimitBytes) || memoryLimitBytes >= 2 ** 50) return 1_000_000;
  return Math.min(1_000_000, Math.max(10_000, Math.floor((memoryLimitBytes * 0.4) / REPLAY_BYTES_PER_ID)));
}

/** The ring's first size (entries); it doubles as it fills, up to maxEntries. */
const FIRST_CAPACITY = 1024;
/** Longest ttl a claim may ask for: expiries are ms after a base in 32 bits, and the base moves forward before they overflow. */
const MAX_TTL_MS = 2 ** 31;
const MAX_OFFSET = 0xffffffff;

/**
 * In-process store, bounded, with no JS object or string per id: a ring of
 * entries in claim order, each a 128-bit digest of the key and its expiry
 * (ms after `base`, 32 bits), and an open-addressing hash table (linear
 * probing) of ring positions, at most half full. Entries share one TTL, so
 * claim order is expiry order and expired entries are dropped from the front
 * as we go (an id that expired behind a later expiry, after a clock step back
 * or a longer ttl, is superseded: its entry stays in the ring, out of the
 * table, until the front reaches it). The ring doubles when full, up to
 * maxEntries, and halves when a quarter full. When full of live entries it
 * refuses (fail closed) rather than forgetting ids that are still inside the
 * window. About 30 bytes per id and ~1 µs per claim (benchmarks.md), where the
 * Map of key strings it replaced took ~190 B of heap per id and, once its
 * window rolled, walked the deleted entries at its front on every claim.
 *
 * The digest is SHA-256 of a per-store random secret and the key, cut to 128
 * bits: the agent chooses its jti, but without the secret it cannot aim ids at
 * one bucket (a probe run that grows with every id) or at each other. Secret
 * prefix rather than HMAC: no digest ever leaves the process, so length
 * extension gives nothing, and the one-shot crypto.hash costs ~0.4 µs per claim
 * against ~1.7 µs for createHmac (Node 20, 90-character keys). Two keys with
 * one digest read as one id: the second is refused as a replay, never a replay
 * accepted. At 1,000,000 live ids a fresh id meets one by chance with
 * probability 10^6 / 2^128 ≈ 3 × 10^-33 (any two of them share a digest:
 * ≈ 1.5 × 10^-27). Strings are hashed as UTF-8, so keys that differ only in
 * lone surrogates (one U+FFFD each) are one id, which again only refuses.
 */
export class MemoryReplayStore implements ReplayStore {
  private readonly secret = randomBytes(32).toString('base64url');
  /** Ring capacity (entries). */
  private cap: number;
  /** Four 32-bit words of digest per ring entry. */
  private digests: Int32Array;
  /** When each ring entry expires, ms after `base`; 0 once the entry is superseded. */
  private expiries: Uint32Array;
  private head = 0;
  /** Entries in the ring: live, expired but not dropped yet, or superseded. */
  private length = 0;
  /** Ring position + 1 of each id held, 0 for an empty slot; size a power of two, at least twice the ring's. */
  private table: Int32Array;
  private mask: number;
  /** Ids in the table. */
  private held = 0;
  private base: number | undefined;
  /** The digest of the key being claimed. */
  private readonly d = new Int32Array(4);

  constructor(
    private readonly maxEntries = 1_000_000,
    private readonly clock: () => number = Date.now,
  ) {
    this.cap = Math.max(1, Math.min(maxEntries, FIRST_CAPACITY));
    this.digests = new Int32Array(this.cap * 4);
    this.expiries = new Uint32Array(this.cap);
    this.table = new Int32Array(tableSize(this.cap));
    this.mask = this.table.length - 1;
  }

  /** Token ids held (some may have expired and wait to be dropped). */
  get size(): number {
    return this.held;
  }

  /** Bytes of the arrays the store holds now. */
  get bytes(): number {
    return this.digests.byteLength + this.expiries.byteLength + this.table.byteLength;
  }

  claim(key: string, ttlMs: number): boolean {
    if (!(ttlMs <= MAX_TTL_MS)) throw new RangeError(`replay ttl ${ttlMs} ms is over ${MAX_TTL_MS} ms`);
    const now = this.clock();
    // A clock that is not a number would make every id look expired: refused, never let through.
    if (!Number.isFinite(now)) throw new ReplayStoreUnavailableError(`replay store clock reads ${now}`);
    const rel = this.offset(now, ttlMs);
    this.dropExpired(rel);
    this.digest(key);
    const slot = this.find();
    if (slot >= 0) {
      const pos = this.table[slot]! - 1;
      if (this.expiries[pos]! > rel) return false;
      // Expired, but kept behind a later expiry (a clock stepped back, a longer ttl ahead): spent again, at the tail.
      this.removeSlot(slot);
      this.expiries[pos] = 0;
    }
    if (this.held >= this.maxEntries) {
      throw new ReplayStoreUnavailableError(`replay store is full (${this.maxEntries} live token ids)`);
    }
    if (this.length === this.cap) this.rebuild(this.keptAfter(rel) * 2 >= this.cap ? Math.min(this.maxEntries, this.cap * 2) : this.cap, rel);
    this.append(Math.min(MAX_OFFSET, Math.ceil(rel + Math.max(0, ttlMs))));
    return true;
  }

  /** The clock as ms after `base`, moving the base (and every expiry with it) when the clock went back before it or the expiry would not fit in 32 bits. */
  private offset(now: number, ttlMs: number): number {
    this.base ??= now;
    const rel = now - this.base;
    if (rel >= 0 && rel + ttlMs <= MAX_OFFSET) return rel;
    for (let k = 0, pos = this.head; k < this.length; k++, pos = this.next(pos)) {
      // Superseded (0) and expired stay so; only a clock stepped back by more than 49 days could clip a live one.
      const e = this.expiries[pos]!;
      this.expiries[pos] = e === 0 ? 0 : Math.min(MAX_OFFSET, Math.max(0, e - rel));
    }
    this.base = now;
    return 0;
  }

  private dropExpired(rel: number): void {
    while (this.length > 0 && this.expiries[this.head]! <= rel) {
      this.unlink(this.head);
      this.head = this.next(this.head);
      this.length--;
    }
    // After a burst, give the memory back (a quarter full: halved, so it cannot grow straight back).
    if (this.cap > FIRST_CAPACITY && this.length * 4 < this.cap) this.rebuild(Math.max(FIRST_CAPACITY, Math.ceil(this.cap / 2)), rel);
  }

  /** The key's digest, into `d`. */
  private digest(key: string): void {
    const s = hash('sha256', this.secret + key, 'binary');
    const d = this.d;
    for (let w = 0; w < 4; w++) {
      const i = w * 4;
      d[w] = s.charCodeAt(i) | (s.charCodeAt(i + 1) << 8) | (s.charCodeAt(i + 2) << 16) | (s.charCodeAt(i + 3) << 24);
    }
  }

  /** The table slot holding `d`, or -1. */
  private find(): number {
    const { d, digests, table, mask } = this;
    for (let i = d[0]! & mask; ; i = (i + 1) & mask) {
      const v = table[i]!;
      if (v === 0) return -1;
      const at = (v - 1) * 4;
      if (digests[at] === d[0] && digests[at + 1] === d[1] && digests[at + 2] === d[2] && digests[at + 3] === d[3]) return i;
    }
  }

  /** Takes ring entry `pos` out of the table, if it is there (a superseded one is not). */
  private unlink(pos: number): void {
    const { table, mask } = this;
    for (let i = this.digests[pos * 4]! & mask; ; i = (i + 1) & mask) {
      const v = table[i]!;
      if (v === 0) return;
      if (v === pos + 1) return this.removeSlot(i);
    }
  }

  /** Empties slot `i` by shifting back the entries of its probe run that may fill it: no tombstones, probe runs stay short. */
  private removeSlot(i: number): void {
    const { table, mask, digests } = this;
    let hole = i;
    for (let j = (i + 1) & mask; table[j] !== 0; j = (j + 1) & mask) {
      const v = table[j]!;
      const home = digests[(v - 1) * 4]! & mask;
      // The entry at j may move to the hole when the hole lies on its probe path, home..j.
      if (((j - home) & mask) >= ((j - hole) & mask)) {
        table[hole] = v;
        hole = j;
      }
    }
    table[hole] = 0;
    this.held--;
  }

  private append(expiry: number): void {
    let pos = this.head + this.length;
    if (pos >= this.cap) pos -= this.cap;
    const { d, digests } = this;
    const at = pos * 4;
    digests[at] = d[0]!;
    digests[at + 1] = d[1]!;
    digests[at + 2] = d[2]!;
    digests[at + 3] = d[3]!;
    this.expiries[pos] = expiry;
    this.length++;
    this.insert(pos);
  }

  private insert(pos: number): void {
    const { table, mask } = this;
    let i = this.digests[pos * 4]! & mask;
    while (table[i] !== 0) i = (i + 1) & mask;
    table[i] = pos + 1;
    this.held++;
  }

  /** Entries a rebuild at `rel` would keep: those not expired (superseded ones have expiry 0). */
  private keptAfter(rel: number): number {
    let n = 0;
    for (let k = 0, pos = this.head; k < this.length; k++, pos = this.next(pos)) if (this.expiries[pos]! > rel) n++;
    return n;
  }

  /** New arrays of `cap` entries holding the unexpired entries in ring order from 0; the table rehashed. */
  private rebuild(cap: number, rel: number): void {
    const { digests, expiries, head, length } = this;
    const oldCap = this.cap;
    this.cap = cap;
    this.digests = new Int32Array(cap * 4);
    this.expiries = new Uint32Array(cap);
    this.table = new Int32Array(tableSize(cap));
    this.mask = this.table.length - 1;
    this.head = 0;
    this.length = 0;
    this.held = 0;
    for (let k = 0, pos = head; k < length; k++, pos = pos + 1 === oldCap ? 0 : pos + 1) {
      if (expiries[pos]! <= rel) continue;
      const to = this.length++;
      for (let w = 0; w < 4; w++) this.digests[to * 4 + w] = digests[pos * 4 + w]!;
      this.expiries[to] = expiries[pos]!;
      this.insert(to);
    }
  }

  private next(pos: number): number {
    return pos + 1 === this.cap ? 0 : pos + 1;
  }
}

/** A power of two at least twice `entries`: linear probing stays at or under half full. */
function tableSize(entries: number): number {
  let n = 8;
  while (n < entries * 2) n *= 2;
  return n;
}

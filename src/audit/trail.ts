import type { Logger } from '../log.js';
import { batchHash, batchLine, GENESIS, openBatch, type AuditBatch, type AuditKeyring, type SealedBatch } from './crypto.js';
import { entryHead, type AuditEntry } from './entry.js';
import type { AuditExporter } from './exporters.js';
import { RawJson } from './raw-json.js';
import { BatchSealer } from './sealer.js';
import { needsRedaction, redact, SECRET_KEY_PATTERN } from './redact.js';
import { Spool } from './spool.js';

export interface AuditTrailOptions {
  keyring: AuditKeyring;
  exporters: AuditExporter[];
  /** Spool directory; memory when absent. */
  spoolDir?: string;
  spoolMaxBytes?: number;
  flushIntervalMs?: number;
  maxBatch?: number;
  /** batched: a crash loses at most the open batch. strict: record() resolves once the entry is on disk. */
  durability?: 'batched' | 'strict';
  /** Extra key patterns to redact in args, besides the built-in ones. */
  redactPatterns?: RegExp[];
  log: Logger;
  /** How long close() waits for exporters before leaving the rest in the spool [10 s]. */
  drainMs?: number;
  /** Backoff before retry n (ms), for tests. */
  backoffMs?: (attempt: number) => number;
  /** While the spool cannot take batches, how much may wait in memory [64 MiB]. */
  maxHeldBytes?: number;
  /** Told of each entry, delivery and failure (metrics). */
  observer?: AuditObserver;
}

/** Events worth counting, for whoever counts them (the metrics module); the trail does not depend on it. */
export interface AuditObserver {
  exported(exporter: string): void;
  exportFailed(exporter: string): void;
  servedWhileUnavailable(): void;
  /** Records not kept: the spool was down and the in-memory backlog full (those calls were refused), or a batch could not be sealed. */
  dropped?(entries: number): void;
}

export interface AuditStats {
  recorded: number;
  batches: number;
  exported: Record<string, number>;
  exportFailures: number;
  spoolBytes: number;
  available: boolean;
  /** Calls served while the spool could not take entries (onAuditFailure: allow). */
  servedWhileUnavailable: number;
  /** Records not kept while the spool was down and the backlog full. */
  dropped: number;
  byCapability: Record<string, { total: number; success: number; denied: number; error: number }>;
}

/**
 * The audit pipeline: entries are redacted at once, held in clear only in the
 * open batch, sealed (AES-256-GCM, hash-chained) on flush, written to the
 * spool, and delivered to every exporter in order, retried until acknowledged.
 */
export class AuditTrail {
  /** The open batch, encrypted as entries arrive. */
  private sealer?: BatchSealer;
  /** Batched durability: entries of the current event-loop turn, written into the open batch at its end. */
  private pending: AuditEntry[] = [];
  private pendingScheduled = false;
  private waiters: { resolve: () => void; reject: (e: Error) => void }[] = [];
  /** Sealed batches not yet in the spool (the spool was full or failing), in order. */
  private readonly sealed: { seq: number; line: Buffer; hash: string; count: number; first: number; waiters: { resolve: () => void; reject: (e: Error) => void }[] }[] = [];
  private seq = 0;
  private prev = GENESIS;
  private timer?: NodeJS.Timeout;
  private flushing: Promise<void> = Promise.resolve();
  private queued?: Promise<void>;
  private healthy = true;
  private readonly spool: Spool;
  private readonly delivering = new Map<string, Promise<void>>();
  private readonly wake = new Map<string, () => void>();
  private stopped = false;
  /** The last sealed batches (encrypted), for the admin's view of recent entries. */
  private readonly recentBatches: Buffer[] = [];
  private pattern: RegExp;
  /** Bytes of sealed batches waiting for the spool. */
  private heldBytes = 0;
  /** Entries of the batch being sealed (off the event loop), for `buffered`. */
  private sealing = 0;
  /** Size of the last batch, so the next one starts with room for as much. */
  private lastBatchBytes = 64 * 1024;
  private warnedFull = false;
  readonly stats: AuditStats = { recorded: 0, batches: 0, exported: {}, exportFailures: 0, spoolBytes: 0, available: true, servedWhileUnavailable: 0, dropped: 0, byCapability: {} };

  constructor(private readonly opts: AuditTrailOptions) {
    this.spool = new Spool(opts.spoolDir, opts.spoolMaxBytes ?? 256 * 1024 * 1024, opts.exporters.map((e) => e.name));
    this.pattern = redactionPattern(opts.redactPatterns);
  }

  /** A policy reload may change the extra redaction patterns; they apply from the next entry on. */
  setRedactPatterns(patterns: RegExp[] | undefined): void {
    this.pattern = redactionPattern(patterns);
    this.verdicts.clear();
  }

  /** Field names repeat from call to call: the pattern's verdict on each is remembered (bounded). */
  private readonly verdicts = new Map<string, boolean>();
  private readonly isSecretKey = (key: string): boolean => {
    let v = this.verdicts.get(key);
    if (v === undefined) {
      v = this.pattern.test(key);
      if (this.verdicts.size < 10_000) this.verdicts.set(key, v);
    }
    return v;
  };

  async start(): Promise<void> {
    const newest = await this.spool.init();
    if (newest) {
      this.seq = newest.seq;
      this.prev = newest.hash;
    }
    for (const e of this.opts.exporters) this.stats.exported[e.name] = 0;
    for (const e of this.opts.exporters) this.delivering.set(e.name, this.deliver(e));
    this.timer = setInterval(() => void this.flush(), this.opts.flushIntervalMs ?? 1000);
    this.timer.unref();
  }

  get durability(): 'batched' | 'strict' {
    return this.opts.durability ?? 'batched';
  }

  /** False when the spool is full or cannot be written: calls must then be refused. */
  get available(): boolean {
    return this.healthy;
  }

  /** Adds an entry; in strict mode resolves once its batch is on disk. After drain, it is spooled at once (kept for the next start). */
  record(entry: AuditEntry): Promise<void> {
    // While the spool is down, calls are refused but still recorded in memory; past the bound the
    // record of a refused call is counted (metric, log) instead of kept, so an outage cannot exhaust memory.
    if (!this.healthy && this.heldBytes > (this.opts.maxHeldBytes ?? 64 * 1024 * 1024)) {
      this.stats.dropped++;
      if (!this.warnedFull) this.opts.log.error('audit spool down and the in-memory backlog is full: records of refused calls are counted, not kept', { heldBytes: this.heldBytes });
      this.warnedFull = true;
      this.opts.observer?.dropped?.(1);
      return Promise.reject(new Error('audit backlog full'));
    }
    const strict = this.opts.durability === 'strict' || this.stopped;
    if (!strict) {
      // Batched: entries are written into the batch once per event-loop turn, all together (see addPending).
      this.pending.push(entry);
      if (!this.pendingScheduled) {
        this.pendingScheduled = true;
        setImmediate(this.addPending);
      }
      this.count(entry);
      return RESOLVED;
    }
    try {
      this.addPending(); // entries recorded before this one (in batched mode, before drain) stay ahead of it
      this.add(entry);
    } catch (err) {
      return Promise.reject(err as Error); // callers handle a refused record as a rejection, never a throw
    }
    this.count(entry);
    // Group commit on the next tick.
    const durable = new Promise<void>((resolve, reject) => { this.waiters.push({ resolve, reject }); });
    queueMicrotask(() => void this.flush());
    return durable;
  }

  private count(entry: AuditEntry): void {
    this.stats.recorded++;
    const cap = (this.stats.byCapability[entry.capability ?? '(none)'] ??= { total: 0, success: 0, denied: 0, error: 0 });
    cap.total++;
    cap[entry.result]++;
  }

  private add(entry: AuditEntry): void {
    this.sealer ??= new BatchSealer(this.opts.keyring.current, this.lastBatchBytes);
    // Verified body bytes go in as they are (RawJson); anything else as a redacted copy.
    this.sealer.addParts(entry.timestamp, entryHead(entry), this.redacted(entry.args));
  }

  /**
   * Writes the entries recorded during one event-loop turn into the batch in
   * one go: serialising them one after another, with the code and data hot,
   * costs a fraction of doing it between calls; none outlives the turn.
   */
  private readonly addPending = (): void => {
    this.pendingScheduled = false;
    const entries = this.pending;
    if (entries.length === 0) return;
    this.pending = [];
    let lost = 0;
    for (const e of entries) {
      try {
        this.add(e);
      } catch (err) {
        lost++;
        this.opts.log.error('audit record failed; the entry is lost', { requestId: e.requestId, error: (err as Error).message });
      }
    }
    if (lost) {
      this.stats.dropped += lost;
      this.opts.observer?.dropped?.(lost);
    }
    if ((this.sealer?.size ?? 0) >= (this.opts.maxBatch ?? 2000)) void this.flush();
  };

  /** Body bytes are kept as they are unless a key must be redacted; everything else is copied redacted. */
  private redacted(args: unknown): unknown {
    if (args instanceof RawJson) {
      const secret = args.keys ? args.keys.some(this.isSecretKey) : needsRedaction(args.value, this.isSecretKey);
      return secret ? redact(args.value, this.pattern) : args;
    }
    return redact(args, this.pattern);
  }

  /**
   * Seals the open batch and spools it. Serialised: batches are appended in
   * sequence order. At most one flush waits behind the running one, and it
   * takes everything gathered by the time it starts (group commit), so a burst
   * of calls does not queue a flush each.
   */
  flush(): Promise<void> {
    if (!this.queued) {
      this.queued = this.flushing.then(() => {
        this.queued = undefined;
        return this.flushOnce();
      });
      this.flushing = this.queued;
    }
    return this.queued;
  }

  private async flushOnce(): Promise<void> {
    this.addPending();
    const sealer = this.sealer;
    if (sealer) {
      // The open batch is closed now; calls recorded while it is sealed go into the next one.
      const waiters = this.waiters;
      this.sealer = undefined;
      this.waiters = [];
      this.sealing = sealer.size;
      this.lastBatchBytes = sealer.bytes;
      let batch: SealedBatch;
      try {
        // Flushes are serialised, so this batch links to the one sealed before it.
        batch = await sealer.seal({ chain: this.spool.chain, seq: this.seq + 1, prev: this.prev });
      } catch (err) {
        // Compression or the cipher failed (out of memory): the entries are lost. Say so; never pretend.
        this.stats.dropped += sealer.size;
        this.opts.observer?.dropped?.(sealer.size);
        this.opts.log.error('audit batch could not be sealed; its entries are lost', { entries: sealer.size, error: (err as Error).message });
        for (const w of waiters) w.reject(err as Error);
        return;
      } finally {
        this.sealing = 0;
      }
      const line = batchLine(batch);
      const hash = batchHash(line);
      this.sealed.push({ seq: batch.seq, line, hash, count: batch.count, first: batch.first, waiters });
      this.heldBytes += line.length;
      // The admin's view of recent entries: the newest batches, at most 8 and 2 MiB (always the newest one).
      this.recentBatches.push(line);
      let kept = this.recentBatches.reduce((n, b) => n + b.length, 0);
      while (this.recentBatches.length > 1 && (this.recentBatches.length > 8 || kept > 2 * 1024 * 1024)) kept -= this.recentBatches.shift()!.length;
      this.seq = batch.seq;
      this.prev = hash;
      this.stats.batches++;
    }
    while (this.sealed.length) {
      const next = this.sealed[0]!;
      try {
        await this.spool.append(next, this.spool.durable && this.opts.durability === 'strict');
      } catch (err) {
        // Keep the sealed batch for the next attempt; refuse new calls until the spool takes it.
        if (this.healthy) this.opts.log.error('audit spool write failed; refusing calls until it recovers', { error: (err as Error).message });
        this.healthy = false;
        this.stats.available = false;
        // Strict callers of every batch waiting for the spool are refused now, not when it recovers.
        for (const b of this.sealed) for (const w of b.waiters.splice(0)) w.reject(err as Error);
        return;
      }
      this.heldBytes -= this.sealed.shift()!.line.length;
      if (!this.healthy) this.opts.log.info('audit spool writable again', { dropped: this.stats.dropped });
      this.warnedFull = false;
      this.healthy = true;
      this.stats.available = true;
      this.stats.spoolBytes = this.spool.bytes;
      for (const w of next.waiters) w.resolve();
      for (const wake of this.wake.values()) wake();
    }
  }

  /** One delivery loop per exporter: in order, each batch retried until acknowledged. */
  private async deliver(exporter: AuditExporter): Promise<void> {
    let attempt = 0;
    while (!this.stopped) {
      const cursor = this.spool.cursors.get(exporter.name) ?? 0;
      const next = this.spool.after(cursor)[0];
      if (next === undefined) {
        await new Promise<void>((r) => this.wake.set(exporter.name, r));
        continue;
      }
      try {
        await exporter.export(this.spool.read(next)!, next);
        await this.spool.ack(exporter.name, next);
        this.stats.exported[exporter.name] = (this.stats.exported[exporter.name] ?? 0) + 1;
        this.opts.observer?.exported(exporter.name);
        this.stats.spoolBytes = this.spool.bytes;
        attempt = 0;
        // Space freed: a full spool can take batches again.
        if (!this.healthy && this.sealed.length) void this.flush();
      } catch (err) {
        this.stats.exportFailures++;
        this.opts.observer?.exportFailed(exporter.name);
        const wait = this.opts.backoffMs?.(attempt) ?? Math.min(30_000, 200 * 2 ** attempt) * (0.5 + Math.random() / 2);
        if (attempt === 0) this.opts.log.warn('audit export failed; retrying', { exporter: exporter.name, seq: next, error: (err as Error).message });
        attempt++;
        await new Promise((r) => setTimeout(r, wait).unref());
      }
    }
  }

  /** The most recent entries, newest last, decrypted on demand (they are kept only sealed). */
  recentEntries(limit = 50): AuditEntry[] {
    const out: AuditEntry[] = [];
    for (const line of this.recentBatches) out.push(...openBatch<AuditEntry>(JSON.parse(line.toString()) as AuditBatch, this.opts.keyring));
    return out.slice(-limit);
  }

  /** A call was served although it could not be recorded (policy audit.onAuditFailure: allow). */
  servedWhileUnavailable(): void {
    this.stats.servedWhileUnavailable++;
    this.opts.observer?.servedWhileUnavailable();
  }

  /** Entries recorded but not yet in the spool: the open batch and sealed batches waiting for space. */
  get buffered(): number {
    return this.pending.length + (this.sealer?.size ?? 0) + this.sealing + this.sealed.reduce((n, b) => n + b.count, 0);
  }

  /** Age of the oldest entry some exporter has not acknowledged; 0 when everything is delivered. */
  oldestUnexportedAgeSeconds(nowMs: number): number {
    const oldest = Math.min(...this.sealed.map((b) => b.first), this.spool.oldestUnacknowledged() ?? Infinity);
    return Number.isFinite(oldest) ? Math.max(0, (nowMs - oldest) / 1000) : 0;
  }

  /** Number of batches not yet acknowledged by every exporter. */
  get backlog(): number {
    const min = Math.min(...[...this.spool.cursors.values()], this.seq);
    return this.seq - min;
  }

  /** On shutdown: flush, then give exporters until the deadline; what is left stays in the spool. */
  async drain(deadlineMs = 10_000): Promise<void> {
    await this.flush();
    const until = Date.now() + deadlineMs;
    while (this.opts.exporters.length && this.backlog > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    for (const wake of this.wake.values()) wake();
    // Whatever was recorded while exporters were waited for goes to the spool too (from now on every record does at once).
    await this.flush();
  }
}

const RESOLVED = Promise.resolve();

function redactionPattern(extra: RegExp[] | undefined): RegExp {
  const sources = (extra ?? []).map((r) => r.source);
  return sources.length ? new RegExp([SECRET_KEY_PATTERN.source, ...sources].join('|'), 'i') : SECRET_KEY_PATTERN;
}

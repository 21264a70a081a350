import type { Logger } from '../log.js';
import { AuditBatcher } from './batcher.js';
import type { AuditKeyring } from './crypto.js';
import { AuditDelivery } from './delivery.js';
import type { AuditEntry } from './entry.js';
import type { AuditExporter } from './exporters.js';
import { RecentEntries } from './recent.js';
import { Spool } from './spool.js';
import { SpoolWriter } from './spool-writer.js';
import { emptyStats, type AuditObserver, type AuditStats } from './stats.js';

export type { AuditObserver, AuditStats } from './stats.js';

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
  /** How long the sidecar's shutdown lets drain() wait for exporters before leaving the rest in the spool [10 s]. */
  drainMs?: number;
  /** Backoff before retry n (ms), for tests. */
  backoffMs?: (attempt: number) => number;
  /** While the spool cannot take batches, how much may wait in memory [64 MiB]. */
  maxHeldBytes?: number;
  /** Told of each entry, delivery and failure (metrics). */
  observer?: AuditObserver;
}

/**
 * The audit pipeline: entries are redacted at once, held in clear only in the
 * open batch, sealed (AES-256-GCM, hash-chained) on flush, written to the
 * spool, and delivered to every exporter in order, retried until acknowledged.
 *
 * This class only wires the parts and keeps the one API the sidecar uses:
 * AuditBatcher (collects, seals), SpoolWriter (appends, holds what the spool
 * cannot take), AuditDelivery (exporters, retries, backlog), RecentEntries
 * (the admin's view).
 */
export class AuditTrail {
  readonly stats: AuditStats = emptyStats();
  private readonly spool: Spool;
  private readonly batcher: AuditBatcher;
  private readonly writer: SpoolWriter;
  private readonly delivery: AuditDelivery;
  private readonly recent: RecentEntries;
  private timer?: NodeJS.Timeout;
  private flushing: Promise<void> = Promise.resolve();
  private queued?: Promise<void>;
  /** Set while drain waits for exporters: told of each acknowledgement. */
  private onAcknowledged?: () => void;

  constructor(private readonly opts: AuditTrailOptions) {
    const { log, observer } = opts;
    const stats = this.stats;
    this.spool = new Spool(
      opts.spoolDir,
      opts.spoolMaxBytes ?? 256 * 1024 * 1024,
      opts.exporters.map((e) => e.name),
    );
    // Bound once: the batcher asks for a flush per strict record, and a fresh closure each time would be garbage.
    const requestFlush = (): void => void this.flush();
    this.batcher = new AuditBatcher({
      keyring: opts.keyring,
      durability: this.durability,
      maxBatch: opts.maxBatch ?? 2000,
      redactPatterns: opts.redactPatterns,
      log,
      observer,
      stats,
      requestFlush,
    });
    this.delivery = new AuditDelivery(this.spool, opts.exporters, { backoffMs: opts.backoffMs, log, observer, stats, acknowledged: () => this.acknowledged() });
    this.writer = new SpoolWriter(this.spool, {
      sync: this.spool.durable && this.durability === 'strict',
      maxHeldBytes: opts.maxHeldBytes ?? 64 * 1024 * 1024,
      log,
      observer,
      stats,
      spooled: () => this.delivery.wake(),
    });
    this.recent = new RecentEntries(opts.keyring);
  }

  async start(): Promise<void> {
    const newest = await this.spool.init();
    this.batcher.continueChain(this.spool.chain, newest);
    this.delivery.start();
    this.timer = setInterval(() => void this.flush(), this.opts.flushIntervalMs ?? 1000);
    this.timer.unref();
  }

  get durability(): 'batched' | 'strict' {
    return this.opts.durability ?? 'batched';
  }

  /** False when the spool is full or cannot be written: calls must then be refused. */
  get available(): boolean {
    return this.writer.available;
  }

  /** A policy reload may change the extra redaction patterns; they apply from the next entry on. */
  setRedactPatterns(patterns: RegExp[] | undefined): void {
    this.batcher.setRedactPatterns(patterns);
  }

  /**
   * Adds an entry; in strict mode resolves once its batch is on disk. After
   * drain, it is spooled at once (kept for the next start). On every call's
   * path: two property reads before the batcher, nothing allocated.
   */
  record(entry: AuditEntry): Promise<void> {
    if (this.writer.overflowing) return this.writer.refuse();
    return this.batcher.record(entry);
  }

  /** A call was served although it could not be recorded (policy audit.onAuditFailure: allow). */
  servedWhileUnavailable(): void {
    this.stats.servedWhileUnavailable++;
    this.opts.observer?.servedWhileUnavailable();
  }

  /**
   * Seals the open batch and spools it (the timer's job; tests call it to
   * cut a batch). Serialised: batches are appended in sequence order. At most
   * one flush waits behind the running one, and it takes everything gathered
   * by the time it starts (group commit), so a burst of calls does not queue
   * a flush each.
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
    const batch = await this.batcher.seal();
    if (batch) {
      this.writer.hold(batch);
      this.recent.add(batch.line);
    }
    await this.writer.writeHeld();
  }

  private acknowledged(): void {
    // Space freed: a full spool can take the held batches again.
    if (this.writer.waiting) void this.flush();
    this.onAcknowledged?.();
  }

  /** The most recent entries, newest last, decrypted on demand (they are kept only sealed). */
  recentEntries(limit = 50): AuditEntry[] {
    return this.recent.entries(limit);
  }

  /** Entries recorded but not yet in the spool: the open batch and sealed batches waiting for space. */
  get buffered(): number {
    return this.batcher.buffered + this.writer.buffered;
  }

  /** Age of the oldest entry some exporter has not acknowledged; 0 when everything is delivered. */
  oldestUnexportedAgeSeconds(nowMs: number): number {
    const oldest = Math.min(this.writer.oldestFirst, this.spool.oldestUnacknowledged() ?? Infinity);
    return Number.isFinite(oldest) ? Math.max(0, (nowMs - oldest) / 1000) : 0;
  }

  /** Number of batches not yet acknowledged by every exporter. */
  get backlog(): number {
    return this.delivery.backlog(this.batcher.lastSeq);
  }

  /** On shutdown: flush, then give exporters until the deadline; what is left stays in the spool. */
  async drain(deadlineMs = 10_000): Promise<void> {
    await this.flush();
    await this.delivered(deadlineMs);
    this.batcher.writeAtOnce();
    if (this.timer) clearInterval(this.timer);
    this.delivery.stop();
    // Whatever was recorded while exporters were waited for goes to the spool too (from now on every record does at once).
    await this.flush();
  }

  /** Resolves once every exporter has every batch, or after `deadlineMs`. */
  private delivered(deadlineMs: number): Promise<void> {
    if (!this.delivery.hasExporters || this.backlog === 0) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(deadline);
        this.onAcknowledged = undefined;
        resolve();
      };
      const deadline = setTimeout(done, deadlineMs);
      this.onAcknowledged = () => {
        if (this.backlog === 0) done();
      };
    });
  }
}

import type { Logger } from '../log.js';
import type { SealedLine } from './batcher.js';
import type { Spool } from './spool.js';
import { countDropped, type AuditObserver, type AuditStats } from './stats.js';

export interface SpoolWriterOptions {
  /** fsync each batch (strict durability with a spool directory). */
  sync: boolean;
  /** While the spool cannot take batches, how much may wait in memory. */
  maxHeldBytes: number;
  log: Logger;
  observer: AuditObserver | undefined;
  stats: AuditStats;
  /** A batch reached the spool: delivery has something new. */
  spooled: () => void;
}

/**
 * Appends sealed batches to the spool, in order. A batch the spool cannot
 * take (full, or the disk fails) is held in memory and the trail reports
 * itself unavailable, so calls are refused until the spool takes it (fail
 * closed); the held backlog is bounded.
 */
export class SpoolWriter {
  /** Sealed batches not yet in the spool, in order. */
  private readonly held: SealedLine[] = [];
  private heldBytes = 0;
  private healthy = true;
  /** One error line per outage, not one per refused record. */
  private warnedFull = false;

  constructor(
    private readonly spool: Spool,
    private readonly opts: SpoolWriterOptions,
  ) {}

  /** False when the spool is full or cannot be written. */
  get available(): boolean {
    return this.healthy;
  }

  /** Batches wait for space: freeing some (an acknowledgement) is worth a retry. */
  get waiting(): boolean {
    return !this.healthy && this.held.length > 0;
  }

  /** Entries in held batches. */
  get buffered(): number {
    let n = 0;
    for (const b of this.held) n += b.count;
    return n;
  }

  /** First-entry timestamp of the oldest held batch; Infinity when none is held. */
  get oldestFirst(): number {
    // Not just the first batch's: entry timestamps need not ascend from batch to batch (clock steps).
    let oldest = Infinity;
    for (const b of this.held) if (b.first < oldest) oldest = b.first;
    return oldest;
  }

  /**
   * While the spool is down calls are refused but their records still kept in
   * memory; past the bound the record of a refused call is counted (metric,
   * log) instead, so an outage cannot exhaust memory.
   */
  get overflowing(): boolean {
    return !this.healthy && this.heldBytes > this.opts.maxHeldBytes;
  }

  /** The answer to a record that is not kept (see `overflowing`). */
  refuse(): Promise<void> {
    countDropped(this.opts.stats, this.opts.observer, 1);
    if (!this.warnedFull)
      this.opts.log.error('audit spool down and the in-memory backlog is full: records of refused calls are counted, not kept', { heldBytes: this.heldBytes });
    this.warnedFull = true;
    return Promise.reject(new Error('audit backlog full'));
  }

  /** Queues a sealed batch behind those already waiting. */
  hold(batch: SealedLine): void {
    this.held.push(batch);
    this.heldBytes += batch.line.length;
  }

  /** Appends held batches until none is left or the spool refuses one. Not to run twice at once (order). */
  async writeHeld(): Promise<void> {
    for (let next = this.held[0]; next; next = this.held[0]) {
      try {
        await this.spool.append(next, this.opts.sync);
      } catch (err) {
        this.failed(err as Error);
        return;
      }
      this.held.shift();
      this.heldBytes -= next.line.length;
      if (!this.healthy) this.opts.log.info('audit spool writable again', { dropped: this.opts.stats.dropped });
      this.setHealthy(true);
      this.warnedFull = false;
      this.opts.stats.spoolBytes = this.spool.bytes;
      for (const w of next.waiters) w.resolve();
      this.opts.spooled();
    }
  }

  /** The batch stays held for the next attempt; calls are refused until the spool takes it. */
  private failed(err: Error): void {
    if (this.healthy) this.opts.log.error('audit spool write failed; refusing calls until it recovers', { error: err.message });
    this.setHealthy(false);
    // Strict callers of every batch waiting for the spool are refused now, not when it recovers.
    for (const b of this.held) for (const w of b.waiters.splice(0)) w.reject(err);
  }

  private setHealthy(healthy: boolean): void {
    this.healthy = healthy;
    this.opts.stats.available = healthy;
  }
}

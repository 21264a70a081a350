import type { Logger } from '../log.js';
import { ArgsRedactor } from './args-redaction.js';
import { batchHash, batchLine, GENESIS, type AuditKeyring, type SealedBatch } from './crypto.js';
import { entryHead, type AuditEntry } from './entry.js';
import { BatchSealer } from './sealer.js';
import type { ChainHead } from './spool.js';
import { countDropped, type AuditObserver, type AuditStats } from './stats.js';

/** A strict caller waiting for its entry to be on disk. */
export interface DurableWaiter {
  resolve(): void;
  reject(err: Error): void;
}

/** A sealed batch as the spool takes it: its line, its place in the chain, and the strict callers waiting for it. */
export interface SealedLine {
  seq: number;
  line: Buffer;
  hash: string;
  count: number;
  /** Timestamp of its first entry (delivery lag). */
  first: number;
  waiters: DurableWaiter[];
}

export interface BatcherOptions {
  keyring: AuditKeyring;
  durability: 'batched' | 'strict';
  maxBatch: number;
  redactPatterns: RegExp[] | undefined;
  log: Logger;
  observer: AuditObserver | undefined;
  stats: AuditStats;
  /** Asks for the open batch to be sealed and spooled (the trail serialises flushes). */
  requestFlush: () => void;
}

const RESOLVED = Promise.resolve();

/**
 * Collects entries into the open batch (encrypted as a whole when sealed, held
 * in clear nowhere else) and seals it into the next link of the chain.
 */
export class AuditBatcher {
  private sealer?: BatchSealer;
  /** Batched durability: entries of the current event-loop turn, written into the open batch at its end. */
  private pending: AuditEntry[] = [];
  private pendingScheduled = false;
  /** Strict callers of the open batch. */
  private waiters: DurableWaiter[] = [];
  /** Entries of the batch being sealed (off the event loop), for `buffered`. */
  private sealing = 0;
  /** Size of the last batch, so the next one starts with room for as much. */
  private lastBatchBytes = 64 * 1024;
  /** After drain nothing is delivered any more: every entry goes to the spool at once, kept for the next start. */
  private atOnce: boolean;
  private chain = '';
  private seq = 0;
  private prev = GENESIS;
  private readonly redactor: ArgsRedactor;

  constructor(private readonly opts: BatcherOptions) {
    this.atOnce = opts.durability === 'strict';
    this.redactor = new ArgsRedactor(opts.redactPatterns);
  }

  /** Where the chain goes on: the spool's chain, after its newest batch (if a previous run left one). */
  continueChain(chain: string, newest: ChainHead | undefined): void {
    this.chain = chain;
    if (newest) {
      this.seq = newest.seq;
      this.prev = newest.hash;
    }
  }

  /** Sequence number of the newest sealed batch (0 before the first). */
  get lastSeq(): number {
    return this.seq;
  }

  setRedactPatterns(patterns: RegExp[] | undefined): void {
    this.redactor.setPatterns(patterns);
  }

  /** From drain on, every record is written and spooled at once. */
  writeAtOnce(): void {
    this.atOnce = true;
  }

  /** Entries recorded and not yet sealed, or being sealed. */
  get buffered(): number {
    return this.pending.length + (this.sealer?.size ?? 0) + this.sealing;
  }

  /**
   * Batched: resolved at once, the entry goes into the batch at the end of the
   * turn. Strict (or after drain): resolves once its batch is spooled, rejects
   * (never throws) when it cannot be written or spooled.
   */
  record(entry: AuditEntry): Promise<void> {
    if (!this.atOnce) {
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
      return Promise.reject(err instanceof Error ? err : new Error(String(err))); // callers handle a refused record as a rejection, never a throw
    }
    this.count(entry);
    // Group commit: every strict entry of this tick shares one flush (and one fsync).
    const durable = new Promise<void>((resolve, reject) => {
      this.waiters.push({ resolve, reject });
    });
    queueMicrotask(this.opts.requestFlush);
    return durable;
  }

  private count(entry: AuditEntry): void {
    const stats = this.opts.stats;
    stats.recorded++;
    const cap = (stats.byCapability[entry.capability ?? '(none)'] ??= { total: 0, success: 0, denied: 0, error: 0 });
    cap.total++;
    cap[entry.result]++;
  }

  private add(entry: AuditEntry): void {
    this.sealer ??= new BatchSealer(this.opts.keyring.current, this.lastBatchBytes);
    // Verified body bytes go in as they are (RawJson); anything else as a redacted copy.
    this.sealer.addParts(entry.timestamp, entryHead(entry), this.redactor.redacted(entry.args));
  }

  /**
   * Writes the entries recorded during one event-loop turn into the batch in
   * one go: serialising them one after another, with the code and data hot,
   * costs a fraction of doing it between calls; none outlives the turn.
   * An arrow, bound once: it is the setImmediate callback.
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
    if (lost) countDropped(this.opts.stats, this.opts.observer, lost);
    if ((this.sealer?.size ?? 0) >= this.opts.maxBatch) this.opts.requestFlush();
  };

  /**
   * Closes the open batch and seals it as the next link; undefined when there
   * was nothing to seal or sealing failed. Calls recorded while it is sealed
   * (off the event loop) go into the next batch. Must not run twice at once:
   * each batch links to the one sealed before it.
   */
  async seal(): Promise<SealedLine | undefined> {
    this.addPending();
    const sealer = this.sealer;
    if (!sealer) return undefined;
    const waiters = this.waiters;
    this.sealer = undefined;
    this.waiters = [];
    this.sealing = sealer.size;
    this.lastBatchBytes = sealer.bytes;
    let batch: SealedBatch;
    try {
      batch = await sealer.seal({ chain: this.chain, seq: this.seq + 1, prev: this.prev });
    } catch (err) {
      // Compression or the cipher failed (out of memory): the entries are lost. Say so; never pretend.
      countDropped(this.opts.stats, this.opts.observer, sealer.size);
      this.opts.log.error('audit batch could not be sealed; its entries are lost', { entries: sealer.size, error: (err as Error).message });
      for (const w of waiters) w.reject(err as Error);
      return undefined;
    } finally {
      this.sealing = 0;
    }
    const line = batchLine(batch);
    const hash = batchHash(line);
    this.seq = batch.seq;
    this.prev = hash;
    this.opts.stats.batches++;
    return { seq: batch.seq, line, hash, count: batch.count, first: batch.first, waiters };
  }
}

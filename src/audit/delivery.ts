import type { Logger } from '../log.js';
import type { AuditExporter } from './exporters.js';
import type { Spool } from './spool.js';
import type { AuditObserver, AuditStats } from './stats.js';

export interface DeliveryOptions {
  /** Backoff before retry n (ms), for tests. */
  backoffMs: ((attempt: number) => number) | undefined;
  log: Logger;
  observer: AuditObserver | undefined;
  stats: AuditStats;
  /** An exporter acknowledged a batch, which may have freed spool space. */
  acknowledged: () => void;
}

/** Exponential, capped at 30 s, with jitter so that several pods do not retry in step. */
function defaultBackoffMs(attempt: number): number {
  return Math.min(30_000, 200 * 2 ** attempt) * (0.5 + Math.random() / 2);
}

/**
 * Delivers spooled batches: one loop per exporter, in sequence order, each
 * batch retried until acknowledged. The spool keeps each exporter's cursor and
 * removes a batch once every exporter has it.
 */
export class AuditDelivery {
  /** Per exporter, the resolver of its wait for a new batch. */
  private readonly wakers = new Map<string, () => void>();
  private stopped = false;

  constructor(
    private readonly spool: Spool,
    private readonly exporters: readonly AuditExporter[],
    private readonly opts: DeliveryOptions,
  ) {}

  get hasExporters(): boolean {
    return this.exporters.length > 0;
  }

  /** Starts the loops (they run until `stop`). */
  start(): void {
    for (const e of this.exporters) this.opts.stats.exported[e.name] = 0;
    for (const e of this.exporters) void this.deliver(e);
  }

  /** A new batch is in the spool. */
  wake(): void {
    for (const wake of this.wakers.values()) wake();
  }

  /** Loops end after the export under way; what is left stays in the spool. */
  stop(): void {
    this.stopped = true;
    this.wake();
  }

  /** Batches up to `lastSeq` not yet acknowledged by every exporter. */
  backlog(lastSeq: number): number {
    let slowest = lastSeq;
    for (const c of this.spool.cursors.values()) if (c < slowest) slowest = c;
    return lastSeq - slowest;
  }

  private async deliver(exporter: AuditExporter): Promise<void> {
    let attempt = 0;
    while (!this.stopped) {
      const seq = this.spool.after(this.spool.cursors.get(exporter.name) ?? 0)[0];
      const line = seq === undefined ? undefined : this.spool.read(seq);
      if (seq === undefined || line === undefined) {
        await new Promise<void>((r) => this.wakers.set(exporter.name, r));
        continue;
      }
      try {
        await exporter.export(line, seq);
        await this.spool.ack(exporter.name, seq);
      } catch (err) {
        await this.retryLater(exporter, seq, attempt++, err as Error);
        continue;
      }
      attempt = 0;
      this.acknowledged(exporter);
    }
  }

  private acknowledged(exporter: AuditExporter): void {
    const stats = this.opts.stats;
    stats.exported[exporter.name] = (stats.exported[exporter.name] ?? 0) + 1;
    stats.spoolBytes = this.spool.bytes;
    this.opts.observer?.exported(exporter.name);
    this.opts.acknowledged();
  }

  private async retryLater(exporter: AuditExporter, seq: number, attempt: number, err: Error): Promise<void> {
    this.opts.stats.exportFailures++;
    this.opts.observer?.exportFailed(exporter.name);
    // One warning per run of failures: a collector that is down for an hour must not flood the log.
    if (attempt === 0) this.opts.log.warn('audit export failed; retrying', { exporter: exporter.name, seq, error: err.message });
    const wait = this.opts.backoffMs?.(attempt) ?? defaultBackoffMs(attempt);
    await new Promise((r) => setTimeout(r, wait).unref());
  }
}

/** Events worth counting, for whoever counts them (the metrics module); the trail does not depend on it. */
export interface AuditObserver {
  exported(exporter: string): void;
  exportFailed(exporter: string): void;
  servedWhileUnavailable(): void;
  /** Records not kept: the spool was down and the in-memory backlog full (those calls were refused), or a batch could not be sealed. */
  dropped?(entries: number): void;
}

/**
 * The trail's totals (`GET /stats`). One plain object that every part of the
 * trail updates in place: the admin handler spreads it as it is, and no part
 * has to ask another for its share.
 */
export interface AuditStats {
  recorded: number;
  batches: number;
  exported: Record<string, number>;
  exportFailures: number;
  spoolBytes: number;
  available: boolean;
  /** Calls served while the spool could not take entries (onAuditFailure: allow). */
  servedWhileUnavailable: number;
  /** Records not kept while the spool was down and the backlog full, or lost when a batch could not be sealed. */
  dropped: number;
  byCapability: Record<string, { total: number; success: number; denied: number; error: number }>;
}

export function emptyStats(): AuditStats {
  return { recorded: 0, batches: 0, exported: {}, exportFailures: 0, spoolBytes: 0, available: true, servedWhileUnavailable: 0, dropped: 0, byCapability: {} };
}

/** Counts entries that could not be kept (stats, metric) in one place, so no loss is counted one way and not the other. */
export function countDropped(stats: AuditStats, observer: AuditObserver | undefined, entries: number): void {
  stats.dropped += entries;
  observer?.dropped?.(entries);
}

import { openBatch, type AuditBatch, type AuditKeyring } from './crypto.js';
import type { AuditEntry } from './entry.js';

/** At most this many of the newest batches, and this many bytes (the newest batch is kept whatever its size). */
const MAX_BATCHES = 8;
const MAX_BYTES = 2 * 1024 * 1024;

/**
 * The admin's view of recent entries (`GET /stats/entries`): the newest sealed
 * batches, kept only encrypted and decrypted on demand, so the view adds no
 * entry in clear to the process's memory between requests.
 */
export class RecentEntries {
  private readonly lines: Buffer[] = [];
  private bytes = 0;

  constructor(private readonly keyring: AuditKeyring) {}

  /** Keeps a freshly sealed batch line, forgetting the oldest past the bounds. */
  add(line: Buffer): void {
    this.lines.push(line);
    this.bytes += line.length;
    while (this.lines.length > 1 && (this.lines.length > MAX_BATCHES || this.bytes > MAX_BYTES)) {
      const dropped = this.lines.shift();
      if (dropped) this.bytes -= dropped.length;
    }
  }

  /** The most recent `limit` entries, newest last. */
  entries(limit: number): AuditEntry[] {
    const out: AuditEntry[] = [];
    for (const line of this.lines) out.push(...openBatch<AuditEntry>(JSON.parse(line.toString()) as AuditBatch, this.keyring));
    return out.slice(-limit);
  }
}

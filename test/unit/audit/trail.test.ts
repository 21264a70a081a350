import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { parseKeyring } from '../../../src/audit/crypto.js';
import type { AuditEntry } from '../../../src/audit/entry.js';
import { AuditTrail } from '../../../src/audit/trail.js';
import { createLogger } from '../../../src/log.js';

const entry = (i: number): AuditEntry => ({
  id: `e${i}`, agentId: 'bot', agentName: 'bot', capability: 'c', args: { i }, result: 'denied', denialReason: 'audit_unavailable',
  jti: null, timestamp: i, durationMs: 0, method: 'GET', path: '/', status: 503, requestId: `r${i}`,
});

describe('AuditTrail while the spool is down', () => {
  it('keeps a bounded backlog in memory; past it, records of refused calls are counted, not kept', async () => {
    const logs: string[] = [];
    let dropped = 0;
    const trail = new AuditTrail({
      keyring: parseKeyring(randomBytes(32).toString('base64')), exporters: [{ name: 'never', export: () => new Promise<void>(() => {}) }],
      spoolMaxBytes: 1, maxHeldBytes: 1, flushIntervalMs: 60_000, log: createLogger('debug', (l) => logs.push(l)),
      observer: { exported() {}, exportFailed() {}, servedWhileUnavailable() {}, dropped: () => { dropped++; } },
    });
    await trail.start();
    await trail.record(entry(1));
    await trail.flush(); // an empty spool always takes one batch
    await trail.record(entry(2));
    await trail.flush(); // the second does not fit: held in memory, the trail is unavailable
    expect(trail.available).toBe(false);
    expect(trail.buffered).toBe(1);
    await expect(trail.record(entry(3))).rejects.toThrow(/backlog full/);
    await expect(trail.record(entry(4))).rejects.toThrow(/backlog full/);
    expect(trail.stats.dropped).toBe(2);
    expect(dropped).toBe(2);
    expect(logs.filter((l) => l.includes('in-memory backlog is full'))).toHaveLength(1); // one line per outage
  });
});

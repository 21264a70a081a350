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
      observer: { exported() {}, exportFailed() {}, servedWhileUnavailable() {}, dropped: (n) => { dropped += n; } },
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

describe('AuditTrail records', () => {
  it('refuses an entry it cannot serialise with a rejection, and the batch keeps only whole entries', async () => {
    const keys = parseKeyring(randomBytes(32).toString('base64'));
    const lines: Buffer[] = [];
    const trail = new AuditTrail({
      keyring: keys, exporters: [{ name: 'mem', export: async (line) => { lines.push(line); } }],
      flushIntervalMs: 60_000, log: createLogger('error', () => {}),
    });
    await trail.start();
    await trail.record(entry(1));
    const bad = { ...entry(2), args: { toJSON() { throw new Error('not serialisable'); } } };
    let thrown: unknown;
    const refused = (() => { try { return trail.record(bad); } catch (err) { thrown = err; return undefined; } })();
    expect(thrown).toBeUndefined();
    await expect(refused).rejects.toThrow(/not serialisable/);
    await trail.record(entry(3));
    await trail.drain(2_000);
    const { openBatch } = await import('../../../src/audit/crypto.js');
    const opened = lines.flatMap((l) => openBatch<AuditEntry>(JSON.parse(l.toString()), keys));
    expect(opened.map((e) => e.id)).toEqual(['e1', 'e3']);
  });
});


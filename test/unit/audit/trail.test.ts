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
  const unserialisable = () => ({ ...entry(2), args: { toJSON() { throw new Error('not serialisable'); } } });
  async function recordThree(durability: 'batched' | 'strict') {
    const keys = parseKeyring(randomBytes(32).toString('base64'));
    const lines: Buffer[] = [];
    const logs: string[] = [];
    let dropped = 0;
    const trail = new AuditTrail({
      keyring: keys, exporters: [{ name: 'mem', export: async (line) => { lines.push(line); } }], durability,
      flushIntervalMs: 60_000, log: createLogger('error', (l) => logs.push(l)),
      observer: { exported() {}, exportFailed() {}, servedWhileUnavailable() {}, dropped: (n) => { dropped += n; } },
    });
    await trail.start();
    await trail.record(entry(1));
    let thrown: unknown;
    const refused = (() => { try { return trail.record(unserialisable()); } catch (err) { thrown = err; return undefined; } })();
    expect(thrown).toBeUndefined(); // never a synchronous throw
    const outcome = await refused!.then(() => 'resolved', (err: Error) => err.message);
    await trail.record(entry(3));
    await trail.drain(2_000);
    const { openBatch } = await import('../../../src/audit/crypto.js');
    const opened = lines.flatMap((l) => openBatch<AuditEntry>(JSON.parse(l.toString()), keys));
    return { outcome, ids: opened.map((e) => e.id), logs, dropped, stats: trail.stats };
  }

  it('strict: refuses an entry it cannot serialise with a rejection; the batch keeps only whole entries', async () => {
    const r = await recordThree('strict');
    expect(r.outcome).toMatch(/not serialisable/);
    expect(r.ids).toEqual(['e1', 'e3']);
  });

  it('batched: an entry that cannot be serialised is logged and counted as dropped, never silently lost; the batch keeps only whole entries', async () => {
    const r = await recordThree('batched');
    expect(r.outcome).toBe('resolved'); // written at the end of the event-loop turn, after record() returned
    expect(r.ids).toEqual(['e1', 'e3']);
    expect(r.dropped).toBe(1);
    expect(r.stats.dropped).toBe(1);
    expect(r.logs.some((l) => l.includes('audit record failed') && l.includes('not serialisable') && l.includes('"requestId":"r2"'))).toBe(true);
  });

  it('batched: entries recorded in one event-loop turn are in the batch by the next turn, in the order recorded', async () => {
    const keys = parseKeyring(randomBytes(32).toString('base64'));
    const lines: Buffer[] = [];
    const trail = new AuditTrail({ keyring: keys, exporters: [{ name: 'mem', export: async (line) => { lines.push(line); } }], flushIntervalMs: 60_000, maxBatch: 3, log: createLogger('error', () => {}) });
    await trail.start();
    for (let i = 1; i <= 7; i++) void trail.record(entry(i));
    expect(trail.buffered).toBe(7); // pending entries count as buffered (readiness, drain)
    await new Promise((r) => setImmediate(r));
    await trail.drain(2_000);
    const { openBatch } = await import('../../../src/audit/crypto.js');
    const batches = lines.map((l) => openBatch<AuditEntry>(JSON.parse(l.toString()), keys).map((e) => e.id));
    expect(batches.flat()).toEqual(['e1', 'e2', 'e3', 'e4', 'e5', 'e6', 'e7']);
  });
});

describe('AuditTrail redaction of verified bodies', () => {
  it('keeps the body bytes as they are unless a key the parser reported is secret-looking, at any depth', async () => {
    const { RawJson } = await import('../../../src/audit/raw-json.js');
    const { parseStrictJsonBytes } = await import('../../../src/json/strict.js');
    const { openBatch } = await import('../../../src/audit/crypto.js');
    const keys = parseKeyring(randomBytes(32).toString('base64'));
    const lines: Buffer[] = [];
    const trail = new AuditTrail({ keyring: keys, exporters: [{ name: 'mem', export: async (line) => { lines.push(line); } }], flushIntervalMs: 60_000, log: createLogger('error', () => {}) });
    await trail.start();
    const raw = (text: string) => {
      const bytes = Buffer.from(text);
      const seen: string[] = [];
      return new RawJson(parseStrictJsonBytes(bytes, seen), bytes, seen);
    };
    await trail.record({ ...entry(1), args: raw('{ "amount" : 5,\n "items": [ {"sku": "a"} ] }') });
    await trail.record({ ...entry(2), args: raw('{"amount":5,"items":[{"sku":"a","meta":{"Client_Secret":"s"}}]}') });
    await trail.drain(2_000);
    const opened = lines.flatMap((l) => openBatch<AuditEntry>(JSON.parse(l.toString()), keys));
    expect(opened[0]!.args).toEqual({ amount: 5, items: [{ sku: 'a' }] });
    expect(opened[1]!.args).toEqual({ amount: 5, items: [{ sku: 'a', meta: { Client_Secret: '[REDACTED]' } }] });
  });
});

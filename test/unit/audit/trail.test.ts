import { createDecipheriv, randomBytes } from 'node:crypto';
import { brotliDecompressSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { aad, parseKeyring } from '../../../src/audit/crypto.js';
import type { AuditEntry } from '../../../src/audit/entry.js';
import { AuditTrail } from '../../../src/audit/trail.js';
import { createLogger } from '../../../src/log.js';
import { memoryTrail, rawJson } from '../../support/audit.js';
import { until } from '../../support/until.js';

const entry = (i: number): AuditEntry => ({
  id: `e${i}`,
  agentId: 'bot',
  agentName: 'bot',
  capability: 'c',
  args: { i },
  result: 'denied',
  denialReason: 'audit_unavailable',
  jti: null,
  timestamp: i,
  durationMs: 0,
  method: 'GET',
  path: '/',
  status: 503,
  requestId: `r${i}`,
});

describe('AuditTrail while the spool is down', () => {
  it('keeps a bounded backlog in memory; past it, records of refused calls are counted, not kept', async () => {
    const logs: string[] = [];
    let dropped = 0;
    const trail = new AuditTrail({
      keyring: parseKeyring(randomBytes(32).toString('base64')),
      exporters: [{ name: 'never', export: () => new Promise<void>(() => {}) }],
      spoolMaxBytes: 1,
      maxHeldBytes: 1,
      flushIntervalMs: 60_000,
      log: createLogger('debug', (l) => logs.push(l)),
      observer: {
        exported() {},
        exportFailed() {},
        servedWhileUnavailable() {},
        dropped: (n) => {
          dropped += n;
        },
      },
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
  const unserialisable = () => ({
    ...entry(2),
    args: {
      toJSON() {
        throw new Error('not serialisable');
      },
    },
  });
  async function recordThree(durability: 'batched' | 'strict') {
    const keys = parseKeyring(randomBytes(32).toString('base64'));
    const lines: Buffer[] = [];
    const logs: string[] = [];
    let dropped = 0;
    const trail = new AuditTrail({
      keyring: keys,
      exporters: [
        {
          name: 'mem',
          export: async (line) => {
            lines.push(line);
          },
        },
      ],
      durability,
      flushIntervalMs: 60_000,
      log: createLogger('error', (l) => logs.push(l)),
      observer: {
        exported() {},
        exportFailed() {},
        servedWhileUnavailable() {},
        dropped: (n) => {
          dropped += n;
        },
      },
    });
    await trail.start();
    await trail.record(entry(1));
    let thrown: unknown;
    const refused = (() => {
      try {
        return trail.record(unserialisable());
      } catch (err) {
        thrown = err;
        return undefined;
      }
    })();
    expect(thrown).toBeUndefined(); // never a synchronous throw
    const outcome = await refused!.then(
      () => 'resolved',
      (err: Error) => err.message,
    );
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

  it('batched: entries of one event-loop turn go into the batch at its end, in order; a full batch is flushed without waiting for the timer', async () => {
    const { trail, keys, lines } = memoryTrail({ maxBatch: 3 });
    await trail.start();
    for (let i = 1; i <= 7; i++) void trail.record(entry(i));
    expect(trail.buffered).toBe(7); // pending entries count as buffered (readiness, drain)
    await until(() => lines.length === 1); // no drain, no timer: the turn's 7 entries reached maxBatch
    const { openBatch } = await import('../../../src/audit/crypto.js');
    expect(openBatch<AuditEntry>(JSON.parse(lines[0]!.toString()), keys).map((e) => e.id)).toEqual(['e1', 'e2', 'e3', 'e4', 'e5', 'e6', 'e7']);
    await trail.drain(2_000);
  });

  it('drain spools what is recorded while it waits for exporters', async () => {
    const keys = parseKeyring(randomBytes(32).toString('base64'));
    let exportCalled!: () => void;
    const exporting = new Promise<void>((r) => {
      exportCalled = r;
    });
    const trail = new AuditTrail({
      keyring: keys,
      exporters: [
        {
          name: 'never',
          export: () => {
            exportCalled();
            return new Promise<void>(() => {});
          },
        },
      ],
      flushIntervalMs: 60_000,
      log: createLogger('error', () => {}),
    });
    await trail.start();
    void trail.record(entry(1));
    const draining = trail.drain(200);
    await exporting; // drain's first flush spooled e1: it is now waiting for the exporter
    void trail.record(entry(2)); // a call that finished during the wait
    await draining;
    expect(trail.buffered).toBe(0);
    expect(trail.recentEntries().map((e) => e.id)).toEqual(['e1', 'e2']);
  });

  it('drain returns as soon as every exporter has every batch, well before its deadline', async () => {
    const keys = parseKeyring(randomBytes(32).toString('base64'));
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    const lines: Buffer[] = [];
    const trail = new AuditTrail({
      keyring: keys,
      exporters: [
        {
          name: 'slow',
          export: async (line) => {
            await held;
            lines.push(line);
          },
        },
      ],
      flushIntervalMs: 60_000,
      log: createLogger('error', () => {}),
    });
    await trail.start();
    void trail.record(entry(1));
    let drained = false;
    const draining = trail.drain(3_600_000).then(() => {
      drained = true;
    });
    await until(() => trail.backlog === 1); // sealed and spooled, not yet acknowledged
    expect(drained).toBe(false);
    release();
    await draining; // an hour's deadline: only the acknowledgement can end this wait within the test's timeout
    expect(lines).toHaveLength(1);
    expect(trail.backlog).toBe(0);
  });
});

describe('AuditTrail redaction of verified bodies', () => {
  it('keeps the verified bytes unless a key the parser reported is secret-looking (at any depth); then records a redacted copy', async () => {
    const { RawJson } = await import('../../../src/audit/raw-json.js');
    const { trail, keys, lines } = memoryTrail();
    await trail.start();

    await trail.record({ ...entry(1), args: rawJson('{ "amount" : 5,\n "items": [ {"sku": "a"} ] }') });
    await trail.record({ ...entry(2), args: rawJson('{"amount":5,"items":[{"sku":"a","meta":{"Client_Secret":"s"}}]}') });
    // The verdict comes from the reported keys, not from walking the value: a reported secret key alone triggers the copy.
    await trail.record({ ...entry(3), args: new RawJson({ a: 1 }, Buffer.from('{ "a" : 1 }'), ['a', 'password']) });
    await trail.drain(2_000);
    const text = lines.map((l) => openText(l, keys)).join('');
    expect(text).toContain('"args":{ "amount" : 5,\n "items": [ {"sku": "a"} ] }}'); // byte for byte
    expect(text).toContain('"args":{"amount":5,"items":[{"sku":"a","meta":{"Client_Secret":"[REDACTED]"}}]}}');
    expect(text).toContain('"args":{"a":1}}');
    expect(text).not.toContain('"s"');
  });
});

/** The decrypted, decompressed text of a batch line (openBatch parses it; these tests look at the bytes). */
function openText(line: Buffer, keys: ReturnType<typeof parseKeyring>): string {
  const b = JSON.parse(line.toString()) as {
    kid: string;
    nonce: string;
    tag: string;
    data: string;
    v: 1;
    chain: string;
    seq: number;
    prev: string;
    z?: string;
  };
  const d = createDecipheriv('aes-256-gcm', keys.all.get(b.kid)!.key, Buffer.from(b.nonce, 'base64'));
  d.setAAD(aad(b));
  d.setAuthTag(Buffer.from(b.tag, 'base64'));
  return brotliDecompressSync(Buffer.concat([d.update(Buffer.from(b.data, 'base64')), d.final()])).toString();
}

import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { AuditBatcher } from '../../../src/audit/batcher.js';
import { batchHash, GENESIS, openBatch, parseKeyring, type AuditBatch } from '../../../src/audit/crypto.js';
import type { AuditEntry } from '../../../src/audit/entry.js';
import { emptyStats } from '../../../src/audit/stats.js';
import { createLogger } from '../../../src/log.js';

const entry = (i: number): AuditEntry => ({
  id: `e${i}`,
  agentId: 'bot',
  agentName: 'bot',
  capability: 'c',
  args: { i },
  result: 'success',
  jti: null,
  timestamp: i,
  durationMs: 0,
  method: 'GET',
  path: '/',
  status: 200,
  requestId: `r${i}`,
});

function batcher(durability: 'batched' | 'strict' = 'batched') {
  const keys = parseKeyring(randomBytes(32).toString('base64'));
  const flushes = { requested: 0 };
  const stats = emptyStats();
  const b = new AuditBatcher({
    keyring: keys,
    durability,
    maxBatch: 2000,
    redactPatterns: undefined,
    log: createLogger('error', () => {}),
    observer: undefined,
    stats,
    requestFlush: () => {
      flushes.requested++;
    },
  });
  const open = (line: Buffer) => openBatch<AuditEntry>(JSON.parse(line.toString()) as AuditBatch, keys).map((e) => e.id);
  return { b, keys, flushes, stats, open };
}

describe('AuditBatcher', () => {
  it('an entry recorded once the trail is stopped (written at once) stays behind the entries still pending', async () => {
    const { b, open } = batcher('batched');
    b.continueChain('c', undefined);
    void b.record(entry(1)); // pending until the end of this turn
    b.writeAtOnce(); // as drain does
    const durable = b.record(entry(2));
    const sealed = await b.seal();
    expect(open(sealed!.line)).toEqual(['e1', 'e2']);
    expect(sealed!.waiters).toHaveLength(1); // e2's caller waits for the spool, e1's did not
    sealed!.waiters[0]!.resolve();
    await durable;
  });

  it('seals consecutive links of the chain, continuing after the newest batch a previous run left', async () => {
    const { b } = batcher();
    b.continueChain('chain-x', { chain: 'chain-x', seq: 41, hash: 'f'.repeat(64) });
    void b.record(entry(1));
    const first = (await b.seal())!;
    void b.record(entry(2));
    const second = (await b.seal())!;
    const header = (s: typeof first) => JSON.parse(s.line.toString()) as AuditBatch;
    expect(header(first)).toMatchObject({ chain: 'chain-x', seq: 42, prev: 'f'.repeat(64), count: 1, first: 1 });
    expect(header(second)).toMatchObject({ chain: 'chain-x', seq: 43, prev: batchHash(first.line) });
    expect(second.hash).toBe(batchHash(second.line));
    expect(b.lastSeq).toBe(43);
  });

  it('starts a new chain at the genesis link; nothing open seals nothing', async () => {
    const { b, stats } = batcher();
    b.continueChain('fresh', undefined);
    expect(await b.seal()).toBeUndefined();
    void b.record(entry(1));
    expect(JSON.parse((await b.seal())!.line.toString())).toMatchObject({ chain: 'fresh', seq: 1, prev: GENESIS });
    expect(stats.batches).toBe(1);
  });

  it('strict: asks for one flush per record (group commit happens in the flush) and counts per capability', async () => {
    const { b, flushes, stats } = batcher('strict');
    b.continueChain('c', undefined);
    const a = b.record(entry(1));
    const d = b.record({ ...entry(2), result: 'denied', capability: null });
    expect(b.buffered).toBe(2);
    await Promise.resolve(); // the flush is asked for in a microtask, after the caller's synchronous work
    expect(flushes.requested).toBe(2);
    const sealed = (await b.seal())!;
    expect(sealed.waiters).toHaveLength(2);
    for (const w of sealed.waiters) w.resolve();
    await Promise.all([a, d]);
    expect(stats.recorded).toBe(2);
    expect(stats.byCapability).toEqual({ c: { total: 1, success: 1, denied: 0, error: 0 }, '(none)': { total: 1, success: 0, denied: 1, error: 0 } });
  });

  it('applies new redaction patterns from the next batch written on, and drops them again', async () => {
    const { b, keys } = batcher();
    b.continueChain('c', undefined);
    const sealedArgs = async () => openBatch<AuditEntry>(JSON.parse((await b.seal())!.line.toString()) as AuditBatch, keys).map((e) => e.args);
    void b.record({ ...entry(1), args: { ssn: '1', token: 't' } });
    expect(await sealedArgs()).toEqual([{ ssn: '1', token: '[REDACTED]' }]); // the built-in rule only
    b.setRedactPatterns([/^ssn$/]);
    void b.record({ ...entry(2), args: { ssn: '2' } });
    expect(await sealedArgs()).toEqual([{ ssn: '[REDACTED]' }]);
    b.setRedactPatterns(undefined); // the remembered verdicts of the old pattern go with it
    void b.record({ ...entry(3), args: { ssn: '3' } });
    expect(await sealedArgs()).toEqual([{ ssn: '3' }]);
  });
});

import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { GENESIS, base64Into, batchHash, batchLine, openBatch, parseKeyring } from '../../../src/audit/crypto.js';
import { BatchSealer } from '../../../src/audit/sealer.js';
import { RawJson } from '../../../src/audit/raw-json.js';
import { needsRedaction, redact } from '../../../src/audit/redact.js';
import { verifyChain } from '../../../src/audit/verify.js';
import { addEntry, sealBatch } from '../../support/audit.js';

const k1 = randomBytes(32).toString('base64');
const k2 = randomBytes(32).toString('base64');

async function chain(n: number, keys = parseKeyring(k1), id = 'chain-a'): Promise<string[]> {
  const lines: string[] = [];
  let prev = GENESIS;
  for (let seq = 1; seq <= n; seq++) {
    const line = JSON.stringify(await sealBatch([{ timestamp: seq, id: `e${seq}` }], { chain: id, seq, prev }, keys.current));
    lines.push(line);
    prev = batchHash(line);
  }
  return lines;
}

describe('audit batches', () => {
  it('seal and open round-trip; old keys still read after rotation', async () => {
    const old = parseKeyring(k1);
    const line = (await chain(1, old))[0]!;
    const rotated = parseKeyring(`${k2}\n${k1}  # old key, kept for reading\n`);
    expect(rotated.current.id).not.toBe(old.current.id);
    expect(openBatch(JSON.parse(line), rotated)).toEqual([{ timestamp: 1, id: 'e1' }]);
  });

  it('uses a fresh nonce per batch and never holds entries in clear in the batch', async () => {
    const keys = parseKeyring(k1);
    const a = await sealBatch([{ timestamp: 1, secret: 'visible?' }], { chain: 'c', seq: 1, prev: GENESIS }, keys.current);
    const b = await sealBatch([{ timestamp: 1, secret: 'visible?' }], { chain: 'c', seq: 1, prev: GENESIS }, keys.current);
    expect(a.nonce).not.toBe(b.nonce);
    expect(Buffer.from(a.nonce, 'base64')).toHaveLength(12);
    expect(JSON.stringify(a)).not.toContain('visible?');
  });

  it('refuses an altered header (AAD) or an unknown key', async () => {
    const keys = parseKeyring(k1);
    const b = JSON.parse((await chain(1, keys))[0]!);
    expect(() => openBatch({ ...b, count: 2 }, keys)).toThrow();
    expect(() => openBatch({ ...b, chain: 'another-pod' }, keys)).toThrow();
    expect(() => openBatch(b, parseKeyring(k2))).toThrow(/unknown key id/);
  });

  it('carries a verified JSON body as its exact bytes, as the last member of the entry', async () => {
    const keys = parseKeyring(k1);
    const bytes = Buffer.from('{ "amount": 5,\n  "note": "caf\u00e9 \\u00e9",\t"n": 1.50 }');
    const sealer = new BatchSealer(keys.current, 16); // a tiny start: the buffer must grow
    addEntry(sealer, { timestamp: 1, id: 'a', args: new RawJson(JSON.parse(bytes.toString()), bytes), status: 200 });
    addEntry(sealer, { timestamp: 2, id: 'b', args: { copied: true } });
    addEntry(sealer, { timestamp: 3, args: new RawJson([], Buffer.from('[]')) });
    const long = JSON.stringify({ text: 'é€'.repeat(3000) });
    addEntry(sealer, { timestamp: 4, note: '€'.repeat(500), args: new RawJson(JSON.parse(long), Buffer.from(long)) });
    const entries = openBatch<Record<string, unknown>>(await sealer.seal({ chain: 'c', seq: 1, prev: GENESIS }), keys);
    expect(entries).toEqual([
      { timestamp: 1, id: 'a', status: 200, args: { amount: 5, note: 'café é', n: 1.5 } },
      { timestamp: 2, id: 'b', args: { copied: true } },
      { timestamp: 3, args: [] },
      { timestamp: 4, note: '€'.repeat(500), args: { text: 'é€'.repeat(3000) } },
    ]);
    expect(Object.keys(entries[0]!).at(-1)).toBe('args');
  });

  it('writes a batch line as exactly the bytes of its JSON, and hashes bytes and text alike', async () => {
    const b = await sealBatch([{ timestamp: 1, note: 'caf\u00e9' }], { chain: 'pod-\u00e9', seq: 7, prev: GENESIS }, parseKeyring(k1).current);
    const line = batchLine(b);
    expect(line.equals(Buffer.from(JSON.stringify(b)))).toBe(true);
    expect(batchHash(line)).toBe(batchHash(JSON.stringify(b)));
  });

  it('writes a sealed batch (ciphertext as bytes) as the same line, base64 included', async () => {
    const keys = parseKeyring(k1);
    for (const n of [0, 1, 2, 3, 50, 700]) {
      const sealer = new BatchSealer(keys.current);
      for (let i = 0; i < n; i++) addEntry(sealer, { timestamp: i, id: `e${i}`, note: randomBytes(i % 7).toString('hex') });
      const sealed = await sealer.seal({ chain: 'c', seq: 1, prev: GENESIS });
      const asText = { ...sealed, data: sealed.data.toString('base64') };
      expect(batchLine(sealed).equals(Buffer.from(JSON.stringify(asText)))).toBe(true);
      expect(openBatch(JSON.parse(batchLine(sealed).toString()), keys)).toHaveLength(n);
    }
  });

  it('base64-encodes into a buffer exactly as Buffer does, for every tail length', () => {
    for (let len = 0; len < 40; len++) {
      const src = randomBytes(len);
      const dst = Buffer.alloc(4 * Math.ceil(len / 3) + 2, 0x2e);
      const end = base64Into(src, dst, 1);
      expect(dst.subarray(1, end).toString('latin1')).toBe(src.toString('base64'));
      expect(dst[0]).toBe(0x2e);
      expect(dst[end]).toBe(0x2e);
    }
    const big = randomBytes(300_001);
    const out = Buffer.alloc(4 * Math.ceil(big.length / 3));
    base64Into(big, out, 0);
    expect(out.toString('latin1')).toBe(big.toString('base64'));
  });

  it('wipes the part of an entry it had written before the entry failed', () => {
    const sealer = new BatchSealer(parseKeyring(k1).current);
    expect(() =>
      addEntry(sealer, {
        timestamp: 1,
        id: 'SECRET-HEAD-XYZ',
        args: {
          toJSON() {
            throw new Error('no');
          },
        },
      }),
    ).toThrow('no');
    expect((sealer as unknown as { arena: Buffer }).arena.includes('SECRET-HEAD-XYZ')).toBe(false);
  });

  it('adds an entry all or nothing', async () => {
    const keys = parseKeyring(k1);
    const sealer = new BatchSealer(keys.current);
    addEntry(sealer, { timestamp: 1, id: 'a' });
    expect(() =>
      addEntry(sealer, {
        timestamp: 2,
        args: {
          toJSON() {
            throw new Error('no');
          },
        },
      }),
    ).toThrow('no');
    addEntry(sealer, { timestamp: 3, id: 'c' });
    expect(sealer.size).toBe(2);
    expect(openBatch(await sealer.seal({ chain: 'c', seq: 1, prev: GENESIS }), keys)).toEqual([
      { timestamp: 1, id: 'a' },
      { timestamp: 3, id: 'c' },
    ]);
  });

  it('rejects keys that are not 32 bytes', () => {
    expect(() => parseKeyring(Buffer.alloc(16).toString('base64'))).toThrow(/32 bytes/);
  });
});

describe('audit verify', () => {
  const keys = parseKeyring(k1);

  it('accepts an intact chain', async () => {
    expect(verifyChain(await chain(5), keys)).toEqual({ batches: 5, entries: 5, chains: ['chain-a'], problems: [] });
  });

  it('tells chains apart: two pods merged in one file verify, a gap is named by its chain', async () => {
    const a = await chain(3, keys, 'pod-a');
    const b = await chain(3, keys, 'pod-b');
    const merged = [a[0]!, b[0]!, b[1]!, a[1]!, a[2]!, b[2]!];
    expect(verifyChain(merged, keys)).toMatchObject({ batches: 6, chains: ['pod-a', 'pod-b'], problems: [] });
    merged.splice(2, 1);
    expect(verifyChain(merged, keys).problems).toEqual([
      { line: 5, chain: 'pod-b', seq: 3, problem: 'gap: batches 2..2 missing' },
      { line: 5, chain: 'pod-b', seq: 3, problem: 'chain broken: prev is not the hash of the batch before' },
    ]);
  });

  it('reports a flipped byte', async () => {
    const lines = await chain(3);
    const b = JSON.parse(lines[1]!);
    const data = Buffer.from(b.data, 'base64');
    data[0]! ^= 1;
    lines[1] = JSON.stringify({ ...b, data: data.toString('base64') });
    const r = verifyChain(lines, keys);
    expect(r.problems.map((p) => p.problem)).toEqual([
      expect.stringMatching(/authentication failed/),
      expect.stringMatching(/chain broken/), // batch 3 names the hash of the original batch 2
    ]);
  });

  it('takes a batch delivered twice in a row (at-least-once delivery) as one', async () => {
    const lines = await chain(3);
    lines.splice(2, 0, lines[1]!);
    expect(verifyChain(lines, keys)).toMatchObject({ batches: 3, problems: [] });
    expect(verifyChain(['null', ...(await chain(1))], keys).problems).toEqual([{ line: 1, problem: 'not a JSON batch' }]);
  });

  it('reports a dropped batch', async () => {
    const lines = await chain(4);
    lines.splice(1, 1);
    expect(verifyChain(lines, keys).problems.map((p) => p.problem)).toEqual([
      expect.stringMatching(/gap: batches 2..2 missing/),
      expect.stringMatching(/chain broken/),
    ]);
  });

  it('reports a swapped pair', async () => {
    const lines = await chain(4);
    [lines[1], lines[2]] = [lines[2]!, lines[1]!];
    const problems = verifyChain(lines, keys).problems.map((p) => p.problem);
    expect(problems.some((p) => /out of order/.test(p))).toBe(true);
    expect(problems.some((p) => /chain broken|gap/.test(p))).toBe(true);
  });
});

describe('redaction', () => {
  it('redacts secret-looking keys at any depth, arrays too, any case', () => {
    expect(redact({ apiKey: 'k', nested: { Password: 'p', list: [{ BEARER_TOKEN: 't', ok: 1 }] }, authorization: 'x', amount: 5 })).toEqual({
      apiKey: '[REDACTED]',
      nested: { Password: '[REDACTED]', list: [{ BEARER_TOKEN: '[REDACTED]', ok: 1 }] },
      authorization: '[REDACTED]',
      amount: 5,
    });
  });

  it('says whether anything would be redacted, without copying', () => {
    expect(needsRedaction({ amount: 5, customer: { tier: 'gold' }, list: [1, { a: 2 }] })).toBe(false);
    expect(needsRedaction({ customer: { list: [{ clientSecret: 'x' }] } })).toBe(true);
    expect(needsRedaction([{ Authorization: 'x' }])).toBe(true);
    expect(needsRedaction('token')).toBe(false);
    expect(needsRedaction({ ssn: '1' }, /ssn/i)).toBe(true);
  });

  it('keeps a "__proto__" key as an ordinary field of the copy', () => {
    const copy = redact(JSON.parse('{"__proto__": {"apiKey": "k", "n": 1}, "a": 2}')) as Record<string, unknown>;
    expect(JSON.stringify(copy)).toBe('{"__proto__":{"apiKey":"[REDACTED]","n":1},"a":2}');
  });

  it('takes extra patterns', () => {
    expect(redact({ ssn: '1', name: 'n' }, /ssn|key/i)).toEqual({ ssn: '[REDACTED]', name: 'n' });
  });
});
